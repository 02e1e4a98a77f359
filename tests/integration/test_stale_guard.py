# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A guard file whose writer is gone, for real on a systemd lab host (issue 28).

The catalogue's fault postgres_restore_guard_left_behind is injected as it is: a restore
tool's drop-in adds ``ConditionPathExists=!RESTORE_IN_PROGRESS`` to PostgreSQL's unit and its
marker names the restore's PID, long gone, so systemd skips every start. The real evidence
module (through ansible, docker connection, become) must say, from the host's /proc, that
the marker's writer is gone; with a real sleeping process's PID written into the marker, that
the writer is alive and what it runs; with the marker older than that process, that the PID
was reused. The request built from that evidence shows it, and the policy lets the marker be
moved aside without a human only while its writer is gone. The truth each verdict is checked
against is read in the container (`kill -0`, `pgrep`), not from the code under test.

The writer's own last record comes with it, found by the writer's name: the drill's log under
/var/log/pgrestore-drill (its last lines, as `tail` reads them in the container) and its journal
lines (a line sent with `logger -t pgrestore-drill`); with the log gone, that none was found.
"""
from __future__ import annotations

import re

from pathlib import Path

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy, policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import build_messages
from host_module import run_host_module

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
FAULT = "postgres_restore_guard_left_behind"
MARKER = "/var/lib/postgresql/15/main/RESTORE_IN_PROGRESS"
DROP_IN = "/etc/systemd/system/postgresql@15-main.service.d/10-restore-guard.conf"
CONDITION = f"ConditionPathExists=!{MARKER}"
ERROR = "port 5432 is not listening"
WRITER = "41877"   # the PID the fault's marker names
SLEEPER = "sleep 4343"
DRILL_LOG = "/var/log/pgrestore-drill/drill.log"


def _definition() -> dict:
    """The lab's PostgreSQL definition for its systemd hosts (inventories/lab)."""
    data = yaml.safe_load((REPO / "inventories/lab/group_vars/lab_systemd.yml").read_text(encoding="utf-8"))
    return next(dict(s) for s in data["remediate_services"] if s["name"] == "postgresql")


def _evidence(lab, host: str) -> dict:
    """sentinel.remediation.evidence on the host as the role runs it (user sentinel, become)."""
    definition = {k: v for k, v in _definition().items()
                  if k not in ("stateful", "confirm_attempts", "confirm_interval", "name")}
    args = dict(definition, service="postgresql", error=ERROR)
    return run_host_module(lab.container(host), "evidence", args)["evidence"]


def _verdict(command: str, evidence: dict) -> dict:
    """The policy's verdict on one command, with the autonomy table applied as the loop does."""
    definition = _definition()
    loaded = policy.load_policy(None)
    [checked] = policy.classify_many([command], loaded, scope=policy.scope_from_service(definition, [], {}))
    [out] = autonomy.apply([checked], loaded["autonomy"], evidence=evidence, definition=definition)
    return out


def _request(evidence: dict) -> str:
    messages = build_messages(service="postgresql", error=ERROR, evidence=evidence, max_commands=3, init="systemd")
    return messages[-1]["content"]


@pytest.fixture(scope="module")
def guarded(mixed_lab):
    """The systemd host of the mixed lab the confinement and known-good tests share (no host of
    its own to boot), with the fault injected; put back as it was afterwards."""
    lab = mixed_lab
    host = lab.hosts("systemd")[0]
    lab.wait_health(host, ["postgres"], timeout=120)
    # what a test before may have left: none of the fault's parts, PostgreSQL running
    assert lab.exec(host, f"test ! -e {MARKER} && test ! -e {DROP_IN} && ! pgrep -xf '{SLEEPER}'").ok
    lab.inject(host, FAULT)
    try:
        yield lab, host
    finally:
        lab.exec(host, f"pkill -f '^{SLEEPER}$'; rm -rf {MARKER} {DROP_IN} /var/log/pgrestore-drill; systemctl daemon-reload; "
                       "systemctl start postgresql@15-main.service", timeout=90)
        lab.wait_health(host, ["postgres"], timeout=120)


