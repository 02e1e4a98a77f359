"""Dependencies in the incident and signatures that separate causes (issue 28), on the lab.

playbooks/remediate.yml through ansible-runner against the session lab's hosts, watching
PostgreSQL and the app that depends on it, with the test LLM server standing in for the
model. Verdicts come from outside: the requests the LLM server received, the report, what
ran in the containers (the app's process, PostgreSQL's files) and the lab's own health check.
"""
from __future__ import annotations

import json
import re

import pytest

from llm_server import LLMServer
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

WATCHED = ("postgresql", "sentinel-app")
ESCALATE = {"plan": {"diagnosis": "a human must decide", "commands": [], "rationale": "not for automation",
                     "escalate": True}}


def _text(request: dict) -> str:
    """The chat request's messages as one text (the server records the HTTP body)."""
    body = request.get("body") if isinstance(request.get("body"), dict) else {}
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [] if isinstance(m, dict))


def _requests_for(server: LLMServer, service: str) -> list[str]:
    return [t for t in (_text(r) for r in server.requests) if re.search(rf"^Service: {re.escape(service)}$", t, re.M)]


@pytest.fixture(scope="module")
def deps(lab, tmp_path_factory):
    """The session lab, an inventory watching only PostgreSQL and the app (the fleet-wide stop
    off: these tests break a service on every host they run on), and the LLM server."""
    require_docker()
    inventory = lab.write_inventory(tmp_path_factory.mktemp("deps-inventory") / "hosts.json", services=True)
    data = json.loads(inventory.read_text())
    for group in data["all"]["children"]["lab"]["children"].values():
        services = group["vars"].get("remediate_services") or []
        group["vars"]["remediate_services"] = [s for s in services if s["name"] in WATCHED]
    inventory.write_text(json.dumps(data))
    with LLMServer(default=ESCALATE) as server:
        yield lab, inventory, server


def _run(work: Workspace, hosts: str, backend: str = "llm"):
    run = work.run(extravars={"remediate_backend": backend, "remediate_hosts": hosts,
                              "remediate_fleet_stop_share": 1})
    # an escalation fails the play (the role hands over to a human); the report says what happened
    assert run.report.get("outcomes"), run.stdout[-3000:]
    return run


def test_the_apps_request_carries_the_databases_own_error_when_the_databases_checks_pass(deps, tmp_path):
    lab, inventory, server = deps
    server.reset()
    server.rules = [{"match": r"Service: sentinel-app\n", "reply": ESCALATE}]
    lab.inject("lab01", "app_db_access_revoked")
    try:
        run = _run(Workspace(tmp_path, inventory, llm_url=server.url), "lab01")
        outcomes = {s: o for (h, s), o in run.outcomes().items() if h == "lab01"}
        assert outcomes["postgresql"]["state"] == "healthy", outcomes["postgresql"]
        (request,) = _requests_for(server, "sentinel-app")
        assert "SUSPECT all the same, sentinel-app's errors name it" in request
        # PostgreSQL's own log line (its prefix user@database), under the dependency's section
        own = request.split("postgresql's own lines on sentinel-app's failure", 1)
        assert len(own) == 2, request[-4000:]
        assert re.search(r"\[postgresql-15-main\.log\] .*sentinelapp@sentinelapp FATAL: +pg_hba\.conf rejects "
                         r"connection for host \"127\.0\.0\.1\", user \"sentinelapp\"", own[1]), own[1][:2000]
        assert not _requests_for(server, "postgresql")  # its checks passed: no incident of its own
    finally:
        lab.fix("lab01", "app_db_access_revoked", timeout=60)
    assert all(h.healthy for h in lab.health("lab01", ["postgres", "app"]).values())


