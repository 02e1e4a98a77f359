# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One pass of remediation over one host's watched services.

``open_run`` builds the run's context (its stores opened); ``Remediation(ctx, port).run()``
checks the host's health (remembered fixes ahead), heals what fails, dependencies first,
or resumes one plan a human approved, and returns a ``RunResult``. Seams for changes:
``AttemptLoop.plan_from_elsewhere`` (before planning), ``AttemptLoop.after_plan``,
``AttemptLoop.before_execute``, ``AttemptLoop.after_execute``, ``AttemptLoop.before_next_attempt``
(after an attempt that did not heal), ``Remediation.after_healthy``, ``Remediation.after_incident``;
a change subclasses ``AttemptLoop`` and passes it: ``Remediation(ctx, port, loop=TheLoop)``.
"""
from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal as journal_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import fleet_stop
from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory as memory_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import safeguards
from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import Lease, process_start
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import run_token

from . import _split as split
from . import vocabulary as words
from .context import CacheSettings, HostPort, RemediationError, RunContext
from ._ahead import AheadFixes
from ._approvals import Approvals
from ._attempts import AttemptLoop, unreachable
from ._checking import PlanCheck
from ._degraded import degraded_cause
from ._dependencies import waiting_on, with_dependencies
from ..dependency_evidence import waiting_reason
from .contracts import Definition, HealthRow, Outcome
from ._stores import (
    JournalStore,
    LeaseBusy,
    LeaseStore,
    MemoryStore,
    PendingPlans,
    PlanStores,
    Stores,
)

HEALTH_MODULE = "sentinel.remediation.service_health"

__all__ = ["CacheSettings", "HostPort", "Remediation", "RemediationError", "RunContext", "RunResult", "open_run"]


def lease_dir(configured: str | None) -> str:
    """One lease directory per controller user, unless set: runs with different artifacts
    directories (the playbook's, the driver's) must still see each other's leases."""
    if configured:
        return configured
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "sentinel-remediation", "leases")


def _run_process() -> tuple[int, str] | None:
    """The ansible-playbook process this worker belongs to (pid, start ticks), the lease's owner."""
    parent = os.getppid()
    start = process_start(parent)
    return (parent, start) if start else None


def _fleet_memories(task_vars: Mapping, host: str, memory_max: int) -> Callable[[], list]:
    """The other inventory hosts' memories, read when the run's index is first built."""
    def read() -> list:
        hostvars = task_vars.get("hostvars") or {}
        memories = []
        for other in (task_vars.get("groups") or {}).get("all") or []:
            if other == host:
                continue
            try:
                facts = hostvars[other].get("ansible_facts") or {}
            except Exception:  # a host whose variables cannot be read has no usable memory
                continue
            episodes = facts.get("sentinel_memory") or []
            # An oversized entry must not cost the run: only its newest episodes count.
            # Only what was written for that host (memory.in_scope) speaks for it.
            memories.append(memory_mod.host_memory(episodes[-4 * memory_max:], other) if isinstance(episodes, list) else [])
        return memories
    return read


