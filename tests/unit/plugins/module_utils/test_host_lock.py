# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's remediation lock: held for a process's life, released by the kernel when it ends."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import host_lock

HOLDER = """
import sys, time
sys.path[:0] = {path!r}
from ansible_collections.sentinel.remediation.plugins.module_utils import host_lock
held = host_lock.hold("run r1 on ctl, nginx attempt 1", directory={directory!r})
print("held", flush=True)
time.sleep(120)
"""


def _holder(directory):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(path=sys.path, directory=str(directory))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_plan_is_told_who_holds_the_host_and_runs_nothing(tmp_path):
    proc = _holder(tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(host_lock.HostBusy, match=r"still running on this host \(run r1 on ctl, nginx attempt 1, pid \d+"):
            host_lock.hold("run r2", wait=0.5, directory=str(tmp_path))
        assert time.monotonic() - started >= 0.5   # it waited as long as it was allowed
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_dies_with_its_holder_even_on_sigkill(tmp_path):
    proc = _holder(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    held = host_lock.hold("run r2", wait=2, directory=str(tmp_path))
    try:
        assert "run r2" in (tmp_path / "host.lock.holder").read_text()
    finally:
        held.close()


def test_a_waiting_plan_gets_the_lock_when_the_holder_ends(tmp_path):
    proc = _holder(tmp_path)
    try:
        subprocess.Popen(["sh", "-c", f"sleep 1; kill {proc.pid}"])
        held = host_lock.hold("run r3", wait=20, directory=str(tmp_path))
        held.close()
    finally:
        proc.kill()
        proc.wait()
