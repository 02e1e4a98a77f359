# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fallback restart is opt-in: from the role's variable through the heal action's option to
the planner, and what the outcome says when it is off."""
from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.sentinel.remediation.plugins.action.heal import argument_spec

from .conftest import FakeHost

ROLE = Path(__file__).resolve().parents[5] / "roles" / "remediate"
# A service nothing here knows: no runbook, no memory, no LLM.
WIDGET = {"name": "widgetd", "units": ["widgetd.service"], "processes": ["widgetd"], "checks": [{"type": "service"}]}
FAILURE = "widgetd: GET http://127.0.0.1:7000/health answers 500"


def test_with_the_fallback_restart_off_an_unknown_failure_escalates_and_says_why(make_run):
    host = FakeHost(error=FAILURE)
    done = make_run(host, services=[WIDGET]).run()
    (outcome,) = done.outcomes
    assert outcome["state"] == "escalated" and outcome["escalation"] == "needs_human" and host.ran() == []
    assert "No plan for widgetd: no source gave a plan that may run (tried: memory, runbook)" in outcome["reason"]
    assert "The fallback restart (`systemctl restart widgetd` as root) is off" in outcome["reason"]
    assert "set remediate_fallback_restart: true" in outcome["reason"]


def test_with_the_fallback_restart_on_the_restart_runs_and_heals(make_run):
    host = FakeHost(error=FAILURE)
    done = make_run(host, services=[WIDGET], fallback_restart=True).run()
    (outcome,) = done.outcomes
    assert outcome["state"] == "healed", outcome
    assert host.ran() == ["systemctl restart widgetd"]


def test_the_role_variable_reaches_every_heal_task_and_is_off_by_default():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    assert defaults["remediate_fallback_restart"] is False and defaults["remediate_services"] == []
    assert argument_spec()["fallback_restart"] == {"type": "bool", "default": False}
    for name in ("run.yml", "resume.yml"):
        tasks = yaml.safe_load((ROLE / "tasks" / name).read_text(encoding="utf-8"))
        heals = [t["sentinel.remediation.heal"] for t in tasks if "sentinel.remediation.heal" in t]
        assert heals, name
        assert all(h.get("fallback_restart") == "{{ remediate_fallback_restart | bool }}" for h in heals), name
