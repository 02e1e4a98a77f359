# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every rule and gate of the attempt engine (plugins/plugin_utils/incident.py)."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.incident import Attempt, CommandRun, Incident


def run(command: str, rc: int | None, source: str = "runbook", **extra) -> CommandRun:
    return CommandRun(command=command, rc=rc, source=source, **extra)


def attempt(number: int, source: str, commands: list[CommandRun], healthy: bool | None,
            error_after: str = "still down", gate: str = "execute") -> Attempt:
    return Attempt(number=number, source=source, commands=commands, healthy=healthy,
                   error_after=error_after if healthy is False else "", gate=gate)


def incident(*attempts: Attempt) -> Incident:
    return Incident(host="web1", service="nginx", error="nginx is not running", attempts=list(attempts))


# ---------------------------------------------------------------- identity of commands and plans

@pytest.mark.parametrize("a, b", [
    ("service nginx start", "service  nginx   start"),
    ("sudo service nginx start", "service nginx start"),
    ("sudo -n service nginx start", "service nginx start"),
    ("kill 'TERM'", "kill TERM"),
    ({"argv": ["sudo", "service", "nginx", "start"]}, "service nginx start"),
    ({"command": "service nginx start"}, "service nginx start"),
])
def test_commands_compare_by_their_words(a, b):
    assert engine.command_key(a) == engine.command_key(b)


def test_a_plan_is_its_commands_in_order():
    assert engine.plan_key(["a x", "b"]) != engine.plan_key(["b", "a x"])
    assert engine.plan_key(["a  x", "sudo b"]) == engine.plan_key(["a x", "b"])


# ---------------------------------------------------------------- learning rules

def test_a_plan_that_ran_without_healing_never_runs_again():
    state = incident(attempt(1, "runbook", [run("rm -f /run/redis/redis-server.pid", 0),
                                            run("service redis-server start", 0)], healthy=False))
    problems = engine.plan_problems(state, ["rm -f /run/redis/redis-server.pid", "service redis-server start"])
    assert problems and "already ran in attempt 1" in problems[0]


def test_a_plan_that_healed_or_did_not_run_is_not_ineffective():
    healed = incident(attempt(1, "runbook", [run("service nginx start", 0)], healthy=True))
    assert engine.ineffective_plans(healed) == {}
    waiting = incident(attempt(1, "llm", [run("service nginx start", None)], healthy=None, gate="approval"))
    assert engine.ineffective_plans(waiting) == {}
    assert engine.plan_problems(waiting, ["service nginx start"]) == []


def test_a_failed_command_may_run_again_after_a_new_fix_before_it():
    # issue 11: `service nginx start` failed (missing /var/lib/nginx); the fix is to create
    # the directory, then start again in the same plan.
    state = incident(attempt(1, "llm", [run("service nginx start", 1)], healthy=False))
    assert engine.plan_problems(state, ["mkdir -p /var/lib/nginx", "service nginx start"]) == []


def test_a_failed_command_alone_or_first_is_refused():
    state = incident(attempt(1, "llm", [run("service nginx start", 1)], healthy=False))
    alone = engine.plan_problems(state, ["service nginx start"])
    assert any("nothing new runs before it" in p for p in alone)
    first = engine.plan_problems(state, ["service nginx start", "mkdir -p /var/lib/nginx"])
    assert any("nothing new runs before it" in p for p in first)


def test_a_command_that_already_ran_does_not_count_as_new():
    first = attempt(1, "llm", [run("mkdir -p /var/lib/nginx", 0), run("service nginx start", 1)], healthy=False)
    state = incident(first)
    problems = engine.plan_problems(state, ["mkdir -p /var/lib/nginx", "service nginx start", "nginx -t"])
    assert any("nothing new runs before it" in p for p in problems)


def checked(command: str) -> dict:
    """The policy's verdict for a command (its effects are what plans are compared by)."""
    return policy.classify(command, scope=policy.scope_from_service({"name": "nginx", "units": ["nginx.service"]}))


def ran_checked(command: str, rc: int) -> CommandRun:
    verdict = checked(command)
    return run(command, rc, argv=verdict["argv"], effects=verdict["effects"])


@pytest.mark.parametrize("again", [
    ["systemctl start nginx.service"],                    # the same change, spelled for systemd
    ["/usr/sbin/service nginx start"],                    # the same program by its path
    ["journalctl -u nginx -n 20", "service nginx start"],  # a read added in front changes nothing
    ["service nginx start", "ss -ltnp"],                  # ... nor one after it
])
def test_a_plan_that_changes_what_an_ineffective_plan_changed_does_not_run(again):
    state = incident(attempt(1, "runbook", [ran_checked("service nginx start", 0)], healthy=False))
    problems = engine.plan_problems(state, [checked(c) for c in again])
    assert any("changes what attempt 1's plan changed" in p or "already ran" in p for p in problems), problems


