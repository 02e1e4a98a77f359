"""Plans shared per key: between the workers of a run (file locks) and across runs and
controllers (a real redis-server, tests/redis_server.py)."""
from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import (
    PlanShare,
    PlanShareUnavailable,
    RedisPlanShare,
    plan_problem,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.redis_connection import RedisUnavailable, redis_options
from tests.redis_server import RedisServer, skip_or_fail_without_redis

PLAN = {"source": "llm", "commands": [{"command": "service nginx start", "verdict": "allow"}],
        "msg": "Plan for nginx from the LLM", "diagnosis": "stopped", "planned_by": "web01", "host_values": {},
        "dropped": [], "llm": {"calls": 1}}


@pytest.fixture()
def redis_server(tmp_path):
    skip_or_fail_without_redis()
    with RedisServer(tmp_path) as server:
        yield server


def share(server, **kwargs) -> RedisPlanShare:
    options = {"prefix": "t:", "wait": 5, "ttl": 60, "claim_ttl": 30, "poll": 0.02} | kwargs
    return RedisPlanShare.connect(server.connection, **options)


# ---------------------------------------------------------------- connection string and shape
def test_redis_options_read_the_fact_cache_connection_format():
    assert redis_options("127.0.0.1:6379:0") == {"host": "127.0.0.1", "port": 6379, "db": 0}
    assert redis_options("tls://cache.example:6380:2:s3cret") == {
        "ssl": True, "host": "cache.example", "port": 6380, "db": 2, "password": "s3cret"}
    assert redis_options("[::1]:6379:1")["host"] == "::1"


@pytest.mark.parametrize("uri, words", [("localhost", "host:port:db"), ("", "host:port:db"),
                                        ("a:26379;b:26379;0", "Sentinel")])
def test_redis_options_refuse_what_they_cannot_read(uri, words):
    with pytest.raises(RedisUnavailable, match=words):
        redis_options(uri)


@pytest.mark.parametrize("plan, words", [
    ([], "not an object"),
    (dict(PLAN, source="shell"), "unknown plan source"),
    (dict(PLAN, commands="rm -rf /"), "not a list"),
    (dict(PLAN, commands=[{"command": ""}]), "command 1"),
    (dict(PLAN, commands=[["service", "nginx", "start"]]), "command 1"),
    (dict(PLAN, host_values={"{port_owner_pid:80}": 310}), "host_values"),
    (dict(PLAN, msg=["x"]), "msg"),
])
def test_plan_problem_names_what_is_wrong(plan, words):
    assert words in plan_problem(plan)


def test_plan_problem_accepts_a_planner_result():
    assert plan_problem(PLAN) is None
    assert plan_problem({"source": "none", "commands": []}) is None


# ---------------------------------------------------------------- one controller, files
def test_file_share_plans_once_per_key(tmp_path):
    calls = []
    files = PlanShare(str(tmp_path), token="run-1")
    first = files.get_or_make("k", lambda: calls.append(1) or PLAN)
    second = PlanShare(str(tmp_path), token="run-1").get_or_make("k", lambda: calls.append(2) or PLAN)
    assert (first[1], second[1], calls) == ("made", "shared", [1])
    assert json.loads((tmp_path / "plans" / "run-1" / "k.json").read_text())["commands"] == PLAN["commands"]


# ---------------------------------------------------------------- across controllers, Redis
def test_redis_share_stores_the_plan_under_an_expiring_namespaced_key(redis_server):
    made, how = share(redis_server).get_or_make("sig", lambda: PLAN)
    assert (made, how) == (PLAN, "made")
    client = redis_server.client
    assert json.loads(client.get("t:plan:sig")) == PLAN
    assert 0 < client.ttl("t:plan:sig") <= 60
    assert client.get("t:plan:sig:claim") is None  # the claim is dropped once the plan is stored
    again, how = share(redis_server).get_or_make("sig", lambda: pytest.fail("planned twice"))
    assert (again, how) == (PLAN, "shared")


def _worker(connection: str, key: str, delay: float, queue) -> None:
    def make():
        time.sleep(delay)
        return dict(PLAN, planned_by=f"pid {__import__('os').getpid()}")
    shared = RedisPlanShare.connect(connection, prefix="t:", wait=20, ttl=60, claim_ttl=30, poll=0.02)
    plan, how = shared.get_or_make(key, make)
    queue.put((how, plan["planned_by"]))


def test_concurrent_processes_plan_a_key_once(redis_server):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_worker, args=(redis_server.connection, "same", 0.5, queue)) for _number in range(4)]
    for proc in workers:
        proc.start()
    results = [queue.get(timeout=60) for _proc in workers]
    for proc in workers:
        proc.join(timeout=30)
    assert sorted(how for how, _by in results) == ["made", "shared", "shared", "shared"]
    assert len({by for _how, by in results}) == 1  # everyone runs the one plan made


