"""First, do no harm (issue 29), on real lab hosts: a failure is confirmed before anything acts
on it, a slow service is reported rather than restarted, and a stateful service that still
runs is never restarted without a human. Each test judges by what happened inside the
container: the postmaster's PID and start time, the processes' states, the lab's own health
check, and the journal of what was sent to the host."""
from __future__ import annotations

import copy
import json

import pytest

from llm_server import LLMServer
from sentinel_lab import kind_group_vars
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST = "lab01"  # a SysV host of the session lab


def definition(name: str, **changes) -> dict:
    found = next(s for s in kind_group_vars("sysv")["remediate_services"] if s["name"] == name)
    return dict(copy.deepcopy(found), **changes)


def postmaster(lab) -> tuple[str, str]:
    """The running postmaster's PID and start time (ticks since boot), as the host sees them."""
    pid = lab.exec(HOST, "head -n 1 /var/lib/postgresql/15/main/postmaster.pid").stdout.strip()
    start = lab.exec(HOST, f"cut -d' ' -f22 /proc/{pid}/stat").stdout.strip()
    assert pid and start, (pid, start)
    return pid, start


def intents(work: Workspace, service: str) -> list[dict]:
    path = work.artifacts_dir / "journal" / f"{HOST}.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in records if r.get("kind") == "intent" and r.get("service") == service]


def notified(result) -> bool:
    """Whether the run worked out notifications for the host (the role does only when there is news)."""
    return any(e.get("event") == "runner_on_ok"
               and str((e.get("event_data") or {}).get("task")).endswith("Work out who hears of what")
               for e in result.events)


def run(lab, tmp_path, services: list[dict], **variables):
    require_docker()
    tmp_path.mkdir(parents=True, exist_ok=True)
    work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"))
    result = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "runbook",
                                 "remediate_services": services, **variables})
    return work, result, result.outcomes()


@pytest.fixture
def resume_postgres(lab):
    yield
    lab.exec(HOST, "pkill -CONT -u postgres -x postgres || true")
    assert lab.health(HOST, ["postgres"])["postgres"].healthy


def test_a_postgres_paused_for_seconds_is_not_restarted(lab, tmp_path, resume_postgres):
    before = postmaster(lab)
    lab.inject(HOST, "postgres_paused")  # SIGSTOP now, SIGCONT 25 s later
    assert not lab.health(HOST, ["postgres"])["postgres"].healthy

    work, result, outcomes = run(lab, tmp_path, [definition("postgresql")])

    outcome = outcomes[(HOST, "postgresql")]
    assert outcome["state"] == "healthy", outcome
    assert outcome["safeguards"] == ["recovered"], outcome
    assert outcome["reason"].startswith("recovered by itself: the first check said"), outcome["reason"]
    assert intents(work, "postgresql") == []  # nothing was sent to the host
    assert postmaster(lab) == before  # the same server, never restarted
    assert lab.health(HOST, ["postgres"])["postgres"].healthy
    assert result.report["totals"]["healthy"] >= 1


def test_a_stateful_service_that_still_runs_is_not_restarted_without_a_human(lab, tmp_path, resume_postgres):
    before = postmaster(lab)
    lab.exec(HOST, "pkill -STOP -u postgres -x postgres")  # frozen until someone resumes it

    work, _result, outcomes = run(lab, tmp_path, [definition("postgresql", confirm_attempts=1, confirm_interval=1)])

    outcome = outcomes[(HOST, "postgresql")]
    # No runbook knows this: the fallback restart is the plan, and it waits for a human.
    assert outcome["state"] == "waiting_approval", outcome
    assert "restart_cost" in outcome["safeguards"] and "confirmed" in outcome["safeguards"], outcome
    assert intents(work, "postgresql") == []
    states = lab.exec(HOST, "ps -o stat= -C postgres").stdout.split()
    assert states and all(s.startswith("T") for s in states), states  # untouched: still stopped
    lab.exec(HOST, "pkill -CONT -u postgres -x postgres")
    assert postmaster(lab) == before


def test_a_postgres_that_stays_down_is_healed(lab, tmp_path):
    lab.inject(HOST, "app_database_down")  # stopped cleanly: no process of it is left
    work, _result, outcomes = run(lab, tmp_path, [definition("postgresql", confirm_attempts=1, confirm_interval=1)])

    outcome = outcomes[(HOST, "postgresql")]
    assert outcome["state"] == "healed", outcome
    assert "confirmed" in outcome["safeguards"] and "restart_cost" not in outcome["safeguards"], outcome
    assert [c["command"] for i in intents(work, "postgresql") for c in i["commands"]], "nothing was sent"
    assert lab.health(HOST, ["postgres"])["postgres"].healthy


