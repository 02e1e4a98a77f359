# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The owner's notes: the paragraphs of the host's login message and banners that name a service,
and the line of one that tells operators to keep their hands off it; the plan's verdicts then."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils import operator_notes
from ansible_collections.sentinel.remediation.plugins.plugin_utils import safeguards
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine

MOTD = """Debian GNU/Linux comes with ABSOLUTELY NO WARRANTY.

*** FIN-4410 month-end close ***
cron is stopped on this host ON PURPOSE since 18:00.
Do not start cron. The close team starts it again.

Backups of postgresql run at 03:00 (DBA team).
"""


def _notes(tmp_path, monkeypatch, files: dict) -> None:
    paths = []
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    monkeypatch.setattr(operator_notes, "NOTE_FILES", tuple(paths))
    monkeypatch.setattr(operator_notes, "NOTE_DIRS", ())


def test_only_the_paragraphs_that_name_the_service_as_a_word_are_read(tmp_path, monkeypatch):
    _notes(tmp_path, monkeypatch, {"motd": MOTD, "issue": "crontab users: see the wiki\n"})
    found = operator_notes.by_file({"name": "cron", "units": ["cron.service"], "processes": []})
    assert list(found) == [str(tmp_path / "motd")]  # "crontab" is not "cron"
    assert found[str(tmp_path / "motd")].startswith("*** FIN-4410")
    assert "postgresql" not in found[str(tmp_path / "motd")] and "WARRANTY" not in found[str(tmp_path / "motd")]
    postgres = operator_notes.by_file({"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": []})
    assert list(postgres.values()) == ["Backups of postgresql run at 03:00 (DBA team)."]


def test_a_note_file_too_large_to_be_a_note_and_a_missing_one_are_skipped(tmp_path, monkeypatch):
    _notes(tmp_path, monkeypatch, {"motd": "cron: do not start\n" * 2000})
    monkeypatch.setattr(operator_notes, "NOTE_FILES", operator_notes.NOTE_FILES + (str(tmp_path / "absent"),))
    assert operator_notes.by_file({"name": "cron", "units": [], "processes": []}) == {}


def test_the_hold_line_is_the_one_that_keeps_hands_off():
    assert operator_notes.hold_line({"/etc/motd": "cron runs the reports\nDo not start cron."}) == \
        ("/etc/motd", "Do not start cron.")
    assert operator_notes.hold_line({"/etc/motd": "redis stopped on purpose (OPS-1)"})[1] == "redis stopped on purpose (OPS-1)"
    assert operator_notes.hold_line({"/etc/motd": "cron runs the close team's reports"}) == ("", "")
    assert operator_notes.hold_line(None) == ("", "")


def _verdict(command: str, effects: list, verdict: str = "allow") -> dict:
    return {"command": command, "verdict": verdict, "effects": effects, "reasons": []}


def test_a_held_service_s_changes_wait_for_a_human_and_its_reads_do_not():
    plan = [_verdict("cat /etc/motd", ["reads /etc/motd"]), _verdict("service cron start", ["starts unit cron.service"]),
            _verdict("rm -f /etc/cron.d/x", ["deletes /etc/cron.d/x"], "reject")]
    held = {"operator_notes": {"/etc/motd": "*** close ***\nDo not start cron."}}
    out = safeguards.weigh_owner_note(plan, {"name": "cron"}, held)
    assert [v["verdict"] for v in out] == ["allow", "approval", "reject"]
    assert out[1]["reasons"][-1].startswith("owner's note: /etc/motd says `Do not start cron.` about cron")
    # a blanket auto-approval (labs) runs what the policy gates, never what the note holds
    assert engine.gate(out, auto_approve=True) == "approval"
    assert engine.gate([_verdict("service cron start", ["starts unit cron.service"], "approval")],
                       auto_approve=True) == "execute"
    # a note that holds nothing, or none at all: the verdicts as the policy gave them
    for evidence in ({"operator_notes": {"/etc/motd": "cron runs the reports"}}, {}, None):
        assert [v["verdict"] for v in safeguards.weigh_owner_note(plan, {"name": "cron"}, evidence)] == \
            ["allow", "allow", "reject"]
