"""A degraded service whose dependency shows the cause (issues 28 and 29), on a real lab host:
the app's /health hangs behind a schema change someone left open in psql. The app is slow, not
down; PostgreSQL's own session view names the blocker. The plan ends that one session (after a
human's yes) and the restart the model added is refused; judged from inside the container: the
session is gone from pg_stat_activity, the postmaster is the same process, the app was not
restarted, and the lab's own check passes."""
from __future__ import annotations

import pytest

from llm_server import LLMServer
from test_do_no_harm import HOST, definition, intents, postmaster
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

BLOCKER = ("SELECT pid FROM pg_stat_activity WHERE datname = 'sentinelapp' AND state = 'idle in transaction' "
           "AND query LIKE 'ALTER TABLE visits%'")
TERMINATE = 'runuser -u postgres -- psql -c "SELECT pg_terminate_backend({capture})"'
RESTART = "service sentinel-app restart"


def sql(lab, query: str) -> str:
    return lab.exec(HOST, ["runuser", "-u", "postgres", "--", "psql", "-X", "-tA", "-d", "sentinelapp", "-c", query],
                    check=True).stdout.strip()


def asked(server) -> list[str]:
    """The last user message of each chat request the planner sent (the request, then each re-ask)."""
    return [[m["content"] for m in r["body"]["messages"] if m["role"] == "user"][-1]
            for r in server.requests if r["path"].endswith("/chat/completions")]


@pytest.fixture
def schema_change_left_open(lab):
    lab.wait_health(HOST, ["postgres", "app"], timeout=60)
    lab.inject(HOST, "app_schema_change_left_open")
    yield
    # whatever happened: the developer's session and its feeder gone, the app answering
    lab.exec(HOST, ["runuser", "-u", "postgres", "--", "psql", "-X", "-tA", "-c",
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE state = 'idle in transaction'"])
    lab.exec(HOST, "pkill -f 'sleep 86400' || true")
    lab.wait_health(HOST, ["postgres", "app"], timeout=60)


def test_a_session_left_idle_in_transaction_is_ended_after_approval_and_nothing_is_restarted(
        lab, tmp_path, schema_change_left_open):
    require_docker()
    server_before = postmaster(lab)
    app_before = lab.exec(HOST, "pgrep -o -x sentinel-app", check=True).stdout.strip()
    blocker = sql(lab, BLOCKER)
    assert blocker.isdigit(), blocker
    assert not lab.health(HOST, ["app"])["app"].healthy

    # The model's answer: end the session the evidence names, and restart the app "for good measure".
    rules = [{"match": r"Service: sentinel-app\b", "capture": r"BLOCKER PID (\d+)",
              "reply": {"plan": {"diagnosis": "a session idle in transaction holds the lock the app waits on",
                                 "commands": [TERMINATE, RESTART], "rationale": "end the blocker"}}}]
    services = [definition("postgresql"), definition("sentinel-app")]
    tmp_path.mkdir(parents=True, exist_ok=True)
    with LLMServer(rules=rules) as server:
        work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        first = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "llm",
                                    "remediate_services": services})
        requests = asked(server)

    outcome = first.outcomes()[(HOST, "sentinel-app")]
    assert outcome["state"] == "waiting_approval", outcome
    assert "degraded" in outcome["safeguards"], outcome
    assert first.outcomes()[(HOST, "postgresql")]["state"] == "healthy"
    # the model was told what the incident is and saw the blocker in PostgreSQL's own view
    assert "This incident is DEGRADED, not down" in requests[0] and f"BLOCKER PID {blocker}" in requests[0]
    # the restart came back refused, with the reason
    assert f"REFUSED `{RESTART}`: do no harm: sentinel-app is degraded" in requests[1], requests[1][:2000]
    assert intents(work, "sentinel-app") == [] and intents(work, "postgresql") == []
    assert sql(lab, BLOCKER) == blocker  # nothing ran: the session still holds its lock

    resumed = work.run("resume.yml", extravars={"remediate_approve": outcome["approval_id"],
                                                "remediate_services": services})
    assert sql(lab, BLOCKER) == ""
    healed_by_ending_only_that_session(lab, resumed, work, blocker, server_before, app_before)


def healed_by_ending_only_that_session(lab, run, work, blocker: str, server_before, app_before: str) -> None:
    """``run`` healed the app by the one command that ends the blocker's session (the journal);
    inside the container: that session gone, PostgreSQL and the app the same processes (neither
    restarted), the lab's own check of the app passing."""
    outcome = run.outcomes()[(HOST, "sentinel-app")]
    assert outcome["state"] == "healed", outcome
    ran = [c["command"] for i in intents(work, "sentinel-app") for c in i["commands"]]
    assert ran == [TERMINATE.replace("{capture}", blocker)], ran
    assert sql(lab, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {blocker}") == "0"
    assert postmaster(lab) == server_before
    assert lab.exec(HOST, "pgrep -o -x sentinel-app", check=True).stdout.strip() == app_before
    assert lab.health(HOST, ["app"])["app"].healthy
