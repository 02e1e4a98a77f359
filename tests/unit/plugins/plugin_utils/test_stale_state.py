# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stale state: a file whose every named writer is gone is removed or moved aside without a
human when it is the service's or its unit names it; judged on the real policy's verdicts."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy, policy, stale_state

POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
            "user": "postgres", "config_paths": ["/etc/postgresql/15/main"],
            "data_paths": ["/var/lib/postgresql/15/main"], "runtime_paths": ["/var/run/postgresql"],
            "pid_files": ["/var/lib/postgresql/15/main/postmaster.pid"], "config_test": ["true"]}
MARKER = "/var/lib/postgresql/15/main/RESTORE_IN_PROGRESS"
GUARD = "/srv/drill/RESTORING"   # outside the service's paths, but its unit names it
GONE = "writer gone: pid 41877 is not running; the file is stale (no process it names runs)"
ALIVE = "writer alive: pid 4242 runs `pgrestore-drill` (user postgres, started ..., before the file was written)"


def _evidence(marker_writer: str = GONE, guard_writer: str = GONE) -> dict:
    return {"init": "systemd",
            "conditions": {f"ConditionPathExists=!{MARKER}": f"NOT met now: {MARKER} exists (file); {marker_writer}",
                           f"ConditionPathExists=|!{GUARD}": f"NOT met now: {GUARD} exists (file); {guard_writer}"},
            "named_paths": {"/etc/postgresql/15/main/FROZEN": {"type": "file", "first_lines": ["frozen by the DBA"]},
                            "/var/lib/postgresql/15/main/backup.lock": {"type": "file", "writer": GONE}},
            "pid_files": {"/var/lib/postgresql/15/main/postmaster.pid": "pid 75 is not running (stale PID file)"}}


def _decide(command: str, evidence: dict) -> tuple[str, dict]:
    loaded = policy.load_policy(None)
    scope = policy.scope_from_service(POSTGRES, [], {})
    [verdict] = policy.classify_many([command], loaded, scope=scope)
    [out] = autonomy.apply([verdict], loaded["autonomy"], evidence=evidence, definition=POSTGRES)
    return verdict["verdict"], out


def test_the_evidence_names_the_files_whose_writers_are_gone_and_which_the_unit_names() -> None:
    assert stale_state.stale_files(_evidence()) == {
        MARKER: "unit", GUARD: "unit", "/var/lib/postgresql/15/main/backup.lock": "evidence",
        "/var/lib/postgresql/15/main/postmaster.pid": "evidence"}
    assert MARKER not in stale_state.stale_files(_evidence(marker_writer=ALIVE))


@pytest.mark.parametrize("command", [
    f"rm {MARKER}",
    f"rm -f {MARKER}",
    f"mv {MARKER} {MARKER}.stale",
    "rm /var/lib/postgresql/15/main/backup.lock",
    f"rm {GUARD}",                        # outside the service's paths, named by its unit
    f"mv {GUARD} {GUARD}.stale",
])
def test_a_file_whose_writer_is_gone_goes_without_a_human(command) -> None:
    before, out = _decide(command, _evidence())
    assert before == "approval"
    assert out["verdict"] == "allow" and out["autonomy"] and set(out["autonomy"]) == {"stale_state"}
    assert out["reasons"][0] == "runs without a human: stale_state (the policy's autonomy table)"


@pytest.mark.parametrize("command, evidence", [
    (f"rm {MARKER}", _evidence(marker_writer=ALIVE)),           # its writer may still run
    (f"mv {MARKER} {MARKER}.stale", _evidence(marker_writer=ALIVE)),
    (f"mv {MARKER} /tmp/RESTORE_IN_PROGRESS", _evidence()),    # not aside: out of the service's files
    ("rm /etc/postgresql/15/main/FROZEN", _evidence()),         # names no process: a human's flag
    ("mv /etc/postgresql/15/main/FROZEN /etc/postgresql/15/main/FROZEN.off", _evidence()),
    ("rm /srv/other/RESTORING", _evidence()),                   # neither the service's nor named by its unit
    (f"rm {MARKER}", {}),                                       # no evidence of its writer
])
def test_a_file_whose_writer_may_run_or_that_names_none_keeps_its_approval(command, evidence) -> None:
    before, out = _decide(command, evidence)
    assert before == "approval"
    assert out["verdict"] == "approval"


def test_the_operator_can_give_stale_state_back_to_a_human() -> None:
    loaded = policy.load_policy({"autonomy": {"stale_state": "human"}})
    scope = policy.scope_from_service(POSTGRES, [], {})
    [verdict] = policy.classify_many([f"rm {MARKER}"], loaded, scope=scope)
    [out] = autonomy.apply([verdict], loaded["autonomy"], evidence=_evidence(), definition=POSTGRES)
    assert out["verdict"] == "approval" and out["autonomy"] == ["stale_state"]
