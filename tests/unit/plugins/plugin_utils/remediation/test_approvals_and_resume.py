# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan that waits for a human, then its approval or rejection, through a fake host."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation.context import RemediationError

from .conftest import FakeHost
from .test_attempt_loop import ReadsProcesses, ScriptedPlans


def waiting(make_run):
    host = FakeHost()
    done = make_run(host, loop=ScriptedPlans, require_approval=True).run()
    outcome = done.outcomes[0]
    assert outcome["state"] == "waiting_approval" and host.ran() == []
    return outcome["approval_id"], done.facts


def test_a_plan_that_needs_approval_waits_sealed_on_disk_and_runs_nothing(make_run, tmp_path):
    approval_id, facts = waiting(make_run)
    assert (tmp_path / "state" / "pending" / f"{approval_id}.json").exists()
    assert facts["sentinel_pending"][approval_id]["service"] == "nginx"


def test_an_approved_plan_runs_on_resume_and_is_used_once(make_run, tmp_path):
    approval_id, facts = waiting(make_run)
    host = FakeHost(verify=(True,))
    done = make_run(host, facts=facts, resume={"id": approval_id, "decision": "approve", "by": "alice"}).run(
        {"id": approval_id, "decision": "approve"}, approver="alice")
    assert done.outcomes[0]["state"] == "healed" and done.outcomes[0]["approved_by"] == "alice"
    assert host.ran() == ["systemctl start nginx"]
    assert approval_id not in done.facts["sentinel_pending"]
    again = make_run(FakeHost(), facts=facts, resume={"id": approval_id, "decision": "approve"})
    with pytest.raises(RemediationError):
        again.run({"id": approval_id, "decision": "approve"}, approver="alice")


def test_a_rejected_plan_escalates_and_runs_nothing(make_run):
    approval_id, facts = waiting(make_run)
    host = FakeHost()
    done = make_run(host, facts=facts, resume={"id": approval_id, "decision": "reject"}).run(
        {"id": approval_id, "decision": "reject"}, approver="bob")
    assert done.outcomes[0]["state"] == "escalated" and "rejected by bob" in done.outcomes[0]["reason"]
    assert host.calls == []


def test_an_approved_plan_for_a_service_healthy_again_runs_nothing(make_run):
    approval_id, facts = waiting(make_run)
    host = FakeHost(healthy=True)
    done = make_run(host, facts=facts, resume={"id": approval_id, "decision": "approve"}).run(
        {"id": approval_id, "decision": "approve"}, approver="alice")
    assert done.outcomes[0]["state"] == "healthy" and host.ran() == []


def test_an_approved_plan_whose_failure_changed_is_not_run(make_run):
    approval_id, facts = waiting(make_run)
    host = FakeHost(error="nginx: bind() to 0.0.0.0:80 failed (98: Address already in use)")
    done = make_run(host, facts=facts, resume={"id": approval_id, "decision": "approve"}).run(
        {"id": approval_id, "decision": "approve"}, approver="alice")
    assert done.outcomes[0]["state"] == "failed" and host.ran() == []


def test_a_malformed_approval_id_is_named(make_run):
    with pytest.raises(RemediationError, match="bad approval id"):
        make_run(FakeHost(), resume={"id": "../etc", "decision": "approve"}).run(
            {"id": "../etc", "decision": "approve"}, approver="alice")


def test_a_tampered_pending_file_is_refused_and_nothing_runs(make_run, tmp_path):
    approval_id, facts = waiting(make_run)
    path = tmp_path / "state" / "pending" / f"{approval_id}.json"
    path.write_text(path.read_text().replace("systemctl", "systemct1"))
    host = FakeHost()
    done = make_run(host, facts=facts, resume={"id": approval_id, "decision": "approve"}).run(
        {"id": approval_id, "decision": "approve"}, approver="alice")
    assert done.outcomes[0]["state"] == "escalated" and "refused" in done.outcomes[0]["reason"]
    assert host.ran() == []


def test_an_approved_signal_to_a_pid_the_incidents_read_showed_runs_with_the_hosts_check(make_run):
    loop = type("ReadThenCore", (ScriptedPlans,), {"plans": [["pgrep -a nginx"], ["kill -ABRT 5151"]]})
    first = make_run(ReadsProcesses(verify=(False,)), loop=loop, max_attempts=3).run()
    outcome = first.outcomes[0]
    assert outcome["state"] == "waiting_approval", outcome
    host = ReadsProcesses(verify=(True,))
    done = make_run(host, facts=first.facts, loop=loop).run(
        {"id": outcome["approval_id"], "decision": "approve"}, approver="alice")
    assert done.outcomes[0]["state"] == "healed", done.outcomes[0]
    assert host.ran() == ["kill -ABRT 5151"]
    sent = [args for name, args in host.calls if name == "sentinel.remediation.execute_plan"][-1]
    assert sent["expect_pids"]["5151"] == {"seen": True, "start": None}
