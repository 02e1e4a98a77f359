# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Remembered fixes sent with the health check, run by the host where it finds the very
failure they healed (one round trip instead of two for a failure seen before).

Which fix: the one the planner's memory source takes (``Planner.from_memory``, asked here),
checked on the one path the loop checks plans on (``_checking.PlanCheck.check``). What is
decided here only is whether that plan may run unseen: every command allowed outright, none
signalling a PID or holding a placeholder evidence fills, confinable on any kernel.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import signature_prefix
from ansible_collections.sentinel.remediation.plugins.plugin_utils import confinement
from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal as journal_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import proven
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fleet import PLACEHOLDER
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner
from ansible_collections.sentinel.remediation.plugins.plugin_utils.undo import incident_id, keep, store_options

from .context import RunContext
from ._attempts import host_command
from ._checking import PlanCheck
from .contracts import AheadFix, Definition, HealthRow, Plan
from ._stores import LeaseBusy

# Remembered fixes sent with the health check: at most this many failure signatures per service.
AHEAD_PER_SERVICE = 8


def sendable(verdicts, confinement_mode: str) -> bool:
    """Whether a checked plan may run unseen inside the health check: the policy allows each
    command outright, none signals a PID or keeps a placeholder the evidence would fill, and
    each can be confined on any kernel (the host's is not known yet)."""
    return bool(verdicts) and all(v.get("verdict") == "allow" and not v.get("pids")
                                  and not PLACEHOLDER.search(str(v.get("command"))) for v in verdicts) \
        and not confinement.gate(verdicts, confinement_mode, None)[0]


