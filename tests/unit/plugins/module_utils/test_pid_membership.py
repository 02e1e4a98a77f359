# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a PID is one of a service's processes now, read from this machine's /proc."""
from __future__ import annotations

import subprocess
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe, pid_membership


@pytest.fixture()
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    deadline = time.monotonic() + 5
    # exec sets the new name before the new arguments: wait for both (a loaded machine shows the gap)
    while time.monotonic() < deadline and not (
            (host_probe.read_stat(proc.pid) or {}).get("comm") == "sleep"
            and "sleep 60" in ((host_probe.process_info(proc.pid) or {}).get("cmdline") or "")):
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_a_process_named_as_the_service_declares_belongs(sleeper) -> None:
    assert pid_membership.problem(sleeper.pid, {"name": "sleepy", "processes": ["sleep"]}, init="sysv") is None
    # nothing declared: programs named like the service
    assert pid_membership.problem(sleeper.pid, {"name": "sleep", "processes": []}, init="sysv") is None


def test_another_programs_process_does_not_belong_and_says_what_it_runs(sleeper) -> None:
    found = pid_membership.problem(sleeper.pid, {"name": "nginx", "processes": ["nginx"], "units": ["nginx.service"]},
                                   init="sysv")
    assert found is not None and "sleep 60" in found and "not one of nginx's processes" in found


def test_a_gone_process_belongs_to_nobody() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    found = pid_membership.problem(proc.pid, {"name": "true", "processes": ["true"]}, init="sysv")
    assert found is not None and "is gone" in found
