# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Incidents of one host linked through their dependencies: a dependent waits on a failing
dependency, and a dependency its errors name joins its evidence (a fake host port)."""
from __future__ import annotations

import copy

from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation._attempts import AttemptLoop

DB = {"name": "db", "units": ["db"], "processes": ["postgres"], "ports": [5432], "checks": [{"type": "service"}]}
APP = {"name": "app", "units": ["app"], "processes": ["app"], "ports": [8080], "depends_on": ["db"],
       "checks": [{"type": "service"}]}
AUTH = 'GET /health answered 503: port 5432 failed: FATAL: password authentication failed for user "appuser"'
DB_LOG = ('2026-01-01 10:00:01 UTC [90] appuser@app FATAL:  password authentication failed for user "appuser"\n'
          '2026-01-01 10:00:02 UTC [81] LOG:  checkpoint complete')


class Host:
    """Per service: (healthy, error); ``verify``: what each execute_plan's check says."""

    def __init__(self, state: dict, verify=False):
        self.state = state
        self.verify = verify
        self.calls: list = []

    def run_module(self, name, args):
        self.calls.append((name, copy.deepcopy(dict(args))))
        if name == "sentinel.remediation.service_health":
            rows = []
            for d in args["services"]:
                healthy, error = self.state[d["name"]]
                row = {"name": d["name"], "healthy": healthy, "error": error, "checks": []}
                if not healthy:
                    row["evidence"] = {"init": "systemd", "journal": error}
                    blocked = [x for x in d.get("depends_on") or [] if not self.state[x][0]]
                    if blocked:
                        row["blocked_by"] = blocked
                rows.append(row)
            return {"services": rows, "healthy": all(r["healthy"] for r in rows), "tools": {"present": ["systemctl"]}}
        if name == "sentinel.remediation.evidence":
            return {"changed": False, "evidence": {"logs": {"/var/log/db.log": DB_LOG}}, "tools": {}}
        if name == "sentinel.remediation.execute_plan":
            return {"changed": True, "results": [{"rc": 0, "label": c["label"]} for c in args["commands"]],
                    "verify": {"healthy": self.verify, "error": "" if self.verify else "still down"}}
        raise AssertionError(name)

    def ran(self, service=None):
        return [c["label"] for n, a in self.calls if n == "sentinel.remediation.execute_plan"
                and (service is None or a["verify"]["name"] == service) for c in a["commands"]]


class Start(AttemptLoop):
    seen: dict = {}

    def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
        type(self).seen[incident.service] = evidence
        return {"source": "runbook", "commands": [{"command": f"systemctl start {incident.service}"}],
                "diagnosis": "down"}


def test_a_dependent_waits_on_a_dependency_that_did_not_heal_and_spends_no_attempt(make_run):
    host = Host({"db": (False, "db is not running"), "app": (False, "port 5432 failed: Connection refused")})
    done = make_run(host, loop=Start, services=[APP, DB], max_attempts=1).run()
    outcomes = {o["service"]: o for o in done.outcomes}
    assert outcomes["db"]["state"] == "escalated"
    assert outcomes["app"]["state"] == "waiting" and outcomes["app"]["waits_on"] == ["db"]
    assert "waits on db (escalated)" in outcomes["app"]["reason"]
    assert host.ran("app") == [] and host.ran("db") == ["systemctl start db"]


def test_a_dependency_whose_checks_pass_is_a_suspect_with_its_own_lines_in_the_evidence(make_run):
    Start.seen = {}
    host = Host({"db": (True, ""), "app": (False, AUTH)}, verify=True)
    done = make_run(host, loop=Start, services=[APP, DB]).run()
    assert {o["service"]: o["state"] for o in done.outcomes}["app"] == "healed"
    evidence = Start.seen["app"]
    assert evidence["dependencies"]["db"].endswith("SUSPECT all the same, app's errors name it (port 5432)")
    section = evidence["dependency_evidence"]["db"]
    assert section.startswith("db's own lines on app's failure")
    assert '[db.log] 2026-01-01 10:00:01 UTC [90] appuser@app FATAL:  password authentication failed' in section
    assert "checkpoint complete" not in section
    # the dependency's evidence was read on the host, read only
    asked = [a for n, a in host.calls if n == "sentinel.remediation.evidence"]
    assert len(asked) == 1 and asked[0]["service"] == "db" and "5432" in asked[0]["error"]


