# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin sentinel.remediation.heal: the attempt loop, driven by the attempt engine.

Thin on purpose: every decision is a function of ``plugin_utils/incident.py``; this file
moves data between the planner, the policy, the host (``execute_plan``) and the facts.
"""
from __future__ import annotations

import datetime
import getpass
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Mapping

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sentinel.remediation.plugins.modules.heal import DOCUMENTATION
from ansible_collections.sentinel.remediation.plugins.plugin_utils import confinement
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import from_documentation, llm_option_spec
from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory as memory_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as policy_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal as journal_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval as approval_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import notifications as routing
from ansible_collections.sentinel.remediation.plugins.plugin_utils._test_policy_override import misread
from ansible_collections.sentinel.remediation.plugins.plugin_utils import state_dir
from ansible_collections.sentinel.remediation.plugins.plugin_utils import safeguards
from ansible_collections.sentinel.remediation.plugins.plugin_utils.canary import Rollout
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fleet import (
    PLACEHOLDER,
    generalize,
    host_values,
    localize_values,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import (
    Lease,
    LeaseBusy,
    LeaseUnavailable,
    RedisLease,
    process_start,
    target_key,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import LLMError, resolve_settings
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import (
    PlanShare,
    PlanShareUnavailable,
    RedisPlanShare,
    run_token,
    share_key,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import (
    Planner,
    PlannerError,
    remembered_fixes,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import load_knowledge
from ansible_collections.sentinel.remediation.plugins.plugin_utils.role_inputs import check_role_inputs
from ansible_collections.sentinel.remediation.plugins.module_utils.option_bounds import MINIMUMS, ROLE_VARIABLES
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import (
    failure_signature,
    hostnames_of,
    key_facts,
    signature_prefix,
)

display = Display()
_NAME = "sentinel.remediation.heal"
_announced_no_llm = False
_announced_volatile = False
# Once per worker process: why plans are not shared through the Redis fact cache.
_announced_share = set()
# Remembered fixes sent with the health check: at most this many failure signatures per service.
AHEAD_PER_SERVICE = 8
# What the docker daemon answers when a container went away under the connection (a failed
# module run, not an unreachable host, for the community.docker.docker connection).
_HOST_GONE = re.compile(r"Error response from daemon: (?:[Cc]ontainer \S+ is (?:not running|paused|restarting)"
                        r"|No such container)")


def argument_spec() -> dict:
    spec = from_documentation(DOCUMENTATION)
    spec["llm"] = llm_option_spec()
    return spec


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lease_dir(configured: str | None) -> str:
    """One lease directory per controller user, unless set: runs with different artifacts
    directories (the playbook's, the driver's) must still see each other's leases."""
    if configured:
        return configured
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "sentinel-remediation", "leases")


def _controller_user() -> str:
    """Who runs this controller, the approver when none is named (remediate_approved_by)."""
    try:
        return f"{getpass.getuser()} on {socket.gethostname()}"
    except (KeyError, OSError):
        return f"uid {os.getuid()} on {socket.gethostname()}"


def _run_process() -> tuple[int, str] | None:
    """The ansible-playbook process this worker belongs to (pid, start ticks), the lease's owner."""
    parent = os.getppid()
    start = process_start(parent)
    return (parent, start) if start else None


# Options of this action that the role fills from its variables: bad input names both.
_ROLE_VARS = ROLE_VARIABLES


def _unreachable(result: Mapping) -> str | None:
    """Why a module run did not reach the host (the connection said so, or the container
    went away under it), or None when it did."""
    gone = _HOST_GONE.search(f"{result.get('msg', '')} {result.get('module_stderr', '')}")
    if gone:
        return gone.group(0)
    return str(result.get("msg", "")) if result.get("unreachable") else None


def _host_command(checked: Mapping) -> dict:
    """A checked command as the host modules take it: its argv, whether it runs as root, the
    command as the policy judged it (for the record), and what the kernel is to hold it to
    (``confinement.derive``: the verdict's effects as a Landlock confinement)."""
    return {"argv": list(checked.get("argv") or []), "become": bool(checked.get("become")),
            "label": str(checked.get("command"))[:200], "confine": confinement.derive(checked)}


def _role_var(option: str, value) -> str:
    return f" ({_ROLE_VARS[option]}={value})" if option in _ROLE_VARS else ""


def _dependencies_first(definitions: Mapping[str, Mapping], rows: Mapping[str, Mapping]) -> list[str]:
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


def plan_hash(commands) -> str:
    """What an approver approves: each argv and whether it runs as root."""
    return hashlib.sha256(json.dumps([[c.get("argv"), bool(c.get("become"))] for c in commands]).encode("utf-8")).hexdigest()


