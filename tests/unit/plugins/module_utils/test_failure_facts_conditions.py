# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An unmet start condition is a cause, stated without its PID: hosts with the same stale
guard share a signature, a live writer is another failure."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import extract_facts
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature

MARKER = "/var/lib/postgresql/15/main/RESTORE_IN_PROGRESS"
CONDITION = f"ConditionPathExists=!{MARKER}"


def _evidence(writer: str) -> dict:
    return {"init": "systemd",
            "conditions": {CONDITION: f"NOT met now: {MARKER} exists (file, postgres:postgres, 0644, 103 bytes, "
                                      f"written 2026-11-27T23:10:02Z); {writer} (set in /etc/x.d/10-guard.conf)",
                           "ConditionPathExists=/etc/postgresql": "met now: /etc/postgresql exists (directory)"}}


def test_an_unmet_guard_whose_writer_is_gone_is_a_cause_without_its_pid() -> None:
    found = extract_facts("postgresql", "port 5432 is not listening",
                          _evidence("writer gone: pid 41877 is not running; the file is stale"))
    [fact] = found.of("start_condition_unmet")
    assert fact["class"] == "cause" and fact["condition"] == CONDITION and fact["writer"] == "gone"
    assert "41877" not in str(fact)


def test_the_same_stale_guard_on_two_hosts_shares_a_signature_and_a_live_writer_does_not() -> None:
    one = failure_signature("postgresql", "port 5432 is not listening",
                            _evidence("writer gone: pid 41877 is not running; the file is stale"))
    two = failure_signature("postgresql", "port 5432 is not listening",
                            _evidence("writer gone: pid 512 now runs `sleep 9` (user root), which started "
                                      "2026-11-28T10:00:00+00:00, after the file was written: the PID was reused"))
    alive = failure_signature("postgresql", "port 5432 is not listening",
                              _evidence("writer alive: pid 41877 runs `pgrestore-drill` (user postgres)"))
    assert one == two
    assert alive != one


def test_a_met_condition_is_no_fact() -> None:
    evidence = _evidence("")
    evidence["conditions"].pop(CONDITION)
    assert not extract_facts("postgresql", "port 5432 is not listening", evidence).of("start_condition_unmet")


def test_a_config_test_killed_at_its_timeout_gives_no_fact_and_the_signature_holds() -> None:
    """On a loaded host the config test may not finish in time; a minute later the same test
    runs. What a killed test printed is no fact of the failure: otherwise the plan's signature
    (made while it timed out) and the resume's (when it ran) differ, and an approval runs nothing."""
    from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import extract_facts
    from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature

    base = {"status": "$ service app status\nrc 1\napp is not running ... failed!",
            "pid_files": "/run/app.pid: stale (PID 412 not running)"}
    killed = dict(base, config_test="$ app --check\nrc 124\ntimed out after 10s")
    quiet = dict(base, config_test="$ app --check\nrc 0\n(no output)")
    facts = [f["fact"] for f in extract_facts("app", "app is not running", killed).facts]
    assert "config_invalid" not in facts, facts
    assert failure_signature("app", "app is not running", killed) == failure_signature("app", "app is not running", quiet)
    failed = dict(base, config_test="$ app --check\nrc 1\nline 3: unknown directive 'lisen'")
    assert failure_signature("app", "app is not running", failed) != failure_signature("app", "app is not running", quiet)
