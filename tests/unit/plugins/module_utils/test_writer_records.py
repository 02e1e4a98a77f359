# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The writer a marker names, found by its name in its own logs and journal (synthetic files in a tmp dir)."""
from __future__ import annotations

import os
import re

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import writer_records

SECRETISH = re.compile(r"key|secret|passw|token", re.IGNORECASE).search
DRILL_LOG = [
    "2026-11-27T23:10:02Z start: restore of backup 20261127-010001F into 15/main (marker written)",
    "2026-11-27T23:31:47Z restore complete: recovery finished, cluster consistent",
    "2026-11-27T23:31:52Z checks passed: 42 tables, row counts match the backup manifest",
    "2026-11-27T23:31:55Z cleaning up",
]
MARKER_TEXT = "pgrestore-drill pid 41877 started 2026-11-27T23:10:02Z: restoring backup 20261127-010001F into 15/main\n"


def _no_journal(argv, timeout=10):
    return 0, "-- No entries --\n", ""


def _write(path, text, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize("text, comments, expected", [
    (MARKER_TEXT, [], ["pgrestore-drill"]),
    ("backup-agent[3121]: lock\n", [], ["backup-agent"]),
    ("locked by job (pid 31)", [], ["job"]),
    ("written by deployctl at 2026-11-02\n", [], ["deployctl"]),
    ("owner: patchbot\npid=77\n", [], ["patchbot"]),
    ("41877\n", ["# pgrestore-drill: never start the cluster while a restore writes"], ["pgrestore-drill"]),
    ("", ["[Unit]", "# DBA team: no start while FROZEN exists"], []),   # a team is no program name
    ("the pid 9 ran", [], []),
])
def test_the_writer_is_named_by_the_marker_or_its_drop_ins_comment(text, comments, expected) -> None:
    assert writer_records.writer_names(text, comments) == expected


@pytest.mark.parametrize("name", ["../etc", "a/b", "x;rm -rf /", "$(id)", "a b", "..", "-rf", "`id`", "x|y", ""])
def test_a_name_with_shell_characters_or_a_path_is_not_a_program_name(name) -> None:
    assert not writer_records.safe_name(name)


def test_the_drills_own_last_lines_come_with_their_times_against_the_markers(tmp_path) -> None:
    root = tmp_path / "log"
    marker = _write(tmp_path / "RESTORE_IN_PROGRESS", MARKER_TEXT, mtime=1795821002)        # 2026-11-27T23:10:02Z
    _write(root / "pgrestore-drill" / "drill.log", "\n".join(DRILL_LOG) + "\n", mtime=1795822315)
    _write(root / "pgrestore-drill" / "drill.log.1.gz", "\x1f\x8b binary", mtime=1795822316)
    _write(root / "pgrestore-drill" / "api-token.log", "token=abc\n", mtime=1795822317)
    _write(root / "other.log", "not its log\n")

    text = writer_records.record(str(marker), MARKER_TEXT, ["pgrestore-drill"], SECRETISH, _no_journal, root=str(root))

    lines = text.splitlines()
    assert lines[0] == f"marker {marker} (states 2026-11-27T23:10:02Z, file written 2026-11-27T23:10:02Z)"
    log = root / "pgrestore-drill" / "drill.log"
    assert lines[1] == (f"pgrestore-drill log {log} (last written 2026-11-27T23:31:55Z, 21 min 53 s after the marker file), "
                        "last 4 line(s):")
    assert lines[2:6] == ["  " + line for line in DRILL_LOG]
    assert lines[6] == "pgrestore-drill in the journal: no entries"
    assert lines[7] == ("pgrestore-drill's newest line (%s) is of 2026-11-27T23:31:55Z, 21 min 53 s after the time the "
                        "marker states: nothing later from it in its logs or the journal" % log)
    # neither the compressed rotation, nor a file whose name suggests a secret, nor another program's log
    assert "gz" not in text and "token" not in text and "other.log" not in text


def test_a_missing_log_is_said_and_the_journal_is_asked_by_the_writers_name(tmp_path) -> None:
    asked = []

    def journal(argv, timeout=10):
        asked.append(argv)
        return 0, "", ""

    marker = _write(tmp_path / "RESTORE_IN_PROGRESS", MARKER_TEXT)
    text = writer_records.record(str(marker), MARKER_TEXT, ["pgrestore-drill"], SECRETISH, journal,
                                 root=str(tmp_path / "log"))
    assert text.splitlines()[-1].startswith("no log of pgrestore-drill found under %s" % (tmp_path / "log"))
    assert text.endswith("or in the journal (no entries)")
    [argv] = asked
    assert argv[0] == "journalctl" and "SYSLOG_IDENTIFIER=pgrestore-drill" in argv
    assert "_COMM=pgrestore-drill" in argv and "_SYSTEMD_UNIT=pgrestore-drill.service" in argv


def test_journal_lines_are_shown_redacted_and_count_as_the_newest_record(tmp_path) -> None:
    def journal(argv, timeout=10):
        return 0, ("2026-11-27T23:31:50+0000 db1 pgrestore-drill[41877]: connecting with password=hunter2hunter2\n"
                   "2026-11-27T23:31:56+0000 db1 pgrestore-drill[41877]: exiting 0\n"), ""

    marker = _write(tmp_path / "RESTORE_IN_PROGRESS", MARKER_TEXT)
    text = writer_records.record(str(marker), MARKER_TEXT, ["pgrestore-drill"], SECRETISH, journal,
                                 root=str(tmp_path / "log"))
    assert "pgrestore-drill in the journal, last 2 line(s):" in text
    assert "hunter2" not in text and "exiting 0" in text
    assert ("pgrestore-drill's newest line (the journal) is of 2026-11-27T23:31:56Z, 21 min 54 s after the time "
            "the marker states") in text


def test_a_marker_naming_a_traversal_or_shell_characters_never_reads_outside_the_log_root(tmp_path) -> None:
    root = tmp_path / "log"
    root.mkdir()
    _write(tmp_path / "etc" / "shadow.log", "root:$6$secret\n")
    _write(tmp_path / "outside.log", "outside\n")
    os.symlink(tmp_path / "outside.log", root / "drill.log")     # a link that leads out of the root
    asked = []

    def journal(argv, timeout=10):
        asked.append(argv)
        return 0, "", ""

    for text in ("../etc/shadow pid 12\n", "../../outside pid 12\n", "x;cat${IFS}/etc/shadow pid 12\n",
                 "$(cat /etc/shadow) pid 12\n"):
        marker = _write(tmp_path / "m", text)
        for name in writer_records.writer_names(text):
            assert writer_records.safe_name(name) and "/" not in name and ".." not in name
            assert writer_records.log_files(name, str(root)) == []
        found = writer_records.records_for([(str(marker), [], [])], SECRETISH, journal)
        assert "outside" not in "".join(found.values()) and "secret" not in "".join(found.values())
    assert writer_records.log_files("drill", str(root)) == []      # drill.log leads out: left out
    assert writer_records.log_files("../etc/shadow", str(root)) == []
    assert all(a[-1].endswith(".service") and "/" not in a[-1] for a in asked)


def test_the_newest_logs_are_kept_and_bounded(tmp_path) -> None:
    root = tmp_path / "log"
    for n in range(6):
        _write(root / f"agent-{n}.log", "\n".join(f"line {i} of {n}" for i in range(50)) + "\n", mtime=1795900000 + n)
    _write(root / "agent.log", "x" * 5000 + "\n", mtime=1795800000)
    found = writer_records.log_files("agent", str(root))
    assert [os.path.basename(p) for p, _m in found] == ["agent-5.log", "agent-4.log", "agent-3.log"]
    tail = writer_records.tail_lines(found[0][0])
    assert tail == [f"line {i} of 5" for i in range(40, 50)]
    assert writer_records.tail_lines(str(root / "agent.log")) == ["x" * writer_records.LINE_WIDTH]


def test_a_file_that_names_no_writer_has_no_record(tmp_path) -> None:
    flag = _write(tmp_path / "FROZEN", "frozen by the DBA team, ticket DBA-1432\n")
    assert writer_records.records_for([(str(flag), [], [])], SECRETISH, _no_journal) == {}
    assert writer_records.records_for([(str(tmp_path / "absent"), [], [])], SECRETISH, _no_journal) == {}


def test_no_journal_on_the_host_is_said(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(writer_records.host_probe, "find_tool", lambda name: None)
    assert writer_records.journal_lines("pgrestore-drill") == ([], "no journal on this host (journalctl absent)")


def test_an_unmet_guard_of_the_unit_is_looked_up_with_its_drop_ins_comment(tmp_path) -> None:
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence

    marker = _write(tmp_path / "RESTORE_IN_PROGRESS", "41877\n")
    absent = tmp_path / "ABSENT"
    drop_in = _write(tmp_path / "10-restore-guard.conf",
                     "[Unit]\n# pgrestore-drill: never start while a restore writes\n"
                     f"ConditionPathExists=!{marker}\nConditionPathExists=!{absent}\n")
    guards = service_evidence.guard_files({"DropInPaths": str(drop_in)}, "db.service")
    assert guards == [(str(marker), ["# pgrestore-drill: never start while a restore writes"], [])]
    [(path, comments, comms)] = guards
    assert writer_records.writer_names(marker.read_text(), comments, comms) == ["pgrestore-drill"]
