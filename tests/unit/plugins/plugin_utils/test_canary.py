"""Canary, then the fleet: the first hosts of a shared plan run it; the others follow its verdict."""
from __future__ import annotations

import threading

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.canary import RedisRollout, Rollout, rollout_verdict


def rollout(tmp_path, size=1, wait=5.0, **kwargs):
    return Rollout(str(tmp_path), "k1", size, wait, poll=0.01, **kwargs)


def test_the_first_host_is_the_canary_and_keeps_its_place(tmp_path):
    share = rollout(tmp_path)
    assert share.verdict("lab01").canary and share.verdict("lab01").action == "go"
    assert share.join("lab01") == 0 and share.join("lab02") == 1 and share.join("lab01") == 0


def test_later_hosts_wait_for_the_canary_and_go_when_it_healed(tmp_path):
    share = rollout(tmp_path)
    assert share.verdict("lab01").canary
    answers = {}
    waiting = threading.Thread(target=lambda: answers.update(lab02=rollout(tmp_path).verdict("lab02")))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # waits while the canary runs
    share.record("lab01", True, "")
    waiting.join(5)
    assert answers["lab02"].action == "go" and not answers["lab02"].canary
    assert answers["lab02"].detail == "wave 2: the canary lab01 healed with this plan"


def test_a_canary_that_did_not_heal_stops_the_rollout_with_its_evidence(tmp_path):
    share = rollout(tmp_path, size=2)
    assert share.verdict("lab01").canary and share.verdict("lab02").canary
    share.record("lab02", False, "service nginx status: nginx is not running (rc 3)")
    verdict = rollout(tmp_path, size=2).verdict("lab03")
    assert verdict.action == "stop"
    assert verdict.detail == ("the canary lab02 ran this plan and it did not heal: "
                              "service nginx status: nginx is not running (rc 3)")


def test_a_canary_waiting_for_a_human_stops_the_rollout_as_unverified_not_as_failed(tmp_path):
    # The canary's restart met clients on its host and waits for an approval: the plan was not
    # verified there, so it runs nowhere else, and nobody is told it failed.
    share = rollout(tmp_path)
    assert share.verdict("lab01").canary
    share.record("lab01", False, "service postgresql restart would drop 1 client connection(s)", held=True)
    verdict = rollout(tmp_path).verdict("lab02")
    assert verdict.action == "stop"
    assert verdict.detail == ("the canary lab01 did not verify this plan: it waits there for a human (service "
                              "postgresql restart would drop 1 client connection(s)); it runs on no other host "
                              "before it is verified")


def test_no_word_from_the_canary_within_the_wait_runs_nothing(tmp_path):
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    assert rollout(tmp_path).verdict("lab01").canary
    verdict = rollout(tmp_path, wait=3, sleep=sleep, clock=lambda: now[0]).verdict("lab02")
    assert verdict.action == "timeout" and "within 3 s" in verdict.detail and now[0] >= 3


def test_other_plans_have_their_own_rollout(tmp_path):
    assert rollout(tmp_path).verdict("lab01").canary
    assert Rollout(str(tmp_path), "k2", 1, 1.0).verdict("lab02").canary


def test_waves_widen_only_once_every_host_before_them_healed(tmp_path):
    share = rollout(tmp_path, waves=[2])
    assert [share.wave_of(p) for p in range(5)] == [(0, 0), (1, 1), (1, 1), (2, 3), (2, 3)]
    assert share.verdict("lab01").canary
    share.record("lab01", True, "")
    for host in ("lab02", "lab03"):  # the second wave: two hosts, after the canary
        verdict = share.verdict(host)
        assert verdict.action == "go" and verdict.wave == 1, verdict
    answers = {}
    waiting = threading.Thread(target=lambda: answers.update(lab04=rollout(tmp_path, waves=[2]).verdict("lab04")))
    waiting.start()
    share.record("lab02", True, "")
    waiting.join(0.2)
    assert waiting.is_alive()  # lab03 of the wave before has not reported yet
    share.record("lab03", True, "")
    waiting.join(5)
    assert answers["lab04"].action == "go" and answers["lab04"].wave == 2
    assert answers["lab04"].detail == "wave 3: the canary lab01 healed with this plan, and the 2 hosts of the waves after it"


def test_a_wave_host_that_did_not_heal_stops_every_later_wave(tmp_path):
    share = rollout(tmp_path, waves=[1])
    assert share.verdict("lab01").canary
    share.record("lab01", True, "")
    assert share.verdict("lab02").action == "go"
    share.record("lab02", False, "port 80 refused")
    verdict = share.verdict("lab03")
    assert verdict.action == "stop" and verdict.wave == 2
    assert verdict.detail == "lab02 (wave 2) ran this plan and it did not heal: port 80 refused"


def test_a_wave_of_no_host_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least 1 host"):
        rollout(tmp_path, waves=[2, 0])


# ---------------------------------------------------------------- across controllers (a real redis-server)
@pytest.fixture()
def redis_client(tmp_path):
    from tests.redis_server import RedisServer, skip_or_fail_without_redis
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.redis_connection import connect

    skip_or_fail_without_redis()
    with RedisServer(tmp_path) as server:
        yield connect(server.connection)


def controller(client, **kwargs) -> RedisRollout:
    return RedisRollout(client, "t:", "k1", 1, 5.0, 60, poll=0.01, **kwargs)


def test_two_controllers_share_one_canary_and_one_order_of_waves(redis_client):
    first, second = controller(redis_client, waves=[1]), controller(redis_client, waves=[1])
    assert first.verdict("web01").canary  # controller 1's host is the canary
    assert second.join("web02") == 1 and first.join("web02") == 1 and second.join("web01") == 0
    answers = {}
    waiting = threading.Thread(target=lambda: answers.update(web02=second.verdict("web02")))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # controller 2 waits for controller 1's canary
    first.record("web01", True, "")
    waiting.join(5)
    assert answers["web02"].action == "go" and answers["web02"].wave == 1
    second.record("web02", False, "port 80 refused")
    verdict = first.verdict("web03")
    assert verdict.action == "stop" and verdict.detail == "web02 (wave 2) ran this plan and it did not heal: port 80 refused"
    assert 0 < redis_client.ttl("t:rollout:k1:order") <= 60 and 0 < redis_client.ttl("t:rollout:k1:outcomes") <= 60


def test_concurrent_joins_across_controllers_get_distinct_places(redis_client):
    places = []
    threads = [threading.Thread(target=lambda h=h: places.append(controller(redis_client).join(h)))
               for h in (f"web{i:02d}" for i in range(20))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(places) == list(range(20))


def test_a_redis_that_stops_answering_falls_back_to_the_run_directory_with_a_warning(tmp_path):
    class Gone:
        prefix = "t:"

        class client:  # noqa: N801  (the attribute the plan share exposes)
            @staticmethod
            def eval(*_args):
                raise ConnectionError("Connection refused")

    rollout_, verdict, warning = rollout_verdict("web01", Gone(), str(tmp_path), "k1", 1, 5.0, 60)
    assert isinstance(rollout_, Rollout) and verdict.canary
    assert warning == "the canary of this plan is kept on this controller only: Redis failed: Connection refused"
    _rollout, verdict, warning = rollout_verdict("web02", object(), str(tmp_path), "k1", 1, 0.0, 60)
    assert verdict.action == "timeout" and warning == ""  # the same directory: web01 is the canary