@pytest.mark.parametrize("different", [
    ["service nginx restart"],                              # restart is not start (a running but stuck daemon)
    ["mkdir -p /var/log/nginx", "service nginx start"],     # a new change before the start
    ["kill -CONT 4242"],
])
def test_a_plan_that_changes_something_else_may_run(different):
    state = incident(attempt(1, "runbook", [ran_checked("service nginx start", 0)], healthy=False))
    assert engine.plan_problems(state, [checked(c) for c in different]) == []


def test_a_read_before_a_failed_command_is_not_a_fix():
    state = incident(attempt(1, "llm", [ran_checked("service nginx start", 1)], healthy=False))
    problems = engine.plan_problems(state, [checked("tail -n 50 /var/log/nginx/error.log"),
                                            checked("systemctl start nginx")])
    assert any("nothing new runs before it" in p for p in problems), problems
    fixed = engine.plan_problems(state, [checked("mkdir -p /var/lib/nginx"), checked("systemctl start nginx")])
    assert fixed == []


def test_plans_without_known_effects_compare_by_their_words():
    assert engine.plan_change_key(["service nginx start"]) is None
    state = incident(attempt(1, "runbook", [run("service nginx start", 0)], healthy=False))
    assert engine.plan_problems(state, [checked("systemctl start nginx.service")]) == []
    assert engine.plan_problems(state, ["service nginx start"])


def test_effects_survive_the_incident_round_trip():
    state = incident(attempt(1, "runbook", [ran_checked("service nginx start", 0)], healthy=False))
    again = Incident.from_dict(state.to_dict())
    assert again.attempts[0].change_key == ("starts unit nginx.service",)


def test_a_spent_source_is_not_asked_again_but_the_model_is():
    state = incident(attempt(1, "memory", [run("service nginx start", 0, "memory")], healthy=False),
                     attempt(2, "runbook", [run("service nginx restart", 0)], healthy=False))
    assert engine.source_order("auto", True, state) == ["llm", "fallback"]
    state.attempts.append(attempt(3, "llm", [run("nginx -s reload", 0, "llm")], healthy=False))
    assert engine.source_order("auto", True, state) == ["llm", "fallback"]
    assert engine.source_order("auto", False, state) == ["fallback"]


def test_source_orders_per_backend():
    fresh = incident()
    assert engine.source_order("auto", True, fresh) == ["memory", "runbook", "llm", "fallback"]
    assert engine.source_order("llm", True, fresh) == ["memory", "llm", "runbook", "fallback"]
    assert engine.source_order("runbook", True, fresh) == ["memory", "runbook", "fallback"]
    assert engine.source_order("memory", True, fresh) == ["memory"]
    with pytest.raises(engine.IncidentError):
        engine.source_order("magic", True, fresh)


# ---------------------------------------------------------------- the gate

def v(verdict: str, command: str = "x") -> dict:
    return {"command": command, "verdict": verdict}


@pytest.mark.parametrize("verdicts, kwargs, expected", [
    (["allow"], {}, "execute"),
    (["allow", "approval"], {}, "approval"),
    (["allow", "approval"], {"auto_approve": True}, "execute"),
    (["allow"], {"require_approval": True}, "approval"),
    (["reject"], {}, "escalate"),
    ([], {}, "escalate"),
    (["reject", "allow"], {}, "execute"),
    (["allow"], {"check_mode": True}, "dry_run"),
    (["reject"], {"check_mode": True}, "escalate"),
])
def test_gate(verdicts, kwargs, expected):
    assert engine.gate([v(x) for x in verdicts], **kwargs) == expected


def test_refused_commands_never_run():
    assert [c["verdict"] for c in engine.runnable([v("reject"), v("allow"), v("approval")])] == ["allow", "approval"]


# ---------------------------------------------------------------- after an attempt

def test_conclude():
    assert engine.conclude(incident(), 3) == "open"
    assert engine.conclude(incident(attempt(1, "llm", [run("a", 0)], healthy=True)), 3) == "healed"
    assert engine.conclude(incident(attempt(1, "llm", [run("a", 0)], healthy=False)), 3) == "open"
    two = incident(attempt(1, "llm", [run("a", 0)], healthy=False), attempt(2, "llm", [run("b", 0)], healthy=False))
    assert engine.conclude(two, 2) == "escalated"
    assert "still failing after 2 attempt(s): still down" == engine.escalation_reason(two)
    with pytest.raises(engine.IncidentError):
        engine.conclude(two, 0)


