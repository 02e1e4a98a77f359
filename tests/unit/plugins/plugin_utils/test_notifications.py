# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Routing escalations per reason, the engine's escalation kinds, and reading send results."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import notifications as routing

ALL_ON = {"webhook": True, "slack": True, "pagerduty": True, "mail": True}


def test_routes_default_to_every_configured_channel_and_waiting_approval_to_none():
    routes = routing.check_routes({}, {"webhook": True, "mail": True})
    assert routes["refused"] == ["webhook", "mail"] and routes["waiting_approval"] == []
    routes = routing.check_routes({"llm_error": ["slack"], "default": ["all"]}, ALL_ON)
    assert routes["llm_error"] == ["slack"] and routes["rejected"] == list(routing.CHANNELS)
    assert routes["waiting_approval"] == list(routing.CHANNELS)  # default covers it when given


@pytest.mark.parametrize("routes, message", [
    ({"typo": ["slack"]}, "unknown reason(s) typo"),
    ({"refused": ["teams"]}, "unknown channel 'teams'"),
    ({"refused": ["slack"]}, "names slack, which is not configured (remediate_notify_slack.token is empty)"),
    ({"refused": {"slack": 1}}, "must be a list of channels"),
    ("slack", "must be a mapping"),
])
def test_bad_routes_name_what_is_wrong(routes, message):
    with pytest.raises(routing.NotificationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        routing.check_routes(routes, {"webhook": True})


def _incident(*attempts, approval="none"):
    incident = engine.Incident(host="h", service="nginx", state="escalated", approval=approval)
    incident.attempts = list(attempts)
    return incident


def test_the_engine_says_why_a_human_is_needed():
    ran = engine.CommandRun(command="service nginx start", rc=1)
    assert engine.escalation_kind(_incident(engine.Attempt(1, gate="execute", commands=[ran], healthy=False))) \
        == "exhausted"
    refused = engine.Attempt(1, source="llm", gate="escalate", refused=[{"command": "rm -rf /"}])
    assert engine.escalation_kind(_incident(refused)) == "refused"
    failed_model = engine.Attempt(1, source="none", gate="escalate", llm={"used": True, "error": "timeout"})
    assert engine.escalation_kind(_incident(failed_model)) == "llm_error"
    assert engine.escalation_kind(_incident(engine.Attempt(1, source="runbook", gate="escalate"))) == "needs_human"
    repeat = engine.Attempt(1, gate="escalate", notes=["not run: this plan already ran"])
    assert engine.escalation_kind(_incident(repeat)) == "exhausted"
    assert engine.escalation_kind(_incident(engine.Attempt(1, gate="approval"), approval="rejected")) == "rejected"
    assert engine.escalation_kind(engine.Incident(host="h", service="s", state="healed")) == ""


def test_notices_carry_the_reason_and_the_webhook_body_holds_only_routed_outcomes():
    outcomes = [{"service": "nginx", "state": "escalated", "escalation": "refused", "reason": "bad\x1b[31m",
                 "signature": "s1"},
                {"service": "cron", "state": "escalated", "escalation": "exhausted"},
                {"service": "ssh", "state": "healed"}]
    routes = routing.check_routes({"refused": ["webhook", "pagerduty"], "exhausted": ["mail"]}, ALL_ON)
    out = routing.notices("web1", outcomes, routes, now="2026-01-01T00:00:00Z")
    assert [(n["service"], n["channel"]) for n in out["notices"]] == [
        ("nginx", "webhook"), ("nginx", "pagerduty"), ("cron", "mail")]
    assert "\x1b" not in out["notices"][0]["text"] and "\\x1b" in out["notices"][0]["text"]
    assert [a["labels"]["service"] for a in out["webhook"]["alerts"]] == ["nginx"]
    assert out["notices"][1]["dedup_key"] == "sentinel/web1/nginx/s1"


def test_send_results_become_records_and_warnings():
    routes = routing.check_routes({"default": ["webhook", "slack"]}, ALL_ON)
    notes = routing.notices("web1", [{"service": "nginx", "state": "escalated"}], routes)["notices"]
    slack_item = next(n for n in notes if n["channel"] == "slack")
    records, warnings = routing.summarise(notes, {
        "webhook": {"status": 503, "msg": "Status code was 503"},
        "slack": {"results": [{"item": slack_item, "failed": True, "msg": "failed to send"}]}})
    assert [(r["channel"], r["status"]) for r in records] == [("webhook", "failed"), ("slack", "failed")]
    assert warnings[0].startswith("sentinel.remediation.notifications: the webhook notification for nginx on web1")
    records, warnings = routing.summarise(notes, {"webhook": {"status": 200},
                                                  "slack": {"results": [{"item": slack_item, "msg": "OK"}]}})
    assert [r["status"] for r in records] == ["sent", "sent"] and not warnings
    records, _warnings = routing.summarise(notes, {"webhook": {"skipped": True, "skip_reason": "check mode"}, "slack": {}})
    assert [r["status"] for r in records] == ["skipped", "failed"]  # a notice with no result is never "sent"


def test_an_escalation_notified_before_is_not_routed_again():
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.notifications import route_key

    outcome = {"state": "escalated", "escalation": "needs_human", "reason": "x"}
    assert route_key(outcome) == "needs_human"
    assert route_key(dict(outcome, repeat_notice=True)) == ""
    assert route_key({"state": "degraded", "reason": "slow"}) == "needs_human"