def test_an_app_whose_database_is_down_waits_on_it_and_heals_after_it(deps, tmp_path):
    lab, inventory, server = deps
    server.reset()
    server.rules = [{"match": r"Service: postgresql\n", "reply": ESCALATE},
                    {"match": r"Service: sentinel-app\n",
                     "reply": {"plan": {"diagnosis": "restart", "commands": ["service sentinel-app restart"],
                                        "rationale": "r"}}}]
    app_pid = lab.exec("lab02", "pgrep -o -f /usr/local/bin/sentinel-app").stdout.strip()
    lab.inject("lab02", "app_database_down")
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    try:
        first = {s: o for (h, s), o in _run(work, "lab02").outcomes().items() if h == "lab02"}
        assert first["postgresql"]["state"] == "escalated", first["postgresql"]
        app = first["sentinel-app"]
        assert app["state"] == "waiting" and app["waits_on"] == ["postgresql"], app
        assert app["commands"] == [] and app["attempts"] == 0
        assert not _requests_for(server, "sentinel-app")  # no plan asked for, nothing ran for it
        assert lab.exec("lab02", "pgrep -o -f /usr/local/bin/sentinel-app").stdout.strip() == app_pid

        # the database heals (runbooks), the app is looked at again and recovers with nothing run for it
        second = {s: o for (h, s), o in _run(work, "lab02", backend="runbook").outcomes().items() if h == "lab02"}
        assert second["postgresql"]["state"] == "healed", second["postgresql"]
        assert second["sentinel-app"]["state"] == "healthy", second["sentinel-app"]
        assert "recovered once postgresql healed" in second["sentinel-app"]["reason"]
        assert all(h.healthy for h in lab.health("lab02", ["postgres", "app"]).values())
        assert lab.exec("lab02", "pgrep -o -f /usr/local/bin/sentinel-app").stdout.strip() == app_pid
    finally:
        if not lab.health("lab02", ["postgres"])["postgres"].healthy:
            lab.fix("lab02", "app_database_down", timeout=60)


def test_two_hosts_with_one_symptom_and_different_causes_do_not_share_a_plan(deps, tmp_path):
    lab, inventory, server = deps
    server.reset()
    server.rules = [
        {"match": r"Service: postgresql\n.*scram-sha256",
         "reply": {"plan": {"diagnosis": "pg_hba.conf names an unknown method",
                            "commands": ["sed -i 's/scram-sha256/scram-sha-256/' /etc/postgresql/15/main/pg_hba.conf",
                                         "service postgresql start"], "rationale": "fix the typo, start"}}},
        {"match": r"Service: postgresql\n.*could not access file \S*pg_cron",
         "reply": {"plan": {"diagnosis": "a preload library that is not installed",
                            "commands": ["sed -i '/^shared_preload_libraries = /d' "
                                         "/var/lib/postgresql/15/main/postgresql.auto.conf",
                                         "service postgresql start"], "rationale": "drop the setting, start"}}},
    ]
    lab.inject("lab01", "postgres_hba_typo")
    lab.inject("lab03", "postgres_preload_library_missing")
    work = Workspace(tmp_path, inventory, llm_url=server.url)
    try:
        outcomes = _run(work, "lab01,lab03").outcomes()
        hba, preload = outcomes[("lab01", "postgresql")], outcomes[("lab03", "postgresql")]
        # the same symptom (nothing listens on 5432), two causes: two signatures, two requests
        assert hba["signature"] != preload["signature"]
        asked = _requests_for(server, "postgresql")
        assert len(asked) == 2 and sum("scram-sha256" in t for t in asked) == 1
        assert sum('"pg_cron"' in t for t in asked) == 1
        # lab03 got the plan made for its own cause, never lab01's
        planned = [c["command"] for c in preload["planned"]]
        assert planned and planned[0].endswith("postgresql.auto.conf"), preload
        assert not any("pg_hba" in c for c in planned), preload
        assert preload["state"] in ("healed", "waiting_approval"), preload
        if preload["state"] == "waiting_approval":
            # the approver is shown this host's own causes
            record = json.loads((work.artifacts_dir / "pending" / f"{preload['approval_id']}.json").read_text())
            assert any("pg_cron" in cause for cause in record["host_diagnosis"]), record["host_diagnosis"]
            assert not any("scram" in cause for cause in record["host_diagnosis"]), record["host_diagnosis"]
            assert record["planned_on"] == ""  # made for lab03 itself
        # inside the containers: neither host's fix touched the other's file
        assert lab.exec("lab03", "grep -c scram-sha256 /etc/postgresql/15/main/pg_hba.conf",
                        check=False).stdout.strip() == "0"
        assert "shared_preload_libraries" not in lab.exec(
            "lab01", "cat /var/lib/postgresql/15/main/postgresql.auto.conf").stdout
    finally:
        for host, fault in (("lab01", "postgres_hba_typo"), ("lab03", "postgres_preload_library_missing")):
            if not lab.health(host, ["postgres"])["postgres"].healthy:
                lab.fix(host, fault, timeout=60)
