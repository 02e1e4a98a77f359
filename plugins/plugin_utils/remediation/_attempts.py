# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attempt loop of one incident: plan, check, gate, execute, verify, remember, conclude.

Every decision is a function of ``incident.py`` (the gate, the plan's problems, the
conclusion) or of ``_checking.PlanCheck`` (the verdicts); this class moves data between
them, the planner, the stores and the host. Its seams (methods a change overrides or fills):
``plan_from_elsewhere`` (before planning), ``after_plan`` (a shared plan, before it is
checked here), ``before_execute`` (a reason not to run), ``after_execute``,
``before_next_attempt`` (after an attempt that did not heal, before the next).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature
from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy
from ansible_collections.sentinel.remediation.plugins.plugin_utils import client_hold
from ansible_collections.sentinel.remediation.plugins.plugin_utils import confinement
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal as journal_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import known_good_plan
from ansible_collections.sentinel.remediation.plugins.plugin_utils import canary as canary_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils.canary import Rollout
from ansible_collections.sentinel.remediation.plugins.plugin_utils import proven
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fleet import host_values, localize_values
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import share_key
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner
from ansible_collections.sentinel.remediation.plugins.plugin_utils import read_pids
from ansible_collections.sentinel.remediation.plugins.plugin_utils import shared_plan_check
from ansible_collections.sentinel.remediation.plugins.plugin_utils import undo as undo_mod

from . import vocabulary as words
from .context import HostPort, RunContext
from ._checking import PlanCheck
from ._dependencies import with_dependencies
from ._stores import NAME
from .contracts import Definition, Evidence, Plan

EXECUTE_MODULE = "sentinel.remediation.execute_plan"
# What the docker daemon answers when a container went away under the connection (a failed
# module run, not an unreachable host, for the community.docker.docker connection).
_HOST_GONE = re.compile(r"Error response from daemon: (?:[Cc]ontainer \S+ is (?:not running|paused|restarting)"
                        r"|No such container)")


def unreachable(result: Mapping) -> str | None:
    """Why a module run did not reach the host (the connection said so, or the container
    went away under it), or None when it did."""
    gone = _HOST_GONE.search(f"{result.get('msg', '')} {result.get('module_stderr', '')}")
    if gone:
        return gone.group(0)
    return str(result.get("msg", "")) if result.get("unreachable") else None


def host_command(checked: Mapping) -> dict:
    """A checked command as the host modules take it: its argv, whether it runs as root, the
    command as the policy judged it (for the record), and what the kernel is to hold it to
    (``confinement.derive``: the verdict's effects as a Landlock confinement)."""
    command = {"argv": list(checked.get("argv") or []), "become": bool(checked.get("become")),
               "label": str(checked.get("command"))[:200], "confine": confinement.derive(checked)}
    if checked.get("idle_pids"):  # a restart whose cost was waived: the host counts clients again first
        command["idle_pids"] = [int(p) for p in checked["idle_pids"]]
    return command


@dataclass
class Approved:
    """A plan a human approved, checked again now: what the loop runs as its next attempt."""
    commands: list
    record: Mapping
    by: str


@dataclass
class Planned:
    """One attempt's checked plan and what it was checked with."""
    checked: list
    checked_with: Mapping
    scope: Mapping | None = None
    rollout: str | None = None
    extra: dict = field(default_factory=dict)


