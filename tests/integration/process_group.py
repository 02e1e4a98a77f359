"""Stopping a daemon a test started in its own session (ansible-rulebook and what it runs)."""
from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGINT to ``proc``'s process group (a clean shutdown), SIGKILL after ``timeout`` s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
