"""The one Redis helper: a bad connection string, a missing ``redis`` package and a server that
does not answer are each named, for whoever connects (the host lease, the shared plans)."""
from __future__ import annotations

import socket
import sys

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import redis_connection
from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import LeaseUnavailable, RedisLease
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import PlanShareUnavailable, RedisPlanShare


def test_without_the_redis_package_the_error_names_the_package_and_the_purpose(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)   # `import redis` raises ImportError
    with pytest.raises(redis_connection.RedisUnavailable, match=r"the host lease: .*redis"):
        redis_connection.connect("127.0.0.1:6379:0", "the host lease")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_lease_and_a_plan_share_report_a_silent_server_the_same_way():
    pytest.importorskip("redis")
    uri = f"127.0.0.1:{_closed_port()}:0"
    with pytest.raises(LeaseUnavailable, match="did not answer"):
        RedisLease.connect(uri, "p:", "web01", "run-1")
    with pytest.raises(PlanShareUnavailable, match="did not answer"):
        RedisPlanShare.connect(uri, "p:")


def test_a_bad_connection_string_is_named_before_any_connection():
    with pytest.raises(redis_connection.RedisUnavailable, match=r"'nope'.*host:port:db"):
        redis_connection.connect("nope")