def test_a_dependent_whose_errors_do_not_name_its_dependency_reads_nothing_more(make_run):
    Start.seen = {}
    host = Host({"db": (True, ""), "app": (False, "cannot write in /var/lib/app: No space left on device")},
                verify=True)
    make_run(host, loop=Start, services=[APP, DB]).run()
    assert "dependency_evidence" not in Start.seen["app"]
    assert not [n for n, _a in host.calls if n == "sentinel.remediation.evidence"]


class Planned:
    """The planner as the loop calls it: a plan from the evidence it was given, counted."""
    made: list = []

    def __init__(self, **kwargs):
        self.evidence = kwargs["evidence"]
        self.service = kwargs["service"]

    def run(self):
        type(self).made.append(self.service)
        environment = self.evidence.get("environment") or {}
        if "/srv/stash" in environment:
            commands = ["mv /srv/stash /srv/data", "systemctl start nginx"]
        else:
            commands = ["systemctl start nginx"]
        return {"source": "llm", "commands": [{"command": c} for c in commands], "diagnosis": "data moved away"}


class NginxHost(Host):
    def __init__(self, environment):
        super().__init__({"nginx": (False, "nginx is not running")}, verify=True)
        self.environment = environment

    def run_module(self, name, args):
        result = super().run_module(name, args)
        if name == "sentinel.remediation.service_health":
            for row in result["services"]:
                row["evidence"] = {"init": "systemd", "processes": [], "environment": dict(self.environment)}
        return result


def test_a_shared_plan_acting_on_what_this_host_does_not_have_is_not_used_here(make_run, monkeypatch):
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import _attempts

    monkeypatch.setattr(_attempts, "Planner", Planned)
    Planned.made = []
    first = NginxHost({"/srv/stash": "DATA_DIR=/srv/stash"})
    done = make_run(first, name="web1", auto_approve=True).run()
    assert first.ran() == ["mv /srv/stash /srv/data", "systemctl start nginx"]
    second = NginxHost({"/etc/default/nginx": "DAEMON_OPTS="})
    other = make_run(second, name="web2", auto_approve=True).run()
    # one signature for both, yet the second host planned for itself and ran only its own plan
    assert other.incidents[0].signature == done.incidents[0].signature
    assert Planned.made == ["nginx", "nginx"]
    assert second.ran() == ["systemctl start nginx"]
    notes = " ".join(other.incidents[0].attempts[0].notes)
    assert "does not fit this host" in notes and "/srv/stash" in notes


def test_a_host_receiving_a_fitting_plan_does_not_plan_again_and_its_approver_sees_its_own_evidence(
        make_run, monkeypatch, tmp_path):
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import _attempts

    monkeypatch.setattr(_attempts, "Planner", Planned)
    Planned.made = []
    make_run(NginxHost({"/srv/stash": "x"}), name="web1").run()
    second = NginxHost({"/srv/stash": "y"})
    other = make_run(second, name="web2").run()
    assert Planned.made == ["nginx"] and second.ran() == []
    (outcome,) = other.outcomes
    assert outcome["state"] == "waiting_approval"
    pending = tmp_path / "state" / "pending"
    record = approval.parse(approval.read_pending(str(pending), outcome["approval_id"]), approval.controller_key(),
                            outcome["approval_id"])
    assert record["host"] == "web2" and record["planned_on"].startswith("web1 (")
    assert isinstance(record["host_diagnosis"], list)


class Healing(Host):
    """A host where running the database's plan brings the database back."""

    def run_module(self, name, args):
        if name == "sentinel.remediation.execute_plan" and args["verify"]["name"] == "db":
            self.state["db"] = (True, "")
        return super().run_module(name, args)


