# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""First, do no harm: what stops the loop from acting where acting is the outage.

Pure functions over the health check's rows, the policy's verdicts, a service definition
and the incident journal's records; the heal action calls them at its hooks.

- **Confirmed failures only.** The host re-checks a failing service before it reports it
  (``module_utils/failure_confirmation.py``). A row that recovered on a re-check opens no
  incident (:func:`recovered_reason`); a row whose failing checks all timed out while its
  processes run is ``degraded`` (slow, alive): reported and escalated, never restarted
  (:func:`degraded_reason`).
- **What a restart costs.** A service defined ``stateful`` (a database, a queue) loses
  connections and transactions in flight to a restart, and may spend minutes recovering:
  while any of its processes is alive, every command of a plan that restarts, stops or kills
  it waits for a human, whatever the policy allowed (:func:`weigh_restart_cost`); the
  fallback restart is such a command.
- **Budgets and flaps.** :func:`hold_reason` reads the journal: past a number of attempts in
  a window, or healed and failing again too often in a window, a service is left alone
  until a human clears it (a ``cleared`` record).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.sentinel.remediation.plugins.module_utils import operator_notes
from ansible_collections.sentinel.remediation.plugins.plugin_utils.incident import change_key

# Effects (as the policy words them) that end what a service is doing: a restart, a stop,
# or a signal whose default action terminates the process. A start, a reload, SIGHUP,
# SIGCONT or SIGUSR1 keep its state.
_COSTLY = re.compile(r"^(?:restarts unit |stops unit |sends (?:KILL|TERM|INT|QUIT|ABRT|SEGV|9|15|2|3|6) to )")


def recovered_reason(row: Mapping) -> str:
    """Why a healthy row needed nothing: it failed at first and passed a re-check. ``""`` when
    it never failed."""
    confirmation = row.get("confirmation") if isinstance(row.get("confirmation"), Mapping) else {}
    if not confirmation.get("recovered"):
        return ""
    return (f"recovered by itself: the first check said {confirmation.get('first_error') or 'it failed'!r}; "
            f"check {confirmation.get('checks')} passed {confirmation.get('seconds')} s later; nothing was done")


def confirmed_note(row: Mapping) -> str:
    """How a failure that opens an incident was confirmed (for the incident's reason), or ``""``."""
    confirmation = row.get("confirmation") if isinstance(row.get("confirmation"), Mapping) else {}
    checks = int(confirmation.get("checks") or 0)
    if checks < 2:
        return ""
    return f"confirmed: failed {checks} checks over {confirmation.get('seconds')} s"


def degraded_reason(row: Mapping) -> str:
    """Why a slow service is reported, not healed; ``""`` when the row is not degraded."""
    if not row.get("degraded"):
        return ""
    error = str(row.get("error") or "a check timed out")
    note = confirmed_note(row)
    return (f"degraded: {error} (every failing check timed out while its processes run: slow, not down"
            f"{'; ' + note if note else ''}); not restarted, a human decides (on_timeout: remediate "
            "in its definition heals it instead)")


def is_stateful(definition: Mapping) -> bool:
    return bool(definition.get("stateful"))


def costly(verdict: Mapping) -> list[str]:
    """The effects of a classified command that end what the service is doing."""
    return [str(e) for e in verdict.get("effects") or [] if _COSTLY.match(str(e))]


def running(evidence: Mapping | None) -> bool:
    """Whether any process of the service is alive (a zombie is not) by the evidence; unknown
    evidence counts as alive."""
    if not isinstance(evidence, Mapping) or "processes" not in evidence:
        return True
    return any(isinstance(p, Mapping) and p.get("state") not in ("zombie", "dead") for p in evidence.get("processes") or [])


def without_clients(evidence: Mapping | None) -> list[int]:
    """The service's PIDs when the host counted no client connection open on them (the
    evidence's ``client_connections``); [] when it counted some, or could not count."""
    if not isinstance(evidence, Mapping):
        return []
    found = evidence.get("client_connections")
    pids = [int(p) for p in evidence.get("service_pids") or [] if str(p).isdigit()]
    if not isinstance(found, Mapping) or "unknown" in found or found.get("count") != 0 or not pids:
        return []
    return pids