def test_the_evidence_says_the_restore_markers_writer_is_gone_and_the_marker_may_go_alone(guarded) -> None:
    lab, host = guarded
    # the host's truth: the unit is down, the marker is there, and no process has its PID
    assert lab.exec(host, "systemctl show -p ActiveState --value postgresql@15-main").stdout.strip() == "inactive"
    assert lab.exec(host, ["test", "-f", MARKER]).ok
    assert not lab.exec(host, ["kill", "-0", WRITER]).ok

    evidence = _evidence(lab, host)
    condition = evidence["conditions"][CONDITION]
    assert condition.startswith(f"NOT met now: {MARKER} exists (file, postgres:postgres, 0644, ")
    assert f"writer gone: pid {WRITER} is not running" in condition
    assert condition.endswith(f"(set in {DROP_IN})")
    assert evidence["named_paths"][MARKER]["writer"].startswith(f"writer gone: pid {WRITER} is not running")

    request = _request(evidence)
    assert "\n### conditions\n" in request and f"\n{CONDITION}: NOT met now: {MARKER} exists" in request
    # systemd's own unit-name specifiers are expanded: the package's Assert on %I holds
    assert evidence["conditions"]["AssertPathExists=/etc/postgresql/%I/postgresql.conf"].startswith(
        "met now: /etc/postgresql/15/main/postgresql.conf exists (file")
    assert f'"{MARKER}": {{"writer": "writer gone: pid {WRITER} is not running' in request

    moved = _verdict(f"mv {MARKER} {MARKER}.stale", evidence)
    assert moved["verdict"] == "allow" and moved["autonomy"] == ["stale_state"], moved
    # the guard itself is another team's drop-in: still a human's call
    assert _verdict(f"rm {DROP_IN}", evidence)["verdict"] == "approval"


def test_a_live_writer_is_reported_alive_and_an_older_marker_names_a_reused_pid(guarded) -> None:
    lab, host = guarded
    original = lab.exec(host, ["cat", MARKER], check=True).stdout
    lab.exec(host, f"setsid -f {SLEEPER} </dev/null >/dev/null 2>&1", check=True)
    pid = lab.exec(host, ["pgrep", "-xf", SLEEPER], check=True).stdout.split()[0]
    try:
        lab.exec(host, f"printf 'pgrestore-drill pid {pid} started: restoring backup into 15/main\\n' > {MARKER}",
                 check=True)
        assert lab.exec(host, ["kill", "-0", pid]).ok

        evidence = _evidence(lab, host)
        condition = evidence["conditions"][CONDITION]
        assert f"writer alive: pid {pid} runs `{SLEEPER}` (user root, started " in condition, condition
        assert "before the file was written): it may be the writer" in condition
        assert evidence["named_paths"][MARKER]["writer"].startswith(f"writer alive: pid {pid} runs `{SLEEPER}`")
        assert f"writer alive: pid {pid} runs `{SLEEPER}`" in _request(evidence)
        # its writer may still be writing: moving the marker waits for a human
        assert _verdict(f"mv {MARKER} {MARKER}.stale", evidence)["verdict"] == "approval"

        # the same PID in a marker written before that process started: not its writer
        lab.exec(host, ["touch", "-d", "2 hours ago", MARKER], check=True)
        evidence = _evidence(lab, host)
        condition = evidence["conditions"][CONDITION]
        assert f"writer gone: pid {pid} now runs `{SLEEPER}` (user root)" in condition, condition
        assert "the PID was reused, it is not the writer" in condition
        assert _verdict(f"mv {MARKER} {MARKER}.stale", evidence)["verdict"] == "allow"
    finally:
        lab.exec(host, ["kill", pid])
        # the fault's own marker back, as the tests after this one read it
        lab.exec(host, ["sh", "-c", 'printf %s "$1" > "$2"', "-", original, MARKER], check=True)


