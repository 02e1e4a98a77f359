# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host leases in the fact cache's Redis (plugins/plugin_utils/lease.py RedisLease), against a
real redis-server: controllers that share a Redis exclude each other per target."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import (
    LeaseBusy,
    LeaseUnavailable,
    RedisLease,
    process_start,
)
from tests.redis_server import RedisServer, skip_or_fail_without_redis

TARGET = "community.docker.docker://web01:"


@pytest.fixture()
def redis_server(tmp_path):
    skip_or_fail_without_redis()
    with RedisServer(tmp_path) as server:
        yield server


def lease(server, owner: str, **kwargs) -> RedisLease:
    return RedisLease.connect(server.connection, prefix="t:", key=TARGET, owner=owner, **kwargs)


def stored(server) -> tuple[dict, int]:
    names = server.client.keys("t:lease:*")
    assert len(names) == 1, names
    return json.loads(server.client.get(names[0])), server.client.ttl(names[0])


def test_one_owner_at_a_time_and_the_record_says_who(redis_server):
    first = lease(redis_server, "run-a@ctl1 (web01)", ttl=120)
    first.acquire()
    record, ttl = stored(redis_server)
    assert record["owner"] == "run-a@ctl1 (web01)" and record["key"] == TARGET
    assert 0 < ttl <= 120
    with pytest.raises(LeaseBusy, match="run-a@ctl1"):
        lease(redis_server, "run-b@ctl2 (web-01.example)", ttl=120).acquire()


def test_renewal_keeps_since_and_extends_the_expiry(redis_server):
    mine = lease(redis_server, "run-a", ttl=5)
    mine.acquire(now=1000.0)
    redis_server.client.pexpire(next(iter(redis_server.client.keys("t:lease:*"))), 1500)
    mine.acquire(now=1010.0)
    record, ttl = stored(redis_server)
    assert record["since"] == 1000.0
    assert ttl >= 4


def test_release_drops_only_our_own_lease(redis_server):
    mine = lease(redis_server, "run-a", ttl=60)
    mine.acquire()
    mine.release()
    assert redis_server.client.keys("t:lease:*") == []
    other = lease(redis_server, "run-b", ttl=60)
    other.acquire()
    mine.held = True  # a stale handle that believes it still holds the target
    mine.release()
    assert stored(redis_server)[0]["owner"] == "run-b"


def test_an_expired_lease_lapses(redis_server):
    lease(redis_server, "run-a", ttl=1).acquire()
    time.sleep(1.2)
    later = lease(redis_server, "run-b", ttl=60)
    later.acquire()
    assert stored(redis_server)[0]["owner"] == "run-b"


def test_a_lease_whose_local_owner_process_is_gone_lapses_at_once(redis_server):
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = lease(redis_server, "run-killed", ttl=600, process=(int(proc.stdout), "1"))
    dead.acquire()
    alive = lease(redis_server, "run-b", ttl=600)
    alive.acquire()
    assert stored(redis_server)[0]["owner"] == "run-b"


def test_a_live_local_owner_keeps_its_lease(redis_server):
    import os

    live = lease(redis_server, "run-live", ttl=600, process=(os.getpid(), process_start(os.getpid())))
    live.acquire()
    with pytest.raises(LeaseBusy):
        lease(redis_server, "run-b", ttl=600).acquire()


def test_an_unreachable_or_unreadable_redis_is_a_clear_error(redis_server):
    with pytest.raises(LeaseUnavailable, match="did not answer"):
        RedisLease.connect("127.0.0.1:1:0", prefix="t:", key=TARGET, owner="x")
    with pytest.raises(LeaseUnavailable, match="host:port:db"):
        RedisLease.connect("not a connection", prefix="t:", key=TARGET, owner="x")
    held = lease(redis_server, "run-a", ttl=60)
    redis_server.stop()
    with pytest.raises(LeaseUnavailable, match="could not be taken"):
        held.acquire()