def test_a_waiter_plans_alone_when_the_wait_ends(redis_server):
    redis_server.client.set("t:plan:slow:claim", "elsewhere/1/x", ex=30)  # a live owner on another machine
    started = time.monotonic()
    plan, how = share(redis_server, wait=0.3).get_or_make("slow", lambda: PLAN)
    assert (plan, how) == (PLAN, "alone")
    assert time.monotonic() - started < 5
    assert redis_server.client.get("t:plan:slow") is None  # a lone plan is not published


def test_a_claim_whose_owner_process_is_gone_is_taken_over(redis_server):
    import socket

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = f"{socket.gethostname()}/{int(proc.stdout)}/abc"
    redis_server.client.set("t:plan:orphan:claim", dead, ex=30)
    plan, how = share(redis_server, wait=10).get_or_make("orphan", lambda: PLAN)
    assert (plan, how) == (PLAN, "made")


def test_an_expired_claim_is_taken_over(redis_server):
    redis_server.client.set("t:plan:expiring:claim", "elsewhere/1/x", ex=1)
    plan, how = share(redis_server, wait=10).get_or_make("expiring", lambda: PLAN)
    assert how == "made"


def test_a_failed_planning_step_drops_the_claim(redis_server):
    def broken():
        raise RuntimeError("planner failed")
    with pytest.raises(RuntimeError):
        share(redis_server).get_or_make("fails", broken)
    assert redis_server.client.get("t:plan:fails:claim") is None
    assert share(redis_server, wait=1).get_or_make("fails", lambda: PLAN)[1] == "made"


@pytest.mark.parametrize("raw", [b"{not json", json.dumps({"source": "llm", "commands": "reboot"}).encode(),
                                 b"\xff\xfe"])
def test_a_corrupt_entry_is_ignored_with_a_warning_and_replaced(redis_server, raw):
    redis_server.client.set("t:plan:bad", raw)
    shared = share(redis_server)
    plan, how = shared.get_or_make("bad", lambda: PLAN)
    assert (plan, how) == (PLAN, "made")
    assert len(shared.warnings) == 1 and "t:plan:bad" in shared.warnings[0]
    assert json.loads(redis_server.client.get("t:plan:bad")) == PLAN


def test_an_unreachable_redis_is_a_clear_error(redis_server):
    port = redis_server.port
    redis_server.stop()
    with pytest.raises(PlanShareUnavailable, match=f"127.0.0.1:{port} did not answer"):
        RedisPlanShare.connect(f"127.0.0.1:{port}:0", prefix="t:", wait=1, ttl=1, claim_ttl=1)


def test_a_plan_made_here_survives_a_redis_that_fails_after_the_claim(redis_server):
    shared = share(redis_server)

    def make_then_lose_redis():
        redis_server.stop()
        return PLAN
    plan, how = shared.get_or_make("lost", make_then_lose_redis)
    assert (plan, how) == (PLAN, "made")  # planned once, not again elsewhere
    assert "could not store the plan t:plan:lost" in shared.warnings[0]


def test_redis_failing_before_the_claim_is_a_clear_error(redis_server):
    shared = share(redis_server)
    redis_server.stop()
    with pytest.raises(PlanShareUnavailable, match="Redis failed while sharing a plan"):
        shared.get_or_make("down", lambda: PLAN)