def open_run(args: Mapping[str, Any], *, host: str, hostnames, target: str, check_mode: bool,
             definitions: Mapping[str, Mapping], task_vars: Mapping, cache: CacheSettings, settings=None,
             knowledge=None, log: Callable[[str], None] = print, clock=None, controller: str | None = None,
             run: str | None = None) -> RunContext:
    """The run's context with its stores opened (memory from the host's facts, the journal,
    the lease, the plan share, the pending plans). Touches no host."""
    run = run or run_token()
    controller = controller or socket.gethostname()
    warnings: list = []

    def warn(message: str) -> None:
        if message not in warnings:
            warnings.append(message)

    facts = task_vars.get("ansible_facts") or {}
    plans = PlanStores(args["artifacts_dir"], wait=args["plan_wait"], ttl=args["plan_share_ttl"],
                       # A planning step ends within the LLM deadline; a claim outliving it is an owner gone.
                       claim_ttl=float(getattr(settings, "deadline", 120.0) or 120.0) + 30, cache=cache, warn=warn)
    memory = MemoryStore.from_fact(facts.get("sentinel_memory"), memory_max=args["memory_max"], warn=warn, host=host,
                                   hostnames=hostnames, plans=plans,
                                   fleet=_fleet_memories(task_vars, host, args["memory_max"]))
    journal = JournalStore(journal_mod.Journal(os.path.join(args["artifacts_dir"], "journal"), host), run, host, log)
    file_lease = Lease(lease_dir(args["lease_dir"]), target, owner=f"{run}@{controller} ({host})",
                       ttl=args["max_attempts"] * (args["plan_wait"] + args["command_timeout"] * 3 + 60),
                       process=_run_process())
    lease = LeaseStore.open(file_lease, cache, check_mode=check_mode, host=host, warn=warn)
    stores = Stores(memory, journal, lease, plans, PendingPlans(facts.get("sentinel_pending")))
    extra = {"clock": clock} if clock is not None else {}
    return RunContext(args=args, host=host, hostnames=tuple(hostnames), target=target, check_mode=check_mode,
                      definitions=definitions, run=run, controller=controller, stores=stores, settings=settings,
                      knowledge=knowledge, task_vars=task_vars, warnings=warnings, log=log, **extra)


def dependencies_first(definitions: Mapping[str, Mapping], rows: Mapping[str, Mapping]) -> list[str]:
    """The services in their given order, except that a failing service comes after the failing
    services it depends on (``blocked_by`` of the health check): the database before the app."""
    ordered: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in ordered or name in visiting or name not in definitions:
            return
        visiting.add(name)
        for dep in (rows.get(name) or {}).get("blocked_by") or ():
            visit(str(dep))
        visiting.discard(name)
        ordered.append(name)

    for name in definitions:
        visit(name)
    return ordered


@dataclass
class RunResult:
    """What a pass gives the action: the incidents and outcomes, the health it checked (when
    it did), the facts to write back; ``unreachable``: the health check did not reach the host."""
    incidents: list = field(default_factory=list)
    outcomes: list = field(default_factory=list)
    health: dict | None = None
    unreachable: dict | None = None
    facts: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