def test_a_slow_but_alive_service_is_reported_degraded_and_not_restarted(lab, tmp_path):
    """cron runs; its health check answers slower than its timeout (a check that takes 5 s with
    a 1 s timeout, what a slow service looks like to a probe)."""
    pid = lab.exec(HOST, "pgrep -o -x cron").stdout.strip()
    assert pid
    slow = definition("cron", confirm_attempts=1, confirm_interval=1,
                      checks=[{"type": "process", "pattern": "^(/usr/sbin/)?cron( |$)"},
                              {"type": "command", "argv": ["sleep", "5"], "timeout": 1}])

    work, result, outcomes = run(lab, tmp_path, [slow])

    outcome = outcomes[(HOST, "cron")]
    assert outcome["state"] == "degraded", outcome
    assert outcome["reason"].startswith("degraded: sleep 5 exited 124"), outcome["reason"]
    assert "not restarted" in outcome["reason"] and outcome["safeguards"] == ["confirmed", "degraded"], outcome
    assert intents(work, "cron") == []
    assert lab.exec(HOST, "pgrep -o -x cron").stdout.strip() == pid  # the same cron
    assert result.report["ok"] is False  # a human is told
    assert notified(result)

    # The next pass finds it unchanged: reported again, not notified again (remind after notify_remind).
    again = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "runbook", "remediate_services": [slow]})
    assert again.outcomes()[(HOST, "cron")]["state"] == "degraded"
    assert not notified(again)

    # The operator says a timeout of this service means down: it is healed as one.
    _work, _result, outcomes = run(lab, tmp_path / "remediate", [dict(slow, on_timeout="remediate")])
    assert outcomes[(HOST, "cron")]["state"] != "degraded", outcomes[(HOST, "cron")]


def test_a_flapping_service_is_escalated_once_and_left_alone_until_cleared(lab, tmp_path):
    require_docker()
    work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"))
    variables = {"remediate_hosts": HOST, "remediate_backend": "runbook", "remediate_flap_count": 2,
                 "remediate_services": [definition("cron", confirm_attempts=0)]}

    def cron_pass(**more):
        lab.inject(HOST, "cron_stopped")
        return work.run(extravars={**variables, **more}).outcomes()[(HOST, "cron")]

    assert cron_pass()["state"] == "healed"
    assert cron_pass()["state"] == "healed"
    sent = len(intents(work, "cron"))
    third = cron_pass()  # healed twice within the hour and failing again: flapping
    assert third["state"] == "escalated" and third["safeguards"] == ["held"], third
    assert third["reason"].startswith("flapping: healed 2 times"), third["reason"]
    fourth = work.run(extravars=variables).outcomes()[(HOST, "cron")]  # the next pass says held, not escalated again
    assert fourth["state"] == "held" and fourth["reason"].startswith("left alone since an earlier pass"), fourth
    assert len(intents(work, "cron")) == sent  # nothing was sent to the host by either pass
    assert lab.exec(HOST, "pgrep -x cron").stdout.strip() == ""  # and cron is still stopped
    assert not lab.health(HOST, ["cron"])["cron"].healthy

    cleared = work.run(extravars={**variables, "remediate_clear_holds": ["cron"]}).outcomes()[(HOST, "cron")]
    assert cleared["state"] == "healed", cleared
    assert lab.health(HOST, ["cron"])["cron"].healthy


FLEET = ["lab01", "lab02", "lab03"]
MARK = "/var/log/nginx/sentinel-canary"


def journal_records(work: Workspace, host: str) -> list[dict]:
    path = work.artifacts_dir / "journal" / f"{host}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.exists() else []


def fleet_run(lab, tmp_path, plan: list[str]):
    require_docker()
    rules = [{"match": r"Service: nginx\b",
              "reply": {"plan": {"diagnosis": "nginx is down", "commands": plan, "rationale": "test"}}}]
    for host in FLEET:
        lab.exec(host, f"rm -f {MARK}")
        lab.inject(host, "nginx_stopped")
    with LLMServer(rules=rules) as server:
        work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        result = work.run(extravars={"remediate_backend": "llm",
                                     "remediate_services": [definition("nginx", confirm_attempts=0)]})
    return work, result.outcomes()


