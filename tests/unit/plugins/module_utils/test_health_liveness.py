"""Liveness: a daemon stopped by a signal keeps its PID and its port, and is not healthy."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import health_checks, host_probe, service_spec

SERVER = ("import socket, sys, time\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('127.0.0.1', 0)); s.listen(5); print(s.getsockname()[1], flush=True)\n"
          "while True: time.sleep(1)\n")


@pytest.fixture()
def listener():
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait()


def _wait_state(pid: int, letter: str) -> None:
    deadline = time.monotonic() + 5
    while (host_probe.read_stat(pid) or {}).get("state") != letter and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.skipif(os.geteuid() != 0, reason="seeing which process holds a socket needs root, as on hosts")
def test_a_stopped_holder_of_the_port_fails_the_port_check(listener):
    proc, port = listener
    name = host_probe.read_stat(proc.pid)["comm"]
    defn = service_spec.resolve({"name": "svc", "checks": [{"type": "port", "port": port, "process": name},
                                                           {"type": "port", "port": port}]})
    assert health_checks.service_health(defn, 5)["healthy"] is True
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        _wait_state(proc.pid, "T")
        # the kernel still completes a connection into the stopped process's backlog
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        result = health_checks.service_health(defn, 5)
        assert result["healthy"] is False
        named, anyone = result["checks"]
        assert named["detail"].endswith(f"which is not alive: pid {proc.pid} stopped")
        assert anyone["ok"] is False and f"its holder is not alive: pid {proc.pid} stopped" in anyone["detail"]
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    _wait_state(proc.pid, "S")
    assert health_checks.service_health(defn, 5)["healthy"] is True


def test_frozen_text_speaks_only_when_none_of_the_processes_can_run(listener):
    proc, _port = listener
    other = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        _wait_state(proc.pid, "T")
        assert host_probe.frozen_text([proc.pid]) == f"pid {proc.pid} stopped"
        assert host_probe.frozen_text([proc.pid, other.pid]) == ""  # one of them still runs
        assert host_probe.frozen_text([]) == ""
        other.kill()
        other.wait()
        assert host_probe.frozen_text([proc.pid, other.pid]) == f"pid {proc.pid} stopped"  # a gone one does not count
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        other.kill()
        other.wait()


def test_named_pids_finds_a_zombie_by_its_kernel_name():
    # the child exits; its parent (exec'd into sleep) never reaps it
    parent = subprocess.Popen(["sh", "-c", "sleep 0.1 & exec sleep 30"])
    try:
        deadline = time.monotonic() + 5
        zombies = []
        while not zombies and time.monotonic() < deadline:
            zombies = [p for p in host_probe.named_pids(["sleep"])
                       if (host_probe.read_stat(p) or {}).get("state") == "Z"
                       and host_probe.read_stat(p)["ppid"] == parent.pid]
            time.sleep(0.05)
        assert zombies, "no zombie child of the test's sleep"
        assert host_probe.frozen_text(zombies) == f"pid {zombies[0]} zombie"
    finally:
        parent.kill()
        parent.wait()
