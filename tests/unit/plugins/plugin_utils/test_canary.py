"""Canary, then the fleet: the first hosts of a shared plan run it; the others follow its verdict."""
from __future__ import annotations

import threading

from ansible_collections.sentinel.remediation.plugins.plugin_utils.canary import Rollout


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
    import pytest
    with pytest.raises(ValueError, match="at least 1 host"):
        rollout(tmp_path, waves=[2, 0])
