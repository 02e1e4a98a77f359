"""Approvals and escalation through playbooks/remediate.yml and playbooks/resume.yml.

A plan with a command the policy gates (a copy into the service's configuration) waits: the host is
reported waiting_approval, the plan is kept in the fact cache and as a pending file;
resume.yml with remediate_approve=<id> runs exactly that plan and heals the service;
remediate_reject=<id> escalates. Escalations (rejected plan, exhausted retries, a fault
that needs a human) POST an Alertmanager-style alert to a loopback webhook and end the
host failed.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llm_server import LLMServer
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

# Giving the data directory back to redis is inside the incident's scope (allowed); the backup of
# its configuration is an edit of /etc/redis, which the policy gates behind an approval.
REDIS_PLAN = {"diagnosis": "redis cannot enter /var/lib/redis (root:root 0700)",
              "commands": ["cp /etc/redis/redis.conf /etc/redis/redis.conf.bak", "chown redis:redis /var/lib/redis",
                           "service redis-server restart"],
              "rationale": "give the directory back to redis"}
RULES = [
    {"match": r"Service: redis-server\b", "reply": {"plan": REDIS_PLAN}},
    # nginx_binary_missing: the host lacks nginx itself; the model asks for a human.
    {"match": r"Service: nginx\b.*Tools MISSING[^\n]*\bnginx\b",
     "reply": {"plan": {"diagnosis": "ESCALATE: the nginx binary is gone; reinstalling is a human's call",
                        "commands": [], "rationale": "needs a package reinstall"}}},
    # Useless for a stopped nginx: the retry loop must give up after remediate_max_retries.
    {"match": r"Service: nginx\b", "reply": {"plan": {"diagnosis": "guess", "commands": ["nginx -t"],
                                                      "rationale": "guess"}}},
]


class Webhook:
    """A loopback receiver that records the JSON bodies POSTed to it."""

    def __init__(self):
        self.bodies: list = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                owner.bodies.append(json.loads(self.rfile.read(length) or b"null"))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def env(lab_factory, tmp_path_factory):
    require_docker()
    lab = lab_factory("sentinel-test-wfa", 2)
    inventory = lab.write_inventory(tmp_path_factory.mktemp("wfa-inventory") / "hosts.yml")
    hook = Webhook()
    with LLMServer(rules=RULES) as server:
        yield lab, inventory, server, hook
    hook.close()


def read_cache(work, host):
    raw = json.loads((work.facts_dir / f"s1_{host}").read_text())
    payload = json.loads(raw["__payload__"]) if "__payload__" in raw else raw

    def plain(value):  # ansible-core 2.19 keeps tagged values as {"value": ..., "__ansible_type": ...}
        if isinstance(value, dict):
            if "__ansible_type" in value and "value" in value:
                return plain(value["value"])
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return plain(payload)


def test_approval_waits_then_resume_heals(env, tmp_path):
    lab, inventory, server, hook = env
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    lab.inject("lab01", "redis_bad_dir_permissions")
    try:
        run = work.run(extravars={"remediate_backend": "llm", "remediate_hosts": "lab01"})
        assert run.status == "successful", run.stdout[-3000:]
        outcome = run.outcomes()[("lab01", "redis-server")]
        assert outcome["state"] == "waiting_approval", outcome
        approval_id = outcome["approval_id"]
        pending_file = work.artifacts_dir / "pending" / f"{approval_id}.json"
        pending = json.loads(pending_file.read_text())
        assert [c["command"] for c in pending["commands"]] == REDIS_PLAN["commands"]
        assert approval_id in read_cache(work, "lab01")["sentinel_pending"]
        assert not lab.health("lab01")["redis"].healthy  # nothing ran

        resumed = work.run("resume.yml", extravars={"remediate_approve": approval_id})
        assert resumed.status == "successful", resumed.stdout[-3000:]
        healed = resumed.outcomes()[("lab01", "redis-server")]
        assert healed["state"] == "healed", healed
        assert [c["command"] for c in healed["commands"]] == REDIS_PLAN["commands"]
        assert all(c["rc"] == 0 for c in healed["commands"])
        assert lab.health("lab01")["redis"].healthy
        assert not pending_file.exists()
        facts = read_cache(work, "lab01")
        assert approval_id not in facts["sentinel_pending"]
        assert facts["sentinel_memory"][-1]["approval"] == "approved" and facts["sentinel_memory"][-1]["success"]

        again = work.run("resume.yml", extravars={"remediate_approve": approval_id})
        assert again.status == "failed"  # a plan runs once
    finally:
        lab.reset("lab01")


def test_reject_escalates_to_webhook(env, tmp_path):
    lab, inventory, server, hook = env
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    hook.bodies.clear()
    lab.inject("lab02", "redis_bad_dir_permissions")
    try:
        run = work.run(extravars={"remediate_backend": "llm", "remediate_hosts": "lab02"})
        approval_id = run.outcomes()[("lab02", "redis-server")]["approval_id"]
        rejected = work.run("resume.yml", extravars={"remediate_reject": approval_id,
                                                     "remediate_webhook_url": hook.url})
        assert rejected.status == "failed"  # the host ends red
        outcome = rejected.outcomes()[("lab02", "redis-server")]
        assert outcome["state"] == "escalated" and "rejected" in outcome["reason"]
        assert read_cache(work, "lab02")["sentinel_memory"][-1]["approval"] == "rejected"
        assert len(hook.bodies) == 1
        alert = hook.bodies[0]["alerts"][0]
        assert alert["labels"]["alertname"] == "SentinelRemediationEscalated"
        assert alert["labels"]["instance"] == "lab02" and alert["labels"]["service"] == "redis-server"
        assert "rejected" in alert["annotations"]["description"]
        assert not lab.health("lab02")["redis"].healthy
    finally:
        lab.reset("lab02")


def test_exhausted_retries_and_needs_human_escalate(env, tmp_path):
    lab, inventory, server, hook = env
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    hook.bodies.clear()
    server.reset()
    lab.inject("lab01", "nginx_stopped")
    lab.inject("lab02", "nginx_binary_missing")
    try:
        run = work.run(extravars={"remediate_backend": "llm", "remediate_max_retries": 2,
                                  "remediate_webhook_url": hook.url})
        assert run.status == "failed"
        # The model's plan ran once and did not heal: the engine never runs it again (the
        # model repeating it is sent back) and the next source, the runbook, heals.
        learned = run.outcomes()[("lab01", "nginx")]
        assert learned["state"] == "healed" and learned["attempts"] == 2, learned
        ran = [c["command"] for c in learned["commands"] if c["rc"] is not None]
        assert ran.count("nginx -t") == 1 and ran[-1] == "service nginx start", ran
        assert learned["sources"] == ["llm", "runbook"]
        assert lab.health("lab01")["nginx"].healthy
        human = run.outcomes()[("lab02", "nginx")]
        assert human["state"] == "escalated", human
        assert human["commands"] == [] and human["attempts"] == 1
        assert {b["alerts"][0]["labels"]["instance"] for b in hook.bodies} == {"lab02"}
        junit = (work.root / f"runner-{work.count}" / "junit.xml").read_text()
        assert junit.count("<failure") == 1
        # With one attempt allowed, the same failure is escalated after it.
        hook.bodies.clear()
        lab.inject("lab01", "nginx_stopped")
        fresh = Workspace(tmp_path / "again", inventory, llm_url=server.url)
        run = fresh.run(extravars={"remediate_backend": "llm", "remediate_max_retries": 1,
                                   "remediate_hosts": "lab01", "remediate_webhook_url": hook.url})
        retried = run.outcomes()[("lab01", "nginx")]
        assert retried["state"] == "escalated" and retried["attempts"] == 1, retried
        assert "still failing after 1 attempt(s)" in retried["reason"]
        assert {b["alerts"][0]["labels"]["instance"] for b in hook.bodies} == {"lab01"}
    finally:
        lab.reset("lab01")
        lab.reset("lab02")


def test_an_approved_plan_is_judged_in_its_incident_scope_and_signals_only_the_processes_seen(env, tmp_path):
    """The approved plan is classified again with the scope it was planned in (the PIDs the
    evidence tied to nginx), and its signal goes to those processes only if each is still the
    process the approver saw (same start time and name)."""
    lab, inventory, server, _hook = env
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    lab.inject("lab02", "nginx_processes_stopped")
    try:
        pids = lab.exec("lab02", "pgrep -x nginx", check=True).stdout.split()
        assert pids
        server.queue({"plan": {"diagnosis": "every nginx process is stopped (SIGSTOP)",
                               "commands": ["cp /etc/nginx/nginx.conf /etc/nginx/nginx.conf.bak",
                                            "kill -CONT " + " ".join(pids)],
                               "rationale": "keep a copy, then let the processes run again"}})
        run = work.run(extravars={"remediate_backend": "llm", "remediate_hosts": "lab02"})
        outcome = run.outcomes()[("lab02", "nginx")]
        assert outcome["state"] == "waiting_approval", outcome
        pending = json.loads((work.artifacts_dir / "pending" / f"{outcome['approval_id']}.json").read_text())
        assert {int(p) for p in pids} <= set(pending["scope"]["pids"])
        assert {str(p["pid"]) for p in pending["processes"]} >= set(pids)

        resumed = work.run("resume.yml", extravars={"remediate_approve": outcome["approval_id"]})
        healed = resumed.outcomes()[("lab02", "nginx")]
        assert healed["state"] == "healed", healed
        assert [c["rc"] for c in healed["commands"]] == [0, 0], healed["commands"]
        assert lab.health("lab02")["nginx"].healthy
        states = lab.exec("lab02", "ps -o stat= -C nginx", check=True).stdout.split()
        assert states and not any(s.startswith("T") for s in states), states
    finally:
        lab.reset("lab02")


def test_check_mode_is_a_dry_run_that_changes_nothing_and_sends_nothing(env, tmp_path):
    """ansible-playbook --check: the plans, their verdicts and what would run, and nothing
    else - no command on the host, no memory, no pending approval, no escalation sent."""
    lab, inventory, server, hook = env
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    hook.bodies.clear()
    server.reset()
    lab.inject("lab01", "redis_bad_dir_permissions")
    lab.inject("lab02", "nginx_binary_missing")
    try:
        run = work.run(extravars={"remediate_backend": "llm", "remediate_webhook_url": hook.url}, check=True)
        assert run.report.get("dry_run") is True, run.report.keys()
        assert "DRY RUN (--check)" in run.stdout
        redis = run.outcomes()[("lab01", "redis-server")]
        assert redis["state"] == "dry_run" and "would run" in redis["reason"], redis
        assert [c["command"] for c in redis["planned"]] == REDIS_PLAN["commands"]
        assert {c["verdict"] for c in redis["planned"]} == {"approval", "allow"}
        assert all(c.get("rc") is None for c in redis["commands"]), redis["commands"]
        assert run.outcomes()[("lab02", "nginx")]["state"] in ("escalated", "dry_run")
        assert not lab.health("lab01")["redis"].healthy          # nothing ran on the host
        assert hook.bodies == []                                  # no escalation sent
        assert not list((work.artifacts_dir / "pending").glob("*.json"))
        for host in ("lab01", "lab02"):
            if (work.facts_dir / f"s1_{host}").exists():
                facts = read_cache(work, host)
                assert not facts.get("sentinel_memory") and not facts.get("sentinel_pending"), facts
    finally:
        lab.reset("lab01")
        lab.reset("lab02")
