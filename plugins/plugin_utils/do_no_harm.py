# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""First, do no harm, where a degraded service is planned for: what its plan may not do.

A degraded service (slow, alive) is planned for only when its dependencies show the cause
(``dependency_cause``). Its plan acts on that cause; it may not end what is alive and busy:
no restart, stop, reload-with-restart or terminating signal of the degraded service, nor of
any *stateful* dependency (its definition's ``stateful``: a database, a queue). The engine
enforces it, not the model: such a command is refused for that incident, with a reason the
model reads on the re-ask. A targeted action on the cause (ending one database session by its
PID, signalling one client process) is left to the policy as usual (approval by default for
a database session), except that a session is ended only by a PID the incident's session view
shows now (a remembered or guessed PID may be another session's once the first ended).

``constraint`` builds the rule from the incident's evidence (its ``degraded`` entry) and the
definitions; ``refuse`` applies it to verdicts; ``prompt_lines`` says it to the model.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_cause, safeguards

_UNIT_EFFECT = re.compile(r"^(?:restarts|stops) unit (\S+)")
_SERVER_EFFECT = re.compile(r"^(?:restarts|stops) the (?:cluster|server)\b")
_PID_EFFECT = re.compile(r"^sends \S+ to PID (\d+)(?: \(([^)]*)\))?")
_GROUP_EFFECT = re.compile(r"^sends \S+ to every process (?:matching|named) `?([^`]+?)`?$")
_PID_IN_TEXT = re.compile(r"\bPID (\d+)\b")
_SESSION_EFFECT = re.compile(r"^\w+ on backend PID (\d+)$")


def _base(unit: str) -> str:
    unit = str(unit)
    return unit[:-len(".service")] if unit.endswith(".service") else unit


def _protected(definition: Mapping, stateful: bool) -> dict:
    name = str(definition.get("name") or "")
    units = sorted({_base(u) for u in [name] + [str(u) for u in definition.get("units") or []] if u})
    return {"name": name, "units": units, "processes": sorted({str(p) for p in definition.get("processes") or []}),
            "stateful": stateful}


def constraint(definition: Mapping, definitions: Mapping[str, Mapping], evidence: Mapping | None) -> dict | None:
    """The do-no-harm rule of a degraded incident (its evidence has a ``degraded`` entry), or
    None. Protected: the service itself, its PIDs, and each stateful dependency with the PIDs
    its session view printed (its backends)."""
    if not isinstance(evidence, Mapping) or not evidence.get("degraded"):
        return None
    protected = [_protected(definition, bool(definition.get("stateful")))]
    pids = {int(p) for p in evidence.get("service_pids") or [] if str(p).isdigit()}
    sessions = evidence.get("dependency_sessions") if isinstance(evidence.get("dependency_sessions"), Mapping) else {}
    shown: set = set()
    for dep in definition.get("depends_on") or []:
        printed = {int(p) for p in _PID_IN_TEXT.findall(str(sessions.get(dep) or ""))}
        shown.update(printed)
        other = definitions.get(dep)
        if isinstance(other, Mapping) and other.get("stateful"):
            protected.append(_protected(other, True))
            pids.update(printed)
    return {"service": str(definition.get("name") or ""), "protected": protected, "pids": sorted(pids),
            "sessions": sorted(shown), "causes": dependency_cause.causes_in(evidence)}


def _hits(effect: str, rule: Mapping) -> str:
    """The protected service ``effect`` ends, or ""."""
    found = _UNIT_EFFECT.match(effect)
    if found:
        unit = _base(found.group(1))
        return next((p["name"] for p in rule["protected"] if unit in p["units"]), "")
    if _SERVER_EFFECT.match(effect):
        return next((p["name"] for p in rule["protected"] if p["stateful"]), "")
    found = _PID_EFFECT.match(effect)
    if found:
        pid, comm = int(found.group(1)), (found.group(2) or "").strip()
        if pid in rule["pids"]:
            return "a process of " + ", ".join(p["name"] for p in rule["protected"])
        return next((p["name"] for p in rule["protected"] if comm and comm in p["processes"]), "")
    found = _GROUP_EFFECT.match(effect)
    if found:
        pattern = found.group(1).strip().lower()
        return next((p["name"] for p in rule["protected"]
                     if any(pattern in name.lower() or name.lower() in pattern for name in p["processes"] + [p["name"]])),
                    "")
    return ""


def refusal(verdict: Mapping, rule: Mapping | None) -> str:
    """Why ``verdict``'s command may not run in the degraded incident of ``rule``, or ""."""
    if not rule:
        return ""
    for effect in verdict.get("effects") or []:
        # A session's PID is reused once it ends: a remembered or guessed one may be anyone's now.
        found = _SESSION_EFFECT.match(str(effect))
        if found and int(found.group(1)) not in rule.get("sessions", []):
            return (f"do no harm: backend PID {found.group(1)} is not a session the sessions view of this incident "
                    "shows now (a session's PID is reused once it ends); take the PID from the evidence's "
                    "`dependency_sessions`")
    for effect in safeguards.costly(verdict):
        target = _hits(effect, rule)
        if target:
            # No host text here (a session's query is anyone's): the reason is read outside the evidence fence.
            return (f"do no harm: {rule['service']} is degraded (slow, alive), not down, and this command {effect} "
                    f"({target}), which drops the work in flight and does not end the cause the evidence's "
                    "`degraded` entry names; act on that cause itself (the one session or client it names) or "
                    "escalate")
    return ""


def refuse(verdicts: Sequence[Mapping], rule: Mapping | None) -> list[dict]:
    """``verdicts`` with each command that ends a protected service refused, with the reason."""
    out = []
    for verdict in verdicts:
        verdict = dict(verdict)
        why = refusal(verdict, rule)
        if why and verdict.get("verdict") != "reject":
            verdict.update(verdict="reject", argv=None, become=False, pids=[],
                           reasons=[why] + list(verdict.get("reasons") or []))
        out.append(verdict)
    return out


def prompt_lines(rule: Mapping | None) -> list[str]:
    """What the model is told of the rule (before the scope's lines, which it overrides)."""
    if not rule:
        return []
    named = "; ".join(f"{p['name']} (units {', '.join(p['units'])}; processes {', '.join(p['processes']) or 'none'})"
                      for p in rule["protected"])
    lines = [f"This incident is DEGRADED, not down: {rule['service']}'s checks time out while its processes run "
             "(slow, alive). Restarting it drops what it is busy with and does not end what it waits on."]
    if rule.get("causes"):
        lines.append("Its dependencies show the cause it waits on: the evidence's `degraded` entry names it "
                     "(and `dependency_sessions` shows the sessions).")
    lines.append(f"REFUSED in this incident, whatever else this list says: restarting, stopping, reloading with a "
                 f"restart or killing (any terminating signal) any of: {named}.")
    lines.append("Send instead the targeted action that ends the cause: end the one blocking database session by its "
                 "PID with the server's own function, or signal the one client process that holds it; it waits for "
                 "approval as the policy says. Escalate if no such action exists.")
    return lines
