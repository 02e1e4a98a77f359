# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attempt loop through a fake host: what the host is asked to run, and what the pass says."""
from __future__ import annotations

import json

from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import vocabulary
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation._attempts import AttemptLoop

from .conftest import FakeHost


class ScriptedPlans(AttemptLoop):
    """A loop whose plans come from a script, through the 'before planning' seam."""
    plans = [["systemctl start nginx"]]
    between: list = []

    def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
        commands = self.plans[min(attempt.number, len(self.plans)) - 1]
        return {"source": "runbook", "commands": [{"command": c} for c in commands], "diagnosis": "stopped"}

    def before_next_attempt(self, incident, attempt, evidence):
        type(self).between.append(attempt.number)


def journal(tmp_path, host="web1"):
    path = tmp_path / "state" / "journal" / f"{host}.jsonl"
    out = []
    for line in path.read_bytes().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn line
    return out


def test_a_stopped_service_is_started_healed_journaled_and_remembered(make_run, tmp_path):
    host = FakeHost(verify=(True,))
    done = make_run(host, loop=ScriptedPlans).run()
    assert [o["state"] for o in done.outcomes] == ["healed"]
    assert host.ran() == ["systemctl start nginx"]
    kinds = [r["kind"] for r in journal(tmp_path)]
    assert kinds.index("intent") < kinds.index("result") < kinds.index("closed")
    assert done.facts["sentinel_memory"][-1]["commands"][0]["command"] == "systemctl start nginx"
    assert done.health["services"][0]["name"] == "nginx"


def test_an_attempt_that_did_not_heal_is_followed_by_a_different_plan(make_run):
    ScriptedPlans.between = []
    host = FakeHost(verify=(False, True))
    loop = type("TwoPlans", (ScriptedPlans,), {"plans": [["systemctl start nginx"], ["systemctl restart nginx"]]})
    done = make_run(host, loop=loop, max_attempts=3).run()
    assert done.outcomes[0]["state"] == "healed"
    assert host.ran() == ["systemctl start nginx", "systemctl restart nginx"]
    assert ScriptedPlans.between == [1]  # the seam after an attempt that did not heal, before the next
    assert [a.number for a in done.incidents[0].attempts] == [1, 2]


def test_a_service_still_failing_after_the_last_attempt_is_escalated(make_run):
    host = FakeHost(verify=(False,))
    done = make_run(host, loop=ScriptedPlans, max_attempts=1).run()
    assert done.outcomes[0]["state"] == "escalated"
    assert "still failing after 1 attempt" in done.outcomes[0]["reason"]
    assert len(host.ran()) == 1


def test_a_plan_the_policy_refuses_runs_nothing_and_escalates(make_run):
    host = FakeHost()
    loop = type("Refused", (ScriptedPlans,), {"plans": [["rm -rf /etc"]]})
    done = make_run(host, loop=loop).run()
    assert done.outcomes[0]["state"] == "escalated"
    assert host.ran() == []


def test_check_mode_says_what_would_run_and_runs_nothing(make_run, tmp_path):
    host = FakeHost()
    done = make_run(host, loop=ScriptedPlans, check_mode=True).run()
    assert done.outcomes[0]["state"] == "dry_run"
    assert "systemctl start nginx" in done.outcomes[0]["reason"]
    assert host.ran() == [] and journal(tmp_path) == [] and done.facts == {}


def test_a_healthy_service_opens_no_incident_and_calls_the_healthy_seam(make_run):
    seen = []
    host = FakeHost(healthy=True)
    service = make_run(host)
    service.after_healthy = lambda name, row, outcome: seen.append((name, outcome["state"]))
    done = service.run()
    assert done.incidents == [] and seen == [("nginx", "healthy")]
    assert [call[0] for call in host.calls] == ["sentinel.remediation.service_health"]


def test_an_unreachable_host_at_the_health_check_is_reported_and_nothing_runs(make_run):
    host = FakeHost(unreachable=True)
    done = make_run(host).run()
    assert done.unreachable and "unreachable" in done.unreachable["msg"]
    assert done.outcomes == [] and host.ran() == []


