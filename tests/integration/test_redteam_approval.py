# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team: an approval reaches only the incident it was made for, while it is fresh, on
one lab host through the real playbooks (remediate.yml, resume.yml).

Every `service` call that acts on the host is logged inside the container (a wrapper in
front of /usr/sbin/service, as in test_approval_tamper.py), so each test asserts what ran
there. What test_approval_tamper.py covers (a changed pending file or cache entry, a host
healed while its plan waited, a changed failure, two approvals at once) is not repeated.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import ansible_runner
import pytest

from test_approval_tamper import CALLS, HOST, WAIT, calls, service_call_lab
from workflow_support import Workspace

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rlab(lab_factory, tmp_path_factory):
    yield from service_call_lab(lab_factory, tmp_path_factory, "sentinel-test-redteam-approval")


@pytest.fixture()
def broken(rlab):
    lab, inventory = rlab
    lab.exec(HOST, "/usr/sbin/service.real nginx stop; : > " + CALLS, check=True)
    yield lab, inventory
    lab.exec(HOST, "/usr/sbin/service.real nginx start")


def nginx_running(lab) -> bool:
    return lab.health(HOST, ["nginx"])["nginx"].healthy


def wait_for_approval(work: Workspace) -> str:
    run = work.run(extravars=WAIT)
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "waiting_approval", outcome
    return outcome["approval_id"]


def test_a_plan_whose_incident_ended_never_runs_on_a_later_incident_that_fails_the_same_way(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    # Someone starts nginx by hand; the next pass finds it healthy: that incident is over.
    lab.exec(HOST, "/usr/sbin/service.real nginx start", check=True)
    healthy = work.run()
    assert healthy.outcomes()[(HOST, "nginx")]["state"] == "healthy"
    # Days later nginx stops again, the same failure signature; the old approval is found and used.
    lab.exec(HOST, "/usr/sbin/service.real nginx stop; : > " + CALLS, check=True)
    again = work.run("resume.yml", extravars={"remediate_approve": approval_id})
    assert again.status == "failed", again.stdout[-2000:]
    assert calls(lab) == [] and not nginx_running(lab)
    assert (work.artifacts_dir / "pending" / "withdrawn" / f"{approval_id}.json").exists()
    assert not (work.artifacts_dir / "pending" / f"{approval_id}.json").exists()


def test_an_approval_past_its_window_runs_nothing_and_escalates(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    time.sleep(3)
    run = work.run("resume.yml", extravars={"remediate_approve": approval_id, "remediate_approval_max_age": 1})
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "escalated" and "remediate_approval_max_age" in outcome["reason"], outcome
    assert calls(lab) == [] and not nginx_running(lab)
    # Claimed: approving it again with a longer window is refused as already used.
    later = work.run("resume.yml", extravars={"remediate_approve": approval_id})
    assert later.status == "failed"
    assert calls(lab) == [] and not nginx_running(lab)


def test_the_awx_plan_node_shows_the_plans_where_the_heal_task_wrote_them(broken, tmp_path):
    # As an execution environment runs it: no remediate_artifacts_dir, the state directory
    # from the environment. The plan node must hand on (and hash) the file the heal task
    # wrote there, not look for it inside the collection's own directory.
    lab, inventory = broken
    (tmp_path / "plan").mkdir()
    state = tmp_path / "state"
    runner = ansible_runner.run(
        private_data_dir=str(tmp_path / "plan"), project_dir=str(REPO), playbook="playbooks/awx_plan.yml",
        inventory=str(inventory), extravars={"remediate_backend": "runbook", "remediate_hosts": HOST},
        ident="plan", fact_cache_type="configured", quiet=True, suppress_env_files=True,
        envvars={"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp_path / "facts"), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                 "SENTINEL_STATE_DIR": str(state)})
    output = runner.stdout.read()
    assert runner.status == "successful", output[-3000:]
    stats = [e for e in runner.events if e.get("event") == "playbook_on_stats"][-1]["event_data"]["artifact_data"]
    (plan,) = [p for p in stats["sentinel_plans"] if p["host"] == HOST]
    pending = state / "remediation" / "pending" / f"{plan['id']}.json"
    assert plan["digest"] == hashlib.sha256(pending.read_bytes()).hexdigest()
    assert calls(lab) == [] and not nginx_running(lab)