class ActionModule(ActionBase):
    """Heal this host's failing services; the host is reached through execute_plan only."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    # ------------------------------------------------------------------ entry
    def run(self, tmp=None, task_vars=None):
        global _announced_no_llm
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        entry_point = self._task.args.get("role_entry_point")
        if entry_point:
            # The role's variables first: a bad one is named as the operator wrote it.
            check_role_inputs(self, str(entry_point), task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=argument_spec())
        self._args = args
        self._vars = task_vars
        self._prepare_state()
        self._host = str(task_vars.get("inventory_hostname") or "host")
        self._hostnames = hostnames_of(task_vars)
        self._check_mode = bool(self._task.check_mode)
        # Every input is checked before the host is touched (the health check included).
        for name, low in MINIMUMS.items():
            if name in args and args[name] < low:
                raise AnsibleActionFail(f"{_NAME}: bad input: {name} must be at least {low}, got {args[name]}"
                                        f"{_role_var(name, args[name])}")
        try:
            self._settings = resolve_settings(args["llm"])
        except LLMError as exc:
            given = args["llm"].get("base_url") if isinstance(args["llm"], Mapping) else None
            raise AnsibleActionFail(f"{_NAME}: bad input: {exc}"
                                    + (f" (remediate_llm.base_url={given})" if given else "")) from None
        if self._settings.base_url and not re.match(r"^https?://[^\s/]+", self._settings.base_url):
            raise AnsibleActionFail(f"{_NAME}: bad input: the LLM base URL is not an http(s) URL: "
                                    f"remediate_llm.base_url={self._settings.base_url} "
                                    f"(from {self._settings.origin.get('base_url', 'the settings')})")
        self._defs = self._definitions()  # names present and unique; read by every step after
        self._routes = None
        if args["notify_routes"] is not None:
            try:
                self._routes = routing.check_routes(args["notify_routes"], args["notify_configured"])
            except routing.NotificationError as exc:
                raise AnsibleActionFail(f"{_NAME}: bad input: {exc}") from None
        if not self._settings.configured and args["backend"] not in ("runbook", "memory") \
                and not _announced_no_llm and not args["monitor_only"]:
            _announced_no_llm = True
            display.warning(f"{_NAME}: no LLM configured (llm.base_url / OPENAI_BASE_URL, llm.api_key / "
                            "OPENAI_API_KEY); planning from runbooks and memory")
        try:
            # The operator's runbooks are checked before any host is touched; the index over
            # them and the documents is built once per content and cached (knowledge.py).
            self._knowledge = load_knowledge(args["runbook_dirs"], args["docs_dirs"])
        except ValueError as exc:  # RunbookError, KnowledgeError: they name the file and the key
            raise AnsibleActionFail(f"{_NAME}: {exc}") from exc
        facts = task_vars.get("ansible_facts") or {}
        stored = facts.get("sentinel_memory")
        if isinstance(stored, list) and len(stored) > args["memory_max"]:
            result.setdefault("warnings", []).append(
                f"{_NAME}: {self._host}'s memory held {len(stored)} episodes; kept the newest {args['memory_max']} "
                "(remediate_memory_max)")
            stored = stored[-args["memory_max"]:]
            cut = True
        else:
            cut = False
        self._memory = memory_mod.normalise_memory(stored)
        self._memory_changed = cut  # the cut entry is written back: the next run does not pay for it again
        pending = facts.get("sentinel_pending")
        self._pending = dict(pending) if isinstance(pending, Mapping) else {}
        self._pending_changed = False
        self._approved_by = ""
        self._lease_lost = False
        self._share = None
        self._shared = None
        self._warnings = []
        self._index = None
        self._recall_candidates = None
        self._unreachable = False
        self._run = run_token()
        self._journal = journal_mod.Journal(os.path.join(args["artifacts_dir"], "journal"), self._host)
        self._limits = safeguards.Limits(args["action_budget"], args["action_budget_window"], args["flap_count"],
                                         args["flap_window"])
        self._clear_holds(args["clear_holds"])
        self._lease = self._file_lease = Lease(
            _lease_dir(args["lease_dir"]), target_key(task_vars),
            owner=f"{self._run}@{socket.gethostname()} ({self._host})",
            ttl=args["max_attempts"] * (args["plan_wait"] + args["command_timeout"] * 3 + 60),
            process=_run_process())
        self._lease = self._redis_lease() or self._file_lease
        self._ahead = {}
        if args["health"] is None and not args["resume"]:
            self._ahead = self._send_ahead(self._ahead_fixes())
            health = self._check_health(ahead=self._ahead)
            if health.get("unreachable"):
                self._lease.release()
                return dict(result, **health)
            result["health"] = self._args["health"] = health
        try:
            if args["resume"]:
                incidents, outcomes = self._resume(args["resume"])
            else:
                incidents, outcomes = self._heal_all()
        except (PlannerError, policy_mod.PolicyError) as exc:
            raise AnsibleActionFail(f"{_NAME}: {exc}") from exc
        finally:
            self._lease.release()
        if self._warnings:
            result.setdefault("warnings", []).extend(self._warnings)
        result["outcomes"] = outcomes
        result["incidents"] = [i.to_dict() for i in incidents]
        result["changed"] = any(c.ran for i in incidents for a in i.attempts for c in a.commands)
        result["msg"] = "; ".join(f"{o['service']}: {o['state']}" for o in outcomes) or "no watched service"
        # The report callback reads the outcomes as a custom stat (what set_stats would record).
        result["ansible_stats"] = {"data": {"sentinel_remediation": outcomes}, "per_host": True, "aggregate": True}
        waiting = self._routes.get("waiting_approval") if self._routes else None
        self._dedup_notices(outcomes)
        result["notify"] = any((o["state"] in ("escalated", "degraded") and not o.get("repeat_notice"))
                               or (o["state"] == "waiting_approval" and bool(waiting)) for o in outcomes)
        new_facts = {}
        if self._memory_changed:
            new_facts["sentinel_memory"] = self._memory
        if self._pending_changed:
            new_facts["sentinel_pending"] = self._pending
        if new_facts and not self._check_mode:
            result["ansible_facts"] = new_facts
        return result

    # ------------------------------------------------------------------ monitor results
    def _definitions(self) -> dict[str, dict]:
        out = {}
        if not self._args["services"]:
            raise AnsibleActionFail(f"{_NAME}: bad input: services (remediate_services) is empty: nothing to watch")
        for item in self._args["services"]:
            if not isinstance(item, Mapping) or not item.get("name"):
                raise AnsibleActionFail(f"{_NAME}: bad input: every item of services needs a name, got {item!r}")
            if str(item["name"]) in out:
                raise AnsibleActionFail(f"{_NAME}: bad input: services names {item['name']!r} twice "
                                        "(remediate_services: one definition per service)")
            out[str(item["name"])] = dict(item)
        return out

    def _check_health(self, services: list | None = None, ahead: Mapping | None = None) -> dict:
        """Every watched service's health in one round trip, with evidence for those that fail
        (none when monitoring only), and the remembered fixes ``ahead`` run where the host finds
        the very failure they healed (``_ahead_fixes``)."""
        args = self._args
        module_args = {"services": services if services is not None else args["services"],
                       "evidence": not args["monitor_only"],
                       "evidence_log_lines": args["evidence_log_lines"],
                       "evidence_max_bytes": args["evidence_max_bytes"]}
        if services is None:  # the pass's first look: a failure counts once it is confirmed
            module_args.update(confirm_attempts=args["confirm_attempts"], confirm_interval=args["confirm_interval"],
                               confirm_max_seconds=args["confirm_max_seconds"])
        if ahead:
            module_args.update(
                remembered=[{"service": name, "signature": signature,
                             "commands": [_host_command(c) for c in fix["commands"]]}
                            for name, fixes in ahead.items() for signature, fix in fixes.items()],
                hostnames=list(self._hostnames), command_timeout=args["command_timeout"],
                confinement=args["confinement"],
                output_max=args["output_max"], settle=args["settle"])
        health = self._execute_module(module_name="sentinel.remediation.service_health", module_args=module_args,
                                      task_vars=self._vars)
        gone = _unreachable(health)
        if gone is not None:
            return {"unreachable": True, "changed": False, "msg": f"host unreachable at the health check: {gone}"}
        if health.get("failed") and not health.get("services"):
            raise AnsibleActionFail(f"{_NAME}: the health check could not run on {self._host}: "
                                    f"{health.get('msg') or health.get('module_stderr') or 'no reason given'}")
        return {k: v for k, v in health.items() if not k.startswith("_ansible") and k != "invocation"}

    def _heal_all(self):
        definitions = self._defs
        health = self._args["health"]
        rows = {str(r.get("name")): r for r in health.get("services") or [] if isinstance(r, Mapping)}
        tools = health.get("tools") or {}
        incidents, outcomes = [], []
        states: dict[str, str] = {}
        self._resolve_ahead(rows)
        for name in _dependencies_first(definitions, rows):
            definition = definitions[name]
            row = rows.get(name)
            if row is not None and row.get("blocked_by") and not row.get("healthy") and not self._args["monitor_only"]:
                row, blocked = self._after_dependencies(name, definition, row, states)
                if blocked is not None:
                    outcomes.append(blocked)
                    states[name] = blocked["state"]
                    continue
            if row is None or row.get("skipped"):
                skipped = (row or {}).get("skipped")
                reason = (row or {}).get("msg") or (skipped if isinstance(skipped, str) else "") or \
                    "the health check did not report this service"
                outcomes.append(engine.service_outcome(name, "failed", str(reason)))
                continue
            interrupted = self._interrupted(name)
            if self._unreachable and not row.get("healthy"):
                outcomes.append(engine.service_outcome(name, "unreachable", "host unreachable earlier in this run"))
                continue
            if row.get("healthy"):
                reason = safeguards.recovered_reason(row)
                if interrupted:
                    reason = (f"an attempt interrupted in run {interrupted.get('run')} is accounted for: "
                              "the service is healthy now")
                    self._close(name, "healthy", reason)
                elif not self._check_mode:
                    reason = self._recover_episode(name, definition) or reason
                outcomes.append(engine.service_outcome(name, "healthy", reason))
                outcomes[-1]["safeguards"] = safeguards.guards(row, outcomes[-1])
                continue
            error = str(row.get("error") or row.get("msg") or "health check failed")
            if self._args["monitor_only"]:
                outcomes.append(engine.service_outcome(name, "failed", f"{error} (not remediated: monitoring only)"))
                continue
            if row.get("degraded"):
                outcomes.append(engine.service_outcome(name, "degraded", safeguards.degraded_reason(row)))
                outcomes[-1]["safeguards"] = safeguards.guards(row, outcomes[-1])
                self._close(name, "degraded", outcomes[-1]["reason"])
                continue
            held = self._held(name)
            if held is not None:
                outcomes.append(held)
                continue
            if not self._check_mode:
                try:
                    self._take_lease()
                except LeaseBusy as exc:
                    outcomes.append(engine.service_outcome(name, "busy", f"{error}; not remediated: {exc}"))
                    continue
            incident = engine.Incident(host=self._host, service=name, error=error, started=_now())
            if interrupted:
                incident.attempts.append(self._interrupted_attempt(interrupted, error))
            ran = row.get("remembered") if isinstance(row.get("remembered"), Mapping) else {}
            ahead = None
            if ran.get("ran") and ran.get("signature") in self._ahead.get(name, {}):
                ahead = dict(self._ahead[name][ran["signature"]], record=ran)
            self._loop(incident, definition, row.get("evidence") or {}, row.get("tools") or tools, ahead=ahead)
            self._close(name, incident.state, incident.reason)
            incidents.append(incident)
            outcomes.append(engine.outcome(incident))
            outcomes[-1]["safeguards"] = safeguards.guards(
                row, outcomes[-1], [r for a in incident.attempts for c in a.commands for r in c.reasons],
                [n for a in incident.attempts for n in a.notes])
            states[name] = incident.state
        order = {name: index for index, name in enumerate(definitions)}
        outcomes.sort(key=lambda o: order.get(o["service"], len(order)))
        return incidents, outcomes

    def _after_dependencies(self, name: str, definition: Mapping, row: Mapping, states: Mapping[str, str]):
        """A service that failed while services it depends on failed too: those were handled
        first. When they all healed, look again: it often recovers by itself (nothing runs for
        it), or shows its own cause now (fresh evidence for its incident). Returns the row to go
        on with, and the outcome when it stops here."""
        waiting = {dep: states.get(dep, "failed") for dep in row["blocked_by"]}
        error = str(row.get("error") or "health check failed")
        if self._check_mode or any(state not in ("healed", "healthy") for state in waiting.values()):
            # Its own incident goes on with the evidence it has (its dependencies FAILING in it):
            # starting a dependency is in its scope, a deeper fix of one waits in that one's incident.
            return row, None
        fresh = self._check_health([definition])
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

    # ------------------------------------------------------------------ the loop
    def _loop(self, incident: engine.Incident, definition: dict, evidence: dict, tools: Mapping,
              approved: list[dict] | None = None, approved_record: Mapping | None = None,
              ahead: Mapping | None = None) -> None:
        """The attempts of one incident. ``ahead``: a remembered fix that already ran in the
        health round trip (its plan and the host's record), taken as attempt 1."""
        args = self._args
        while incident.state == "open":
            checked_with, scope, rollout = evidence, None, None
            attempt = engine.Attempt(number=len(incident.attempts) + 1, started=_now())
            error = incident.current_error
            attempt.signature = failure_signature(incident.service, error, evidence, self._hostnames)
            incident.signature = incident.signature or attempt.signature
            if ahead is not None:
                checked, attempt.source, attempt.recall = list(ahead["commands"]), "memory", "exact"
                attempt.diagnosis = ahead["diagnosis"]
                attempt.notes = [f"Plan for {incident.service} from a remembered fix: {len(checked)} command(s) "
                                 f"({len(checked)} allow), run with the health check: the host found the failure "
                                 "it healed (the same signature)."]
                if ahead["record"].get("signature") != attempt.signature:
                    self._warnings.append(
                        f"{_NAME}: {self._host} computed the signature {ahead['record'].get('signature')} for "
                        f"{incident.service} and the controller {attempt.signature}; the remembered fix had run")
            elif approved is not None:
                checked, attempt.source = approved, "approved"
                record = approved_record or {}
                attempt.diagnosis = str(record.get("diagnosis") or "")
                # The PIDs the approver saw: a signal runs only if each is still that process.
                checked_with = {"processes": list(record.get("processes") or [])}
                approved = None
            else:
                scope = self._scope(definition, evidence)
                planned = self._plan(incident, attempt, definition, error, evidence, tools, scope)
                rollout = planned.get("rollout_key")
                checked = self._check_here(planned, tools, scope)
                limited = engine.start_limited_unit(evidence)
                where = engine.reset_before_start(checked, limited)
                if where is not None:
                    # systemd refuses every start until the start limit is cleared: the engine
                    # adds the reset before the plan's start, and the policy judges it too.
                    commands = list(planned.get("commands") or [])
                    commands.insert(where, {"command": f"systemctl reset-failed {limited}", "source": "engine"})
                    planned = dict(planned, commands=commands)
                    checked = self._check_here(planned, tools, scope)
                checked = safeguards.weigh_restart_cost(checked, definition, evidence)
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
                    checked = [dict(c, verdict="reject", reasons=list(c.get("reasons") or []) + problems)
                               for c in checked]
            attempt.commands = [engine.CommandRun(
                command=str(c.get("command")), verdict=str(c.get("verdict")), source=str(c.get("source") or ""),
                argv=c.get("argv"), become=bool(c.get("become")), reasons=list(c.get("reasons") or []),
                effects=[str(e) for e in c.get("effects") or []])
                for c in engine.runnable(checked)]
            if ahead is not None:
                attempt.gate = "execute"  # it ran: only plans the policy allows outright are sent ahead
            elif attempt.source != "approved":
                attempt.gate = engine.gate(checked, auto_approve=args["auto_approve"],
                                           require_approval=args["require_approval"], check_mode=self._check_mode)
                if attempt.gate == "execute" and not args["auto_approve"]:
                    held, note = confinement.gate(engine.runnable(checked), args["confinement"],
                                                  (args.get("health") or {}).get("landlock_abi"))
                    if held:
                        attempt.gate = held
                        attempt.notes.insert(0, note)
            else:
                attempt.gate = "dry_run" if self._check_mode else "execute"
            incident.attempts.append(attempt)
            if attempt.gate == "escalate":
                attempt.finished = _now()
                if not attempt.notes or not attempt.notes[0]:
                    attempt.notes = ["no safe command to run"]
                incident.state, incident.reason = "escalated", self._escalation_note(attempt)
                break
            if attempt.gate == "dry_run":
                incident.state = "dry_run"
                incident.reason = "check mode: would run " + "; ".join(
                    f"{c.command} [{c.verdict}]" for c in attempt.commands)
                break
            if attempt.gate == "approval":
                self._wait_for_approval(incident, attempt, checked, scope, evidence, tools)
                break
            if ahead is not None:
                after = self._ran_ahead(incident, attempt, ahead["record"], evidence)
                ahead = None
            else:
                canary = self._canary(incident, attempt, rollout)
                if incident.state != "open":
                    break
                after = self._execute(incident, attempt, definition, checked, checked_with)
                if canary is not None:
                    canary.record(self._host, attempt.healthy and incident.state == "open",
                                  attempt.error_after or incident.reason)
            if incident.state != "open":
                break
            self._remember(incident, attempt, evidence, definition)
            evidence = after
            incident.state = engine.conclude(incident, args["max_attempts"])
            if incident.state == "escalated":
                incident.reason = engine.escalation_reason(incident)
        incident.finished = _now()

    def _canary(self, incident, attempt, key: str | None) -> Rollout | None:
        """Canary, then the fleet (canary.py): the rollout this host is a canary of (it records its
        verified outcome), or None. A later host waits for the canaries; when one did not heal, or
        none reported in time, the incident escalates here with that evidence and nothing runs."""
        size = self._args["canary_size"]
        if not key or not size or self._check_mode:
            return None
        args = self._args
        rollout = Rollout(self._plans().dir, key, size,
                          wait=args["max_commands"] * args["command_timeout"] + args["settle"] + 60)
        verdict = rollout.verdict(self._host)
        if verdict.canary:
            attempt.notes.append(f"canary: the first host{'s' if size > 1 else ''} to run this shared plan")
            return rollout
        if verdict.action == "go":
            attempt.notes.append(f"after the canary: {verdict.detail}")
            return None
        attempt.finished = _now()
        for command in attempt.commands:
            command.skipped, command.reason = True, f"not run: {verdict.detail}"
        incident.state, incident.reason = "escalated", f"rollout stopped: {verdict.detail}; this host ran nothing"
        return None

    def _escalation_note(self, attempt: engine.Attempt) -> str:
        if attempt.source == "none":
            return "no safe command to run: " + (attempt.notes[0] if attempt.notes else "no plan")
        if not attempt.commands:
            return f"{attempt.source} says a human is needed: {attempt.diagnosis}".strip()
        return attempt.notes[0] if attempt.notes else "no safe command to run"

    # ------------------------------------------------------------------ journal
    def _records(self) -> list[dict]:
        if not hasattr(self, "_journal_records"):
            try:
                self._journal_records = self._journal.records()
            except journal_mod.JournalError as exc:
                display.warning(f"{_NAME}: {exc}")
                self._journal_records = []
        return self._journal_records

    def _interrupted(self, service: str) -> dict | None:
        return journal_mod.interrupted(self._records(), service)

    def _interrupted_attempt(self, record: Mapping, error: str) -> engine.Attempt:
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

    def _held(self, name: str) -> dict | None:
        """The outcome of a service past its budget or flapping (safeguards.hold): escalated once,
        when this pass decides it (a ``held`` record in the journal), then ``held`` until cleared."""
        found = safeguards.hold(self._records(), name, time.time(), self._limits)
        if found is None:
            return None
        reason = safeguards.held_reason(found, self._host, name)
        state = "held"
        if found.new and not self._check_mode:
            state = "escalated"
            try:
                self._journal.append({"kind": "held", "run": self._run, "host": self._host, "service": name,
                                      "reason": found.reason})
            except journal_mod.JournalError as exc:
                display.warning(f"{_NAME}: {exc}")
        outcome = engine.service_outcome(name, state, reason)
        outcome["safeguards"] = ["held"]
        return outcome

    def _dedup_notices(self, outcomes: list[dict]) -> None:
        """An escalation already notified, unchanged and within notify_remind seconds, is marked
        ``repeat_notice`` (the notifications skip it); a new or changed one is journaled as notified."""
        if self._check_mode:
            return
        self.__dict__.pop("_journal_records", None)  # this run's own records count
        for outcome in outcomes:
            if outcome["state"] not in ("escalated", "degraded"):
                continue
            key = safeguards.notice_key(outcome)
            if safeguards.repeated_notice(self._records(), outcome["service"], key, time.time(),
                                          self._args["notify_remind"]):
                outcome["repeat_notice"] = True
                continue
            try:
                self._journal.append({"kind": "notified", "run": self._run, "host": self._host,
                                      "service": outcome["service"], "key": key})
            except journal_mod.JournalError as exc:
                display.warning(f"{_NAME}: {exc}")

    def _clear_holds(self, names) -> None:
        """A human's word that held services may be acted on again (remediate_clear_holds)."""
        if self._check_mode or not names:
            return
        wanted = list(self._defs) if "all" in names else [str(n) for n in names]
        for name in wanted:
            if safeguards.is_held(self._records(), name):
                try:
                    self._journal.append({"kind": "cleared", "run": self._run, "host": self._host, "service": name,
                                          "by": "remediate_clear_holds"})
                except journal_mod.JournalError as exc:
                    raise AnsibleActionFail(f"{_NAME}: cannot clear the hold of {name}: {exc}") from None
                self.__dict__.pop("_journal_records", None)

    def _lease_kept(self) -> bool:
        """Whether this run still holds the host (True when the lease store cannot say)."""
        if self._check_mode:
            return True
        try:
            return self._lease.holds()
        except (LeaseUnavailable, OSError) as exc:
            self._warnings.append(f"{_NAME}: could not check {self._host}'s lease after its commands: {exc}")
            return True

    def _close(self, service: str, state: str, reason: str) -> None:
        if self._check_mode or self._lease_lost:
            return
        try:
            self._journal.append({"kind": "closed", "run": self._run, "host": self._host, "service": service,
                                  "state": state, "reason": reason})
        except journal_mod.JournalError as exc:
            display.warning(f"{_NAME}: {exc}")

    # ------------------------------------------------------------------ planning
    def _memory_index(self) -> dict:
        if self._index is None:
            def build():
                return memory_mod.index(self._fleet_memories())
            self._index = self._plans().get_or_make("memory-index", build)[0]
        return self._index

    def _recall_index(self) -> dict:
        """Recall candidates by service, made once per run from the memory index."""
        if self._recall_candidates is None:
            def build():
                return memory_mod.recall_index(self._memory_index())
            self._recall_candidates = self._plans().get_or_make("recall-index", build)[0]
        return self._recall_candidates

    def _recalled(self, incident, signature, error, evidence, definition, failed) -> list[dict]:
        """Similar incidents healed before (memory.similar_incidents): this host's own
        episodes first (those of this run are not in the run's index yet), then the fleet's."""
        service = incident.service
        own = memory_mod.recall_index(memory_mod.index([self._memory])).get(service, []) if self._memory else []
        seen = {(c["signature"], tuple(c["commands"])) for c in own}
        pool = own + [c for c in self._recall_index().get(service, [])
                      if (c.get("signature"), tuple(c.get("commands") or [])) not in seen]
        return memory_mod.similar_incidents(
            pool, service=service, signature=signature, error=error,
            facts=key_facts(service, error, evidence, self._hostnames), service_def=definition,
            host=self._host, failed_commands=failed)

    def _fleet_memories(self) -> list:
        """Every inventory host's memory, read once per run (the first host builds the index)."""
        hostvars = self._vars.get("hostvars") or {}
        hosts = (self._vars.get("groups") or {}).get("all") or []
        memories = [self._memory]
        for host in hosts:
            if host == self._host:
                continue
            try:
                facts = hostvars[host].get("ansible_facts") or {}
            except Exception:  # a host whose variables cannot be read has no usable memory
                continue
            episodes = facts.get("sentinel_memory") or []
            # An oversized entry must not cost the run: only its newest episodes count.
            memories.append(episodes[-4 * self._args["memory_max"]:] if isinstance(episodes, list) else [])
        return memories

    def _plans(self) -> PlanShare:
        if self._share is None:
            self._share = PlanShare(self._args["artifacts_dir"], wait=self._args["plan_wait"])
            self._share.prune()
        return self._share

    def _redis_lease(self) -> RedisLease | None:
        """With the Redis fact cache, host leases live in that Redis, so every controller on
        it (AWX slices, a driver next to a plain playbook) sees them; else None."""
        cache = str(getattr(C, "CACHE_PLUGIN", "") or "")
        if cache.rsplit(".", 1)[-1] != "redis" or self._check_mode:
            return None
        lease = self._file_lease
        try:
            return RedisLease.connect(str(getattr(C, "CACHE_PLUGIN_CONNECTION", "") or ""),
                                      prefix=f"{getattr(C, 'CACHE_PLUGIN_PREFIX', '') or 'ansible_facts'}sentinel:",
                                      key=lease.key, owner=lease.owner, ttl=lease.ttl, process=lease.process)
        except LeaseUnavailable as exc:
            self._warnings.append(f"{_NAME}: host leases are kept on this controller only: {exc}")
            return None

    def _take_lease(self) -> None:
        """Take or renew this host's lease; a Redis that stops answering falls back to the
        controller's file lease (with a warning) rather than running unleased."""
        try:
            self._lease.acquire()
        except LeaseUnavailable as exc:
            self._warnings.append(f"{_NAME}: host leases are kept on this controller only from now: {exc}")
            self._lease = self._file_lease
            self._lease.acquire()

    def _signature_plans(self):
        """Where plans per signature are shared: the fact cache's Redis when it is the cache
        (every run and controller on it), else this run's plan directory."""
        if self._shared is not None:
            return self._shared
        self._shared = self._plans()
        cache = str(getattr(C, "CACHE_PLUGIN", "") or "")
        if cache.rsplit(".", 1)[-1] != "redis":
            return self._shared
        try:
            self._shared = RedisPlanShare.connect(
                str(getattr(C, "CACHE_PLUGIN_CONNECTION", "") or ""),
                prefix=f"{getattr(C, 'CACHE_PLUGIN_PREFIX', '') or 'ansible_facts'}sentinel:",
                wait=self._args["plan_wait"], ttl=self._args["plan_share_ttl"],
                # A planning step ends within the LLM deadline; a claim outliving it is an owner gone.
                claim_ttl=float(getattr(self._settings, "deadline", 120.0) or 120.0) + 30)
        except PlanShareUnavailable as exc:
            self._share_failed(str(exc))
        return self._shared

    def _share_failed(self, reason: str) -> None:
        message = f"{_NAME}: plans are shared within this run only: {reason}"
        if message not in _announced_share:
            _announced_share.add(message)
            self._warnings.append(message)
        self._shared = self._plans()

    def _get_or_make(self, key: str, make):
        share = self._signature_plans()
        try:
            plan, how = share.get_or_make(key, make)
        except PlanShareUnavailable as exc:
            self._share_failed(str(exc))
            plan, how = self._plans().get_or_make(key, make)
        for warning in getattr(share, "warnings", ()):
            if f"{_NAME}: {warning}" not in self._warnings:
                self._warnings.append(f"{_NAME}: {warning}")
        return plan, how

    def _memory_plans(self, signature: str, own: Mapping | None = None) -> tuple[list[dict], list[str]]:
        """What memory offers for ``signature``: the plans that healed it (this host's first;
        none this host demoted) and the commands that failed on it. ``own``: this host's
        memory's summary of ``signature`` when the caller has it (``memory.index``)."""
        known = self._memory_index().get(signature) or {}
        # Episodes written during this run by this host are not in the run's index yet.
        if own is None:
            own = memory_mod.lookup([self._memory], signature) if self._memory else {}
        successes = list(own.get("successes") or []) + [
            s for s in known.get("successes") or [] if s not in (own.get("successes") or [])]
        demoted = {tuple(d["commands"]) for d in own.get("demoted") or []}
        successes = [s for s in successes if tuple(s["commands"]) not in demoted]
        failed = list(dict.fromkeys(list(known.get("failed_commands") or []) + list(own.get("failed_commands") or [])))
        return successes, failed

    def _plan(self, incident, attempt, definition, error, evidence, tools, scope) -> dict:
        args = self._args
        successes, failed = self._memory_plans(attempt.signature)
        history = [(a.signature, list(a.key), [c.rc for c in a.commands], a.healthy) for a in incident.attempts]
        # What the planner is given besides the evidence: hosts (or controllers) whose memory
        # differs plan for themselves rather than reuse a plan made without what they know.
        known_plans = sorted({json.dumps(s.get("commands"), default=str) for s in successes})
        key = share_key(attempt.signature, history, args["backend"], sorted(failed), known_plans)
        recalled = self._recalled(incident, attempt.signature, error, evidence, definition, failed)

        def make() -> dict:
            planner = Planner(
                service=incident.service, error=error, evidence=evidence, failed_commands=failed,
                successful_fixes=successes, host_tools=tools, policy=self._host_policy(tools),
                max_commands=args["max_commands"], backend=args["backend"], hostnames=self._hostnames,
                llm_settings=self._settings, incident=incident, scope=scope, knowledge=self._knowledge,
                service_def=definition, recalled=recalled)
            out = planner.run()
            out["host_values"] = host_values(evidence, incident.service, definition.get("ports") or [])
            out["planned_by"] = self._planner_id()
            return out

        plan, how = self._get_or_make(key, make)
        plan = dict(plan, rollout_key=key)
        plan["llm_used"] = plan.get("llm") if how != "shared" else {
            k: v for k, v in (plan.get("llm") or {}).items() if k not in ("calls", "prompt_tokens",
                                                                          "completion_tokens")}
        if how == "alone":
            plan["msg"] = (plan.get("msg") or "") + (" (planned alone: the host planning this failure did not share "
                                                     f"its plan within plan_wait={args['plan_wait']} s)")
        if plan.get("planned_by") != self._planner_id():
            plan["commands"] = localize_values(plan.get("commands") or [], plan.get("host_values") or {},
                                               evidence, incident.service, definition.get("ports") or [])
        return plan

    def _planner_id(self) -> str:
        """This host in this run on this controller (inventory names repeat across controllers)."""
        return f"{self._host} ({self._run}@{socket.gethostname()})"

    def _host_policy(self, tools: Mapping) -> dict:
        policy = dict(self._args["policy"] or {})
        absent = list(policy.get("absent_tools") or []) + list(tools.get("absent") or [])
        policy["absent_tools"] = sorted(set(absent))
        return policy

    def _scope(self, definition: Mapping, evidence: Mapping) -> dict:
        """The incident's scope for the policy: the service definition and the PIDs the
        evidence ties to it (computed once per attempt, for planning and the final check).
        A dependency that is itself a watched service stands for its units (the Debian
        ``postgresql`` umbrella stands for ``postgresql@15-main``)."""
        pids = evidence.get("service_pids") if isinstance(evidence, Mapping) else None
        definitions = self._defs
        depends = []
        for name in definition.get("depends_on") or []:
            other = definitions.get(name)
            for unit in [name] + list((other or {}).get("units") or []):
                if unit not in depends:
                    depends.append(unit)
        if depends != list(definition.get("depends_on") or []):
            definition = dict(definition, depends_on=depends)
        return policy_mod.scope_from_service(definition, pids or (), evidence)

    def _check_here(self, planned: Mapping, tools: Mapping, scope: Mapping) -> list[dict]:
        """The plan classified again for this host and incident (the policy is the last word)."""
        commands = list(planned.get("commands") or [])
        if not commands:
            return []
        loaded = policy_mod.load_policy(self._host_policy(tools))
        texts = [str(c.get("command")) for c in commands]
        verdicts = policy_mod.classify_many(texts, loaded, scope=scope)
        out = []
        for item, verdict in zip(commands, verdicts):
            if item.get("verdict") == "reject":  # e.g. a value that could not be localized
                out.append(dict(item))
                continue
            verdict = misread(verdict, loaded, scope)  # test-only, inert unless its variable is set
            out.append(dict(verdict, source=item.get("source") or planned.get("source") or "unknown"))
        return out

    # ------------------------------------------------------------------ approval
    def _wait_for_approval(self, incident: engine.Incident, attempt: engine.Attempt, checked: list[dict],
                           scope: Mapping | None = None, evidence: Mapping | None = None,
                           tools: Mapping | None = None) -> None:
        runnable = engine.runnable(checked)
        approval_id = approval_mod.new_id()
        incident.state, incident.approval, incident.approval_id = "waiting_approval", "pending", approval_id
        incident.reason = (f"plan {approval_id} waits for approval "
                           f"(playbooks/resume.yml -e remediate_approve={approval_id})")
        attempt.finished = _now()
        if self._check_mode:
            return
        record = {
            "id": approval_id, "host": self._host, "target": target_key(self._vars), "service": incident.service,
            "signature": attempt.signature, "attempt": attempt.number, "error": incident.current_error,
            "diagnosis": attempt.diagnosis, "commands": runnable, "plan_hash": plan_hash(runnable),
            "requested": _now(), "evidence_time": incident.started or attempt.started, "llm": incident.llm_totals(),
            "incident": incident.to_dict(), "run": self._run,
            # The verdicts' scope then, for the record: approval judges again in the scope of
            # the host's evidence at that time; signals go only to the processes seen then.
            "scope": dict(scope or {}),
            "tools": dict(tools or {}),
            "processes": [{"pid": p.get("pid"), "start": p.get("start"), "comm": p.get("comm")}
                          for p in (evidence or {}).get("processes") or [] if isinstance(p, Mapping)],
        }
        try:
            sealed = approval_mod.seal(record, approval_mod.controller_key())
            approval_mod.write_pending(os.path.join(self._args["artifacts_dir"], "pending"), sealed)
        except (OSError, approval_mod.ApprovalRefused) as exc:
            # A full disk or an unusable key: the plan cannot wait safely; the rest of the run goes on.
            incident.state, incident.approval, incident.approval_id = "failed", "none", ""
            incident.reason = f"the plan needs approval but could not be recorded for it: {exc}"
            return
        # The cache holds which host has which plan (resume.yml's host filter); what runs is
        # read from the authenticated pending file only.
        self._pending[approval_id] = {k: sealed[k] for k in ("id", "service", "requested", "plan_hash")}
        self._pending_changed = True

    def _resume(self, resume: Mapping):
        """Approve or reject one pending plan (approval.py says what is checked and why)."""
        approval_id = str(resume["id"])
        if not approval_mod.ID_RE.match(approval_id):
            raise AnsibleActionFail(f"{_NAME}: bad approval id {approval_id!r}")
        by = str(resume.get("by") or "") or _controller_user()
        self._approved_by = by
        directory = os.path.join(self._args["artifacts_dir"], "pending")
        refused = ""
        try:
            raw = approval_mod.read_pending(directory, approval_id)
            record = approval_mod.parse(raw, approval_mod.controller_key(), approval_id)
        except approval_mod.ApprovalRefused as exc:
            record, refused = None, str(exc)
        except OSError as exc:
            raise AnsibleActionFail(f"{_NAME}: plan {approval_id} not run: cannot read the approval key: {exc}") from None
        if record is None:
            service = str((self._pending.get(approval_id) or {}).get("service") or "?")
            self._forget_pending(approval_id)
            if "has no pending file" in refused:
                raise AnsibleActionFail(f"{_NAME}: {approval_mod.used_note(None, approval_id) or refused}")
            if not self._check_mode:
                approval_mod.retire(directory, approval_id, "refused")
            return [], [dict(engine.service_outcome(service, "escalated", f"plan {approval_id} refused: {refused}"),
                             approval_id=approval_id, approved_by=by)]
        problem = approval_mod.binding_problem(record, self._host, target_key(self._vars))
        if not problem and resume.get("digest") and resume["digest"] != approval_mod.digest(raw):
            problem = f"plan {approval_id}'s pending file changed after it was shown to the approver"
        if problem:
            raise AnsibleActionFail(f"{_NAME}: {problem}; nothing ran")
        incident = engine.Incident.from_dict(record.get("incident") or {
            "host": self._host, "service": record.get("service"), "error": record.get("error", "")})
        incident.state, incident.approval_id = "open", approval_id
        definition = self._defs.get(incident.service, {"name": incident.service})
        if resume["decision"] == "reject":
            return self._consume(incident, record, "reject", by, definition)
        if not self._check_mode:
            try:
                self._take_lease()
            except LeaseBusy as exc:
                return [], [dict(engine.service_outcome(incident.service, "busy", f"plan {approval_id} not run yet: {exc}"),
                                 approval_id=approval_id)]
        return self._consume(incident, record, "approve", by, definition)

    def _approval_note(self, incident) -> dict:
        """What the journal's intent records of the approval: its id and who gave it."""
        by = self._approved_by
        return {"approval_id": incident.approval_id, "approved_by": by} if by and incident.approval_id else {}

    def _forget_pending(self, approval_id: str) -> None:
        if approval_id in self._pending:
            del self._pending[approval_id]
            self._pending_changed = True

    def _consume(self, incident, record: Mapping, decision: str, by: str, definition: Mapping):
        """Claim the approval (once, whatever the races), then reject it, or check the host and
        run it: healthy now closes the incident, another failure needs a new plan, and today's
        policy judges the recorded argv in the scope of the host's current evidence."""
        approval_id = incident.approval_id
        directory = os.path.join(self._args["artifacts_dir"], "pending")
        if not self._check_mode:
            try:
                approval_mod.claim(None, approval_id, by, self._run)
            except approval_mod.ApprovalRefused as exc:
                self._forget_pending(approval_id)
                raise AnsibleActionFail(f"{_NAME}: {exc}") from None
            except OSError as exc:
                raise AnsibleActionFail(f"{_NAME}: plan {approval_id} not run: cannot record its use: {exc}") from None
            approval_mod.retire(directory, approval_id, "used")
            self._forget_pending(approval_id)

        def stop(state: str, reason: str):
            incident.state, incident.reason, incident.finished = state, reason, _now()
            self._close(incident.service, state, reason)
            return [incident], [dict(engine.outcome(incident), approved_by=by)]

        if decision == "reject":
            incident.approval = "rejected"
            incident.state, incident.reason = "escalated", f"plan {approval_id} rejected by {by}"
            incident.finished = _now()
            if not self._check_mode and incident.attempts:
                self._remember(incident, incident.attempts[-1], {}, definition)
            return [incident], [dict(engine.outcome(incident), approved_by=by)]
        incident.approval = "approved"
        health = self._check_health([definition])
        if health.get("unreachable"):
            return stop("unreachable", f"plan {approval_id} approved by {by}, not run: {health.get('msg')}")
        row = next((r for r in health.get("services") or [] if r.get("name") == incident.service), None) or {}
        if row.get("healthy"):
            return stop("healthy", f"healthy when plan {approval_id} was approved by {by}: nothing ran")
        evidence = row.get("evidence") if isinstance(row.get("evidence"), Mapping) else {}
        error = str(row.get("error") or row.get("msg") or "health check failed")
        tools = row.get("tools") or health.get("tools") or {}
        changed = approval_mod.incident_change(record, failure_signature(incident.service, error, evidence,
                                                                         self._hostnames), error)
        if changed:
            return stop("failed", changed)
        commands = list(record.get("commands") or [])
        verdicts = policy_mod.classify_many([str(c.get("command")) for c in commands],
                                            policy_mod.load_policy(self._host_policy(tools)),
                                            scope=self._scope(definition, evidence))
        changed = approval_mod.policy_change(record, verdicts)
        if changed:
            return stop("escalated", f"plan {approval_id} approved by {by} and not run: {changed}")
        approved = [dict(v, source=c.get("source") or "approved") for v, c in zip(verdicts, commands)]
        # The approved attempt replaces the one that waited.
        if incident.attempts and incident.attempts[-1].gate == "approval":
            incident.attempts.pop()
        self._loop(incident, definition, evidence, tools, approved=approved, approved_record=record)
        return [incident], [dict(engine.outcome(incident), approved_by=by)]

    # ------------------------------------------------------------------ execution
    def _execute(self, incident, attempt, definition, checked, evidence) -> dict:
        args = self._args
        runnable = engine.runnable(checked)
        processes = evidence.get("processes") if isinstance(evidence, Mapping) else None
        expect = {}
        for proc in processes or []:
            if isinstance(proc, Mapping) and proc.get("pid") is not None:
                expect[str(proc["pid"])] = {"start": proc.get("start"), "comm": proc.get("comm")}
        module_args = {
            "commands": [dict(_host_command(c), pids=[int(p) for p in c.get("pids") or []],
                              approved=attempt.source == "approved" or incident.approval == "approved"
                              or args["auto_approve"])
                         for c in runnable],
            "confinement": args["confinement"],
            "expect_pids": expect,
            "stop_on_failure": True,
            "command_timeout": args["command_timeout"],
            "output_max": args["output_max"],
            "verify": definition,
            "settle": args["settle"],
            "evidence": True,
            # watched dependencies are judged by their own checks, as the health check does
            "depends": [self._defs[name] for name in dict.fromkeys(definition.get("depends_on") or [])
                        if name in self._defs and name != definition.get("name")],
            "evidence_log_lines": args["evidence_log_lines"],
            "evidence_max_bytes": args["evidence_max_bytes"],
            # The host's own lock for the commands' life: outlives this controller if it dies.
            "holder": f"run {self._run} on {socket.gethostname()}, {incident.service} attempt {attempt.number}",
        }
        try:
            self._journal.append(dict(journal_mod.intent(self._run, incident.service, attempt.number, runnable,
                                                         incident.approval, attempt.source, attempt.signature,
                                                         incident.current_error, attempt.diagnosis),
                                      host=self._host, **self._approval_note(incident)))
        except journal_mod.JournalError as exc:
            # Nothing runs that is not recorded first.
            incident.state, incident.reason = "failed", f"not run: {exc}"
            for command in attempt.commands:
                command.skipped, command.reason = True, "not run: the journal could not record it"
            return evidence
        self._take_lease()  # renew: a long incident keeps its host
        result = self._execute_module(module_name="sentinel.remediation.execute_plan", module_args=module_args,
                                      task_vars=self._vars)
        attempt.finished = _now()
        verify = result.get("verify") or {}
        if not self._lease_kept():
            # Another run took the host meanwhile (this controller was taken for dead): it
            # accounts for this attempt; a late result must not close the incident again.
            self._lease_lost = True
            incident.state = "failed"
            incident.reason = (f"this run lost {self._host}'s lease while attempt {attempt.number} ran; its result "
                               "is not recorded (the run that holds the host now accounts for it)")
            return evidence
        try:
            self._journal.append(dict(journal_mod.result(self._run, incident.service, attempt.number,
                                                         result.get("results") or [], verify.get("healthy"),
                                                         str(verify.get("error") or result.get("msg") or "")),
                                      host=self._host))
        except journal_mod.JournalError as exc:
            display.warning(f"{_NAME}: {exc}")
        return self._results(incident, attempt, result, evidence)

    def _results(self, incident, attempt, result: Mapping, evidence) -> dict:
        """The host's report of an attempt (execute_plan's, or a remembered fix's from the health
        check) into the attempt; returns the evidence to go on with."""
        args = self._args
        gone = _unreachable(result)
        if gone is not None:
            incident.state = "unreachable"
            incident.reason = (f"host unreachable while running attempt {attempt.number}: {gone}; the outcome "
                               "of its commands is unknown (the journal holds what was sent)")
            self._unreachable = True
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
        engine.record_results(attempt, result.get("results") or [], args["output_max"])
        verify = result.get("verify") if isinstance(result.get("verify"), Mapping) else {}
        attempt.healthy = bool(verify.get("healthy"))
        error = verify.get("error") or verify.get("msg") or "still failing"
        attempt.error_after = "" if attempt.healthy else str(error)
        denied = engine.confinement_event(attempt)
        if denied and not attempt.healthy:
            # The kernel stopped what the policy did not declare: a policy event, never retried.
            incident.state, incident.reason = "escalated", denied
        new_evidence = result.get("evidence")
        return new_evidence if isinstance(new_evidence, Mapping) and new_evidence else evidence

    # ------------------------------------------------------------------ remembered fixes ahead
    def _ahead_fixes(self) -> dict[str, dict[str, dict]]:
        """The remembered fixes that may run inside the health round trip, by service and
        signature: for each signature this service failed with before, the plan the planner
        would take from memory for it (memory comes first in every backend's order), kept only
        when the policy allows each of its commands outright in the scope the service
        definition alone gives (evidence only widens a scope), no command signals a PID or
        holds a placeholder that evidence fills, and no approval is required. The host runs
        one only where its fresh evidence gives that very signature."""
        args = self._args
        if self._check_mode or args["monitor_only"] or args["require_approval"] or args["health"] is not None \
                or args["resume"]:
            return {}
        index = self._memory_index()
        own = memory_mod.index([self._memory]) if self._memory else {}
        loaded = None
        out: dict[str, dict[str, dict]] = {}
        for name, definition in self._defs.items():
            prefix = signature_prefix(name)
            signatures = [sig for sig in list(own) + [s for s in index if s not in own] if sig.startswith(prefix)]
            if not signatures or self._interrupted(name) \
                    or safeguards.hold(self._records(), name, time.time(), self._limits) is not None:
                continue  # a held service gets no fix ahead either: nothing runs for it
            scope = self._scope(definition, {})
            for signature in signatures[:AHEAD_PER_SERVICE]:
                successes, failed = self._memory_plans(signature, own.get(signature) or {})
                # The fixes in the order the planner's memory source takes them.
                for texts, diagnosis in remembered_fixes(successes, signature, failed):
                    if texts is None:
                        continue  # the planner skips these too
                    if len(texts) > args["max_commands"] or any(PLACEHOLDER.search(t) for t in texts):
                        break  # the planner would take it, changed: not sent ahead
                    loaded = loaded or policy_mod.load_policy(self._host_policy({}))
                    verdicts = safeguards.weigh_restart_cost(policy_mod.classify_many(texts, loaded, scope=scope),
                                                             definition)
                    if any(v["verdict"] == "reject" for v in verdicts):
                        continue  # the planner skips a plan the policy refuses
                    # (the host's kernel is not known yet: only plans that can be confined anywhere go ahead)
                    if all(v["verdict"] == "allow" and not v.get("pids") for v in verdicts) \
                            and not confinement.gate(verdicts, args["confinement"], None)[0]:
                        out.setdefault(name, {})[signature] = {
                            "commands": [dict(v, source="memory") for v in verdicts], "diagnosis": diagnosis}
                    break
        return out

    def _prepare_state(self) -> None:
        """The state directory resolved and proven writable before any host is touched; a warning
        (once per run) when the fact cache cannot keep memory and pending plans."""
        global _announced_volatile
        try:
            self._args["artifacts_dir"] = state_dir.ensure_writable(
                state_dir.artifacts_dir(self._args["artifacts_dir"]),
                collection=state_dir.installed_collection_root())
        except state_dir.StateDirError as exc:
            raise AnsibleActionFail(f"{_NAME}: {exc}") from None
        warning = state_dir.volatile_cache_warning(C.CACHE_PLUGIN)
        if warning and not _announced_volatile:
            _announced_volatile = True
            display.warning(f"{_NAME}: {warning}")

    def _send_ahead(self, fixes: dict[str, dict[str, dict]]) -> dict[str, dict[str, dict]]:
        """Take the host's lease and record the fixes in the journal before they go: nothing
        runs that is not recorded first. Returns the fixes to send (none when either fails)."""
        if not fixes:
            return {}
        try:
            self._take_lease()
        except LeaseBusy:
            return {}  # the incident says busy, as without fixes ahead
        try:
            self._journal.append(dict(journal_mod.conditional(
                self._run, {name: [dict(fix, signature=sig) for sig, fix in by_sig.items()]
                            for name, by_sig in fixes.items()}), host=self._host))
        except journal_mod.JournalError as exc:
            display.warning(f"{_NAME}: {exc}")
            return {}
        return fixes

    def _resolve_ahead(self, rows: Mapping[str, Mapping]) -> None:
        """After the health check: the services for which no fix sent ahead ran are resolved in
        the journal (those that ran get their attempt's intent and result)."""
        idle = [name for name in self._ahead
                if not ((rows.get(name) or {}).get("remembered") or {}).get("ran")]
        if not idle:
            return
        try:
            self._journal.append(dict(journal_mod.resolved(self._run, idle), host=self._host))
        except journal_mod.JournalError as exc:
            display.warning(f"{_NAME}: {exc}")

    def _ran_ahead(self, incident, attempt, record: Mapping, evidence) -> dict:
        """A remembered fix that ran in the health round trip: journal its intent and result,
        as an attempt run through execute_plan, and read its results."""
        runnable = [{"command": c.command, "argv": c.argv, "verdict": c.verdict, "become": c.become}
                    for c in attempt.commands]
        verify = record.get("verify") if isinstance(record.get("verify"), Mapping) else {}
        try:
            self._journal.append(dict(journal_mod.intent(self._run, incident.service, attempt.number, runnable,
                                                         incident.approval, attempt.source, attempt.signature,
                                                         incident.current_error, attempt.diagnosis),
                                      host=self._host))
            self._journal.append(dict(journal_mod.result(self._run, incident.service, attempt.number,
                                                         record.get("results") or [], verify.get("healthy"),
                                                         str(verify.get("error") or "")), host=self._host))
        except journal_mod.JournalError as exc:
            display.warning(f"{_NAME}: {exc}")
        attempt.finished = _now()
        return self._results(incident, attempt, record, evidence)

    # ------------------------------------------------------------------ memory
    def _recover_episode(self, service: str, definition: Mapping) -> str:
        """A run killed after its plan healed ``service`` and before the episode was written
        left the proof in the journal: write that episode now (memory learns the fix) and
        close the incident. Returns the outcome's reason ("" when there was nothing to do)."""
        found = journal_mod.unrecorded_success(self._records(), service)
        if found is None:
            return ""
        start, result = found
        commands = [engine.CommandRun(command=str(c.get("command")), verdict=str(c.get("verdict") or ""),
                                      argv=c.get("argv"), become=bool(c.get("become")), source=str(start.get("source")),
                                      rc=(r or {}).get("rc"), skipped=bool((r or {}).get("skipped")))
                    for c, r in zip(start.get("commands") or [], list(result.get("results") or [])
                                    + [None] * len(start.get("commands") or []))]
        incident = engine.Incident(host=self._host, service=service, error=str(start.get("error") or ""),
                                   signature=str(start.get("signature") or ""), state="healed",
                                   approval=str(start.get("approval") or "none"))
        attempt = engine.Attempt(number=int(start.get("attempt") or 1), source=str(start.get("source") or "unknown"),
                                 signature=incident.signature, diagnosis=str(start.get("diagnosis") or ""),
                                 commands=commands, gate="execute", healthy=True)
        incident.attempts.append(attempt)
        self._remember(incident, attempt, {}, definition)
        reason = (f"run {start.get('run')} healed it and stopped before remembering; "
                  "its episode was recovered from the journal")
        self._close(service, "healthy", reason)
        return reason

    def _remember(self, incident, attempt, evidence, definition) -> None:
        if self._check_mode:
            return
        facts = key_facts(incident.service, incident.error, evidence, self._hostnames)
        record = engine.episode(incident, attempt, facts)
        # Remembered commands keep {port_owner_pid:N} rather than a PID that means nothing next time.
        record["commands"] = generalize(record["commands"], evidence, incident.service, definition.get("ports") or [])
        if not record["commands"] and incident.approval != "rejected":
            return
        self._memory = memory_mod.append_episode(self._memory, record, self._args["memory_max"])
        self._memory_changed = True