def weigh_restart_cost(checked: Sequence[Mapping], definition: Mapping, evidence: Mapping | None = None,
                       idle_restart: bool = False) -> list[dict]:
    """The verdicts of a plan for ``definition``'s incident with the restart cost applied: for
    a stateful service with a process alive, a command the policy allowed that restarts, stops
    or kills waits for approval, with the reason. A service with no process left loses nothing
    to a restart (it is a start). ``idle_restart`` (the autonomy table's
    ``restart_without_clients``): when the host counted no client connection open, such a
    command keeps the policy's verdict, and carries ``idle_pids``: the host counts again just
    before running it and, finding a client, does not run it. The fallback restart (a guess)
    always waits. Other verdicts are returned unchanged."""
    if not is_stateful(definition) or not running(evidence):
        return [dict(c) for c in checked]
    idle = without_clients(evidence) if idle_restart else []
    out = []
    for verdict in checked:
        verdict = dict(verdict)
        effects = costly(verdict)
        if verdict.get("verdict") == "allow" and effects and idle and verdict.get("source") != "fallback":
            verdict["idle_pids"] = idle
            verdict["reasons"] = list(verdict.get("reasons") or []) + [
                f"restart cost waived: {definition.get('name')} is stateful but serves no client connection (counted "
                "on the host), so this command drops nothing; the host counts again just before it runs and, "
                "finding a client, does not run it (autonomy: restart_without_clients)"]
        elif verdict.get("verdict") == "allow" and effects:
            verdict["verdict"] = "approval"
            verdict["reasons"] = list(verdict.get("reasons") or []) + [
                f"restart cost: {definition.get('name')} is stateful (a restart drops its connections and work in "
                f"flight) and this command {'; '.join(effects)}: a human decides"]
        out.append(verdict)
    return out


def weigh_owner_note(checked: Sequence[Mapping], definition: Mapping, evidence: Mapping | None = None) -> list[dict]:
    """The verdicts of a plan with the owner's note applied: when a note the host's people left
    for the next operator (the evidence's ``operator_notes``: the login message, the banners)
    names the service and tells operators to keep their hands off it ("stopped ON PURPOSE ...
    do not start cron"), every command the policy allowed that changes something waits for a
    human, with the note's line as the reason. Whatever the plan's source (a runbook, memory,
    known-good, the model, the fallback): the note is the owner's word, not a fault. Such a
    command carries ``owner_hold`` (the note's path): ``remediate_auto_approve`` does not run
    it, only a human's approval of the plan does. Read-only commands keep their verdict."""
    path, line = operator_notes.hold_line(evidence.get("operator_notes") if isinstance(evidence, Mapping) else None)
    if not line:
        return [dict(c) for c in checked]
    out = []
    for verdict in checked:
        verdict = dict(verdict)
        if verdict.get("verdict") == "allow" and change_key(verdict) != ():
            verdict["verdict"] = "approval"
            verdict["owner_hold"] = path  # a person's word: no blanket auto-approval waives it (incident.gate)
            verdict["reasons"] = list(verdict.get("reasons") or []) + [
                f"owner's note: {path} says `{line}` about {definition.get('name')}: a human who knows whether "
                "it still holds decides"]
        out.append(verdict)
    return out


# The words an outcome's ``safeguards`` list holds (the report counts them).
GUARDS = ("recovered", "confirmed", "degraded", "restart_cost", "held", "canary", "rollout_stopped", "after_canary", "fleet_stop",
          "proven_plan")


def guards(row: Mapping | None, outcome: Mapping, checked_reasons: Sequence[str] = (),
           notes: Sequence[str] = ()) -> list[str]:
    """Which safeguards acted on one service's outcome: ``recovered`` (a re-check passed),
    ``confirmed`` (re-checks confirmed the failure), ``degraded``, ``restart_cost`` (a command
    waited for a human for what a restart costs), ``canary`` (this host ran a shared plan
    first), ``after_canary`` (it ran only once the canary and the waves before its own healed),
    ``rollout_stopped`` (a canary did not heal: nothing ran here), ``proven_plan`` (no canary:
    the fleet's memory shows the plan healed this failure on enough hosts, ``proven.py``);
    ``fleet_stop`` is set by ``fleet_stop.py``."""
    row = row or {}
    confirmation = row.get("confirmation") if isinstance(row.get("confirmation"), Mapping) else {}
    out = []
    if confirmation.get("recovered"):
        out.append("recovered")
    elif int(confirmation.get("checks") or 0) > 1:
        out.append("confirmed")
    if outcome.get("state") == "degraded":
        out.append("degraded")
    if any(str(r).startswith("restart cost:") for r in checked_reasons):
        out.append("restart_cost")
    if any(str(n).startswith("canary:") for n in notes):
        out.append("canary")
    if any(str(n).startswith("after the canary:") for n in notes):
        out.append("after_canary")
    if any(str(n).startswith("no canary:") for n in notes):
        out.append("proven_plan")
    if str(outcome.get("reason") or "").startswith("rollout stopped:"):
        out.append("rollout_stopped")
    return out


