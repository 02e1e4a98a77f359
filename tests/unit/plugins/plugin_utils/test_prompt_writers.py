# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The request shows whether a guard's writer still runs (issue 28).

tests/data/evidence/postgres_restore_guard_left_behind.systemd.json is what the evidence module
reported on a systemd lab host with the catalogue's fault injected (tests/integration/
test_stale_guard.py makes the same report live). In stop 32's relay the request for this fault
showed the marker's text, ``pgrestore-drill pid 41877 ...``, and nothing about that PID: the
model asked `ps -p 41877` and escalated (stop 32's transcript, since replaced by s36-001.json).
"""
from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import extract_facts
from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import build_messages, render_evidence

REPO = Path(__file__).resolve().parents[4]
RECORDED = REPO / "tests/data/evidence/postgres_restore_guard_left_behind.systemd.json"
MARKER = "/var/lib/postgresql/15/main/RESTORE_IN_PROGRESS"
CONDITION = f"ConditionPathExists=!{MARKER}"
ERROR = "port 5432 is not listening"


def _evidence() -> dict:
    evidence = json.loads(RECORDED.read_text(encoding="utf-8"))
    # as the role adds it on the controller: the drift since the last healthy pass (the relay's request had it)
    evidence["known_good"] = {"recorded": 1795863736, "files": 8, "drift": [{
        "path": "/etc/systemd/system/postgresql@15-main.service.d/10-restore-guard.conf", "change": "new",
        "aside": "a0" * 32, "now": "a0" * 32, "known_good": "",
        "diff": "--- known-good\n+++ now\n@@ -0,0 +1,3 @@\n+[Unit]\n+# pgrestore-drill: never start the cluster "
                "while a restore writes its data directory\n+" + CONDITION}]}
    return evidence


def _request(evidence: dict) -> str:
    return build_messages(service="postgresql", error=ERROR, evidence=evidence, max_commands=3,
                          init="systemd")[-1]["content"]


def test_the_request_says_the_guards_writer_is_gone_in_its_condition_and_at_the_top_of_its_entry() -> None:
    request = _request(_evidence())
    assert "\n### conditions\n" in request
    line = next(x for x in request.splitlines() if x.startswith(CONDITION + ": "))
    assert line.startswith(f"{CONDITION}: NOT met now: {MARKER} exists (file, postgres:postgres, 0644, 103 bytes")
    assert "; writer gone: pid 41877 is not running; the file is stale" in line
    assert f'"{MARKER}": {{"writer": "writer gone: pid 41877 is not running' in request
    left_out = request.split("### left out for size", 1)[1] if "### left out for size" in request else ""
    assert "conditions" not in left_out and "named_paths" not in left_out


def test_the_condition_is_kept_when_the_logs_fill_the_budget() -> None:
    evidence = _evidence()
    noise = "\n".join(f"2026-11-28 11:0{n % 10}:00 UTC [75] LOG:  checkpoint complete: wrote {n} buffers" for n in range(400))
    evidence["logs"] = {"/var/log/postgresql/postgresql-15-main.log": noise}
    evidence["journal"] = noise
    rendered = render_evidence(evidence, error=ERROR, service="postgresql")
    assert "writer gone: pid 41877 is not running" in rendered.split("### conditions", 1)[1].split("###", 1)[0]


def test_the_recorded_evidence_makes_a_stable_cause_of_the_unmet_guard() -> None:
    facts = extract_facts("postgresql", ERROR, _evidence()).of("start_condition_unmet")
    assert [(f["condition"], f["writer"]) for f in facts] == [(CONDITION, "gone")]


RECORD = ("marker /var/lib/postgresql/15/main/RESTORE_IN_PROGRESS (states 2026-11-27T23:10:02Z, file written 2026-11-28T06:02:11Z)\n"
          "pgrestore-drill log /var/log/pgrestore-drill/drill.log (last written 2026-11-28T06:02:11Z, the same second as "
          "the marker file), last 2 line(s):\n"
          "  2026-11-27T23:31:52Z checks passed: 42 tables, row counts match the backup manifest\n"
          "  2026-11-27T23:31:55Z cleaning up\n"
          "pgrestore-drill in the journal: no entries\n"
          "pgrestore-drill's newest line (/var/log/pgrestore-drill/drill.log) is of 2026-11-27T23:31:55Z, 21 min 53 s after "
          "the time the marker states: nothing later from it in its logs or the journal")


def test_the_writers_last_record_follows_the_conditions_and_survives_noisy_logs() -> None:
    evidence = _evidence()
    evidence["writer_records"] = {MARKER: RECORD}
    noise = "\n".join(f"2026-11-28 11:0{n % 10}:00 UTC [75] LOG:  checkpoint complete: wrote {n} buffers" for n in range(400))
    evidence["logs"] = {"/var/log/postgresql/postgresql-15-main.log": noise}
    evidence["journal"] = noise
    request = _request(evidence)
    section = request.split("\n### writer_records\n", 1)[1].split("\n### ", 1)[0]
    assert section == f"[{MARKER}]\n{RECORD}"
    assert request.index("\n### conditions\n") < request.index("\n### writer_records\n")