def test_a_plan_that_does_not_heal_the_canary_never_runs_on_the_others(lab, tmp_path):
    work, outcomes = fleet_run(lab, tmp_path, [f"touch {MARK}"])
    ran = [h for h in FLEET if [r for r in journal_records(work, h) if r.get("kind") == "intent"]]
    assert len(ran) == 1, ran  # only the canary ran it
    canary = ran[0]
    # ... and what it changed was put back, since it did not heal
    assert [h for h in FLEET if lab.exec(h, f"test -e {MARK}").ok] == []
    assert [r for r in journal_records(work, canary) if r.get("kind") == "undo"], canary
    assert "canary" in outcomes[(canary, "nginx")]["safeguards"], outcomes[(canary, "nginx")]
    for host in FLEET:
        if host == canary:
            continue
        outcome = outcomes[(host, "nginx")]
        assert outcome["state"] == "escalated" and "rollout_stopped" in outcome["safeguards"], outcome
        assert outcome["reason"].startswith(f"rollout stopped: the canary {canary} ran this plan and it did not heal"), \
            outcome["reason"]
        assert not [r for r in journal_records(work, host) if r.get("kind") == "intent"], host  # nothing sent
        assert not lab.health(host, ["nginx"])["nginx"].healthy
        lab.exec(host, "service nginx start")
    lab.exec(canary, "service nginx start || true")
    assert all(lab.health(h, ["nginx"])["nginx"].healthy for h in FLEET)


def test_a_fault_on_many_hosts_is_healed_canary_first_then_the_rest(lab, tmp_path):
    work, outcomes = fleet_run(lab, tmp_path, ["service nginx start"])
    assert all(outcomes[(h, "nginx")]["state"] == "healed" for h in FLEET), outcomes
    canaries = [h for h in FLEET if "canary" in outcomes[(h, "nginx")]["safeguards"]]
    assert len(canaries) == 1, outcomes
    verified = next(r["ts"] for r in journal_records(work, canaries[0]) if r.get("kind") == "result")
    for host in FLEET:
        if host != canaries[0]:
            started = next(r["ts"] for r in journal_records(work, host) if r.get("kind") == "intent")
            assert started > verified, (host, started, verified)  # sent only after the canary was verified
    assert all(lab.health(h, ["nginx"])["nginx"].healthy for h in FLEET)


def test_a_service_that_answers_while_its_writes_wait_is_healed_by_a_targeted_command_and_not_restarted(lab, tmp_path):
    """Redis answers PING while every write waits (writes paused, as a backup script does before
    its copy and did not undo): degraded, not down. The cause is inside the service (one asking
    check answered, another timed out), so it is planned under do no harm: the model's targeted
    command runs without a human, its restart is refused, and the same server serves writes."""
    require_docker()
    pid = lab.exec(HOST, "pgrep -o -x redis-server").stdout.strip()
    assert pid
    lab.exec(HOST, "redis-cli CLIENT PAUSE 600000 WRITE")
    try:
        assert not lab.health(HOST, ["redis"])["redis"].healthy
        rules = [{"match": r"Service: redis-server\b",
                  "reply": {"plan": {"diagnosis": "writes are paused inside redis", "rationale": "test",
                                     "commands": ["redis-cli CLIENT UNPAUSE", "service redis-server restart"]}}}]
        with LLMServer(rules=rules) as server:
            work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
            result = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "llm",
                                         "remediate_services": [definition("redis-server", confirm_attempts=1,
                                                                           confirm_interval=1)]})
            prompt = server.prompt_text(0) if server.chat_requests else ""
        outcome = result.outcomes()[(HOST, "redis-server")]
        assert outcome["state"] == "healed", outcome
        assert "degraded" in outcome["safeguards"], outcome
        assert "it answers (" in prompt and "one kind of request waits inside the service" in prompt
        sent = [c["command"] for i in intents(work, "redis-server") for c in i["commands"]]
        assert sent == ["redis-cli CLIENT UNPAUSE"], sent  # the restart never reached the host
        assert lab.exec(HOST, "pgrep -o -x redis-server").stdout.strip() == pid  # the same server
        assert lab.health(HOST, ["redis"])["redis"].healthy
    finally:
        lab.exec(HOST, "redis-cli CLIENT UNPAUSE")
