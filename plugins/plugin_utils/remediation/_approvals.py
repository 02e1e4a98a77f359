# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan that waits for a human: sealed and recorded (``wait``), then approved or rejected
(``resume``), claimed once and judged again by today's policy before it runs (``consume``).
``approval.py`` says what is checked and why; this class moves the data."""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import (
    failure_signature, settled_signature, settled_signatures, unfinished_sections)
from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval as approval_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils.file_ownership import plan_ownership, plan_writer_records
from ansible_collections.sentinel.remediation.plugins.plugin_utils.shared_plan_check import host_diagnosis

from .context import RemediationError, RunContext
from ._attempts import Approved, AttemptLoop
from ._checking import PlanCheck
from ._dependencies import with_dependencies
from ._stores import LeaseBusy


def plan_hash(commands) -> str:
    """What an approver approves: each argv and whether it runs as root."""
    return hashlib.sha256(json.dumps([[c.get("argv"), bool(c.get("become"))] for c in commands]).encode("utf-8")).hexdigest()


class Approvals:
    """Wait, resume and consume one host's pending plans."""

    def __init__(self, ctx: RunContext, loop: AttemptLoop, check: PlanCheck,
                 look: Callable[[Mapping], dict], close: Callable[[str, str, str], None]):
        self.ctx = ctx
        self.loop = loop
        self.check = check
        self.look = look    # a fresh health check of one definition (service.Remediation.check_health)
        self.close = close  # journal an incident's end
        self.directory = os.path.join(ctx.args["artifacts_dir"], "pending")

    def wait(self, incident: engine.Incident, attempt: engine.Attempt, checked: list[dict],
             scope: Mapping | None = None, evidence: Mapping | None = None, tools: Mapping | None = None) -> None:
        """The incident waits for approval of ``checked``: sealed in a pending file (check mode
        says so only); a plan that cannot be recorded safely fails its incident."""
        ctx = self.ctx
        runnable = engine.runnable(checked)
        approval_id = approval_mod.new_id()
        incident.state, incident.approval, incident.approval_id = "waiting_approval", "pending", approval_id
        incident.reason = (f"plan {approval_id} waits for approval "
                           f"(playbooks/resume.yml -e remediate_approve={approval_id})")
        attempt.finished = ctx.now()
        if ctx.check_mode:
            return
        record = {
            "id": approval_id, "host": ctx.host, "target": ctx.target, "service": incident.service,
            "signature": attempt.signature, "attempt": attempt.number, "error": incident.current_error,
            # the signature without each combination of the command sections, and which of them
            # did not finish in this look (approval.incident_change)
            "settled": settled_signatures(incident.service, incident.current_error, evidence, ctx.hostnames),
            "unfinished": unfinished_sections(evidence),
            "diagnosis": attempt.diagnosis, "commands": runnable, "plan_hash": plan_hash(runnable),
            "requested": ctx.now(), "evidence_time": incident.started or attempt.started, "llm": incident.llm_totals(),
            "incident": incident.to_dict(), "run": ctx.run,
            # The verdicts' scope then, for the record: approval judges again in the scope of
            # the host's evidence at that time; signals go only to the processes seen then.
            "scope": dict(scope or {}),
            "tools": dict(tools or {}),
            "processes": [{"pid": p.get("pid"), "start": p.get("start"), "comm": p.get("comm")}
                          for p in (evidence or {}).get("processes") or [] if isinstance(p, Mapping)],
            # who the host says manages the files the plan touches, for the approver
            "ownership": plan_ownership(evidence, runnable),
            # what the writer of a guard or marker the plan removes last recorded (writer_records)
            "writer_records": plan_writer_records(evidence, runnable),
            # what this host's own evidence says, and who made the plan when another host did
            "host_diagnosis": host_diagnosis(incident.service, incident.current_error, evidence),
            "planned_on": self.loop.shared_from.get(incident.service, ""),
        }
        try:
            sealed = approval_mod.seal(record, approval_mod.controller_key())
            approval_mod.write_pending(self.directory, sealed)
        except (OSError, approval_mod.ApprovalRefused) as exc:
            # A full disk or an unusable key: the plan cannot wait safely; the rest of the run goes on.
            incident.state, incident.approval, incident.approval_id = "failed", "none", ""
            incident.reason = f"the plan needs approval but could not be recorded for it: {exc}"
            return
        ctx.stores.pending.add(approval_id, {k: sealed[k] for k in ("id", "service", "requested", "plan_hash")})

    def resume(self, resume: Mapping, by: str):
        """Approve or reject one pending plan: ``(incidents, outcomes)``."""
        ctx = self.ctx
        approval_id = str(resume["id"])
        if not approval_mod.ID_RE.match(approval_id):
            raise RemediationError(f"bad approval id {approval_id!r}")
        refused = ""
        try:
            raw = approval_mod.read_pending(self.directory, approval_id)
            record = approval_mod.parse(raw, approval_mod.controller_key(), approval_id)
        except approval_mod.ApprovalRefused as exc:
            record, refused = None, str(exc)
        except OSError as exc:
            raise RemediationError(f"plan {approval_id} not run: cannot read the approval key: {exc}") from None
        if record is None:
            service = ctx.stores.pending.service_of(approval_id)
            ctx.stores.pending.forget(approval_id)
            if "has no pending file" in refused:
                raise RemediationError(approval_mod.used_note(None, approval_id)
                                       or approval_mod.withdrawn_note(self.directory, approval_id) or refused)
            if not ctx.check_mode:
                approval_mod.retire(self.directory, approval_id, "refused")
            return [], [dict(engine.service_outcome(service, "escalated", f"plan {approval_id} refused: {refused}"),
                             approval_id=approval_id, approved_by=by)]
        problem = approval_mod.binding_problem(record, ctx.host, ctx.target)
        if not problem and resume.get("digest") and resume["digest"] != approval_mod.digest(raw):
            problem = f"plan {approval_id}'s pending file changed after it was shown to the approver"
        if problem:
            raise RemediationError(f"{problem}; nothing ran")
        expired = approval_mod.expiry_problem(record, ctx.clock(), int(ctx.args.get("approval_max_age") or 0))
        if expired and resume["decision"] != "reject":
            # Too old to stand for what the approver saw: claimed (so it is never tried again),
            # retired, escalated; the next run plans from the host's state then.
            if not ctx.check_mode:
                self._claim(approval_id, by, aside="expired")
            return [], [dict(engine.service_outcome(record.get("service") or "?", "escalated",
                                                    f"plan {approval_id} not run: {expired}"),
                             approval_id=approval_id, approved_by=by)]
        incident = engine.Incident.from_dict(record.get("incident") or {
            "host": ctx.host, "service": record.get("service"), "error": record.get("error", "")})
        incident.state, incident.approval_id = "open", approval_id
        definition = ctx.definitions.get(incident.service, {"name": incident.service})
        if resume["decision"] != "reject" and not ctx.check_mode:
            try:
                ctx.stores.lease.take()
            except LeaseBusy as exc:
                return [], [dict(engine.service_outcome(incident.service, "busy",
                                                        f"plan {approval_id} not run yet: {exc}"),
                                 approval_id=approval_id)]
        return self.consume(incident, record, resume["decision"], by, definition)

    def withdraw(self, service: str, why: str) -> list[str]:
        """The incident ``service``'s plans were made for has ended (``why``): its plans still
        waiting on this host are moved aside (``pending/withdrawn``) and leave the host's index,
        so approving one later refuses, saying so, instead of running it on another incident
        that happens to fail the same way. Returns the ids withdrawn."""
        ctx = self.ctx
        gone = [approval_id for approval_id, entry in ctx.stores.pending.entries.items()
                if isinstance(entry, Mapping) and entry.get("service") == service]
        if ctx.check_mode:
            return gone
        for approval_id in gone:
            approval_mod.withdraw(self.directory, approval_id, why)
            ctx.stores.pending.forget(approval_id)
        return gone

    def _claim(self, approval_id: str, by: str, aside: str = "used") -> None:
        ctx = self.ctx
        try:
            approval_mod.claim(None, approval_id, by, ctx.run)
        except approval_mod.ApprovalRefused as exc:
            ctx.stores.pending.forget(approval_id)
            raise RemediationError(str(exc)) from None
        except OSError as exc:
            raise RemediationError(f"plan {approval_id} not run: cannot record its use: {exc}") from None
        approval_mod.retire(self.directory, approval_id, aside)
        ctx.stores.pending.forget(approval_id)

    def consume(self, incident, record: Mapping, decision: str, by: str, definition: Mapping):
        """Claim the approval (once, whatever the races), then reject it, or check the host and
        run it: healthy now closes the incident, another failure needs a new plan, and today's
        policy judges the recorded argv in the scope of the host's current evidence."""
        ctx = self.ctx
        approval_id = incident.approval_id
        if not ctx.check_mode:
            self._claim(approval_id, by)

        def stop(state: str, reason: str):
            incident.state, incident.reason, incident.finished = state, reason, ctx.now()
            self.close(incident.service, state, reason)
            return [incident], [dict(engine.outcome(incident), approved_by=by)]

        if decision == "reject":
            incident.approval = "rejected"
            incident.state, incident.reason = "escalated", f"plan {approval_id} rejected by {by}"
            incident.finished = ctx.now()
            if not ctx.check_mode and incident.attempts:
                ctx.stores.memory.remember(incident, incident.attempts[-1], {}, definition)
            return [incident], [dict(engine.outcome(incident), approved_by=by)]
        incident.approval = "approved"
        health = self.look(definition)
        if health.get("unreachable"):
            return stop("unreachable", f"plan {approval_id} approved by {by}, not run: {health.get('msg')}")
        row = next((r for r in health.get("services") or [] if r.get("name") == incident.service), None) or {}
        if row.get("healthy"):
            return stop("healthy", f"healthy when plan {approval_id} was approved by {by}: nothing ran")
        evidence = row.get("evidence") if isinstance(row.get("evidence"), Mapping) else {}
        error = str(row.get("error") or row.get("msg") or "health check failed")
        tools = row.get("tools") or health.get("tools") or {}
        if definition.get("depends_on"):
            # The evidence as the plan's signature saw it: with its dependencies' part.
            rows = {str(r.get("name")): r for r in health.get("services") or [] if isinstance(r, Mapping)}
            evidence = with_dependencies(self.ctx, self.loop.port, incident.service, definition, error, evidence, rows)
        changed = approval_mod.incident_change(record, failure_signature(incident.service, error, evidence,
                                                                         ctx.hostnames), error,
                                               lambda left_out: settled_signature(incident.service, error, evidence,
                                                                                  left_out, ctx.hostnames),
                                               unfinished_sections(evidence))
        if changed:
            return stop("failed", changed)
        commands = list(record.get("commands") or [])
        # The recorded argv judged by today's policy (the one classification path, without the
        # engine's additions: what runs is exactly what was approved).
        verdicts = self.check.verdicts(commands, tools, self.check.scope(definition, evidence, incident))
        changed = approval_mod.policy_change(record, verdicts)
        if changed:
            return stop("escalated", f"plan {approval_id} approved by {by} and not run: {changed}")
        approved = [dict(v, source=c.get("source") or "approved") for v, c in zip(verdicts, commands)]
        # The approved attempt replaces the one that waited.
        if incident.attempts and incident.attempts[-1].gate == "approval":
            incident.attempts.pop()
        self.loop.run(incident, definition, evidence, tools, approved=Approved(approved, record, by))
        return [incident], [dict(engine.outcome(incident), approved_by=by)]
