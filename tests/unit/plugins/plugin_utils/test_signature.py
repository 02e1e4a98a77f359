# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import re

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import (
    hostnames_of,
    failure_signature,
    key_facts,
    listeners,
    normalise_error,
)
from fault_samples import FAULTS, sample


def _sig(case):
    return failure_signature(case["service"], case["error"], case["evidence"], [case["hostname"]])


@pytest.mark.parametrize("fault", FAULTS)
def test_same_fault_on_two_hosts_same_signature(fault):
    one, two = sample(fault, 1), sample(fault, 2)
    assert _sig(one) == _sig(two)
    assert re.fullmatch(r"[a-z-]+:[0-9a-f]{16}", _sig(one))


def test_different_faults_differ():
    signatures = {fault: _sig(sample(fault)) for fault in FAULTS}
    assert len(set(signatures.values())) == len(FAULTS)


def test_port_conflict_pid_is_not_in_the_signature_but_the_owner_is():
    case = sample("nginx_port_conflict")
    assert "port 80 held by python3" in key_facts(case["service"], case["error"], case["evidence"])
    other = dict(case, evidence=dict(case["evidence"], listeners="0.0.0.0:80 held by apache2 (pid 4242)"))
    assert _sig(other) != _sig(case)


@pytest.mark.parametrize("raw, expected", [
    ("2024/05/01 10:11:12 [emerg] 1234#1234: bind() to 0.0.0.0:80 failed (98: Address already in use)",
     "[emerg] <pid>: bind() to <ip>:80 failed (98: Address already in use)"),
    ("May  1 10:11:12 web-01 redis[123]: oops", "redis[<pid>]: oops"),
    ("2025-01-02T03:04:05.123Z container 3f2a9b8c7d6e restarted 12345 times", "container <id> restarted <n> times"),
    ("pid=991 killed", "pid=<pid> killed"),
    ("4242:M 04 Mar 2025 10:11:12.345 # Can't chdir", "<pid> # Can't chdir"),
    ("mode 0750 on /var/lib/redis", "mode 0750 on /var/lib/redis"),
    ("failed at host db1.prod.example.com", "failed at host <host>"),
    ("in /etc/nginx/conf.d/zz-broken.conf:3", "in /etc/nginx/conf.d/zz-broken.conf:3"),
])
def test_normalise_error(raw, expected):
    assert normalise_error(raw) == expected


def test_given_hostnames_are_removed():
    assert normalise_error("lab-web-01 says no", ["lab-web-01"]) == "<host> says no"
    assert normalise_error("") == ""


def test_listeners_from_ss_and_from_the_evidence_module():
    ss = 'LISTEN 0 5 0.0.0.0:80 0.0.0.0:* users:(("python3",pid=77,fd=3))'
    held = "0.0.0.0:6379 held by redis-server (pid 5, 6)"
    found = listeners({"a": ss, "b": held})
    assert {(i["port"], i["process"], i["pid"]) for i in found} == {(80, "python3", 77), (6379, "redis-server", 5),
                                                                    (6379, "redis-server", 6)}


def test_a_hosts_names_are_taken_once_and_templates_left_out() -> None:
    names = hostnames_of({"inventory_hostname": "web1", "ansible_host": "web1", "ansible_hostname": "ip-10-0-0-7",
                          "ansible_fqdn": "{{ lookup('env', 'X') }}", "ansible_nodename": None})
    assert names == ["web1", "ip-10-0-0-7"]
    assert failure_signature("nginx", "nginx on web1 is down", "", names) == \
        failure_signature("nginx", "nginx on web2 is down", "", hostnames_of({"inventory_hostname": "web2"}))


def test_alike_failures_with_different_causes_get_different_signatures():
    """Two PostgreSQL hosts that are both "down" for different reasons must never share a plan."""
    status = "$ service postgresql status\nrc 3\n15/main (port 5432): down"

    def evidence(line: str, when: str, pid: int) -> dict:
        return {"init": "systemd", "status": status, "journal": f"{when} db1 postgres[{pid}]: {line}"}

    preload = 'FATAL:  could not access file "pg_cron": No such file or directory'
    hba = 'LOG:  invalid authentication method "scram-sha256"'
    one = failure_signature("postgresql", "postgresql is down", evidence(preload, "2026-11-26T10:24:35+0000", 12),
                            ["db1"])
    again = failure_signature("postgresql", "postgresql is down", evidence(preload, "2026-12-02T07:01:09+0000", 991),
                              ["db1"])
    other = failure_signature("postgresql", "postgresql is down", evidence(hba, "2026-11-26T10:24:35+0000", 12), ["db1"])
    assert one == again          # the same cause at another time and PID: the same failure
    assert one != other          # the same symptom, another cause


def test_crash_loops_of_different_causes_behind_the_same_systemd_lines_differ():
    """Two starts that end alike (failed, exit-code, start limit) after a line systemd
    ignored: one the program's own error, one a user systemd cannot find. Sharing a
    signature would give one host the other's plan."""
    def journal(middle: str, status: str, when: str, pid: int) -> str:
        return ("\n".join([
            f"{when} app1 systemd[1]: app.service: Failed to get cgroup ID of cgroup /sys/fs/cgroup/x, ignoring: "
            "Operation not permitted",
            f"{when} app1 systemd[1]: Started app.service - app.",
        ] + ([f"{when} app1 app[{pid}]: {middle}"] if middle else []) + [
            f"{when} app1 systemd[1]: app.service: Main process exited, code=exited, status={status}",
            f"{when} app1 systemd[1]: app.service: Start request repeated too quickly.",
            f"{when} app1 systemd[1]: app.service: Failed with result 'exit-code'."]))

    error = "app.service is failed/failed (result exit-code; unit file enabled)"
    unset = failure_signature("app", error, {"init": "systemd", "journal": journal(
        "fatal: cannot read : No such file or directory", "1/FAILURE", "2026-11-26T13:09:09+0000", 345)}, ["app1"])
    unset_later = failure_signature("app", error, {"init": "systemd", "journal": journal(
        "fatal: cannot read : No such file or directory", "1/FAILURE", "2026-12-01T01:00:00+0000", 9)}, ["app1"])
    no_user = failure_signature("app", error, {"init": "systemd", "journal": journal(
        "", "217/USER", "2026-11-26T13:09:09+0000", 345)}, ["app1"])
    no_group = failure_signature("app", error, {"init": "systemd", "journal": journal(
        "", "216/GROUP", "2026-11-26T13:09:09+0000", 345)}, ["app1"])
    assert unset == unset_later
    assert len({unset, no_user, no_group}) == 3
