# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stateful service's restart, allowed because it served no client, meets a client on the host
just before it runs: the host does not run it, and the same plan waits for a human (issues 27/29)."""
from __future__ import annotations

import json

from .conftest import FakeHost
from .test_attempt_loop import ScriptedPlans, journal

DB = {"name": "db", "units": ["db"], "processes": ["postgres"], "ports": [5432], "stateful": True,
      "checks": [{"type": "service"}]}
# A database that runs and that, when the evidence was read, served nobody.
IDLE = {"init": "systemd", "unit": {"ActiveState": "active"}, "service_pids": [40],
        "processes": [{"pid": 40, "start": 900, "comm": "postgres", "state": "sleeping"}],
        "client_connections": {"count": 0}}
PLAN = ["systemctl reset-failed db", "systemctl restart db", "systemctl status db"]
CLIENT = {"count": 1, "by_endpoint": {"tcp :5432": 1}}


class DbPlans(ScriptedPlans):
    plans = [PLAN]


class ClientAppears(FakeHost):
    """The host of a database a client connects to after the evidence: it runs the plan as
    plan_runner.run_plan does, and does not run a waived restart unless it was approved."""

    def __init__(self, **kwargs):
        super().__init__(error="db does not answer on 5432", **kwargs)

    def run_module(self, name, args):
        if name != "sentinel.remediation.execute_plan" or self.unreachable:
            return super().run_module(name, args)
        self.calls.append((name, json.loads(json.dumps(args))))
        results, stopped = [], None
        for index, command in enumerate(args["commands"]):
            item = {"label": command["label"], "rc": None, "stdout": "", "stderr": "", "skipped": False, "reason": ""}
            if stopped is not None:
                item.update(skipped=True, reason=f"not run: command {stopped} failed and stop_on_failure is true")
            elif command.get("idle_pids") and not command["approved"]:
                item.update(skipped=True, clients=CLIENT,
                            reason="needs a human's approval: it would drop client connections (clients now: 1 open)")
                stopped = index
            else:
                item["rc"] = 0
            results.append(item)
        healed = stopped is None
        return {"changed": True, "results": results, "stopped_at": stopped,
                "verify": {"healthy": healed, "error": "" if healed else self.error}, "evidence": IDLE}

    def _health(self, args):
        answer = super()._health(args)
        for row in answer["services"]:
            if not row["healthy"]:
                row["evidence"] = IDLE
        return answer

    def executed(self) -> list[list[dict]]:
        return [args["commands"] for name, args in self.calls if name == "sentinel.remediation.execute_plan"]


def test_a_restart_that_meets_a_client_waits_for_a_human_with_the_same_plan_and_approval_runs_it(make_run, tmp_path):
    host = ClientAppears()
    done = make_run(host, loop=DbPlans, services=[DB], max_attempts=3).run()
    outcome = done.outcomes[0]
    # Held at once: one execute_plan call, no second attempt, no other model or runbook call.
    assert outcome["state"] == "waiting_approval", json.dumps(outcome, indent=1)
    sent = host.executed()
    assert len(sent) == 1 and [c["label"] for c in sent[0]] == PLAN
    assert sent[0][1]["idle_pids"] == [40] and not sent[0][1]["approved"]
    assert "would drop 1 client connection(s) (tcp :5432 1)" in outcome["reason"]
    assert "a human should confirm" in outcome["reason"] and outcome["approval_id"] in outcome["reason"]
    # The pending approval holds the same plan the host was sent (the approver sees what ran and what waits).
    pending = json.loads((tmp_path / "state" / "pending" / f"{outcome['approval_id']}.json").read_text())
    record = pending.get("record", pending)
    assert [c["command"] for c in record["commands"]] == PLAN
    assert done.facts["sentinel_pending"][outcome["approval_id"]]["service"] == "db"
    # Not remembered as a plan that failed: it was never run whole.
    assert not [r for r in journal(tmp_path) if r.get("kind") == "closed" and r.get("state") == "escalated"]

    # Approved through the resume path: the same commands run, approved, and heal.
    approver = ClientAppears()
    resumed = make_run(approver, loop=DbPlans, services=[DB], facts=done.facts).run(
        {"id": outcome["approval_id"], "decision": "approve"}, approver="alice")
    healed = resumed.outcomes[0]
    assert healed["state"] == "healed" and healed["approved_by"] == "alice", json.dumps(healed, indent=1)
    again = approver.executed()
    assert len(again) == 1 and [c["label"] for c in again[0]] == PLAN and all(c["approved"] for c in again[0])


def test_a_restart_whose_clients_went_unnoticed_is_not_held_when_the_attempt_healed(make_run):
    """The host skipped the restart, but the service is healthy anyway: nothing waits."""

    class HealsWithoutIt(ClientAppears):
        def run_module(self, name, args):
            answer = super().run_module(name, args)
            if name == "sentinel.remediation.execute_plan":
                answer["verify"] = {"healthy": True, "error": ""}
            return answer

    done = make_run(HealsWithoutIt(), loop=DbPlans, services=[DB]).run()
    assert done.outcomes[0]["state"] == "healed"