def test_the_runbook_backend_plans_a_start_for_a_stopped_service(make_run):
    host = FakeHost(verify=(True,))
    done = make_run(host).run()
    outcome = done.outcomes[0]
    assert outcome["state"] == "healed", outcome
    assert host.ran() and "nginx" in host.ran()[0]


def test_the_planners_plan_is_judged_by_the_policy_once_per_command(make_run, monkeypatch):
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as policy_mod
    judged: list[str] = []
    real = policy_mod.classify_many

    def counting(commands, *args, **kwargs):
        judged.extend(commands)
        return real(commands, *args, **kwargs)
    monkeypatch.setattr(policy_mod, "classify_many", counting)
    host = FakeHost(verify=(True,))
    done = make_run(host).run()
    assert done.outcomes[0]["state"] == "healed"
    ran = host.ran()
    assert ran and all(judged.count(command) == 1 for command in ran), judged


def test_every_state_the_loop_reports_is_a_word_of_the_vocabulary(make_run):
    for verify in ((True,), (False,)):
        done = make_run(FakeHost(verify=verify), loop=ScriptedPlans, max_attempts=1).run()
        assert {o["state"] for o in done.outcomes} <= set(vocabulary.STATES)


def test_the_lease_is_released_after_the_pass(make_run, tmp_path):
    assert make_run(FakeHost(), loop=ScriptedPlans).run().outcomes[0]["state"] == "healed"
    # another run (another owner) takes the host at once: the first one let it go
    assert make_run(FakeHost(), loop=ScriptedPlans).run().outcomes[0]["state"] == "healed"


def test_a_reason_given_before_execute_stops_the_incident_and_the_host_runs_nothing(make_run):
    loop = type("Stopped", (ScriptedPlans,), {"before_execute": lambda self, incident, attempt, checked:
                                              "the fleet is stopped by an operator"})
    host = FakeHost()
    done = make_run(host, loop=loop).run()
    assert done.outcomes[0]["state"] == "escalated"
    assert "the fleet is stopped" in done.outcomes[0]["reason"] and host.ran() == []


def test_the_after_execute_seam_sees_the_hosts_report_of_each_attempt(make_run):
    seen = []
    loop = type("Seen", (ScriptedPlans,), {"after_execute": lambda self, incident, attempt, result:
                                           seen.append((attempt.number, result["verify"]["healthy"]))})
    make_run(FakeHost(verify=(True,)), loop=loop).run()
    assert seen == [(1, True)]


class ReadsProcesses(FakeHost):
    """A host whose `pgrep -a nginx` prints a worker the first evidence did not list."""

    def run_module(self, name, args):
        answer = super().run_module(name, args)
        if name == "sentinel.remediation.execute_plan":
            for result in answer["results"]:
                if result["label"].startswith("pgrep"):
                    result["stdout"] = "4242 nginx: master process /usr/sbin/nginx\n5151 nginx: worker process\n"
        return answer


def test_a_pid_the_incidents_own_read_showed_is_signalled_with_the_hosts_check(make_run):
    host = ReadsProcesses(verify=(False, True))
    loop = type("ReadThenSignal", (ScriptedPlans,), {"plans": [["pgrep -a nginx"], ["kill 5151"]]})
    done = make_run(host, loop=loop, max_attempts=3).run()
    assert done.outcomes[0]["state"] == "healed"
    assert host.ran() == ["pgrep -a nginx", "kill 5151"]
    sent = [args for name, args in host.calls if name == "sentinel.remediation.execute_plan"][-1]
    assert sent["commands"][0]["pids"] == [5151]
    # no start time from text: the host is told to check the process is nginx's before the signal
    assert sent["expect_pids"]["5151"] == {"seen": True, "start": None}
    assert "4242" not in sent["expect_pids"]  # only the PIDs the plan signals


def test_a_pid_no_read_showed_still_needs_a_human(make_run):
    host = ReadsProcesses(verify=(False, True))
    loop = type("SignalUnseen", (ScriptedPlans,), {"plans": [["pgrep -a nginx"], ["kill 6161"]]})
    done = make_run(host, loop=loop, max_attempts=3).run()
    assert done.outcomes[0]["state"] == "waiting_approval"
    assert host.ran() == ["pgrep -a nginx"]