def test_results_fill_the_commands_and_unreached_ones_are_marked():
    a = Attempt(number=1, commands=[CommandRun("rm -f /run/x.pid"), CommandRun("service x start"),
                                    CommandRun("x --check")])
    engine.record_results(a, [{"rc": 0, "stdout": "", "stderr": ""},
                              {"rc": 1, "stdout": "", "stderr": "x" * 5000 + "Address already in use"}], 100)
    assert [c.rc for c in a.commands] == [0, 1, None]
    assert a.commands[1].stderr.endswith("Address already in use") and len(a.commands[1].stderr) == 100
    assert a.commands[2].skipped and "earlier command" in a.commands[2].reason


def test_history_shows_what_each_attempt_did():
    commands = [run("kill 310", 0), run("service nginx start", 1, stderr="bind() to 0.0.0.0:80 failed")]
    state = incident(attempt(1, "runbook", commands, healthy=False, error_after="port 80 held by python3"))
    state.attempts[0].refused = [{"command": "iptables -F", "reasons": ["firewall changes are refused"]}]
    (seen,) = engine.history(state)
    assert seen["commands"][0] == {"command": "kill 310", "source": "runbook", "rc": 0}
    assert seen["commands"][1]["rc"] == 1 and "bind()" in seen["commands"][1]["output"]
    assert seen["healthy_after"] is False and seen["error_after"] == "port 80 held by python3"
    assert seen["refused"][0]["command"] == "iptables -F"


def test_the_model_is_told_what_the_engine_put_back_after_an_attempt_that_did_not_heal():
    """An edit that did not heal is undone before the next attempt: the history says so, with the
    paths, so the model does not plan on top of a change that is no longer there. A change kept
    (the attempt healed, or nothing was put back) says nothing of the kind."""
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import render_history

    edit = run("sed -i 's/^listen 8o/listen 80/' /etc/nginx/sites-enabled/default", 0, source="llm")
    undone = attempt(1, "llm", [edit], healthy=False, error_after="nginx: [emerg] invalid port")
    undone.undo = {"incident": "i1", "rolled_back": True, "restored": ["/etc/nginx/sites-enabled/default"],
                   "changed": [{"path": "/etc/nginx/sites-enabled/default"}]}
    kept = attempt(2, "llm", [run("service nginx start", 0, source="llm")], healthy=False)
    kept.undo = {"incident": "i1", "rolled_back": False, "restored": ["/etc/nginx/nginx.conf"]}
    seen = engine.history(incident(undone, kept))
    assert seen[0]["put_back"] == ["/etc/nginx/sites-enabled/default"] and seen[1]["put_back"] == []
    text = render_history(seen)
    first, second = text.split("Attempt 2")
    assert "PUT BACK what it changed, as it was before this attempt: /etc/nginx/sites-enabled/default" in first
    assert "PUT BACK" not in second


def test_episode_and_outcome():
    state = incident(attempt(1, "runbook", [run("service nginx start", 1)], healthy=False),
                     attempt(2, "llm", [run("mkdir -p /var/lib/nginx", 0, "llm"),
                                        run("service nginx start", 0, "llm")], healthy=True))
    state.signature, state.state = "nginx:abc", "healed"
    state.attempts[1].llm = {"used": True, "calls": 1, "prompt_tokens": 900, "completion_tokens": 40}
    ep = engine.episode(state, state.attempts[1], ["missing /var/lib/nginx"])
    assert ep["success"] and ep["attempts"] == 2 and ep["facts"] == ["missing /var/lib/nginx"]
    assert [c["command"] for c in ep["commands"]] == ["mkdir -p /var/lib/nginx", "service nginx start"]
    out = engine.outcome(state)
    assert out["state"] == "healed" and out["attempts"] == 2 and out["sources"] == ["runbook", "llm"]
    assert out["llm"] == {"calls": 1, "prompt_tokens": 900, "completion_tokens": 40}
    assert [t["healthy"] for t in out["timeline"]] == [False, True]


def test_state_round_trips_through_a_dict():
    state = incident(attempt(1, "llm", [run("service nginx start", 1, stderr="no")], healthy=False))
    again = Incident.from_dict(state.to_dict())
    assert again == state
    with pytest.raises(engine.IncidentError):
        Incident.from_dict({"service": "nginx"})


