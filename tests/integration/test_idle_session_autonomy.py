"""The autonomy table's ``end_idle_transaction`` (issue 27) on a real lab host: a schema change
someone left open in psql holds the lock the app's every query waits on. Each layer on its own:

- the engine: with the operator's ``idle_transaction_seconds`` met, the session the evidence names
  is ended in the same run, without a human, and nothing is restarted; under the limit (the
  default ten minutes against a session a minute old) the same plan waits for a human;
- the host: the module that runs the command reads PostgreSQL's own session view again just
  before it and does not end a session that is not the one the evidence showed (another
  transaction, another backend), or that a plan let run alone while it has been idle too short,
  whatever the controller sent. Judged from inside the container: pg_stat_activity, the table's
  columns (the open ALTER TABLE rolled back), the postmaster and the app's process.
"""
from __future__ import annotations

import time

import pytest

from host_module import run_host_module
from llm_server import LLMServer
from test_degraded_cause import (BLOCKER, TERMINATE, asked,  # noqa: F401 pylint: disable=unused-import
                                 healed_by_ending_only_that_session, schema_change_left_open, sql)
from test_do_no_harm import HOST, definition, intents, postmaster
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

COLUMN = "SELECT count(*) FROM information_schema.columns WHERE table_name = 'visits' AND column_name = 'referrer'"
IDENTITY = ("SELECT extract(epoch FROM backend_start)::text || '/' || extract(epoch FROM xact_start)::text "
            "FROM pg_stat_activity WHERE pid = {pid}")


def _idle_at_least(lab, pid: str, seconds: int) -> None:
    deadline = time.monotonic() + seconds + 30
    while int(sql(lab, f"SELECT floor(extract(epoch FROM now() - state_change)) FROM pg_stat_activity "
                       f"WHERE pid = {pid}") or 0) < seconds:
        assert time.monotonic() < deadline, f"session {pid} not idle for {seconds} s"
        time.sleep(1)


def _plan():
    """The model's answer: end the one session the evidence names (its PID captured from the request)."""
    return [{"match": r"Service: sentinel-app\b", "capture": r"BLOCKER PID (\d+)",
             "reply": {"plan": {"diagnosis": "a session idle in transaction holds the lock the app waits on",
                                "commands": [TERMINATE], "rationale": "end the one blocking session"}}}]


def test_a_session_idle_past_the_operators_limit_is_ended_without_a_human_and_its_change_rolls_back(
        lab, tmp_path, schema_change_left_open):  # noqa: F811
    require_docker()
    server_before = postmaster(lab)
    app_before = lab.exec(HOST, "pgrep -o -x sentinel-app", check=True).stdout.strip()
    blocker = sql(lab, BLOCKER)
    assert blocker.isdigit(), blocker
    _idle_at_least(lab, blocker, 6)
    services = [definition("postgresql"), definition("sentinel-app")]

    with LLMServer(rules=_plan()) as server:
        work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        run = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "llm", "remediate_services": services,
                                  "remediate_policy": {"idle_transaction_seconds": 5}})
        assert f"BLOCKER PID {blocker}" in asked(server)[0]

    healed_by_ending_only_that_session(lab, run, work, blocker, server_before, app_before)
    assert sql(lab, COLUMN) == "0"  # its uncommitted schema change rolled back


def test_under_the_default_limit_the_same_plan_waits_for_a_human(lab, tmp_path, schema_change_left_open):  # noqa: F811
    require_docker()
    blocker = sql(lab, BLOCKER)
    services = [definition("postgresql"), definition("sentinel-app")]
    with LLMServer(rules=_plan()) as server:
        work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        run = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "llm", "remediate_services": services})
    outcome = run.outcomes()[(HOST, "sentinel-app")]
    assert outcome["state"] == "waiting_approval", outcome
    assert intents(work, "sentinel-app") == []
    assert sql(lab, BLOCKER) == blocker and sql(lab, COLUMN) == "0"


def test_the_host_ends_only_the_session_the_evidence_showed_whatever_the_controller_sent(
        lab, schema_change_left_open):  # noqa: F811
    """The host's check alone (the controller's class forced open: the module is called directly)."""
    require_docker()
    blocker = sql(lab, BLOCKER)
    identity = sql(lab, IDENTITY.format(pid=blocker))
    assert "/" in identity, identity
    services = {s["name"]: s for s in [definition("postgresql"), definition("sentinel-app")]}

    def end(session_check: dict, approved: bool = False) -> dict:
        argv = ["runuser", "-u", "postgres", "--", "psql", "-X", "-c", f"SELECT pg_terminate_backend({blocker})"]
        result = run_host_module(lab.container(HOST), "execute_plan", {
            "commands": [{"argv": argv, "become": True, "approved": approved, "session_check": session_check}],
            "depends": [services["postgresql"]], "verify": services["sentinel-app"], "settle": 0})
        [item] = result["results"]
        return item

    # another transaction of that backend (or a new backend on a reused PID): not run, even approved
    other = end({"dependency": "postgresql", "pid": int(blocker), "identity": identity + "1"}, approved=True)
    assert other["skipped"] and "not the session the evidence showed" in other["reason"], other
    # the session, but idle for less than the plan that let it run alone requires
    young = end({"dependency": "postgresql", "pid": int(blocker), "identity": identity, "min_idle": 86400})
    assert young["skipped"] and "under the policy's 86400 s" in young["reason"], young
    assert sql(lab, BLOCKER) == blocker and sql(lab, COLUMN) == "0"  # still there, still uncommitted

    # the very session, as the evidence showed it: ended
    ended = end({"dependency": "postgresql", "pid": int(blocker), "identity": identity, "min_idle": 1})
    assert ended["rc"] == 0 and not ended["skipped"], ended
    assert sql(lab, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {blocker}") == "0"
    # a PID the server no longer has is never signalled, whatever was approved
    gone = end({"dependency": "postgresql", "pid": int(blocker), "identity": identity}, approved=True)
    assert gone["skipped"] and "no longer a session" in gone["reason"], gone
