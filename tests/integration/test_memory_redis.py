"""Shared memory across controllers: the fact cache in a real redis-server (Debian's).

Two runs with separate private data dirs (two "controllers") share one Redis: the
episode written by the first run is what the second plans from.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest

from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def redis_url(tmp_path):
    binary = shutil.which("redis-server")
    if binary is None:
        import os

        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI=true)", pytrace=False)
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path), "--daemonize", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    for _attempt in range(50):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}:0", client
    proc.terminate()
    proc.wait(timeout=10)


def test_episodes_shared_through_redis(lab_factory, tmp_path, redis_url):
    require_docker()
    connection, client = redis_url
    lab = lab_factory("sentinel-test-wfr", 1)
    inventory = lab.write_inventory(tmp_path / "hosts.yml")
    env = {"ANSIBLE_CACHE_PLUGIN": "community.general.redis", "ANSIBLE_CACHE_PLUGIN_CONNECTION": connection,
           "ANSIBLE_CACHE_PLUGIN_PREFIX": "sentinel_test_"}
    controller_a = Workspace(tmp_path / "a", inventory, extra_env=env)
    controller_b = Workspace(tmp_path / "b", inventory, extra_env=env)
    for work in (controller_a, controller_b):
        work.root.mkdir()

    lab.inject("lab01", "nginx_stopped")
    first = controller_a.run(extravars={"remediate_backend": "runbook"})
    assert first.status == "successful", first.stdout[-3000:]
    assert first.outcomes()[("lab01", "nginx")]["commands"][0]["source"] == "runbook"
    assert any(key.endswith(b"lab01") for key in client.keys("sentinel_test_*"))
    assert not controller_a.facts_dir.exists()  # nothing went to the jsonfile cache

    lab.inject("lab01", "nginx_stopped")
    second = controller_b.run(extravars={"remediate_backend": "runbook"})
    assert second.status == "successful", second.stdout[-3000:]
    healed = second.outcomes()[("lab01", "nginx")]
    assert healed["state"] == "healed"
    assert healed["commands"][0]["source"] == "memory"
    assert lab.health("lab01")["nginx"].healthy