def _record_lines(evidence: dict) -> list[str]:
    return evidence["writer_records"][MARKER].splitlines()


def test_with_the_drills_log_gone_the_evidence_says_no_log_was_found(guarded) -> None:
    lab, host = guarded
    lab.exec(host, "mv /var/log/pgrestore-drill /var/tmp/pgrestore-drill.aside", check=True)
    try:
        assert lab.exec(host, "test ! -e /var/log/pgrestore-drill && ! ls /var/log/pgrestore-drill*.log").ok
        evidence = _evidence(lab, host)
        said = _record_lines(evidence)[-1]
        truth = lab.exec(host, "journalctl --no-pager -q -t pgrestore-drill -n 1").stdout.strip()
        if truth:
            # a line of the drill's in the journal (a lab host reused from an earlier run): its only record
            assert "pgrestore-drill in the journal, last" in evidence["writer_records"][MARKER]
            assert f"{DRILL_LOG}" not in evidence["writer_records"][MARKER]
        else:
            assert said == ("no log of pgrestore-drill found under /var/log (/var/log/pgrestore-drill/, "
                            "/var/log/pgrestore-drill.log, /var/log/pgrestore-drill*.log) or in the journal (no entries)")
    finally:
        lab.exec(host, "mv /var/tmp/pgrestore-drill.aside /var/log/pgrestore-drill", check=True)


def test_the_drills_own_last_lines_and_journal_come_with_the_marker_and_reach_the_request(guarded) -> None:
    lab, host = guarded
    # the host's truth: the drill's log as `tail` reads it, and a line of the drill's in the journal
    tail = lab.exec(host, ["tail", "-n", "10", DRILL_LOG], check=True).stdout.splitlines()
    assert tail and tail[-1].endswith("cleaning up")
    lab.exec(host, ["logger", "-t", "pgrestore-drill", "drill 20261127-010001F: exit 0"], check=True)
    journal = ""
    for _attempt in range(20):   # journald takes the line asynchronously
        journal = lab.exec(host, "journalctl --no-pager -q -t pgrestore-drill -n 5").stdout
        if "exit 0" in journal:
            break
        lab.exec(host, "sleep 0.5")
    assert "drill 20261127-010001F: exit 0" in journal

    evidence = _evidence(lab, host)
    lines = _record_lines(evidence)
    stated = re.search(r" started (\S+Z): ", lab.exec(host, ["cat", MARKER], check=True).stdout).group(1)
    assert lines[0].startswith(f"marker {MARKER} (states {stated}, file written ")
    header = next(i for i, line in enumerate(lines) if line.startswith(f"pgrestore-drill log {DRILL_LOG} (last written "))
    assert lines[header].endswith(f"last {len(tail)} line(s):")
    assert lines[header + 1:header + 1 + len(tail)] == ["  " + line for line in tail]
    # the journal's line as journalctl shows it in the container, with its absolute time
    shown = lab.exec(host, "journalctl --no-pager -q -o short-iso -t pgrestore-drill -n 1").stdout.strip()
    assert "exit 0" in shown and "  " + shown in lines
    assert any(line.startswith("pgrestore-drill in the journal, last ") for line in lines)
    assert "after the time the marker states: nothing later from it in its logs or the journal" in lines[-1]

    request = _request(evidence)
    section = request.split("\n### writer_records\n", 1)[1].split("\n### ", 1)[0]
    assert f"[{MARKER}]" in section and "  " + tail[-1] in section
    assert "checks passed: 42 tables" in section and "exit 0" in section
    # next to the writer verdict: right after the conditions that say the writer is gone
    assert request.index("\n### conditions\n") < request.index("\n### writer_records\n")
    # evidence, not a verdict: the policy says of the marker what it said without the record
    assert _verdict(f"mv {MARKER} {MARKER}.stale", evidence)["verdict"] == "allow"
