# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A split pass (health of every host, the fleet count, then the heal): the heal phase's
remembered fixes go with one re-check of the failing services, never for a stopped check."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import _split

from .conftest import STOPPED, FakeHost
from .test_ahead_and_stores import remembered
from .test_attempt_loop import ScriptedPlans, journal

HEALTH = "sentinel.remediation.service_health"
EXECUTE = "sentinel.remediation.execute_plan"
DEFINITIONS = {name: {"name": name} for name in ("db", "nginx", "app", "cron", "slow", "gone")}
STOP = {"hosts": ["web1", "web2", "web3"], "checked": 3, "reason": "fleet-wide stop: the nginx check fails on 3 of 3"}


def failing(name="nginx", **extra) -> dict:
    return dict({"name": name, "healthy": False, "error": f"{name} is not running", "evidence": STOPPED,
                 "checks": []}, **extra)


def phase_health(*rows) -> dict:
    """What the health phase returned for this host (the heal phase's ``health``)."""
    rows = rows or (failing(),)
    return {"services": list(rows), "healthy": all(r["healthy"] for r in rows), "tools": {"present": ["systemctl"]}}


def modules(host) -> list[str]:
    return [name for name, _args in host.calls]


def test_only_failing_services_the_count_left_to_act_on_are_checked_again():
    health = phase_health(
        failing("db"), failing("nginx"), failing("app", blocked_by=["db"]), {"name": "cron", "healthy": True},
        failing("slow", degraded=True), {"name": "gone", "healthy": False, "error": "x"})
    assert _split.recheck_names(DEFINITIONS, health, {"nginx": STOP}) == ["db"]
    assert _split.recheck_names(DEFINITIONS, health, {}) == ["db", "nginx"]


def test_the_recheck_rows_replace_the_health_phase_rows_they_checked_again():
    health = phase_health(failing("db"), failing("nginx"))
    fresh = {"services": [{"name": "nginx", "healthy": True, "remembered": {"ran": True}}],
             "tools": {"present": ["service"]}}
    out = _split.merged(health, fresh)
    assert [(r["name"], r["healthy"]) for r in out["services"]] == [("db", False), ("nginx", True)]
    assert out["services"][1]["remembered"] == {"ran": True}
    assert out["tools"] == {"present": ["service"]} and out["healthy"] is False
    assert health["services"][1]["healthy"] is False  # the health phase's result is left as it was