# ---------------------------------------------------------------------- budgets and flaps
@dataclass(frozen=True)
class Limits:
    """Per host and service: at most ``budget`` attempts in ``budget_window`` seconds, and at
    most ``flap_count`` heals in ``flap_window`` seconds before a new failure is left to a human."""

    budget: int = 6
    budget_window: int = 3600
    flap_count: int = 3
    flap_window: int = 3600


@dataclass(frozen=True)
class Hold:
    """A service the loop leaves alone: ``new`` when this pass decided it (escalate once)."""

    reason: str
    new: bool
    since: float = 0.0


def _since_cleared(records: Sequence[Mapping], service: str) -> list[Mapping]:
    """This service's records after the last time a human cleared its hold."""
    mine = [r for r in records if r.get("service") == service]
    for index in range(len(mine) - 1, -1, -1):
        if mine[index].get("kind") == "cleared":
            return mine[index + 1:]
    return mine


def hold(records: Sequence[Mapping], service: str, now: float, limits: Limits) -> Hold | None:
    """Whether a failing ``service`` is left alone, from its journal ``records``: already held
    (a ``held`` record not cleared since), or past its budget of attempts (``intent`` records)
    or its flap limit (``closed`` as healed) in their windows. None: act."""
    mine = _since_cleared(records, service)
    held = next((r for r in mine if r.get("kind") == "held"), None)
    if held is not None:
        return Hold(reason=str(held.get("reason") or "held"), new=False, since=float(held.get("ts") or 0))
    attempts = [r for r in mine if r.get("kind") == "intent" and now - float(r.get("ts") or 0) <= limits.budget_window]
    if limits.budget and len(attempts) >= limits.budget:
        return Hold(new=True, reason=(f"budget spent: {len(attempts)} attempts in the last {limits.budget_window} s "
                                      f"(at most {limits.budget})"))
    heals = [r for r in mine if r.get("kind") == "closed" and r.get("state") == "healed"
             and now - float(r.get("ts") or 0) <= limits.flap_window]
    if limits.flap_count and len(heals) >= limits.flap_count:
        return Hold(new=True, reason=(f"flapping: healed {len(heals)} times in the last {limits.flap_window} s and "
                                      "failing again"))
    return None


def held_reason(found: Hold, host: str, service: str) -> str:
    clear = f"sentinel-remediate holds clear {host} {service}, or remediate_clear_holds: [{service}]"
    if found.new:
        return f"{found.reason}; left alone until a human clears it ({clear})"
    return f"left alone since an earlier pass: {found.reason}; clear with {clear}"


def is_held(records: Sequence[Mapping], service: str) -> bool:
    """Whether ``service`` has a hold to clear."""
    return any(r.get("kind") == "held" for r in _since_cleared(records, service))


# ---------------------------------------------------------------------- repeated escalations
_DIGITS = re.compile(r"\d+")


def notice_key(outcome: Mapping) -> str:
    """What makes an escalation news: its state, signature and reason (numbers aside: a PID or
    a duration that changes is the same news)."""
    reason = _DIGITS.sub("N", str(outcome.get("reason") or ""))[:160]
    return f"{outcome.get('state')}|{outcome.get('signature') or ''}|{reason}"


def repeated_notice(records: Sequence[Mapping], service: str, key: str, now: float, remind: int) -> bool:
    """Whether this escalation was notified already: the service's last ``notified`` record has
    the same key and is younger than ``remind`` seconds (0: every escalation is notified).
    Notify on change, remind on an interval."""
    if not remind:
        return False
    last = next((r for r in reversed(records) if r.get("kind") == "notified" and r.get("service") == service), None)
    return last is not None and last.get("key") == key and now - float(last.get("ts") or 0) < remind