def test_the_outcome_names_the_kind_and_the_message_of_an_llm_failure():
    incident = Incident(host="h", service="nginx", error="down")
    incident.attempts.append(Attempt(number=1, source="runbook", llm={
        "used": True, "error": "deadline", "error_message": "no complete answer within the 12 s LLM deadline"}))
    assert engine.outcome(incident)["llm_error"] == "deadline: no complete answer within the 12 s LLM deadline"
    incident.attempts[0].llm = {"used": True, "error": "timeout", "error_message": None}
    assert engine.outcome(incident)["llm_error"] == "timeout"


def test_a_start_limited_unit_is_reset_before_the_plan_starts_it() -> None:
    evidence = {"unit": {"Id": "redis-server.service", "ActiveState": "failed", "Result": "start-limit-hit"}}
    unit = engine.start_limited_unit(evidence)
    assert unit == "redis-server.service"
    assert engine.start_limited_unit({"unit": {"Id": "x.service", "Result": "exit-code"}}) == ""
    assert engine.start_limited_unit({"status": "sysv"}) == ""
    # Failed after automatic restarts: those count against the start limit too.
    assert engine.start_limited_unit({"unit": {"Id": "redis-server.service", "Result": "exit-code",
                                               "ActiveState": "failed", "NRestarts": "4"}}) == "redis-server.service"
    assert engine.start_limited_unit({"unit": {"Id": "x.service", "Result": "exit-code", "ActiveState": "failed",
                                               "NRestarts": "0"}}) == ""
    scope = policy.scope_from_service({"name": "redis-server", "units": ["redis-server.service"],
                                       "data_paths": ["/var/lib/redis"], "user": "redis"}, [], {})
    plan = policy.classify_many(["chmod 750 /var/lib/redis", "service redis-server start"], None, scope=scope)
    assert engine.reset_before_start(plan, unit) == 1       # before the start, after the fix
    restart = policy.classify_many(["systemctl restart redis-server"], None, scope=scope)
    assert engine.reset_before_start(restart, unit) == 0
    cleared = policy.classify_many(["systemctl reset-failed redis-server", "systemctl start redis-server"], None,
                                   scope=scope)
    assert engine.reset_before_start(cleared, unit) is None  # the plan already clears it
    other = policy.classify_many(["service cron start"], None, scope=scope)
    assert engine.reset_before_start(other, unit) is None    # another unit's start
    assert engine.reset_before_start(plan, "") is None


def test_the_history_shows_more_of_what_a_diagnostic_read_printed():
    listing = "\n".join(f"{pid} /usr/bin/python3 /usr/local/sbin/nightly-report" for pid in range(4000, 4012))
    read = ran_checked("ps -o pid,args -C nightly-report", 0)
    read.stdout = listing
    change = ran_checked("service nginx start", 1)
    change.stderr = "x" * 2000
    state = incident(attempt(1, "llm", [read, change], healthy=False))
    shown = engine.history(state)[0]["commands"]
    assert shown[0]["output"] == listing[-engine.OUTPUT_TAIL:] or shown[0]["output"].endswith(listing[-200:])
    assert len(shown[0]["output"]) > engine.HISTORY_TAIL
    assert len(shown[1]["output"]) <= engine.HISTORY_TAIL


def test_the_model_sees_a_diagnostic_read_line_by_line():
    """A read the model asked for comes back with its lines, up to a bound, the middle line too."""
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import READ_OUTPUT, render_history

    defaults = "\n".join([f"# comment line {n} of the packaged defaults file" for n in range(8)]
                         + ['EXTRA_OPTS="-m off"'] + [f"# trailing note {n}" for n in range(4)])
    read = ran_checked("cat /etc/default/cron", 0)
    read.stdout = defaults
    state = incident(attempt(1, "llm", [read], healthy=False))
    text = render_history(engine.history(state))
    assert '    | EXTRA_OPTS="-m off"' in text and "(read-only)" in text
    assert text.count("    | ") == len(defaults.splitlines())
    long_read = ran_checked("systemctl cat cron.service", 0)
    long_read.stdout = "\n".join(f"Line{n}=" + "v" * 60 for n in range(60))
    shown = render_history(engine.history(incident(attempt(1, "llm", [long_read], healthy=False))))
    # whole lines from both ends, the gap saying what it holds
    assert "Line0=" in shown and "Line59=" in shown and "    | [... " in shown and " chars cut ...]" in shown
    assert all(row.endswith("v" * 60) for row in shown.splitlines() if row.startswith("    | Line"))
    assert len(shown) < READ_OUTPUT + 600
