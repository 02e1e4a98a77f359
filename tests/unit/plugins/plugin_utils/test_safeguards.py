"""First, do no harm: what a restart costs, and how recovered and degraded services are told."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy, safeguards

POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
            "user": "postgres", "ports": [5432], "stateful": True}


def judged(commands, definition=None, pids=(4242,)):
    definition = definition or POSTGRES
    scope = policy.scope_from_service(definition, list(pids), {})
    return safeguards.weigh_restart_cost(policy.classify_many(commands, policy.load_policy({}), scope=scope), definition)


def test_a_stateful_service_restarted_stopped_or_killed_waits_for_a_human():
    verdicts = judged(["systemctl restart postgresql@15-main.service", "service postgresql restart",
                       "kill -9 4242", "pkill -x postgres"])
    assert [v["verdict"] for v in verdicts] == ["approval"] * 4
    assert all(any(r.startswith("restart cost: postgresql is stateful") for r in v["reasons"]) for v in verdicts)


def test_what_keeps_a_stateful_service_s_state_runs_as_the_policy_says():
    verdicts = judged(["systemctl start postgresql@15-main.service", "systemctl reload postgresql@15-main",
                       "kill -HUP 4242", "pkill -CONT -x postgres"])
    assert [v["verdict"] for v in verdicts] == ["allow"] * 4
    assert not any("restart cost" in r for v in verdicts for r in v.get("reasons") or [])


def test_a_stateful_service_with_no_process_left_loses_nothing_to_a_restart():
    scope = policy.scope_from_service(POSTGRES, [], {})
    verdicts = policy.classify_many(["service postgresql restart"], policy.load_policy({}), scope=scope)
    down = {"processes": [{"pid": 7, "state": "zombie"}]}
    alive = {"processes": [{"pid": 7, "state": "sleeping"}]}
    assert safeguards.weigh_restart_cost(verdicts, POSTGRES, down)[0]["verdict"] == "allow"
    assert safeguards.weigh_restart_cost(verdicts, POSTGRES, alive)[0]["verdict"] == "approval"
    assert safeguards.weigh_restart_cost(verdicts, POSTGRES, None)[0]["verdict"] == "approval"


def test_a_service_not_defined_stateful_keeps_the_policy_s_verdict():
    stateless = dict(POSTGRES, stateful=False)
    assert [v["verdict"] for v in judged(["systemctl restart postgresql@15-main.service"], stateless)] == ["allow"]


def test_a_rejected_command_stays_rejected():
    verdict = judged(["rm -rf /var/lib/postgresql"])[0]
    assert verdict["verdict"] == "reject"


def test_recovered_and_confirmed_rows_say_what_the_re_checks_saw():
    recovered = {"healthy": True, "confirmation": {"checks": 2, "seconds": 2.1, "recovered": True,
                                                   "first_error": "pg_isready exited 2"}}
    assert safeguards.recovered_reason(recovered).startswith("recovered by itself: the first check said 'pg_isready")
    assert safeguards.guards(recovered, {"state": "healthy"}) == ["recovered"]
    assert safeguards.recovered_reason({"healthy": True}) == ""
    confirmed = {"healthy": False, "confirmation": {"checks": 3, "seconds": 4.0, "recovered": False}}
    assert safeguards.confirmed_note(confirmed) == "confirmed: failed 3 checks over 4.0 s"
    assert safeguards.guards(confirmed, {"state": "healed"}, ["restart cost: postgresql is stateful"]) == [
        "confirmed", "restart_cost"]


def test_a_degraded_row_is_reported_as_slow_not_down():
    row = {"healthy": False, "degraded": True, "error": "GET http://127.0.0.1/ failed: timed out",
           "confirmation": {"checks": 3, "seconds": 24.0}}
    reason = safeguards.degraded_reason(row)
    assert reason.startswith("degraded: GET http://127.0.0.1/ failed: timed out")
    assert "not restarted" in reason and "confirmed: failed 3 checks" in reason
    assert safeguards.degraded_reason({"healthy": False}) == ""


LIMITS = safeguards.Limits(budget=3, budget_window=600, flap_count=2, flap_window=600)


def intent(ts, service="nginx"):
    return {"kind": "intent", "service": service, "ts": ts}


def healed(ts, service="nginx"):
    return {"kind": "closed", "state": "healed", "service": service, "ts": ts}


def test_a_service_past_its_budget_is_held_once_then_left_alone_until_cleared():
    records = [intent(1000), intent(1100), intent(1200)]
    found = safeguards.hold(records, "nginx", 1300, LIMITS)
    assert found.new and found.reason.startswith("budget spent: 3 attempts in the last 600 s")
    records.append({"kind": "held", "service": "nginx", "reason": found.reason, "ts": 1300})
    again = safeguards.hold(records, "nginx", 1400, LIMITS)
    assert not again.new and again.reason == found.reason and again.since == 1300
    assert safeguards.is_held(records, "nginx") and not safeguards.is_held(records, "redis")
    records.append({"kind": "cleared", "service": "nginx", "ts": 1500})
    assert safeguards.hold(records, "nginx", 1600, LIMITS) is None  # the attempts before the clear do not count
    assert not safeguards.is_held(records, "nginx")


def test_attempts_outside_the_window_or_of_other_services_do_not_count():
    records = [intent(0), intent(100), intent(1200), intent(1200, "redis"), intent(1250, "redis")]
    assert safeguards.hold(records, "nginx", 1300, LIMITS) is None
    assert safeguards.hold(records, "nginx", 1300, safeguards.Limits(budget=0, flap_count=0)) is None


def test_a_service_healed_again_and_again_is_flapping():
    records = [healed(1000), healed(1200)]
    found = safeguards.hold(records, "nginx", 1300, LIMITS)
    assert found.new and found.reason.startswith("flapping: healed 2 times in the last 600 s")
    assert "sentinel-remediate holds clear lab01 nginx" in safeguards.held_reason(found, "lab01", "nginx")
    assert safeguards.hold([healed(1000)], "nginx", 1300, LIMITS) is None


def test_an_unchanged_escalation_is_notified_once_then_reminded_after_the_interval():
    outcome = {"state": "escalated", "signature": "nginx:ab", "reason": "no safe command to run (pid 4242)"}
    key = safeguards.notice_key(outcome)
    assert key == safeguards.notice_key(dict(outcome, reason="no safe command to run (pid 999)"))
    records = [{"kind": "notified", "service": "nginx", "key": key, "ts": 1000}]
    assert safeguards.repeated_notice(records, "nginx", key, 1500, remind=3600)
    assert not safeguards.repeated_notice(records, "nginx", key, 5000, remind=3600)  # the reminder is due
    changed = safeguards.notice_key(dict(outcome, state="degraded"))
    assert not safeguards.repeated_notice(records, "nginx", changed, 1500, remind=3600)  # news: notified
    assert not safeguards.repeated_notice(records, "redis", key, 1500, remind=3600)
    assert not safeguards.repeated_notice(records, "nginx", key, 1500, remind=0)
