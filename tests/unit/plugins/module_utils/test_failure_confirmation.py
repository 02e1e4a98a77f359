"""Confirmed failures only: re-checks on the host, their bound, and slow versus frozen."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import failure_confirmation, health_checks, service_spec

PARAMS = {"confirm_attempts": 2, "confirm_interval": 2, "confirm_max_seconds": 30}


class Clock:
    """Time that passes only when slept (and by ``cost`` per check)."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(round(seconds, 3))
        self.now += seconds


def failing(error="port 5432 is not listening"):
    return {"healthy": False, "error": error, "checks": []}


def test_a_failure_that_passes_a_re_check_is_recovered_and_acts_on_nothing():
    clock = Clock()
    answers = [{"healthy": True, "error": "", "checks": []}]
    results = [dict(name="postgresql", **failing())]
    failure_confirmation.confirm([{"name": "postgresql"}], results, lambda d: answers.pop(0), PARAMS, clock, clock.sleep)
    assert results[0]["healthy"] is True
    assert results[0]["confirmation"] == {"checks": 2, "seconds": 2.0, "recovered": True,
                                          "first_error": "port 5432 is not listening"}
    assert clock.slept == [2.0]


def test_a_failure_seen_on_every_re_check_stands_with_the_latest_answer():
    clock = Clock()
    answers = [failing("second"), failing("third")]
    results = [dict(name="nginx", **failing("first"))]
    failure_confirmation.confirm([{"name": "nginx"}], results, lambda d: answers.pop(0), PARAMS, clock, clock.sleep)
    assert results[0]["healthy"] is False and results[0]["error"] == "third"
    assert results[0]["confirmation"]["checks"] == 3 and results[0]["confirmation"]["first_error"] == "first"
    assert clock.slept == [2.0, 2.0]


def test_the_service_definition_sets_its_own_count_and_spacing():
    clock = Clock()
    seen = []
    definitions = [{"name": "postgresql", "confirm_attempts": 1, "confirm_interval": 7},
                   {"name": "cron", "confirm_attempts": 0}]
    results = [dict(name="postgresql", **failing()), dict(name="cron", **failing())]
    failure_confirmation.confirm(definitions, results, lambda d: seen.append(d["name"]) or failing(), PARAMS,
                                 clock, clock.sleep)
    assert seen == ["postgresql"] and clock.slept == [7.0]
    assert "confirmation" not in results[1]  # zero re-checks: one failure counts


def test_no_re_check_starts_past_the_bound():
    clock = Clock()
    seen = []

    def slow(defn):
        seen.append(defn["name"])
        clock.now += 10  # a check that runs into its timeout
        return failing()

    results = [dict(name="nginx", **failing())]
    params = dict(PARAMS, confirm_attempts=5, confirm_max_seconds=15)
    failure_confirmation.confirm([{"name": "nginx"}], results, slow, params, clock, clock.sleep)
    assert seen == ["nginx", "nginx"]  # at 2 s and at 14 s; the next would start at 26 s


def test_a_service_whose_dependency_recovered_late_is_checked_once_more():
    clock = Clock()
    definitions = [{"name": "app", "depends_on": ["db"]}, {"name": "db", "confirm_attempts": 3, "confirm_interval": 10}]
    results = [dict(name="app", **failing("503")), dict(name="db", **failing("no response"))]

    def recheck(defn):
        db_back = clock.now >= 120
        return {"healthy": True, "error": "", "checks": []} if db_back else failing(defn["name"] + " still")

    failure_confirmation.confirm(definitions, results, recheck, PARAMS, clock, clock.sleep)
    assert results[1]["healthy"] and results[1]["confirmation"]["checks"] == 3  # at 10 and 20 s
    assert results[0]["healthy"] and results[0]["confirmation"]["recovered"]  # its own re-checks (2, 4 s) failed


def test_healthy_services_are_not_checked_again():
    clock = Clock()
    results = [{"name": "ssh", "healthy": True, "error": "", "checks": []}]
    failure_confirmation.confirm([{"name": "ssh"}], results, lambda d: 1 / 0, PARAMS, clock, clock.sleep)
    assert "confirmation" not in results[0] and clock.slept == []


def test_timeouts_are_degraded_unless_frozen_or_the_operator_says_remediate():
    definitions = [{"name": "a"}, {"name": "b"}, {"name": "c", "on_timeout": "remediate"}, {"name": "d"}]
    results = [dict(failing(), timed_out=True), dict(failing(), timed_out=True), dict(failing(), timed_out=True),
               failing()]
    failure_confirmation.classify_timeouts(definitions, results, lambda d: d["name"] == "b")
    assert results[0].get("degraded") and not results[0].get("frozen")
    assert results[1].get("frozen") and not results[1].get("degraded")
    assert not results[2].get("degraded") and not results[3].get("degraded")


def test_a_check_that_outlives_its_timeout_is_a_timeout_and_a_refusal_is_not():
    slow = service_spec.resolve({"name": "slowsvc", "checks": [{"type": "command", "argv": ["sleep", "5"], "timeout": 1}]})
    down = service_spec.resolve({"name": "downsvc", "checks": [{"type": "command", "argv": ["false"]}]})
    assert health_checks.service_health(slow, 10).get("timed_out") is True
    assert "timed_out" not in health_checks.service_health(down, 10)


def test_stopped_processes_are_frozen_and_running_ones_are_not(tmp_path):
    program = tmp_path / f"frz{os.getpid() % 100000}"
    shutil.copy("/bin/sleep", program)
    child = subprocess.Popen([str(program), "60"])
    defn = {"name": "x", "processes": [program.name]}
    try:
        for _attempt in range(100):
            if os.path.exists(f"/proc/{child.pid}/comm") and \
                    open(f"/proc/{child.pid}/comm", encoding="utf-8").read().strip() == program.name:
                break
            time.sleep(0.05)
        assert health_checks.processes_stopped(defn) is False
        os.kill(child.pid, signal.SIGSTOP)
        for _attempt in range(100):
            if open(f"/proc/{child.pid}/stat", encoding="utf-8").read().rsplit(")", 1)[1].split()[0] == "T":
                break
            time.sleep(0.05)
        assert health_checks.processes_stopped(defn) is True
        assert health_checks.processes_stopped({"name": "no-such-program-here"}) is False
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