def test_the_heal_phase_sends_a_remembered_fix_with_one_recheck_and_no_second_round_trip(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    host = FakeHost(remembered_ran=True)
    done = make_run(host, facts=facts, health=phase_health(), phase="full").run()
    assert modules(host) == [HEALTH]  # the fix ran in the re-check: no execute_plan
    (call,) = [args for name, args in host.calls if name == HEALTH]
    assert [s["name"] for s in call["services"]] == ["nginx"]
    assert [c["label"] for fix in call["remembered"] for c in fix["commands"]] == ["systemctl start nginx"]
    assert not call.get("confirm_attempts")  # the health phase confirmed the failure already
    assert done.outcomes[0]["state"] == "healed"
    attempt = done.incidents[0].attempts[0]
    assert attempt.source == "memory" and attempt.recall == "exact"
    kinds = [r["kind"] for r in journal(tmp_path)[-4:]]
    assert kinds[:3] == ["conditional", "intent", "result"], kinds  # recorded before it went


def test_a_check_the_fleet_count_stopped_sends_no_fix_and_touches_nothing(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    before = len(journal(tmp_path))
    host = FakeHost(remembered_ran=True)
    done = make_run(host, facts=facts, health=phase_health(), phase="full", fleet_stop={"nginx": STOP}).run()
    assert host.calls == []  # no module at all: no re-check, no fix, no plan run
    assert done.outcomes[0]["state"] == "escalated" and done.outcomes[0]["safeguards"] == ["fleet_stop"]
    assert [r["kind"] for r in journal(tmp_path)[before:]] == ["fleet_stop", "notified"]  # no conditional, no intent


def test_the_health_phase_sends_no_fix_ahead_even_when_memory_has_one(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    host = FakeHost(remembered_ran=True)
    done = make_run(host, facts=facts, phase="health").run()
    assert modules(host) == [HEALTH] and "remembered" not in host.calls[0][1]
    assert done.outcomes == [] and not done.health["healthy"]


def test_a_heal_phase_without_a_remembered_fix_adds_no_round_trip(make_run):
    host = FakeHost(verify=(True,))
    done = make_run(host, loop=ScriptedPlans, health=phase_health(), phase="full").run()
    assert modules(host) == [EXECUTE]  # the plan, run and verified; the health phase's rows used as they are
    assert done.outcomes[0]["state"] == "healed"


def test_a_service_that_recovered_between_the_phases_runs_nothing(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    host = FakeHost(healthy=True)
    done = make_run(host, facts=facts, health=phase_health(), phase="full").run()
    assert modules(host) == [HEALTH] and host.ran() == []
    assert done.outcomes[0]["state"] == "healthy" and done.incidents == []
    assert journal(tmp_path)[-2]["kind"] == "conditional" and journal(tmp_path)[-1]["kind"] == "resolved"


def test_a_host_gone_at_the_recheck_is_reported_unreachable(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    done = make_run(FakeHost(unreachable=True), facts=facts, health=phase_health(), phase="full").run()
    assert done.unreachable and done.unreachable["unreachable"] and done.outcomes == []


def deferred(name="nginx") -> dict:
    """A health phase row whose evidence was left to the heal phase (memory held fixes for it)."""
    return {"name": name, "healthy": False, "error": f"{name} is not running", "checks": [],
            "evidence_deferred": "evidence deferred: memory holds fixes for this service"}


class SeesEvidence(ScriptedPlans):
    """Plans as ScriptedPlans does, keeping the evidence each plan was made from."""
    seen: list = []

    def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
        type(self).seen.append(evidence)
        return super().plan_from_elsewhere(incident, attempt, definition, evidence, tools)


def test_the_health_phase_leaves_a_remembered_services_evidence_to_the_heal_phase(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    host = FakeHost()
    done = make_run(host, facts=facts, phase="health").run()
    (call,) = [args for name, args in host.calls if name == HEALTH]
    assert call["defer_evidence"] == ["nginx"] and "remembered" not in call
    assert done.health["services"][0].get("evidence_deferred") and "evidence" not in done.health["services"][0]
    # With nothing in memory, the health phase reads the evidence as before.
    fresh = FakeHost()
    make_run(fresh, phase="health").run()
    assert "defer_evidence" not in fresh.calls[0][1]


def test_a_deferred_service_with_no_fix_to_carry_is_looked_at_once_more_and_planned_from_that_look(make_run):
    # Memory's fix is gone by the heal phase (here: no memory at all): the re-check still goes,
    # without a fix, and the loop plans from the evidence it brings back.
    SeesEvidence.seen = []
    host = FakeHost(verify=(True,))
    done = make_run(host, loop=SeesEvidence, health=phase_health(deferred()), phase="full").run()
    assert modules(host) == [HEALTH, EXECUTE]
    recheck = host.calls[0][1]
    assert [s["name"] for s in recheck["services"]] == ["nginx"] and not recheck.get("remembered")
    assert SeesEvidence.seen and SeesEvidence.seen[0].get("unit") == STOPPED["unit"]
    assert done.outcomes[0]["state"] == "healed"


def test_a_deferred_services_remembered_fix_that_does_not_heal_falls_back_to_the_full_path(make_run, tmp_path):
    facts = remembered(make_run, tmp_path)
    SeesEvidence.seen = []
    host = FakeHost(remembered_ran=False, verify=(True,))
    loop = type("Next", (SeesEvidence,), {"plans": [["x"], ["systemctl restart nginx"]]})
    done = make_run(host, facts=facts, loop=loop, health=phase_health(deferred()), phase="full", max_attempts=3).run()
    assert modules(host) == [HEALTH, EXECUTE]  # the fix went with the re-check; the next plan was run alone
    assert [c["label"] for fix in host.calls[0][1]["remembered"] for c in fix["commands"]] == ["systemctl start nginx"]
    attempts = done.incidents[0].attempts
    assert attempts[0].source == "memory" and host.ran() == ["systemctl restart nginx"]
    assert SeesEvidence.seen and all(e for e in SeesEvidence.seen)  # planned from evidence, never from none
    assert done.outcomes[0]["state"] == "healed"