class Remediation:
    """One pass over one host's watched services."""

    def __init__(self, ctx: RunContext, port: HostPort, loop: type[AttemptLoop] = AttemptLoop):
        self.ctx = ctx
        self.port = port
        args = ctx.args
        self.limits = safeguards.Limits(args["action_budget"], args["action_budget_window"], args["flap_count"],
                                        args["flap_window"])
        self.check = PlanCheck(args["policy"], ctx.definitions, undoable=bool(args.get("undo_unhealed", True)))
        self.loop = loop(ctx, port, self.check)  # a subclass fills the loop's seams
        self.ahead = AheadFixes(ctx, self.check, lambda name: self._hold(name) is not None)
        self.approvals = Approvals(ctx, self.loop, self.check, self._look, self.close)
        self.loop.wait_for_approval = self.approvals.wait
        self.rows: dict = {}  # this pass's health rows: a dependent reads its dependencies' there

    # ------------------------------------------------------------------ seams
    def after_healthy(self, name: str, row: HealthRow, outcome: Outcome) -> None:
        """Seam: a service the health check found healthy (``outcome`` may still be changed)."""

    def after_incident(self, incident: engine.Incident, outcome: Outcome) -> None:
        """Seam: an incident of this pass ended (``outcome`` may still be changed)."""

    # ------------------------------------------------------------------ the pass
    def run(self, resume: Mapping | None = None, approver: str = "") -> RunResult:
        """Heal this host (or resume one approved plan); the lease is released on the way out."""
        ctx, stores = self.ctx, self.ctx.stores
        health_only = ctx.args["phase"] == "health"  # the fleet's count comes first (fleet_stop.py)
        if not health_only:  # holds are cleared once, by the heal phase
            self.clear_holds(ctx.args["clear_holds"])
        health = ctx.args["health"]
        result = RunResult(warnings=ctx.warnings)
        try:
            if health is None and not resume:
                # nothing runs before the fleet count: the health phase sends no remembered fix ahead,
                # and leaves the evidence of a service memory holds fixes for to the heal phase's
                # re-check, which carries them (read once, where it is acted on: _split)
                health = self.check_health(ahead=None if health_only else self.ahead.send(self.ahead.choose()),
                                           defer=list(self.ahead.remembered()) if health_only else ())
                if health.get("unreachable"):
                    result.unreachable = health
                    return result
                result.health = health
                self.loop.landlock_abi = health.get("landlock_abi")
                if health_only:
                    return result
            elif not resume:  # a split pass's heal phase: its remembered fixes go with one re-check
                health = self.recheck_with_fixes(health)
                if health.get("unreachable"):
                    result.unreachable = health
                    return result
            if resume:
                result.incidents, result.outcomes = self.approvals.resume(resume, approver)
            else:
                result.incidents, result.outcomes = self.heal_all(health)
        finally:
            stores.lease.release()
        self.dedup_notices(result.outcomes)
        result.facts = stores.facts()
        return result

    def _look(self, definition: Definition) -> dict:
        """A fresh health check of one service and the watched services it depends on: its
        evidence judges them by their own checks, as the pass that planned for it did (the
        failure's signature includes what they say)."""
        return self.check_health([definition] + self.ctx.watched_dependencies(definition))

    def check_health(self, definitions: list | None = None, ahead: Mapping | None = None, defer=()) -> dict:
        """Every watched service's health in one round trip, with evidence for those that fail
        (none when monitoring only; ``defer``: not for these yet), and the remembered fixes
        ``ahead`` run where the host finds the very failure they healed."""
        args = self.ctx.args
        module_args = {"services": definitions if definitions is not None else args["services"],
                       "evidence": not args["monitor_only"],
                       "evidence_log_lines": args["evidence_log_lines"],
                       "evidence_max_bytes": args["evidence_max_bytes"],
                       "known_good": bool(args.get("known_good", True)), "snapshot_dir": args.get("snapshot_dir") or ""}
        if definitions is None:  # the pass's first look: a failure counts once it is confirmed
            module_args.update(confirm_attempts=args["confirm_attempts"], confirm_interval=args["confirm_interval"],
                               confirm_max_seconds=args["confirm_max_seconds"])
        if ahead:
            module_args.update(self.ahead.module_args(ahead))
        if defer and module_args["evidence"]:
            module_args["defer_evidence"] = list(defer)
        health = self.port.run_module(HEALTH_MODULE, module_args)
        gone = unreachable(health)
        if gone is not None:
            return {"unreachable": True, "changed": False, "msg": f"host unreachable at the health check: {gone}"}
        if health.get("failed") and not health.get("services"):
            raise RemediationError(f"the health check could not run on {self.ctx.host}: "
                                   f"{health.get('msg') or health.get('module_stderr') or 'no reason given'}")
        return {k: v for k, v in health.items() if not k.startswith("_ansible") and k != "invocation"}

    def recheck_with_fixes(self, health: Mapping) -> Mapping:
        """The heal phase of a split pass (``_split``): the services that failed in the health
        phase, that the fleet count left to act on and that memory holds fixes for are checked
        again in one round trip carrying those fixes, as the single-task pass sends them with its
        health check. Returns the health to heal from (``health`` itself when nothing went)."""
        names = split.recheck_names(self.ctx.definitions, health, self.ctx.args["fleet_stop"])
        fixes = self.ahead.send(self.ahead.choose(only=names)) if names else {}
        # A service whose evidence the health phase deferred is looked at again with or without a fix.
        deferred = split.deferred(health)
        again = [name for name in names if name in fixes or name in deferred]
        if not again:
            return health
        fresh = self.check_health([self.ctx.definitions[name] for name in again], ahead=fixes)
        return fresh if fresh.get("unreachable") else split.merged(health, fresh)

    def heal_all(self, health: Mapping):
        ctx, args = self.ctx, self.ctx.args
        definitions = ctx.definitions
        rows = {str(r.get("name")): r for r in health.get("services") or [] if isinstance(r, Mapping)}
        tools = health.get("tools") or {}
        incidents, outcomes = [], []
        states: dict[str, str] = {}
        self.ahead.resolve(rows)
        self.rows = rows
        for name in dependencies_first(definitions, rows):
            definition = definitions[name]
            row = rows.get(name)
            stop = args["fleet_stop"].get(name)
            if stop and row is not None and not row.get("healthy"):  # fleet-wide stop: act on nothing
                outcomes.append(self.fleet_stopped(name, stop))
                states[name] = "escalated"
                continue
            if row is not None and row.get("blocked_by") and not row.get("healthy") and not args["monitor_only"]:
                row, blocked = self.after_dependencies(name, definition, row, states)
                if blocked is not None:
                    outcomes.append(blocked)
                    states[name] = blocked["state"]
                    continue
            outcome, incident = self.heal_one(name, definition, row, tools)
            outcomes.append(outcome)
            if outcome["state"] in words.WORKING_STATES:  # its evidence of this pass is stale for its dependants
                rows[name] = {"name": name, "healthy": True}
            if incident is not None:
                incidents.append(incident)
                states[name] = incident.state
        order = {name: index for index, name in enumerate(definitions)}
        outcomes.sort(key=lambda o: order.get(o["service"], len(order)))
        return incidents, outcomes

    def heal_one(self, name: str, definition: Definition, row: HealthRow | None, tools: Mapping) -> tuple[Outcome, Any]:
        """One service's outcome from its health row, and its incident when one was opened."""
        ctx, args = self.ctx, self.ctx.args
        if row is None or row.get("skipped"):
            skipped = (row or {}).get("skipped")
            reason = (row or {}).get("msg") or (skipped if isinstance(skipped, str) else "") or \
                "the health check did not report this service"
            return engine.service_outcome(name, "failed", str(reason)), None
        interrupted = ctx.stores.journal.interrupted(name)
        if self.loop.unreachable and not row.get("healthy"):
            return engine.service_outcome(name, "unreachable", "host unreachable earlier in this run"), None
        if row.get("healthy"):
            reason = safeguards.recovered_reason(row)
            if interrupted:
                reason = (f"an attempt interrupted in run {interrupted.get('run')} is accounted for: "
                          "the service is healthy now")
                self.close(name, "healthy", reason)
            elif not ctx.check_mode:
                reason = self.recover_episode(name, definition) or reason
            # The incident its waiting plans were made for has ended: none of them may run later.
            self.approvals.withdraw(name, f"{name} on {ctx.host} was found healthy in run {ctx.run} at {ctx.now()}")
            outcome = engine.service_outcome(name, "healthy", reason)
            outcome["safeguards"] = safeguards.guards(row, outcome)
            self.after_healthy(name, row, outcome)
            return outcome, None
        error = str(row.get("error") or row.get("msg") or "health check failed")
        if args["monitor_only"]:
            return engine.service_outcome(name, "failed", f"{error} (not remediated: monitoring only)"), None
        # Degraded: planned only for a cause its dependencies show, under do no harm (_degraded.py).
        planned_evidence = degraded_cause(ctx, self.port, name, definition, row, self.rows) \
            if row.get("degraded") else None
        if row.get("degraded") and planned_evidence is None:
            outcome = engine.service_outcome(name, "degraded", safeguards.degraded_reason(row))
            outcome["safeguards"] = safeguards.guards(row, outcome)
            self.close(name, "degraded", outcome["reason"])
            return outcome, None
        held = self.held(name)
        if held is not None:
            return held, None
        if not ctx.check_mode:
            try:
                ctx.stores.lease.take()
            except LeaseBusy as exc:
                return engine.service_outcome(name, "busy", f"{error}; not remediated: {exc}"), None
        ahead = self.ahead.ran(name, row)
        # A fix that ran ahead is attempt 1 of an incident opened when it was sent: what it
        # changed is kept on the host under that incident's name.
        incident = engine.Incident(host=ctx.host, service=name, error=error,
                                   started=(ahead or {}).get("started") or ctx.now())
        if interrupted:
            incident.attempts.append(interrupted_attempt(interrupted, error))
        evidence = row.get("evidence") or {}
        if planned_evidence is not None:
            evidence = planned_evidence
        elif definition.get("depends_on"):  # its dependencies judged by what it reports (dependency_evidence)
            evidence = with_dependencies(ctx, self.port, name, definition, error, evidence, self.rows)
        self.loop.run(incident, definition, evidence, row.get("tools") or tools,
                      ahead=ahead)
        self.close(name, incident.state, incident.reason)
        outcome = engine.outcome(incident)
        outcome["safeguards"] = safeguards.guards(
            row, outcome, [r for a in incident.attempts for c in a.commands for r in c.reasons],
            [n for a in incident.attempts for n in a.notes]) + (["degraded"] if planned_evidence is not None else [])
        self.after_incident(incident, outcome)
        return outcome, incident

    def after_dependencies(self, name: str, definition: Mapping, row: Mapping, states: Mapping[str, str]):
        """A service that failed while services it depends on failed too: those were handled
        first. When they all healed, look again: it often recovers by itself (nothing runs for
        it), or shows its own cause now (fresh evidence for its incident). Returns the row to go
        on with, and the outcome when it stops here."""
        waiting = {dep: states.get(dep, "failed") for dep in row["blocked_by"]}
        error = str(row.get("error") or "health check failed")
        if self.ctx.check_mode:
            return row, None
        failing = waiting_on(waiting)
        if failing:
            # It waits on them: no attempt is spent starting a server that could not be healed;
            # the next pass (or this one, once they heal) looks at it again.
            outcome = engine.service_outcome(name, "waiting", waiting_reason(name, failing, error))
            outcome["waits_on"] = sorted(failing)
            self.close(name, "waiting", outcome["reason"])
            return row, outcome
        fresh = self.check_health([definition])
        if fresh.get("unreachable"):
            return row, engine.service_outcome(name, "unreachable", str(fresh.get("msg") or "host unreachable"))
        again = next((r for r in fresh.get("services") or [] if r.get("name") == name), None)
        if again is None:
            return row, None
        if again.get("healthy"):
            return again, engine.service_outcome(
                name, "healthy", f"recovered once {', '.join(waiting)} healed (it had failed with: {error})")
        again = dict(again)
        again.pop("blocked_by", None)
        return again, None

    # ------------------------------------------------------------------ safeguards and the journal
    def _hold(self, name: str):
        return safeguards.hold(self.ctx.stores.journal.records(), name, self.ctx.clock(), self.limits)

    def held(self, name: str) -> dict | None:
        """The outcome of a service past its budget or flapping (safeguards.hold): escalated once,
        when this pass decides it (a ``held`` record in the journal), then ``held`` until cleared."""
        ctx = self.ctx
        found = self._hold(name)
        if found is None:
            return None
        state = "held"
        if found.new and not ctx.check_mode:
            state = "escalated"
            ctx.stores.journal.append({"kind": "held", "run": ctx.run, "host": ctx.host, "service": name,
                                       "reason": found.reason})
        outcome = engine.service_outcome(name, state, safeguards.held_reason(found, ctx.host, name))
        outcome["safeguards"] = ["held"]
        return outcome

    def fleet_stopped(self, name: str, stop: Mapping) -> Outcome:
        """The outcome (and journal record) of a service whose check failed on too much of the
        fleet at once (fleet_stop.py): nothing planned, nothing run."""
        ctx = self.ctx
        if not ctx.check_mode:
            ctx.stores.journal.append(fleet_stop.journal_record(ctx.run, ctx.host, name, stop))
        return fleet_stop.stop_outcome(name, ctx.host, stop, engine.service_outcome(name, "escalated"))

    def dedup_notices(self, outcomes: list[dict]) -> None:
        """An escalation already notified, unchanged and within notify_remind seconds, is marked
        ``repeat_notice`` (the notifications skip it); a new or changed one is journaled as notified."""
        ctx, journal = self.ctx, self.ctx.stores.journal
        if ctx.check_mode:
            return
        journal.reread()  # this run's own records count
        for outcome in outcomes:
            if outcome["state"] not in words.NOTIFIED_STATES or outcome.get("repeat_notice"):
                continue
            key = safeguards.notice_key(outcome)
            if safeguards.repeated_notice(journal.records(), outcome["service"], key, ctx.clock(),
                                          ctx.args["notify_remind"]):
                outcome["repeat_notice"] = True
                continue
            journal.append({"kind": "notified", "run": ctx.run, "host": ctx.host, "service": outcome["service"],
                            "key": key})

    def clear_holds(self, names) -> None:
        """A human's word that held services may be acted on again (remediate_clear_holds)."""
        ctx, journal = self.ctx, self.ctx.stores.journal
        if ctx.check_mode or not names:
            return
        wanted = list(ctx.definitions) if "all" in names else [str(n) for n in names]
        for name in wanted:
            if safeguards.is_held(journal.records(), name):
                try:
                    journal.write({"kind": "cleared", "run": ctx.run, "host": ctx.host, "service": name,
                                   "by": "remediate_clear_holds"})
                except journal_mod.JournalError as exc:
                    raise RemediationError(f"cannot clear the hold of {name}: {exc}") from None
                journal.reread()

    def close(self, service: str, state: str, reason: str) -> None:
        """Journal the end of ``service``'s incident (not in check mode, not after the lease was lost)."""
        ctx = self.ctx
        if ctx.check_mode or ctx.stores.lease.lost:
            return
        ctx.stores.journal.append({"kind": "closed", "run": ctx.run, "host": ctx.host, "service": service,
                                   "state": state, "reason": reason})

    def recover_episode(self, service: str, definition: Definition) -> str:
        """A run killed after its plan healed ``service`` and before the episode was written
        left the proof in the journal: write that episode now (memory learns the fix) and
        close the incident. Returns the outcome's reason ("" when there was nothing to do)."""
        ctx = self.ctx
        found = journal_mod.unrecorded_success(ctx.stores.journal.records(), service)
        if found is None:
            return ""
        start, result = found
        commands = [engine.CommandRun(command=str(c.get("command")), verdict=str(c.get("verdict") or ""),
                                      argv=c.get("argv"), become=bool(c.get("become")), source=str(start.get("source")),
                                      rc=(r or {}).get("rc"), skipped=bool((r or {}).get("skipped")))
                    for c, r in zip(start.get("commands") or [], list(result.get("results") or [])
                                    + [None] * len(start.get("commands") or []))]
        incident = engine.Incident(host=ctx.host, service=service, error=str(start.get("error") or ""),
                                   signature=str(start.get("signature") or ""), state="healed",
                                   approval=str(start.get("approval") or "none"))
        attempt = engine.Attempt(number=int(start.get("attempt") or 1), source=str(start.get("source") or "unknown"),
                                 signature=incident.signature, diagnosis=str(start.get("diagnosis") or ""),
                                 commands=commands, gate="execute", healthy=True)
        incident.attempts.append(attempt)
        ctx.stores.memory.remember(incident, attempt, {}, definition)
        reason = (f"run {start.get('run')} healed it and stopped before remembering; "
                  "its episode was recovered from the journal")
        self.close(service, "healthy", reason)
        return reason


def interrupted_attempt(record: Mapping, error: str) -> engine.Attempt:
    """An attempt a killed run left half done: it ran, its outcome is unknown, the service
    is still failing, so its plan is not run again blindly."""
    reason = f"interrupted: run {record.get('run')} stopped before its result was recorded"
    if record.get("conditional"):
        reason += " (a remembered fix sent with its health check may have run)"
    return engine.Attempt(
        number=1, source=str(record.get("source") or "unknown"), signature=str(record.get("signature") or ""),
        gate="execute", healthy=False, error_after=error, notes=[reason],
        commands=[engine.CommandRun(command=str(c.get("command")), verdict=str(c.get("verdict") or ""),
                                    argv=c.get("argv"), become=bool(c.get("become")), rc=-1,
                                    stderr=reason, source=str(record.get("source") or "unknown"),
                                    effects=[str(e) for e in c.get("effects") or []])
                  for c in record.get("commands") or [] if isinstance(c, Mapping)])
