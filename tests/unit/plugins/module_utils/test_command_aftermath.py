"""command_aftermath: what a command left behind, judged on the host, not by its exit code."""
from __future__ import annotations

import subprocess
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import command_aftermath, host_probe, plan_runner


@pytest.mark.parametrize("argv, expected", [
    (["systemctl", "start", "ssh"], ("systemd", ["ssh.service"])),
    (["systemctl", "--no-block", "restart", "nginx.service", "cron"], ("systemd", ["nginx.service", "cron.service"])),
    (["/usr/sbin/service", "ssh", "start"], ("sysv", ["ssh"])),
    (["systemctl", "stop", "ssh"], ("", [])),
    (["service", "ssh", "status"], ("", [])),
])
def test_starts_are_recognised_by_what_they_do(argv, expected):
    assert command_aftermath.started_units(argv) == expected


@pytest.mark.parametrize("argv", [["kill", "-HUP", "123"], ["kill", "-s", "USR1", "123"], ["kill", "-STOP", "123"],
                                  ["pkill", "nginx"], ["systemctl", "kill", "nginx"]])
def test_signals_that_do_not_end_a_process_or_unknown_targets_are_not_waited_for(argv):
    assert command_aftermath.ending_targets(argv, [123]) == []


@pytest.mark.parametrize("argv", [["kill", "123"], ["kill", "-9", "123"], ["kill", "-s", "KILL", "123"],
                                  ["kill", "-SIGTERM", "123"], ["kill", "--signal=TERM", "123"]])
def test_a_kill_that_ends_its_pids_is_waited_for(argv):
    assert command_aftermath.ending_targets(argv, [123]) == [123]


def test_the_next_command_runs_only_once_the_signalled_process_is_gone():
    # a process that takes a moment to exit after SIGTERM, as a daemon closing its sockets does
    proc = subprocess.Popen(["sh", "-c", "trap 'sleep 0.7; exit 0' TERM; while :; do sleep 0.05; done"])
    try:
        deadline = time.monotonic() + 5
        while (host_probe.read_stat(proc.pid) or {}).get("comm") != "sh" and time.monotonic() < deadline:
            time.sleep(0.01)
        start = host_probe.read_stat(proc.pid)["start"]
        commands = plan_runner.normalise_commands([{"argv": ["kill", str(proc.pid)], "pids": [proc.pid]},
                                                   {"argv": ["cat", f"/proc/{proc.pid}/stat"]}])
        result = plan_runner.run_plan(commands, {proc.pid: {"start": start, "comm": "sh"}},
                                      plan_runner.invoking_identity())
        kill, after = result["results"]
        assert kill["rc"] == 0 and kill["afterwards"].startswith("waited ")
        assert kill["afterwards"].endswith(f"until PID {proc.pid} exited")
        # by the second command the process had exited (a zombie until reaped: state Z, or gone)
        assert after["rc"] != 0 or ") Z " in after["stdout"]
    finally:
        proc.kill()
        proc.wait()


def test_the_wait_is_bounded_and_says_what_is_still_there():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.05)
        note = command_aftermath.wait_gone(command_aftermath.snapshot([proc.pid]), limit=0.3)
        assert note.startswith("waited 0.") and note.endswith(f"PID {proc.pid} still there after the signal")
    finally:
        proc.kill()
        proc.wait()