class AttemptLoop:
    """The attempts of one incident on this host."""

    def __init__(self, ctx: RunContext, port: HostPort, check: PlanCheck):
        self.ctx = ctx
        self.port = port
        self.check = check
        self.unreachable = False  # the host stopped answering during this run
        self.approved_by = ""
        # What the host said of its kernel's Landlock (the health check's ``landlock_abi``).
        self.landlock_abi = (ctx.args.get("health") or {}).get("landlock_abi")
        # Set by the pass: what to do when a plan waits for a human (approvals.wait).
        self.wait_for_approval = None
        # service -> the host that made the plan it goes on with, when another did (for the approver)
        self.shared_from: dict = {}

    # ------------------------------------------------------------------ seams
    def plan_from_elsewhere(self, incident, attempt, definition: Definition, evidence: Evidence, tools) -> Plan | None:
        """Seam, before planning: a plan from another source (a known-good restore...) taken
        instead of the planner's, as a plan dict (``contracts.Plan``); None: plan as usual."""
        # The last known-good version of a drifted file the failure names, ahead of memory and
        # the model, once per incident; the journal and the warnings tell the human, with the diff.
        # A drift that holds the service is its owner's: marked in the evidence, never restored.
        known_good_plan.mark_holds(incident.current_error, evidence)
        # A drift going back would weaken (a key rotated, a tightening) is said to be a human's call.
        known_good_plan.mark_security(evidence)
        restore = known_good_plan.plan(
            incident.service, incident.current_error, evidence, definition,
            tried=not self.ctx.args.get("known_good", True)
            or any(a.source == known_good_plan.SOURCE for a in incident.attempts),
            privileged=self.check.privileged_groups(tools))
        if restore is not None:
            self.ctx.stores.journal.append(known_good_plan.journal_record(self.ctx.run, incident.service,
                                                                          attempt.number, restore))
            self.ctx.warn(f"{NAME}: {self.ctx.host}: {restore['msg']}:\n{restore['diagnosis']}")
        return restore

    def after_plan(self, incident, attempt, plan: Plan, how: str) -> Plan:
        """Seam, after the plan share answered (``how``: ``made`` here, ``shared`` by another
        host, ``alone``): the plan to go on with (a shared plan checked again, say)."""
        return plan

    def before_execute(self, incident, attempt, checked: list) -> str:
        """Seam, before the host is asked to run ``checked``: a reason not to run it (a
        fleet-wide stop, say), or "" to run it."""
        return ""

    def after_execute(self, incident, attempt, result: Mapping) -> None:
        """Seam, after the host ran an attempt's commands (``result``: execute_plan's)."""

    def before_next_attempt(self, incident, attempt, evidence: Mapping) -> None:
        """Seam, after an attempt that did not heal and before the next (undo what it changed)."""

    # ------------------------------------------------------------------ the loop
    def run(self, incident: engine.Incident, definition: Definition, evidence: Evidence, tools: Mapping,
            approved: Approved | None = None, ahead: Mapping | None = None) -> None:
        """The attempts of one incident. ``ahead``: a remembered fix that already ran in the
        health round trip (its plan and the host's record), taken as attempt 1; ``approved``:
        an approved plan, taken as the next attempt."""
        ctx, args = self.ctx, self.ctx.args
        if approved is not None:
            self.approved_by = approved.by
        while incident.state == words.OPEN:
            attempt = engine.Attempt(number=len(incident.attempts) + 1, started=ctx.now())
            attempt.signature = failure_signature(incident.service, incident.current_error, evidence, ctx.hostnames)
            incident.signature = incident.signature or attempt.signature
            if ahead is not None:
                planned = self._take_ahead(incident, attempt, ahead)
            elif approved is not None:
                planned = self._take_approved(attempt, approved)
                approved = None
            else:
                planned = self._take_planned(incident, attempt, definition, evidence, tools)
            checked = planned.checked
            attempt.commands = [engine.CommandRun(
                command=str(c.get("command")), verdict=str(c.get("verdict")), source=str(c.get("source") or ""),
                argv=c.get("argv"), become=bool(c.get("become")), reasons=list(c.get("reasons") or []),
                effects=[str(e) for e in c.get("effects") or []])
                for c in engine.runnable(checked)]
            attempt.gate = self._gate(attempt, checked, ahead is not None)
            incident.attempts.append(attempt)
            if attempt.gate == "escalate":
                attempt.finished = ctx.now()
                if not attempt.notes or not attempt.notes[0]:
                    attempt.notes = ["no safe command to run"]
                incident.state, incident.reason = "escalated", escalation_note(attempt)
                break
            if attempt.gate == "dry_run":
                incident.state = "dry_run"
                incident.reason = "check mode: would run " + "; ".join(
                    f"{c.command} [{c.verdict}]" for c in attempt.commands)
                break
            if attempt.gate == "approval":
                self.wait_for_approval(incident, attempt, checked, planned.scope, evidence, tools)
                break
            if ahead is not None:
                after = self._ran_ahead(incident, attempt, ahead["record"], evidence)
                ahead = None
            else:
                canary = self._canary(incident, attempt, planned.rollout)
                if incident.state != words.OPEN:
                    break
                stop = self.before_execute(incident, attempt, checked)
                if stop:
                    self._stopped(incident, attempt, stop)
                    break
                after = self._execute(incident, attempt, definition, checked, planned.checked_with)
                if canary is not None:
                    clients = client_hold.held(attempt)
                    canary.record(ctx.host, attempt.healthy and incident.state == words.OPEN,
                                  client_hold.reason(clients, "").rstrip("; ") if clients else attempt.error_after or incident.reason,
                                  held=bool(clients))
            if incident.state != words.OPEN:
                break
            held = client_hold.held(attempt)
            if held:  # a waived restart met clients on the host: the same plan waits for a human
                self.wait_for_approval(incident, attempt, checked, planned.scope, evidence, tools)
                if incident.state == "waiting_approval":
                    incident.reason = client_hold.reason(held, incident.reason)
                break
            if not ctx.check_mode:
                ctx.stores.memory.remember(incident, attempt, evidence, definition)
            # Read again after the attempt: its dependencies' part is added as the pass added it
            # (a degraded incident's too: where it waits).
            waits = bool(isinstance(evidence, Mapping) and evidence.get("degraded"))
            jobs = evidence.get("scheduled_jobs") if isinstance(evidence, Mapping) else None
            refreshed, evidence = after is not evidence, after
            incident.state = engine.conclude(incident, args["max_attempts"])
            if incident.state == "healed" and isinstance(jobs, Mapping) and jobs:
                # Healed now; what runs on a schedule against the service may break it again.
                note = (f"healed, but scheduled jobs act on {incident.service}: {', '.join(sorted(jobs))}; the "
                        "cause may come back when they run (flap detection holds the service if it does)")
                attempt.notes.append(note)
                incident.reason = "; ".join(r for r in (incident.reason, note) if r)
                ctx.warn(f"{NAME}: {ctx.host}: {note}")
            if incident.state == "escalated":
                incident.reason = engine.escalation_reason(incident)
            elif incident.state == words.OPEN:
                if definition.get("depends_on") and refreshed:
                    evidence = with_dependencies(ctx, self.port, incident.service, definition,
                                                 incident.current_error, evidence, {}, waits=waits)
                self.before_next_attempt(incident, attempt, evidence)
        incident.finished = ctx.now()

    def _gate(self, attempt, checked, ran_ahead: bool) -> str:
        args = self.ctx.args
        if ran_ahead:
            return "execute"  # it ran: only plans the policy allows outright are sent ahead
        if attempt.source == "approved":
            return "dry_run" if self.ctx.check_mode else "execute"
        gate = engine.gate(checked, auto_approve=args["auto_approve"], require_approval=args["require_approval"],
                           check_mode=self.ctx.check_mode)
        if gate == "execute" and not args["auto_approve"]:
            held, note = confinement.gate(engine.runnable(checked), args["confinement"], self.landlock_abi)
            if held:
                attempt.notes.insert(0, note)
                return held
        return gate

    # ------------------------------------------------------------------ where the plan comes from
    def _take_ahead(self, incident, attempt, ahead: Mapping) -> Planned:
        checked = list(ahead["commands"])
        attempt.source, attempt.recall, attempt.diagnosis = "memory", "exact", ahead["diagnosis"]
        attempt.notes = [f"Plan for {incident.service} from a remembered fix: {len(checked)} command(s) "
                         f"({len(checked)} allow), run with the health check: the host found the failure "
                         "it healed (the same signature)."]
        if ahead["record"].get("signature") != attempt.signature:
            self.ctx.warn(f"{NAME}: {self.ctx.host} computed the signature {ahead['record'].get('signature')} for "
                          f"{incident.service} and the controller {attempt.signature}; the remembered fix had run")
        return Planned(checked, {})

    @staticmethod
    def _take_approved(attempt, approved: Approved) -> Planned:
        attempt.source = "approved"
        attempt.diagnosis = str(approved.record.get("diagnosis") or "")
        # The PIDs the approver saw: a signal runs only if each is still that process.
        return Planned(list(approved.commands), {"processes": list(approved.record.get("processes") or [])})

    def _take_planned(self, incident, attempt, definition, evidence, tools) -> Planned:
        scope = self.check.scope(definition, evidence, incident)
        planned = self.plan_from_elsewhere(incident, attempt, definition, evidence, tools) \
            or self._plan(incident, attempt, definition, evidence, tools, scope)
        checked = self.check.check(planned.get("commands") or [], tools=tools, scope=scope, definition=definition,
                                   evidence=evidence, source=planned.get("source") or "unknown", autonomy=True)
        attempt.refused = list(planned.get("dropped") or []) + [c for c in checked if c["verdict"] == "reject"]
        attempt.source = planned.get("source") or "none"
        attempt.diagnosis = planned.get("diagnosis") or ""
        attempt.runbook = (planned.get("runbook") or {}).get("id", "") if planned.get("source") == "runbook" else ""
        attempt.llm = planned.get("llm_used") or {}
        attempt.notes = [planned.get("msg") or ""]
        attempt.recall = planned.get("recall") or ""
        if planned.get("recalled"):
            incident.recalled = list(planned["recalled"])
        problems = engine.plan_problems(incident, engine.runnable(checked))
        if problems:
            attempt.notes.insert(0, "not run: " + "; ".join(problems))
            checked = [dict(c, verdict="reject", reasons=list(c.get("reasons") or []) + problems) for c in checked]
        return Planned(checked, evidence, scope, planned.get("rollout_key"))

    def _plan(self, incident, attempt, definition: Definition, evidence: Evidence, tools, scope) -> Plan:
        """The planner's plan for this attempt, made once for every host with the same failure
        and the same knowledge (plan share), localized to this host when another made it."""
        ctx, args, memory = self.ctx, self.ctx.args, self.ctx.stores.memory
        error = incident.current_error
        successes, failed = memory.plans_for(attempt.signature)
        history = [(a.signature, list(a.key), [c.rc for c in a.commands], a.healthy) for a in incident.attempts]
        # What the planner is given besides the evidence: hosts (or controllers) whose memory
        # differs plan for themselves rather than reuse a plan made without what they know.
        known_plans = sorted({json.dumps(s.get("commands"), default=str) for s in successes})
        key = share_key(attempt.signature, history, args["backend"], sorted(failed), known_plans,
                        args["fallback_restart"])
        recalled = memory.similar(incident.service, attempt.signature, error, evidence, definition, failed)

        def make() -> dict:
            planner = Planner(
                service=incident.service, error=error, evidence=evidence, failed_commands=failed,
                successful_fixes=successes, host_tools=tools, policy=self.check.host_policy(tools),
                max_commands=args["max_commands"], backend=args["backend"], hostnames=ctx.hostnames,
                llm_settings=ctx.settings, incident=incident, scope=scope, knowledge=ctx.knowledge,
                service_def=definition, recalled=recalled, classify=self.check.classifier(tools, scope),
                fallback_restart=args["fallback_restart"])
            out = planner.run()
            out["host_values"] = host_values(evidence, incident.service, definition.get("ports") or [])
            out["planned_by"] = ctx.planner_id
            # what it was made for: a host that receives it checks it against its own evidence
            out["causes"] = shared_plan_check.causes(incident.service, error, evidence, ctx.hostnames)
            return out

        plan, how = ctx.stores.plans.per_signature(key, make)
        plan = dict(plan, rollout_key=key)
        plan["llm_used"] = plan.get("llm") if how != "shared" else {
            k: v for k, v in (plan.get("llm") or {}).items() if k not in ("calls", "prompt_tokens",
                                                                          "completion_tokens")}
        if how == "alone":
            plan["msg"] = (plan.get("msg") or "") + (" (planned alone: the host planning this failure did not share "
                                                     f"its plan within plan_wait={args['plan_wait']} s)")
        self.shared_from.pop(incident.service, None)
        if plan.get("planned_by") != ctx.planner_id:
            plan["commands"] = localize_values(plan.get("commands") or [], plan.get("host_values") or {},
                                               evidence, incident.service, definition.get("ports") or [])
            misfit = shared_plan_check.recheck(plan, service=incident.service, error=error, evidence=evidence,
                                               definition=definition, hostnames=ctx.hostnames)
            if misfit:  # the same signature, another fault: this host plans for itself
                shared_by = plan.get("planned_by")
                plan = dict(make(), rollout_key=None, msg="")
                plan["llm_used"] = plan.get("llm")
                plan["msg"] = (f"planned here: the plan {shared_by} made for this signature does not fit this "
                               f"host ({'; '.join(misfit)})")
                how = "made"
            else:
                self.shared_from[incident.service] = str(plan.get("planned_by") or "another host")
        return self.after_plan(incident, attempt, plan, how)

    # ------------------------------------------------------------------ running it
    def _canary(self, incident, attempt, key: str | None) -> Rollout | None:
        """Canary, then the fleet (canary.py): the rollout this host is a canary of (it records its
        verified outcome), or None. A later host waits for the canaries; when one did not heal, or
        none reported in time, the incident escalates here with that evidence and nothing runs."""
        ctx, args = self.ctx, self.ctx.args
        size = args["canary_size"]
        if not key or not size or ctx.check_mode:
            return None
        if self._proven(incident, attempt, key, size):
            return None
        # waves after the canary; across controllers through the plan share's Redis
        rollout, verdict, warning = canary_mod.rollout_verdict(
            ctx.host, ctx.stores.plans.signature_share(), ctx.stores.plans.run_share().dir, key, size,
            wait=args["max_commands"] * args["command_timeout"] + args["settle"] + 60,
            ttl=args["plan_share_ttl"], waves=args["canary_waves"])
        if warning:
            ctx.log(f"{NAME}: {warning}")
        # the journal says where in the rollout this host stood
        ctx.stores.journal.append({"kind": "rollout", "run": ctx.run, "service": incident.service, "key": key,
                                   "wave": verdict.wave + 1, "canary": verdict.canary, "action": verdict.action,
                                   "detail": verdict.detail})
        if verdict.canary:
            attempt.notes.append(f"canary: the first host{'s' if size > 1 else ''} to run this shared plan")
            return rollout
        if verdict.action == "go":
            attempt.notes.append(f"after the canary: {verdict.detail}")
            return rollout  # every host records its verified outcome for the waves after it
        attempt.finished = ctx.now()
        for command in attempt.commands:
            command.skipped, command.reason = True, f"not run: {verdict.detail}"
        incident.state, incident.reason = "escalated", f"rollout stopped: {verdict.detail}; this host ran nothing"
        return None

    def _proven(self, incident, attempt, key: str, size: int) -> bool:
        """A plan the fleet's memory shows healed this failure on at least ``size`` hosts, with
        the verdicts it has now (proven.py), runs without a canary; the journal and the
        attempt say so."""
        ctx = self.ctx
        plan = [{"command": c.command, "verdict": c.verdict} for c in attempt.commands]
        hosts = proven.proven_hosts(ctx.stores.memory.proven_index(), attempt.signature, plan)
        if len(hosts) < size:
            return False
        shown = ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")
        detail = f"no canary: this plan healed this failure on {len(hosts)} hosts before ({shown}), with the same verdicts"
        ctx.stores.journal.append({"kind": "rollout", "run": ctx.run, "service": incident.service, "key": key,
                                   "wave": 0, "canary": False, "action": "proven", "detail": detail})
        attempt.notes.append(detail)
        return True

    def _stopped(self, incident, attempt, reason: str) -> None:
        attempt.finished = self.ctx.now()
        for command in attempt.commands:
            command.skipped, command.reason = True, f"not run: {reason}"
        incident.state, incident.reason = "escalated", f"{reason}; this host ran nothing"

    def _approval_note(self, incident) -> dict:
        """What the journal's intent records of the approval: its id and who gave it."""
        by = self.approved_by
        return {"approval_id": incident.approval_id, "approved_by": by} if by and incident.approval_id else {}

    def _intent(self, incident, attempt, runnable) -> dict:
        return dict(journal_mod.intent(self.ctx.run, incident.service, attempt.number, runnable, incident.approval,
                                       attempt.source, attempt.signature, incident.current_error, attempt.diagnosis))

    def _execute(self, incident, attempt, definition, checked, evidence) -> dict:
        ctx, args, stores = self.ctx, self.ctx.args, self.ctx.stores
        runnable = engine.runnable(checked)
        processes = evidence.get("processes") if isinstance(evidence, Mapping) else None
        expect = {}
        for proc in processes or []:
            if isinstance(proc, Mapping) and proc.get("pid") is not None:
                expect[str(proc["pid"])] = {"start": proc.get("start"), "comm": proc.get("comm")}
        # PIDs this incident's reads showed: the host checks each is the service's before a signal
        expect.update(read_pids.expectations(runnable, expect, read_pids.seen_pids(incident),
                                             read_pids.seen_starts(incident)))
        commands = []
        for c in runnable:
            command = dict(host_command(c), pids=[int(p) for p in c.get("pids") or []],
                           approved=attempt.source == "approved" or incident.approval == "approved" or args["auto_approve"])
            # A database session is ended only while it is still the one the evidence showed.
            session = autonomy.session_check(c, evidence)
            if session:
                command["session_check"] = session
            commands.append(command)
        module_args = {
            "commands": commands,
            "confinement": args["confinement"],
            "expect_pids": expect,
            "stop_on_failure": True,
            "command_timeout": args["command_timeout"],
            "output_max": args["output_max"],
            "verify": definition,
            "settle": args["settle"],
            "evidence": True,
            # watched dependencies are judged by their own checks, as the health check does
            "depends": ctx.watched_dependencies(definition),
            "evidence_log_lines": args["evidence_log_lines"],
            "evidence_max_bytes": args["evidence_max_bytes"],
            # The host's own lock for the commands' life: outlives this controller if it dies.
            "holder": f"run {ctx.run} on {ctx.controller}, {incident.service} attempt {attempt.number}",
        }
        # The host keeps each declared path before its command and puts an unhealed attempt back.
        module_args = undo_mod.with_snapshots(module_args, runnable, incident.service, incident.started, attempt.number,
                                              args)
        try:
            stores.journal.write(dict(self._intent(incident, attempt, runnable), **self._approval_note(incident)))
        except journal_mod.JournalError as exc:
            # Nothing runs that is not recorded first.
            incident.state, incident.reason = "failed", f"not run: {exc}"
            for command in attempt.commands:
                command.skipped, command.reason = True, "not run: the journal could not record it"
            return evidence
        stores.lease.take()  # renew: a long incident keeps its host
        result = self.port.run_module(EXECUTE_MODULE, module_args)
        attempt.finished = ctx.now()
        verify = result.get("verify") or {}
        if not stores.lease.kept():
            # Another run took the host meanwhile (this controller was taken for dead): it
            # accounts for this attempt; a late result must not close the incident again.
            stores.lease.lost = True
            incident.state = "failed"
            incident.reason = (f"this run lost {ctx.host}'s lease while attempt {attempt.number} ran; its result "
                               "is not recorded (the run that holds the host now accounts for it)")
            return evidence
        stores.journal.append(journal_mod.result(ctx.run, incident.service, attempt.number, result.get("results") or [],
                                                 verify.get("healthy"), str(verify.get("error") or result.get("msg") or "")))
        after = self.results(incident, attempt, result, evidence)
        self.after_execute(incident, attempt, result)
        return after

    def _ran_ahead(self, incident, attempt, record: Mapping, evidence) -> dict:
        """A remembered fix that ran in the health round trip: journal its intent and result,
        as an attempt run through execute_plan, and read its results."""
        ctx = self.ctx
        runnable = [{"command": c.command, "argv": c.argv, "verdict": c.verdict, "become": c.become}
                    for c in attempt.commands]
        verify = record.get("verify") if isinstance(record.get("verify"), Mapping) else {}
        if ctx.stores.journal.append(self._intent(incident, attempt, runnable)):
            ctx.stores.journal.append(journal_mod.result(ctx.run, incident.service, attempt.number,
                                                         record.get("results") or [], verify.get("healthy"),
                                                         str(verify.get("error") or "")))
        attempt.finished = ctx.now()
        return self.results(incident, attempt, record, evidence)

    def results(self, incident, attempt, result: Mapping, evidence) -> dict:
        """The host's report of an attempt (execute_plan's, or a remembered fix's from the health
        check) into the attempt; returns the evidence to go on with."""
        gone = unreachable(result)
        if gone is not None:
            incident.state = "unreachable"
            incident.reason = (f"host unreachable while running attempt {attempt.number}: {gone}; the outcome "
                               "of its commands is unknown (the journal holds what was sent)")
            self.unreachable = True
            for command in attempt.commands:
                command.skipped, command.reason = True, "host unreachable: outcome unknown"
            return evidence
        if result.get("busy"):
            incident.state, incident.reason = "busy", f"attempt {attempt.number} not run: {result.get('msg')}"
            for command in attempt.commands:
                command.skipped, command.reason = True, "not run: the host was running another plan's commands"
            return evidence
        if result.get("failed") and not result.get("results"):
            incident.state = "failed"
            incident.reason = f"could not run attempt {attempt.number} on the host: {result.get('msg', '')}"
            for command in attempt.commands:
                command.skipped, command.reason = True, "not run: the host module failed"
            return evidence
        engine.record_results(attempt, result.get("results") or [], self.ctx.args["output_max"])
        verify = result.get("verify") if isinstance(result.get("verify"), Mapping) else {}
        attempt.healthy = bool(verify.get("healthy"))
        error = verify.get("error") or verify.get("msg") or "still failing"
        attempt.error_after = "" if attempt.healthy else str(error)
        # What the host kept and put back, into the attempt and the journal; a failed put-back escalates.
        attempt.undo, unrestored = undo_mod.absorb(result)
        if attempt.undo:
            self.ctx.stores.journal.append(undo_mod.journal_record(self.ctx.run, incident.service, attempt.number,
                                                                   attempt.undo))
        if unrestored:
            incident.state, incident.reason = "escalated", unrestored
            return evidence
        denied = engine.confinement_event(attempt)
        if denied and not attempt.healthy:
            # The kernel stopped what the policy did not declare: a policy event, never retried.
            incident.state, incident.reason = "escalated", denied
        new_evidence = result.get("evidence")
        return new_evidence if isinstance(new_evidence, Mapping) and new_evidence else evidence


def escalation_note(attempt: engine.Attempt) -> str:
    if attempt.source == "none":
        return "no safe command to run: " + (attempt.notes[0] if attempt.notes else "no plan")
    if not attempt.commands:
        return f"{attempt.source} says a human is needed: {attempt.diagnosis}".strip()
    return attempt.notes[0] if attempt.notes else "no safe command to run"
