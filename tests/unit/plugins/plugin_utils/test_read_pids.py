# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PIDs the incident's own reads showed (read_pids.py) and how the policy judges them."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import read_pids
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, describe_scope
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import scope_from_service

NGINX = {"name": "nginx", "units": ["nginx.service"], "processes": ["nginx"], "user": "www-data"}
PS = "  PID COMMAND\n 4242 nginx: master process /usr/sbin/nginx\n 5151 nginx: worker process\n"


def _incident(*commands: engine.CommandRun) -> engine.Incident:
    incident = engine.Incident(host="web1", service="nginx", error="down")
    incident.attempts.append(engine.Attempt(number=1, commands=list(commands)))
    return incident


def _read(stdout: str, command: str = "ps -eo pid,args", effects=("reads the process table",), rc=0):
    return engine.CommandRun(command=command, rc=rc, stdout=stdout, effects=list(effects))


def test_numbers_that_stand_alone_are_candidates_times_sizes_and_addresses_are_not() -> None:
    text = "4242 nginx 10:01:02 12K 127.0.0.1:8080 pid=5151, /run/7000.pid v1.2 1"
    assert read_pids.pids_in(text) == [4242, 5151]


def test_only_what_a_read_printed_counts() -> None:
    changed = engine.CommandRun(command="systemctl restart nginx", rc=0, stdout="9999",
                                effects=["restarts unit nginx.service"])
    skipped = engine.CommandRun(command="ps", skipped=True, stdout="8888", effects=["reads the process table"])
    incident = _incident(_read(PS), changed, skipped)
    assert read_pids.seen_pids(incident) == [4242, 5151]


def test_the_host_is_told_to_check_only_the_signalled_pids_the_evidence_does_not_describe() -> None:
    commands = [{"argv": ["kill", "5151"], "pids": [5151]}, {"argv": ["kill", "4242"], "pids": [4242]},
                {"argv": ["kill", "6000"], "pids": [6000]}]
    expect = {"4242": {"start": 10, "comm": "nginx"}}
    assert read_pids.expectations(commands, expect, [4242, 5151]) == {"5151": {"seen": True, "start": None}}


def test_a_seen_pid_is_judged_as_one_from_the_evidence() -> None:
    scope = read_pids.with_seen(scope_from_service(NGINX, [4242]), _incident(_read(PS)))
    term = classify("kill 5151", scope=scope)
    assert term["verdict"] == "allow" and term["pids"] == [5151], term["reasons"]
    assert any("checks it is one of nginx's processes" in e for e in term["effects"]), term["effects"]
    assert classify("kill -9 5151", scope=scope)["verdict"] == "allow"
    # a PID nobody read still needs a human, as before
    assert classify("kill 6000", scope=scope)["verdict"] == "approval"
    # the same checks: never PID 1, never a process group
    assert classify("kill 1", scope=read_pids.with_seen(scope, _incident(_read("1 init"))))["verdict"] == "reject"
    assert classify("kill -- -5151", scope=scope)["verdict"] == "reject"


def test_a_seen_pid_the_evidence_names_as_a_protected_process_stays_refused() -> None:
    evidence = {"processes": [{"pid": 301, "comm": "sshd", "cmdline": "sshd: /usr/sbin/sshd -D"}]}
    scope = read_pids.with_seen(scope_from_service(NGINX, [4242], evidence), _incident(_read("301 sshd")))
    assert classify("kill 301", scope=scope)["verdict"] == "reject"


def test_without_an_incident_nothing_was_seen() -> None:
    scope = read_pids.with_seen(scope_from_service(NGINX, [4242]), None)
    assert "seen_pids" not in scope
    assert classify("kill 5151", scope=scope)["verdict"] == "approval"


def test_the_prompts_scope_lines_say_a_pid_a_read_printed_may_be_signalled() -> None:
    scope = read_pids.with_seen(scope_from_service(NGINX, [4242]), _incident(_read(PS)))
    assert any("a PID your reads in this incident printed" in line for line in describe_scope(scope))
    assert not any("reads in this incident printed" in line for line in describe_scope(scope_from_service(NGINX)))


def test_a_seen_pid_carries_the_start_its_read_found_and_survives_the_incidents_round_trip() -> None:
    older = _read(PS)
    older.pid_starts = {"5151": 100}
    newer = _read(PS)
    newer.pid_starts = {"5151": 200, "4242": 50}
    incident = _incident(older)
    incident.attempts.append(engine.Attempt(number=2, commands=[newer]))
    # through the fact cache, as a plan approved later finds it
    restored = engine.Incident.from_dict(incident.to_dict())
    assert read_pids.seen_starts(restored) == {5151: 200, 4242: 50}   # the newest read's
    commands = [{"command": "kill -TERM 5151", "pids": [5151]}]
    assert read_pids.expectations(commands, {}, read_pids.seen_pids(restored), read_pids.seen_starts(restored)) == {
        "5151": {"seen": True, "start": 200}}
