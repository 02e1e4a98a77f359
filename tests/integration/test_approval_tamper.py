"""Tampering and races around approvals, leases and the journal, on one lab host.

Every `service` call on the host is logged inside the container (a wrapper in front of
/usr/sbin/service), so each test asserts what actually ran there, besides the journal's
bytes on the controller and the report:

- a pending file changed after the controller wrote it is refused, and nothing runs;
- a fact cache entry changed to name other commands changes nothing that runs;
- a host that healed while its plan waited closes the incident without running anything,
  and an approval is used once;
- a failure that changed while its plan waited needs a new plan;
- two approvals at once: the plan runs once, the other approval is told why, and no
  intent is left without its result;
- commands of another run still running on the host (a dead controller's) hold off a new
  run, which reports busy and runs nothing; a torn journal tail never swallows an intent;
- a --limit part that matches no host fails the run before anything is checked.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workflow_support import PLAYBOOKS, Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"
CALLS = "/var/log/sentinel-service-calls.log"
SHIM = f"""#!/bin/sh
echo "$*" >> {CALLS}
exec /usr/sbin/service.real "$@"
"""
WAIT = {"remediate_backend": "runbook", "remediate_require_approval": True}


def service_call_lab(lab_factory, tmp_path_factory, name: str):
    """A one-host lab whose `service` command logs each call to CALLS (what acted on the host,
    read from inside the container), and its inventory; the host reset afterwards."""
    require_docker()
    lab = lab_factory(name, 1)
    lab.exec(HOST, "test -e /usr/sbin/service.real || mv /usr/sbin/service /usr/sbin/service.real", check=True)
    lab.exec(HOST, ["sh", "-c", "cat > /usr/sbin/service && chmod 755 /usr/sbin/service"], stdin=SHIM, check=True)
    inventory = lab.write_inventory(tmp_path_factory.mktemp(f"{name}-inventory") / "hosts.yml")
    yield lab, inventory
    lab.reset(HOST)


@pytest.fixture(scope="module")
def tlab(lab_factory, tmp_path_factory):
    yield from service_call_lab(lab_factory, tmp_path_factory, "sentinel-test-tamper")


@pytest.fixture()
def broken(tlab):
    """nginx stopped, the call log empty; nginx running again afterwards."""
    lab, inventory = tlab
    lab.exec(HOST, "/usr/sbin/service.real nginx stop; : > " + CALLS, check=True)
    yield lab, inventory
    lab.exec(HOST, "pkill -f 'http.server 80' ; /usr/sbin/service.real nginx start; rm -f /run/sentinel-remediation/hold")


def calls(lab) -> list[str]:
    """The `service` calls that acted on the host (the health checks' `status` calls left out)."""
    lines = lab.exec(HOST, f"cat {CALLS} 2>/dev/null || true").stdout.splitlines()
    return [line for line in lines if "status" not in line.split()]


def journal(work: Workspace) -> list[dict]:
    out = []
    for line in (work.artifacts_dir / "journal" / f"{HOST}.jsonl").read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def dangling(records: list[dict]) -> list[dict]:
    """Intents without a result of the same run and attempt."""
    results = {(r.get("run"), r.get("service"), r.get("attempt")) for r in records if r.get("kind") == "result"}
    return [r for r in records if r.get("kind") == "intent"
            and (r.get("run"), r.get("service"), r.get("attempt")) not in results]


def wait_for_approval(work: Workspace) -> str:
    run = work.run(extravars=WAIT)
    assert (HOST, "nginx") in run.outcomes(), run.stdout[-3000:]
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "waiting_approval", outcome
    return outcome["approval_id"]


def test_a_pending_file_changed_after_it_was_written_is_refused_and_nothing_runs(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    path = work.artifacts_dir / "pending" / f"{approval_id}.json"
    record = json.loads(path.read_text())
    assert record["mac"] and record["host"] == HOST and record["target"]
    record["commands"][0].update(command="service cron stop", argv=["service", "cron", "stop"],
                                 display="service cron stop")
    path.write_text(json.dumps(record, indent=2))
    run = work.run("resume.yml", extravars={"remediate_approve": approval_id})
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "escalated", outcome
    assert "changed after the controller wrote it" in outcome["reason"]
    assert calls(lab) == []                                        # nothing ran: not the stop, not the start
    assert lab.health(HOST, ["cron"])["cron"].healthy
    assert not [r for r in journal(work) if r.get("kind") == "intent"]
    assert not path.exists() and (work.artifacts_dir / "pending" / "refused" / f"{approval_id}.json").exists()


def test_a_cache_entry_naming_other_commands_changes_nothing_that_runs(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    cache = work.facts_dir / f"s1_{HOST}"
    raw = json.loads(cache.read_text())
    payload = json.loads(raw["__payload__"]) if "__payload__" in raw else raw
    text = json.dumps(payload)
    assert approval_id in text
    planted = [{"command": "service cron stop", "argv": ["service", "cron", "stop"], "verdict": "allow", "become": True}]
    planted_text = text.replace(f'"{approval_id}": {{', f'"{approval_id}": {{"commands": {json.dumps(planted)}, ', 1)
    assert planted_text != text
    text = planted_text
    if "__payload__" in raw:
        raw["__payload__"] = text
        cache.write_text(json.dumps(raw))
    else:
        cache.write_text(text)
    run = work.run("resume.yml", extravars={"remediate_approve": approval_id, "remediate_approved_by": "alice"})
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healed", outcome
    assert outcome["approved_by"] == "alice"
    ran = calls(lab)
    # What the approver was shown ran first; a retry under load may follow, on nginx only.
    assert ran[:1] == ["nginx start"] and all(c.startswith("nginx ") for c in ran), ran
    assert lab.health(HOST, ["cron"])["cron"].healthy
    intents = [r for r in journal(work) if r.get("kind") == "intent"]
    assert [(i["approval_id"], i["approved_by"], i["approval"]) for i in intents] == [(approval_id, "alice", "approved")]
    assert f"plan {approval_id} approved by alice" in run.stdout
    assert not dangling(journal(work))


def test_a_host_that_healed_while_its_plan_waited_runs_nothing_and_the_approval_is_used_once(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    cache = work.facts_dir / f"s1_{HOST}"
    before = cache.read_bytes()
    lab.exec(HOST, "/usr/sbin/service.real nginx start", check=True)
    run = work.run("resume.yml", extravars={"remediate_approve": approval_id})
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "healthy" and "nothing ran" in outcome["reason"], outcome
    assert calls(lab) == []
    assert [r["state"] for r in journal(work) if r.get("kind") == "closed"][-1] == "healthy"
    # The same approval again, its file and cache entry put back by a writer of both: refused.
    used = work.artifacts_dir / "pending" / "used" / f"{approval_id}.json"
    used.rename(work.artifacts_dir / "pending" / f"{approval_id}.json")
    cache.write_bytes(before)
    lab.exec(HOST, "/usr/sbin/service.real nginx stop", check=True)
    again = work.run("resume.yml", extravars={"remediate_approve": approval_id})
    assert again.status == "failed"
    assert "already used" in again.stdout, again.stdout[-2000:]
    assert calls(lab) == []


def test_a_failure_that_changed_while_its_plan_waited_needs_a_new_plan(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    lab.inject(HOST, "nginx_port_conflict")                       # now a stray process holds :80
    lab.exec(HOST, ": > " + CALLS, check=True)
    run = work.run("resume.yml", extravars={"remediate_approve": approval_id})
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "failed" and "the failure changed" in outcome["reason"], outcome
    assert calls(lab) == []


def test_two_approvals_at_once_run_the_plan_once(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    approval_id = wait_for_approval(work)
    procs = []
    for n in (1, 2):
        report = tmp_path / f"report-{n}.json"
        env = dict(os.environ, **work.env(), SENTINEL_REPORT_JSON=str(report))
        extravars = {"remediate_approve": approval_id, "remediate_artifacts_dir": str(work.artifacts_dir)}
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                str(PLAYBOOKS / "resume.yml"), "-e", json.dumps(extravars)]
        procs.append((subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                      report))
    results = []
    for proc, report in procs:
        out = proc.communicate(timeout=600)[0]
        outcomes = json.loads(report.read_text()).get("outcomes", []) if report.exists() else []
        results.append((proc.returncode, out, outcomes))
    healed = [r for r in results if any(o.get("state") == "healed" for o in r[2])]
    assert len(healed) == 1, [r[1][-1500:] for r in results]
    loser = next(r for r in results if r is not healed[0])
    assert loser[0] != 0 and ("already used" in loser[1] or "BUSY" in loser[1]), loser[1][-2000:]
    assert calls(lab) == ["nginx start"]
    assert not dangling(journal(work))


def test_commands_still_running_on_the_host_hold_off_a_new_run(broken, tmp_path):
    """A dead controller's command still running holds the host's lock: the next run reports
    busy and runs nothing, its intent closed by a result; a torn journal tail is kept aside."""
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    lab.exec(HOST, "mkdir -p /run/sentinel-remediation && touch /run/sentinel-remediation/hold && "
             "(setsid flock /run/sentinel-remediation/host.lock "
             "sh -c 'while [ -e /run/sentinel-remediation/hold ]; do sleep 0.2; done' >/dev/null 2>&1 &) ; sleep 1",
             check=True)
    (work.artifacts_dir / "journal").mkdir(parents=True)
    torn = b'{"kind": "result", "run": "dead-run", "serv'
    (work.artifacts_dir / "journal" / f"{HOST}.jsonl").write_bytes(torn)
    run = work.run(extravars={"remediate_backend": "runbook"})
    outcome = run.outcomes()[(HOST, "nginx")]
    assert outcome["state"] == "busy" and "still running on this host" in outcome["reason"], outcome
    assert calls(lab) == []
    records = journal(work)
    assert [r["kind"] for r in records
            if r.get("service") == "nginx" and r["kind"] in ("intent", "result")][:2] == ["intent", "result"]
    assert not dangling(records)
    kept = (work.artifacts_dir / "journal" / f"{HOST}.jsonl.torn").read_text()
    assert json.loads(kept.splitlines()[0])["bytes"] == torn.decode()
    lab.exec(HOST, "rm -f /run/sentinel-remediation/hold; sleep 1", check=True)
    again = work.run(extravars={"remediate_backend": "runbook"})
    assert again.outcomes()[(HOST, "nginx")]["state"] == "healed"
    assert calls(lab) == ["nginx start"]


def test_a_limit_part_that_matches_no_host_fails_before_anything_is_checked(broken, tmp_path):
    lab, inventory = broken
    work = Workspace(tmp_path, inventory)
    env = dict(os.environ, **work.env())
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
            str(PLAYBOOKS / "remediate.yml"), "--limit", f"{HOST},lab99"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode != 0
    assert "lab99 matches no host of the inventory" in proc.stdout + proc.stderr
    assert calls(lab) == []
    assert not (work.artifacts_dir / "journal").exists()
