# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Remembered fixes sent ahead, plans shared between hosts, and each store failing."""
from __future__ import annotations

import os

from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import Lease
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import _stores
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation._checking import PlanCheck
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation.context import CacheSettings

from .conftest import NGINX, STOPPED, FakeHost
from .test_attempt_loop import ScriptedPlans, journal


def remembered(make_run, tmp_path):
    """The memory fact of a run that healed nginx's stop with a start."""
    done = make_run(FakeHost(verify=(True,)), loop=ScriptedPlans).run()
    assert done.outcomes[0]["state"] == "healed"
    return done.facts


def sent_ahead(host):
    health = [args for name, args in host.calls if name == "sentinel.remediation.service_health"][0]
    return health.get("remembered") or []


def test_a_remembered_fix_goes_with_the_health_check_and_heals_in_one_round_trip(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    host = FakeHost(remembered_ran=True)
    done = make_run(host, facts=facts, name="web1").run()
    assert [c["label"] for fix in sent_ahead(host) for c in fix["commands"]] == ["systemctl start nginx"]
    assert host.ran() == []  # nothing went through execute_plan
    assert done.outcomes[0]["state"] in ("healed", "healthy")


def test_a_remembered_fix_that_ran_and_did_not_heal_counts_as_the_first_attempt(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    host = FakeHost(remembered_ran=False, verify=(True,))
    done = make_run(host, facts=facts, loop=type("Next", (ScriptedPlans,), {"plans": [["x"], ["systemctl restart nginx"]]}),
                    max_attempts=3).run()
    attempts = done.incidents[0].attempts
    assert attempts[0].source == "memory" and attempts[0].recall == "exact"
    assert host.ran() == ["systemctl restart nginx"] and done.outcomes[0]["state"] == "healed"


def test_no_fix_goes_ahead_when_approval_is_required_or_in_check_mode(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    for extra in ({"require_approval": True}, {"check_mode": True}, {"monitor_only": True}):
        host = FakeHost(healthy=True)
        make_run(host, facts=facts, **extra).run()
        assert sent_ahead(host) == []


def test_the_fix_sent_ahead_is_the_one_the_loop_would_check_for_the_same_plan(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    service = make_run(FakeHost(), facts=facts)
    fixes = service.ahead.choose()
    check = PlanCheck({}, {"nginx": NGINX})
    scope = check.scope(NGINX, {})
    again = check.check([{"command": "systemctl start nginx"}], tools={}, scope=scope, definition=NGINX,
                        evidence={}, source="memory")
    (fix,) = fixes["nginx"].values()
    assert [c["argv"] for c in fix["commands"]] == [c["argv"] for c in again]


def test_the_engine_adds_a_reset_before_a_start_systemd_refuses(make_run):
    check = PlanCheck({}, {"nginx": NGINX})
    evidence = dict(STOPPED, unit={"ActiveState": "failed", "Result": "start-limit-hit", "Id": "nginx.service"})
    checked = check.check([{"command": "systemctl start nginx", "source": "runbook"}], tools={},
                          scope=check.scope(NGINX, evidence), definition=NGINX, evidence=evidence)
    assert [c["command"] for c in checked] == ["systemctl reset-failed nginx.service", "systemctl start nginx"]
    assert [c["source"] for c in checked] == ["engine", "runbook"]


def test_two_hosts_with_the_same_failure_share_one_plan(make_run, monkeypatch):
    made = []

    class Counting(ScriptedPlans):
        def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
            return None  # the planner's plan, through the plan share

    real = _stores.PlanStores.per_signature

    def counted(self, key, make):
        return real(self, key, lambda: made.append(key) or make())

    monkeypatch.setattr(_stores.PlanStores, "per_signature", counted)
    first = make_run(FakeHost(verify=(True,)), name="web1", loop=Counting).run()
    second = make_run(FakeHost(verify=(True,)), name="web2", loop=Counting).run()
    assert first.outcomes[0]["state"] == second.outcomes[0]["state"] == "healed"
    assert len(made) == 1  # the second host took the first one's plan


def test_a_journal_that_cannot_record_the_intent_runs_nothing(make_run, tmp_path):
    service = make_run(FakeHost(), loop=ScriptedPlans)
    directory = tmp_path / "state" / "journal"
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o500)
    try:
        if os.access(directory, os.W_OK):  # root: the journal file itself is replaced by a directory
            os.chmod(directory, 0o700)
            (directory / "web1.jsonl").mkdir()
        done = service.run()
    finally:
        os.chmod(directory, 0o700)
    assert done.outcomes[0]["state"] == "failed" and "not run" in done.outcomes[0]["reason"]
    assert service.port.ran() == []


def test_a_host_leased_by_another_run_is_busy_and_untouched(make_run, tmp_path):
    other = Lease(str(tmp_path / "leases"), "web1:22", owner="another run", ttl=600, process=None)
    other.acquire()
    host = FakeHost()
    done = make_run(host, loop=ScriptedPlans).run()
    assert done.outcomes[0]["state"] == "busy" and host.ran() == []


def test_a_redis_that_does_not_answer_leaves_leases_and_plans_on_this_controller(make_run, monkeypatch):
    monkeypatch.setattr(_stores, "_announced_share", set())
    host = FakeHost(verify=(True,))
    cache = CacheSettings("redis", "127.0.0.1:1:0", "")
    done = make_run(host, cache=cache).run()
    assert done.outcomes[0]["state"] == "healed"
    assert any("controller only" in w for w in done.warnings)
    assert any("plans are shared within this run only" in w for w in done.warnings)


def test_an_oversized_memory_is_cut_to_memory_max_with_a_warning(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    episodes = facts["sentinel_memory"] * 5
    done = make_run(FakeHost(healthy=True), facts={"sentinel_memory": episodes}, memory_max=2).run()
    assert len(done.facts["sentinel_memory"]) == 2
    assert any("kept the newest 2" in w for w in done.warnings)


def test_a_journal_that_cannot_be_read_does_not_stop_the_pass(make_run, tmp_path):
    directory = tmp_path / "state" / "journal"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "web1.jsonl").write_bytes(b"\x00not json\n")
    done = make_run(FakeHost(verify=(True,)), loop=ScriptedPlans).run()
    assert done.outcomes[0]["state"] == "healed"
    assert journal(tmp_path)[-1]["kind"] == "closed"
