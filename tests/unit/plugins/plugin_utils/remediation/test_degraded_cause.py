# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A degraded service (slow, alive) whose dependency shows the cause is planned under do no
harm; without one it stays reported, nothing planned (a fake host port)."""
from __future__ import annotations

import copy

from llm_server import LLMServer, plan_content

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_cause
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import LLMSettings
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation._attempts import AttemptLoop
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation._checking import PlanCheck

DB = {"name": "db", "units": ["postgresql@15-main.service"], "processes": ["postgres"], "ports": [5432],
      "user": "postgres", "stateful": True, "checks": [{"type": "service"}]}
APP = {"name": "app", "units": ["app.service"], "processes": ["app"], "ports": [8080], "depends_on": ["db"],
       "checks": [{"type": "http", "url": "http://127.0.0.1:8080/health"}]}
TIMEOUT = "GET http://127.0.0.1:8080/health failed: timed out"
TERMINATE = "psql -c 'SELECT pg_terminate_backend(4242)'"


def view(blocker: bool = True, waiting: int = 3, age: int = 312) -> dict:
    sessions = []
    if blocker:
        sessions.append({"pid": 4242, "user": "postgres", "database": "appdb", "application": "psql",
                         "client": "local", "state": "idle in transaction", "wait": "Client:ClientRead",
                         "transaction_s": age + 1, "state_s": age, "blocked_by": [], "blocks": waiting,
                         "query": "ALTER TABLE visits ADD COLUMN referrer text;"})
    for index in range(waiting if blocker else 0):
        sessions.append({"pid": 5000 + index, "user": "appuser", "database": "appdb", "application": "",
                         "client": "local", "state": "active", "wait": "Lock:relation", "transaction_s": 30 + index,
                         "state_s": 30 + index, "blocked_by": [4242], "blocks": 0,
                         "query": "SELECT count(*) FROM visits"})
    sessions.append({"pid": 6000, "user": "appuser", "database": "appdb", "application": "", "client": "local",
                     "state": "idle", "wait": "Client:ClientRead", "transaction_s": -1, "state_s": 40,
                     "blocked_by": [], "blocks": 0, "query": "SELECT 1"})
    return {"server": "postgresql", "max_connections": 100, "reserved": 3, "client_sessions": len(sessions),
            "sessions": sessions, "left_out": 0}


class Host:
    """db healthy, app degraded (its check times out while it runs); ``views``: what each read
    of db's sessions says (the last repeats); ``verify``: what execute_plan's check says."""

    def __init__(self, views, verify=True, checks=()):
        self.views = list(views)
        self.verify = verify
        self.checks = list(checks)  # the app's check results in its health row
        self.calls: list = []

    def run_module(self, name, args):
        self.calls.append((name, copy.deepcopy(dict(args))))
        if name == "sentinel.remediation.service_health":
            rows = []
            for d in args["services"]:
                if d["name"] == "db":
                    rows.append({"name": "db", "healthy": True, "error": "", "checks": []})
                    continue
                rows.append({"name": d["name"], "healthy": False, "error": TIMEOUT, "checks": self.checks, "timed_out": True,
                             "degraded": True, "confirmation": {"checks": 3, "seconds": 25.0},
                             "evidence": {"init": "systemd", "processes": [{"pid": 300, "comm": "app", "state": "sleeping"}],
                                          "service_pids": [300]}})
            return {"services": rows, "healthy": False, "tools": {"present": ["systemctl", "psql", "kill"]}}
        if name == "sentinel.remediation.evidence":
            found = self.views.pop(0) if len(self.views) > 1 else self.views[0]
            return {"changed": False, "evidence": {"init": "systemd", "logs": {}, "sessions": found}, "tools": {}}
        if name == "sentinel.remediation.execute_plan":
            return {"changed": True, "results": [{"rc": 0, "label": c["label"]} for c in args["commands"]],
                    "verify": {"healthy": self.verify, "error": "" if self.verify else TIMEOUT}}
        raise AssertionError(name)

    def ran(self):
        return [c["label"] for n, a in self.calls if n == "sentinel.remediation.execute_plan" for c in a["commands"]]


class EndsSessionAndRestarts(AttemptLoop):
    """The plan a model could send: end the blocking session, and restart the app for good measure."""
    seen: list = []

    def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
        type(self).seen.append(evidence)
        return {"source": "llm", "diagnosis": "a session left idle in transaction holds the lock",
                "commands": [{"command": TERMINATE}, {"command": "systemctl restart app"}]}


def test_a_degraded_service_whose_database_shows_a_blocking_session_is_planned_and_its_restart_refused(make_run):
    EndsSessionAndRestarts.seen = []
    host = Host([view()])
    done = make_run(host, loop=EndsSessionAndRestarts, services=[APP, DB]).run()

    outcome = {o["service"]: o for o in done.outcomes}["app"]
    assert outcome["state"] == "waiting_approval", outcome
    assert "degraded" in outcome["safeguards"]
    assert host.ran() == []  # nothing runs before a human says yes
    evidence = EndsSessionAndRestarts.seen[0]
    assert "BLOCKER PID 4242" in evidence["dependency_sessions"]["db"]
    assert dependency_cause.causes_in(evidence)[0].startswith("cause in db: session PID 4242 (user postgres")
    # db's sessions were read on the host, read only, with its session view
    asked = [a for n, a in host.calls if n == "sentinel.remediation.evidence"]
    assert [(a["service"], a["sessions"]) for a in asked] == [("db", True)]
    attempt = done.incidents[0].attempts[0]
    assert [c.command for c in attempt.commands] == [TERMINATE]
    assert [c.verdict for c in attempt.commands] == ["approval"]
    refused = {r["command"]: r["reasons"][0] for r in attempt.refused}
    assert refused["systemctl restart app"].startswith("do no harm: app is degraded (slow, alive), not down, and "
                                                       "this command restarts unit app.service")


def test_an_approved_end_of_the_blocking_session_runs_on_resume_and_nothing_is_restarted(make_run):
    host = Host([view(age=312)])
    waiting = make_run(host, loop=EndsSessionAndRestarts, services=[APP, DB]).run()
    approval_id = {o["service"]: o for o in waiting.outcomes}["app"]["approval_id"]
    # a later look: the blocker older, more sessions queued behind it; the same failure
    later = Host([view(age=900, waiting=7)], verify=True)
    done = make_run(later, facts=waiting.facts, services=[APP, DB]).run(
        {"id": approval_id, "decision": "approve"}, approver="alice")
    assert {o["service"]: o for o in done.outcomes}["app"]["state"] == "healed", done.outcomes
    assert later.ran() == [TERMINATE]


def test_a_degraded_service_without_a_cause_in_its_dependencies_is_reported_and_nothing_planned(make_run):
    EndsSessionAndRestarts.seen = []
    host = Host([view(blocker=False)])
    done = make_run(host, loop=EndsSessionAndRestarts, services=[APP, DB]).run()

    outcome = {o["service"]: o for o in done.outcomes}["app"]
    assert outcome["state"] == "degraded", outcome
    assert outcome["reason"].startswith(f"degraded: {TIMEOUT}") and "not restarted" in outcome["reason"]
    assert EndsSessionAndRestarts.seen == [] and host.ran() == []
    assert not done.facts.get("sentinel_pending")


def test_a_degraded_service_without_dependencies_reads_nothing_more(make_run):
    host = Host([view()])
    app = dict(APP, depends_on=[])
    done = make_run(host, loop=EndsSessionAndRestarts, services=[app, DB]).run()
    assert {o["service"]: o["state"] for o in done.outcomes}["app"] == "degraded"
    assert not [n for n, _a in host.calls if n == "sentinel.remediation.evidence"]


class LiftsAndRestarts(AttemptLoop):
    """What a model could send for a service that serves reads while its writes wait: a targeted
    command, and a restart for good measure."""
    seen: list = []

    def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
        type(self).seen.append(evidence)
        return {"source": "llm", "diagnosis": "writes wait inside the service",
                "commands": [{"command": "ss -ltnp"}, {"command": "systemctl restart app"}]}


ANSWERED = {"type": "http", "ok": True, "detail": "GET http://127.0.0.1:8080/ping answered 200"}
WAITING = {"type": "command", "ok": False, "timed_out": True, "detail": "app-cli write probe: timed out after 10s"}


def test_a_degraded_service_that_answers_while_one_request_waits_is_planned_and_its_restart_refused(make_run):
    LiftsAndRestarts.seen = []
    host = Host([view(blocker=False)], checks=[ANSWERED, WAITING])
    app = dict(APP, depends_on=[])
    done = make_run(host, loop=LiftsAndRestarts, services=[app, DB]).run()

    outcome = {o["service"]: o for o in done.outcomes}["app"]
    assert outcome["state"] != "degraded" and "degraded" in outcome["safeguards"], outcome
    causes = dependency_cause.causes_in(LiftsAndRestarts.seen[0])
    assert causes and causes[0].startswith("cause in app: it answers (GET http://127.0.0.1:8080/ping answered 200)")
    attempt = done.incidents[0].attempts[0]
    assert [c.command for c in attempt.commands] == ["ss -ltnp"]
    refused = {r["command"]: r["reasons"][0] for r in attempt.refused}
    assert refused["systemctl restart app"].startswith("do no harm: app is degraded (slow, alive), not down")
    assert "systemctl restart app" not in host.ran()


def test_a_service_whose_asking_checks_all_wait_or_that_only_shows_a_process_is_not_planned_for(make_run):
    process_only = {"type": "process", "ok": True, "detail": "a process named app runs"}
    for checks in ([WAITING], [process_only, WAITING], [ANSWERED, dict(WAITING, timed_out=False)]):
        LiftsAndRestarts.seen = []
        host = Host([view(blocker=False)], checks=checks)
        done = make_run(host, loop=LiftsAndRestarts, services=[dict(APP, depends_on=[]), DB]).run()
        assert {o["service"]: o["state"] for o in done.outcomes}["app"] == "degraded", checks
        assert LiftsAndRestarts.seen == [] and host.ran() == []


def _degraded_evidence() -> dict:
    return {"init": "systemd", "service_pids": [300],
            "dependency_sessions": {"db": dependency_cause.render_sessions("db", view())},
            "degraded": dependency_cause.degraded_note("app", dependency_cause.session_causes("db", view()))}


def test_what_ends_the_service_or_its_stateful_database_is_refused_and_the_targeted_action_is_not():
    check = PlanCheck({}, {"app": APP, "db": DB})
    evidence = _degraded_evidence()
    scope = check.scope(APP, evidence)
    commands = ["systemctl restart app", "systemctl restart postgresql@15-main", "systemctl reload-or-restart app",
                "kill -9 300", "kill 4242", "pkill postgres", "systemctl stop postgresql@15-main", TERMINATE,
                "kill -HUP 300"]
    verdicts = {v["command"]: v for v in check.verdicts([{"command": c} for c in commands],
                                                        {"present": ["systemctl", "psql", "kill", "pkill"]}, scope)}
    for command in commands[:7]:
        assert verdicts[command]["verdict"] == "reject", command
        assert verdicts[command]["reasons"][0].startswith("do no harm: app is degraded"), command
    assert verdicts[TERMINATE]["verdict"] == "approval"  # the policy's word on ending a session: a human's yes
    # a session the view does not show now (a PID remembered from an earlier incident) is not ended
    stale = check.verdicts([{"command": "psql -c 'SELECT pg_terminate_backend(999)'"}], {"present": ["psql"]}, scope)[0]
    assert stale["verdict"] == "reject" and stale["reasons"][0].startswith(
        "do no harm: backend PID 999 is not a session the sessions view of this incident shows now")
    assert verdicts["kill -HUP 300"]["verdict"] != "reject"  # a reload signal ends nothing
    # the same commands in an incident that is not degraded are judged as before
    plain = check.scope(APP, {"init": "systemd", "service_pids": [300]})
    assert check.verdicts([{"command": "systemctl restart app"}], {"present": ["systemctl"]}, plain)[0]["verdict"] \
        == "allow"


def test_the_model_is_told_the_incident_is_degraded_and_why_its_restart_was_refused():
    check = PlanCheck({}, {"app": APP, "db": DB})
    evidence = _degraded_evidence()
    scope = check.scope(APP, evidence)
    tools = {"present": ["systemctl", "psql"]}
    replies = [{"content": plan_content("the app is slow", ["systemctl restart app"])},
               {"content": plan_content("a session holds the lock", [TERMINATE])}]
    with LLMServer(replies=replies) as server:
        settings = LLMSettings(base_url=server.url, api_key="k", model="m", timeout=10)
        planned = Planner(service="app", error=TIMEOUT, evidence=evidence, host_tools=tools, backend="llm",
                          llm_settings=settings, scope=scope, classify=check.classifier(tools, scope),
                          service_def=APP, runbook_dirs=[], docs_dirs=[]).run()
        asked = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert [c["command"] for c in planned["commands"]] == [TERMINATE]
    first = asked[0]["messages"][1]["content"]
    assert "This incident is DEGRADED, not down: app's checks time out" in first
    assert "REFUSED in this incident" in first and "db (units db, postgresql@15-main; processes postgres)" in first
    assert "BLOCKER PID 4242" in first  # the session view, inside the evidence
    reask = asked[1]["messages"][-1]["content"]
    assert "REFUSED `systemctl restart app`: do no harm: app is degraded" in reask


def test_two_looks_at_one_blocked_database_give_one_signature_and_another_cause_another(make_run):
    def signature(found):
        done = make_run(Host([found]), loop=EndsSessionAndRestarts, services=[APP, DB]).run()
        return done.incidents[0].signature

    full = dict(view(blocker=False), client_sessions=97)
    assert signature(view(age=40, waiting=2)) == signature(view(age=4000, waiting=9))
    assert signature(view()) != signature(full)


def test_a_full_pool_or_a_lock_timeout_in_a_dependencys_lines_is_a_cause_and_a_plain_timeout_is_not():
    evidence = {"dependency_evidence": {"db": "db's own lines on app's failure (newest last):\n"
                                              "[db.log] FATAL:  sorry, too many clients already (x40)"},
                "journal": "app[1]: query canceled: canceling statement due to lock timeout"}
    causes = dependency_cause.text_causes({"db": "db"}, evidence, TIMEOUT)
    assert [c.split(", as its lines say")[0] for c in causes] == [
        "cause in db: every connection slot is taken", "cause in db: sessions wait on a lock"]
    assert dependency_cause.text_causes({"db": "db"}, {"journal": "GET /health 200"}, TIMEOUT) == []


def test_where_a_degraded_service_waits_reaches_the_model_before_a_long_evidence_fills_the_budget():
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import prompt

    evidence = dict(_degraded_evidence(),
                    journal="\n".join(f"app[300]: GET http://127.0.0.1:8080/health took {i} s" for i in range(400)),
                    named_paths={f"/etc/app/conf.d/{i}.conf": "file, mode 0644, owner root:root" for i in range(60)},
                    logs={"/var/log/app.log": "\n".join(f"GET http://127.0.0.1:8080/ waiting {i}" for i in range(400))},
                    listeners="127.0.0.1:8080 held by app (pid 300)\n" * 30)
    shown = prompt.render_evidence(evidence, error=TIMEOUT, service="app")
    assert "### degraded\napp is degraded, not down" in shown
    assert "### dependency_sessions" in shown and "BLOCKER PID 4242" in shown
