"""The remediation workflow end to end: playbooks/remediate.yml through ansible-runner
against six real lab hosts, with the test LLM server standing in for the model.

Fleet planning: 3 hosts with nginx stopped and 3 with redis stopped are two failure
signatures, so the first run asks the LLM exactly twice (counted by the LLM server
itself); the second run of the same faults plans from memory (no call); a run on the
healed lab changes nothing and asks nothing.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from llm_server import LLMServer
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

NGINX_HOSTS = ["lab01", "lab02", "lab03"]
REDIS_HOSTS = ["lab04", "lab05", "lab06"]
RULES = [
    {"match": r"Service: nginx\b",
     "reply": {"plan": {"diagnosis": "nginx is stopped", "commands": ["service nginx start"], "rationale": "start it"}}},
    {"match": r"Service: redis-server\b",
     "reply": {"plan": {"diagnosis": "redis is stopped", "commands": ["service redis-server start"],
                        "rationale": "start it"}}},
]


@pytest.fixture(scope="module")
def fleet(lab_factory, tmp_path_factory):
    require_docker()
    lab = lab_factory("sentinel-test-wf", 6)
    inventory = lab.write_inventory(tmp_path_factory.mktemp("wf-inventory") / "hosts.yml")
    with LLMServer(rules=RULES) as server:
        yield lab, inventory, server


def inject_faults(lab):
    for host in NGINX_HOSTS:
        lab.inject(host, "nginx_stopped")
    for host in REDIS_HOSTS:
        lab.inject(host, "redis_stopped")


def assert_lab_healthy(lab):
    broken = {f"{host}/{name}": h.summary() for host in NGINX_HOSTS + REDIS_HOSTS
              for name, h in lab.health(host).items() if not h.healthy}
    assert not broken, broken


def test_fleet_planning_memory_and_idempotence(fleet, tmp_path):
    lab, inventory, server = fleet
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    server.reset()

    # Run 1: two signatures -> exactly two LLM calls, every host healed.
    inject_faults(lab)
    first = work.run(extravars={"remediate_backend": "llm"})
    assert first.status == "successful", first.stdout[-3000:]
    assert len(server.chat_requests) == 2, [server.prompt_text(i)[:200] for i in range(len(server.chat_requests))]
    states = first.states()
    assert all(states[f"{h}/nginx"] == "healed" for h in NGINX_HOSTS), states
    assert all(states[f"{h}/redis-server"] == "healed" for h in REDIS_HOSTS), states
    for host in NGINX_HOSTS:
        outcome = first.outcomes()[(host, "nginx")]
        assert [c["command"] for c in outcome["commands"]] == ["service nginx start"]
        assert outcome["commands"][0]["source"] == "llm" and outcome["commands"][0]["rc"] == 0
    assert first.report["llm"]["calls"] == 2
    assert_lab_healthy(lab)

    # Run 2: the same faults again -> planned from memory, no LLM call. The fleet-wide stop is
    # off here: a play it can trip in checks every host first and sends no fix with the health check.
    inject_faults(lab)
    second = work.run(extravars={"remediate_backend": "llm", "remediate_fleet_stop_share": 1})
    assert second.status == "successful", second.stdout[-3000:]
    assert len(server.chat_requests) == 2
    assert all(o["state"] in ("healed", "healthy") for o in second.report["outcomes"]), second.states()
    assert {c["source"] for o in second.report["outcomes"] for c in o["commands"]} == {"memory"}
    assert second.report["llm"]["calls"] == 0
    assert_lab_healthy(lab)
    # Each remembered fix went with the health check and ran there: the journal's bytes hold,
    # per host, the fixes sent (before anything ran), then the one attempt's intent and result,
    # and no second round trip's intent.
    for host, service in [(h, "nginx") for h in NGINX_HOSTS] + [(h, "redis-server") for h in REDIS_HOSTS]:
        lines = [json.loads(line) for line in (work.artifacts_dir / "journal" / f"{host}.jsonl").read_text().splitlines()]
        run2 = lines[[i for i, r in enumerate(lines) if r["kind"] == "conditional"][0]:]
        # (The fleet's fix of the other service went too: it did not run, its service is healthy.)
        assert all(service not in r["services"] for r in run2 if r["kind"] == "resolved"), run2
        steps = [r for r in run2 if r["kind"] not in ("closed", "resolved")]
        kinds = [(r["kind"], r.get("service")) for r in steps]
        assert kinds[:3] == [("conditional", None), ("intent", service), ("result", service)], kinds
        assert service in steps[0]["services"] and steps[1]["source"] == "memory" and steps[2]["healthy"] is True
        assert [("intent", service)] == [k for k in kinds if k[0] == "intent"], kinds
        outcome = second.outcomes()[(host, service)]
        assert outcome["attempts"] == 1 and outcome["commands"][0]["rc"] == 0, outcome

    # Run 3: nothing is broken -> nothing changes, no LLM call.
    third = work.run(extravars={"remediate_backend": "llm"})
    assert third.status == "successful"
    assert third.changed() == 0, third.stats
    assert len(server.chat_requests) == 2
    assert set(third.states().values()) == {"healthy"}


def test_monitor_tag_only_reports(fleet, tmp_path):
    lab, inventory, server = fleet
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    server.reset()
    lab.inject("lab01", "cron_stopped")
    try:
        run = work.run(tags="monitor")
        assert run.status == "successful", run.stdout[-3000:]
        assert run.outcomes()[("lab01", "cron")]["state"] == "failed"
        assert "monitoring only" in run.outcomes()[("lab01", "cron")]["reason"]
        assert run.changed() == 0 and not server.chat_requests
        assert not lab.health("lab01")["cron"].healthy
    finally:
        lab.fix("lab01", "cron_stopped")


def test_corrupt_fact_cache_does_not_stop_the_run(fleet, tmp_path):
    lab, inventory, server = fleet
    work = Workspace(tmp_path, inventory)
    work.facts_dir.mkdir(parents=True)
    (work.facts_dir / "s1_lab02").write_text("{not json")
    run = work.run()
    assert run.status == "successful", run.stdout[-3000:]
    assert run.outcomes()[("lab02", "nginx")]["state"] == "healthy"
    (kept,) = [p for p in work.facts_dir.iterdir() if p.name.startswith("s1_lab02.corrupt")]
    assert kept.read_text() == "{not json"  # a copy is always kept


def test_fleet_plan_with_host_specific_pid(fleet, tmp_path):
    """nginx_port_conflict on two hosts: one signature, one plan ("kill {port_owner_pid:80}"
    resolved on the representative), yet each host kills its own impostor."""
    lab, inventory, server = fleet
    work = Workspace(tmp_path, inventory)
    hosts = ["lab01", "lab02"]
    pids = {}
    for host in hosts:
        if host == "lab02":  # advance lab02's PID counter so the impostors' PIDs differ
            for _attempt in range(3):
                subprocess.run(["docker", "exec", lab.container(host), "true"], check=True)
        lab.inject(host, "nginx_port_conflict")
        pids[host] = lab.port_owner_pid(host, 80)
    assert pids["lab01"] != pids["lab02"]
    run = work.run(extravars={"remediate_backend": "runbook", "remediate_hosts": ",".join(hosts)})
    assert run.status == "successful", run.stdout[-3000:]
    outcomes = run.outcomes()
    assert outcomes[("lab01", "nginx")]["signature"] == outcomes[("lab02", "nginx")]["signature"]
    for host in hosts:
        commands = [c["command"] for c in outcomes[(host, "nginx")]["commands"]]
        assert commands == [f"kill {pids[host]}", "service nginx start"], (host, commands, pids)
        assert outcomes[(host, "nginx")]["state"] == "healed"
        assert lab.health(host)["nginx"].healthy


def test_a_dependency_is_healed_before_the_service_that_needs_it(fleet, tmp_path):
    """The app is listed before its database, and only the database broke: the database is
    healed first, then the app is looked at again and found healthy (nothing ran for it, and
    its process was not restarted), whatever the order of remediate_services."""
    lab, _inventory, _server = fleet
    inventory = lab.write_inventory(tmp_path / "deps.json", services=True)
    data = json.loads(inventory.read_text())
    group = data["all"]["children"]["lab"]["children"]["lab_sysv"]["vars"]
    names = [s["name"] for s in group["remediate_services"]]
    app = names.index("sentinel-app")
    db = names.index("postgresql")
    group["remediate_services"].insert(0, group["remediate_services"].pop(app))   # the app first
    assert [s["name"] for s in group["remediate_services"]].index("postgresql") > 0
    inventory.write_text(json.dumps(data))
    app_pid = lab.exec("lab01", "pgrep -o -f /usr/local/bin/sentinel-app").stdout.strip()
    assert app_pid and db >= 0
    lab.inject("lab01", "app_database_down")
    assert not lab.health("lab01", ["app"])["app"].healthy

    run = Workspace(tmp_path, inventory).run(extravars={"remediate_backend": "runbook", "remediate_hosts": "lab01"})
    outcomes = {s: o for (h, s), o in run.outcomes().items() if h == "lab01"}
    assert outcomes["postgresql"]["state"] == "healed", outcomes["postgresql"]
    assert outcomes["sentinel-app"]["state"] == "healthy", outcomes["sentinel-app"]
    assert "recovered once postgresql healed" in outcomes["sentinel-app"]["reason"], outcomes["sentinel-app"]
    assert outcomes["sentinel-app"]["commands"] == [] and outcomes["sentinel-app"]["attempts"] == 0
    # judged by the lab itself: both healthy, the app's process the same one
    assert all(h.healthy for h in lab.health("lab01", ["postgres", "app"]).values())
    assert lab.exec("lab01", "pgrep -o -f /usr/local/bin/sentinel-app").stdout.strip() == app_pid