class AheadFixes:
    """Choose, record and account for the remembered fixes of one health check."""

    def __init__(self, ctx: RunContext, check: PlanCheck, is_held: Callable[[str], bool]):
        self.ctx = ctx
        self.check = check
        self.is_held = is_held
        self.sent: dict[str, dict[str, AheadFix]] = {}
        # When the fixes went: the start of the incident a fix that runs becomes attempt 1 of,
        # and so the name what it changes is kept under on the host (``undo``).
        self.started = ""

    def wanted(self) -> bool:
        args = self.ctx.args
        return not (self.ctx.check_mode or args["monitor_only"] or args["require_approval"] or args["resume"])

    def choose(self, only: list[str] | None = None) -> dict[str, dict[str, AheadFix]]:
        """By service and signature, the checked plan memory's first usable fix gives, for
        each signature the service failed with before; only plans that may run unseen.
        ``only``: these services alone (a split pass's heal phase, ``_split.recheck_names``)."""
        candidates = self.remembered(only)
        if not candidates:
            return {}
        ctx = self.ctx
        own = ctx.stores.memory.own_index()
        out: dict[str, dict[str, AheadFix]] = {}
        for name, signatures in candidates.items():
            definition = ctx.definitions[name]
            scope = self.check.scope(definition, {})
            for signature in signatures[:AHEAD_PER_SERVICE]:
                plan = self.memory_plan(name, definition, signature, own.get(signature) or {}, scope)
                if plan is None:
                    continue
                checked = self.check.check(plan["commands"], tools={}, scope=scope, definition=definition,
                                           evidence={}, source="memory")
                if sendable(checked, ctx.args["confinement"]) and self.proven_enough(signature, checked):
                    out.setdefault(name, {})[signature] = {
                        "commands": [dict(v, source="memory") for v in checked], "diagnosis": plan["diagnosis"]}
        return out

    def remembered(self, only: list[str] | None = None) -> dict[str, list[str]]:
        """``{service: signatures}``: the services (``only`` these) that memory holds fixes for
        and that may get one ahead (fixes wanted, no interrupted attempt, no hold), in the
        definitions' order. Reads memory's index only: no plan is built or checked."""
        if not self.wanted() or only == []:
            return {}
        ctx, memory = self.ctx, self.ctx.stores.memory
        out = {}
        for name in ctx.definitions:
            if only is not None and name not in only:
                continue
            signatures = memory.signatures(signature_prefix(name))
            if not signatures or ctx.stores.journal.interrupted(name) or self.is_held(name):
                continue  # a held service gets no fix ahead either: nothing runs for it
            out[name] = signatures
        return out

    def proven_enough(self, signature: str, checked) -> bool:
        """A fix runs unseen on every host that finds its failure only when it needs no canary:
        the fleet's memory shows it healed this signature on at least canary_size hosts, with
        the verdicts it has now (proven.py); else it goes through the loop and its canary."""
        size = int(self.ctx.args.get("canary_size") or 0)
        return size < 1 or len(proven.proven_hosts(self.ctx.stores.memory.proven_index(), signature, checked)) >= size

    def memory_plan(self, name: str, definition: Definition, signature: str, own: Mapping, scope: Mapping) -> Plan | None:
        """The plan the planner's memory source takes for ``signature``, or None."""
        ctx = self.ctx
        successes, failed = ctx.stores.memory.plans_for(signature, own)
        if not successes:
            return None
        planner = Planner(service=name, successful_fixes=successes, failed_commands=failed,
                          policy=self.check.host_policy({}), max_commands=ctx.args["max_commands"], backend="memory",
                          hostnames=ctx.hostnames, scope=scope, knowledge=ctx.knowledge, service_def=definition,
                          signature=signature, classify=self.check.classifier({}, scope))
        return planner.from_memory()

    def send(self, fixes: dict[str, dict[str, AheadFix]]) -> dict[str, dict[str, AheadFix]]:
        """Take the host's lease and record the fixes in the journal before they go: nothing
        runs that is not recorded first. Returns the fixes sent (none when either fails)."""
        self.sent = {}
        if not fixes:
            return self.sent
        self.started = self.ctx.now()
        stores = self.ctx.stores
        try:
            stores.lease.take()
        except LeaseBusy:
            return self.sent  # the incident says busy, as without fixes ahead
        if stores.journal.append(journal_mod.conditional(
                self.ctx.run, {name: [dict(fix, signature=sig) for sig, fix in by_sig.items()]
                               for name, by_sig in fixes.items()})):
            self.sent = fixes
        return self.sent

    def module_args(self, fixes: Mapping[str, Mapping[str, AheadFix]]) -> dict:
        """service_health's arguments for ``fixes``: each command as the host takes it, with the
        paths its verdict says it changes, kept under the incident it would be attempt 1 of."""
        args = self.ctx.args
        return {"remembered": [{"service": name, "signature": signature, "incident": incident_id(name, self.started),
                                "commands": [dict(host_command(c), keep=keep(c)) for c in fix["commands"]]}
                               for name, by_signature in fixes.items() for signature, fix in by_signature.items()],
                "snapshot": store_options(args),
                "hostnames": list(self.ctx.hostnames), "command_timeout": args["command_timeout"],
                "confinement": args["confinement"], "output_max": args["output_max"], "settle": args["settle"]}

    def resolve(self, rows: Mapping[str, HealthRow]) -> None:
        """After the health check: the services for which no fix sent ahead ran are resolved in
        the journal (those that ran get their attempt's intent and result)."""
        idle = [name for name in self.sent if not ((rows.get(name) or {}).get("remembered") or {}).get("ran")]
        if idle:
            self.ctx.stores.journal.append(journal_mod.resolved(self.ctx.run, idle))

    def ran(self, name: str, row: HealthRow) -> AheadFix | None:
        """The fix that ran for ``name`` in the health check, with the host's record of it."""
        record = row.get("remembered") if isinstance(row.get("remembered"), Mapping) else {}
        if record.get("ran") and record.get("signature") in self.sent.get(name, {}):
            return dict(self.sent[name][record["signature"]], record=record, started=self.started)
        return None
