# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Redis subcommand judged by what it does, run for real in a lab host.

A Lua script that never ends blocks the lab's real redis-server (every client gets BUSY);
the policy allows `redis-cli script kill` in a Redis incident, its argv runs in the
container, and Redis answers PING again with its data kept, by the lab's own health check.
"""
from __future__ import annotations

import time

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify

pytestmark = pytest.mark.lab

HOST = "lab01"
REDIS = {"name": "redis-server", "user": "redis", "data_paths": ["/var/lib/redis"]}
RUNAWAY = "local i = 0 while true do i = i + 1 end"


def _busy(lab) -> bool:
    return "BUSY" in lab.exec(HOST, ["redis-cli", "ping"], timeout=15).output()


def test_script_kill_frees_a_redis_blocked_by_a_runaway_script(lab) -> None:
    lab.exec(HOST, ["redis-cli", "set", "sentinel:kept", "yes"], check=True)
    lab.exec(HOST, ["redis-cli", "config", "set", "lua-time-limit", "200"], check=True)
    try:
        lab.exec(HOST, f"nohup redis-cli eval '{RUNAWAY}' 0 >/dev/null 2>&1 &", check=True)
        deadline = time.monotonic() + 30
        while not _busy(lab):
            assert time.monotonic() < deadline, "the runaway script never made Redis busy"
            time.sleep(0.5)
        assert not lab.health(HOST, ["redis"])["redis"].healthy, "a blocked Redis must fail the lab's check"

        verdict = classify("redis-cli script kill", scope=REDIS)
        assert verdict["verdict"] == "allow", verdict["reasons"]
        ran = lab.exec(HOST, verdict["argv"], user="root" if verdict["become"] else "sentinel", timeout=30)
        assert ran.ok and "OK" in ran.output(), ran.output()

        assert lab.exec(HOST, ["redis-cli", "ping"], timeout=15).stdout.strip() == "PONG"
        assert lab.exec(HOST, ["redis-cli", "get", "sentinel:kept"], timeout=15).stdout.strip() == "yes"
        assert lab.health(HOST, ["redis"])["redis"].healthy
    finally:
        if _busy(lab):
            lab.exec(HOST, ["redis-cli", "script", "kill"], timeout=15)
        lab.exec(HOST, ["redis-cli", "config", "set", "lua-time-limit", "5000"], timeout=15)
        lab.exec(HOST, ["redis-cli", "del", "sentinel:kept"], timeout=15)
