# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team: what an approval binds (this host, this incident, once, while it is fresh),
through a fake host that records what it was asked to run."""
from __future__ import annotations

import json

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation.context import RemediationError

from .conftest import FakeHost
from .test_approvals_and_resume import waiting


def test_an_approval_made_for_one_host_never_runs_on_another_holding_the_same_failure(make_run):
    approval_id, facts = waiting(make_run)
    host = FakeHost()
    other = make_run(host, facts=facts, name="web2")   # web2 fails the same way, with web1's cached index
    with pytest.raises(RemediationError, match="was made for web1"):
        other.run({"id": approval_id, "decision": "approve"}, approver="alice")
    assert host.calls == []


def test_a_plan_is_withdrawn_when_its_incident_ends_and_never_reaches_a_later_one(make_run, tmp_path):
    approval_id, facts = waiting(make_run)
    # The service heals on its own; a pass sees it healthy: the incident is over.
    healed = make_run(FakeHost(healthy=True), facts=facts).run()
    assert healed.outcomes[0]["state"] == "healthy"
    assert approval_id not in healed.facts["sentinel_pending"]
    assert (tmp_path / "state" / "pending" / "withdrawn" / f"{approval_id}.json").exists()
    # It breaks again the same way (same signature). Approving the old plan, even with the
    # index of a fact cache that still names it, runs nothing and says why.
    host = FakeHost()
    with pytest.raises(RemediationError, match=f"plan {approval_id} was withdrawn before it was approved: "
                                               "nginx on web1 was found healthy"):
        make_run(host, facts=facts).run({"id": approval_id, "decision": "approve"}, approver="alice")
    assert host.ran() == []


def test_a_pass_in_check_mode_withdraws_nothing(make_run, tmp_path):
    approval_id, facts = waiting(make_run)
    make_run(FakeHost(healthy=True), facts=facts, check_mode=True).run()
    assert (tmp_path / "state" / "pending" / f"{approval_id}.json").exists()


def test_a_plan_older_than_the_approval_window_is_refused_claimed_and_runs_nothing(make_run, tmp_path):
    approval_id, facts = waiting(make_run)
    path = tmp_path / "state" / "pending" / f"{approval_id}.json"
    requested = json.loads(path.read_text())["requested"]
    later = approval._moment(requested) + 3601
    host = FakeHost()
    done = make_run(host, facts=facts, approval_max_age=3600, clock=lambda: later).run(
        {"id": approval_id, "decision": "approve"}, approver="alice")
    outcome = done.outcomes[0]
    assert outcome["state"] == "escalated" and "3601 s ago" in outcome["reason"], outcome
    assert "remediate_approval_max_age" in outcome["reason"]
    assert host.ran() == []
    assert (tmp_path / "state" / "pending" / "expired" / f"{approval_id}.json").exists()
    assert approval.used_note(None, approval_id)   # claimed: never tried again


@pytest.mark.parametrize(("age", "max_age", "expired"), [(10, 60, False), (61, 60, True), (10**7, 0, False)])
def test_expiry_is_the_age_against_the_window(age: int, max_age: int, expired: bool) -> None:
    record = {"requested": "2026-01-01T00:00:00Z"}
    now = approval._moment(record["requested"]) + age
    assert bool(approval.expiry_problem(record, now, max_age)) is expired


def test_a_record_whose_time_cannot_be_read_is_too_old() -> None:
    assert "age is unknown" in approval.expiry_problem({"requested": "yesterday"}, 0, 60)