def test_a_dependency_healed_in_this_pass_is_read_afresh_for_its_dependant(make_run):
    Start.seen = {}
    host = Healing({"db": (False, "db is not running"), "app": (False, AUTH)}, verify=True)
    done = make_run(host, loop=Start, services=[APP, DB]).run()
    states = {o["service"]: o["state"] for o in done.outcomes}
    assert states["db"] == "healed" and states["app"] == "healed"
    # the app's incident read the database as it is now, not its evidence from before it healed
    asked = [a for n, a in host.calls if n == "sentinel.remediation.evidence"]
    assert len(asked) == 1 and asked[0]["service"] == "db"
    assert "[db.log]" in Start.seen["app"]["dependency_evidence"]["db"]


class ReadAgain(Host):
    """execute_plan reads the evidence again after an attempt that did not heal, with the
    dependencies' states as its own check reports them (no suspect note: the module does not
    know what the controller judged)."""

    def run_module(self, name, args):
        result = super().run_module(name, args)
        if name == "sentinel.remediation.execute_plan":
            result["verify"]["error"] = AUTH  # the same failure after the attempt
            result["evidence"] = {"init": "systemd", "journal": AUTH,
                                  "dependencies": {"db": "healthy: its own checks passed in this same check"},
                                  "dependency_up": {"db": True}}
        elif name == "sentinel.remediation.service_health":
            for row in result["services"]:
                if row["name"] == "app":
                    row["evidence"]["dependencies"] = {"db": "healthy: its own checks passed in this same check"}
        return result


class Remember(Start):
    evidences: list = []

    def plan_from_elsewhere(self, incident, attempt, definition, evidence, tools):
        type(self).evidences.append(evidence)
        return {"source": "runbook", "commands": [{"command": ("systemctl start app", "systemctl restart app")[attempt.number - 1]}],
                "diagnosis": "refused"}


def test_every_attempts_evidence_carries_the_dependency_part_so_the_signature_holds(make_run):
    """An approved plan made at a later attempt is refused at resume as "the failure changed"
    when that attempt signed evidence without the dependency part the resume's look adds
    (stop 32: the app's kill of a leaking job never ran after its approval)."""
    Remember.evidences = []
    host = ReadAgain({"db": (True, ""), "app": (False, AUTH)}, verify=False)
    done = make_run(host, loop=Remember, services=[APP, DB], max_attempts=2).run()
    incident = next(i for i in done.incidents if i.service == "app")
    assert [a.number for a in incident.attempts] == [1, 2], (incident.state, incident.reason)
    first, second = Remember.evidences
    for evidence in (first, second):
        assert "SUSPECT all the same" in evidence["dependencies"]["db"]
        assert "[db.log]" in evidence["dependency_evidence"]["db"]
    assert incident.attempts[1].signature == incident.attempts[0].signature


def test_a_dependency_reported_failing_after_an_attempt_is_not_called_a_suspect(make_run):
    """The host's verdict (``dependency_up``) decides, not the words of its sentence: a
    sentence in other words (a cut, another wording) changes nothing."""
    said = "the database could not be reached by its own check"

    class Failing(ReadAgain):
        up = False

        def run_module(self, name, args):
            result = super().run_module(name, args)
            if name == "sentinel.remediation.execute_plan":
                result["evidence"]["dependencies"] = {"db": said}
                result["evidence"]["dependency_up"] = {"db": self.up}
            return result
    Remember.evidences = []
    host = Failing({"db": (True, ""), "app": (False, AUTH)}, verify=False)
    make_run(host, loop=Remember, services=[APP, DB], max_attempts=2).run()
    assert Remember.evidences[1]["dependencies"]["db"] == said
    # the same sentence with the dependency reported up: a suspect all the same
    Remember.evidences = []
    Failing.up = True
    make_run(Failing({"db": (True, ""), "app": (False, AUTH)}, verify=False), loop=Remember, services=[APP, DB],
             max_attempts=2).run()
    assert Remember.evidences[1]["dependencies"]["db"].startswith(said + "; ")
    assert "SUSPECT all the same" in Remember.evidences[1]["dependencies"]["db"]
