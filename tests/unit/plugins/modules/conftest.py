# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modules run in-process against this machine. While lab tests run beside them, the
lab's containers' processes (hundreds of nginx, redis and postgres processes) are visible in
this machine's /proc and would fill the evidence the tests measure: the host these tests
describe is this machine without the containers."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe


def _in_a_container(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as handle:
            return any(part in handle.read() for part in ("/docker/", "/docker-", "containerd"))
    except OSError:
        return False


@pytest.fixture(autouse=True)
def without_container_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    real = host_probe.pids
    monkeypatch.setattr(host_probe, "pids", lambda: [p for p in real() if not _in_a_container(p)])
