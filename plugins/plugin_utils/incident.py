# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attempt engine: one incident (a failing service on one host) and every decision on it.

An incident is a small typed state: the service, what was wrong at first, and each
attempt (where its plan came from, each command with its verdict, rc and bounded output
tails, and the health after it). Everything the workflow decides is a pure function of
that state, so each rule has a unit test:

- which plan sources may still be asked (``source_order``);
- which plans and commands may not run again (``plan_problems``): a plan whose commands
  ran and did not heal is *ineffective* and never runs twice in one incident, however it
  is spelled (plans are also compared by what they change, as the policy described each
  command's effects: ``service nginx start`` and ``systemctl start nginx.service`` are one
  plan, and a diagnostic read added to it changes nothing); a command that failed may run
  again only when another command of the same plan first changes something new (fix,
  then start);
- the gate (``gate``): execute, wait for a human, escalate, or only say what would run;
- what happens after an attempt (``conclude``);
- the episode for memory (``episode``), the history the model sees (``history``) and the
  outcome for the report (``outcome``).

Nothing here talks to a host, a model or a cache.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import vocabulary

BACKEND_ORDERS = {
    "auto": ("memory", "runbook", "llm", "fallback"),
    "llm": ("memory", "llm", "runbook", "fallback"),
    "runbook": ("memory", "runbook", "fallback"),
    "memory": ("memory",),
}
OUTPUT_TAIL = 600        # characters of a command's stdout/stderr kept in the incident
HISTORY_TAIL = 300       # characters of each output shown to the model per command
READ_TAIL = 4000         # characters of a read-only diagnostic's output kept (whole lines, both ends): it was asked for
_SUDO = re.compile(r"^sudo(?:\s+-[nSEH]+)*\s+")


class IncidentError(ValueError):
    """A bad argument to an engine function (a state that cannot be read)."""


def _waived(command) -> str:
    """Why a stateful service's restart ran without a human (safeguards.weigh_restart_cost), or ''."""
    return next((r for r in command.reasons if str(r).startswith("restart cost waived")), "")


def _tail(text: Any, limit: int) -> str:
    value = "" if text is None else str(text)
    value = value.rstrip()
    return value if len(value) <= limit else "..." + value[-(limit - 3):]


def both_ends(text: Any, limit: int) -> str:
    """Both ends of a long output: a diagnostic's first lines and its last ones."""
    value = ("" if text is None else str(text)).rstrip()
    if len(value) <= limit:
        return value
    half = (limit - 7) // 2
    return value[:half] + "\n...\n" + value[-(limit - 7 - half):]


def command_key(command: Any) -> str:
    """How two commands are compared: the words, whitespace and quoting normalised, no sudo."""
    if isinstance(command, CommandRun):
        command = {"argv": command.argv, "command": command.command}
    if isinstance(command, Mapping):
        argv = command.get("argv")
        if isinstance(argv, (list, tuple)) and argv:
            words = [str(w) for w in argv]
            if words[0] == "sudo":
                words = words[1:]
            return " ".join(words)
        command = command.get("command") or ""
    text = _SUDO.sub("", " ".join(str(command).split()))
    try:
        return " ".join(shlex.split(text))
    except ValueError:
        return text


def plan_key(commands: Iterable[Any]) -> tuple[str, ...]:
    """The identity of a plan: its commands' keys, in order."""
    return tuple(command_key(c) for c in commands)


# Effects (as the policy words them) that change nothing on the host.
_READ_ONLY_EFFECT = re.compile(r"^(?:reads|inspects|tests|lists|queries|finds|waits|loads configuration)\b")


def change_key(command: Any) -> tuple[str, ...] | None:
    """What a command changes on the host: its policy effects minus the read-only ones, in
    order (``()`` for a read-only command); None when the policy's effects are not known."""
    effects = command.effects if isinstance(command, CommandRun) else (
        command.get("effects") if isinstance(command, Mapping) else None)
    if not isinstance(effects, (list, tuple)) or not effects:
        return None
    return tuple(str(e) for e in effects if not _READ_ONLY_EFFECT.match(str(e)))


def plan_change_key(commands: Iterable[Any]) -> tuple[str, ...] | None:
    """What a plan changes, in order; None when any command's effects are unknown."""
    out: list[str] = []
    for command in commands:
        key = change_key(command)
        if key is None:
            return None
        out.extend(key)
    return tuple(out)


# ---------------------------------------------------------------------------- the state

@dataclass
class CommandRun:
    """One command of an attempt: what the policy said and what happened."""

    command: str
    verdict: str = "allow"
    source: str = "unknown"
    argv: list[str] | None = None
    become: bool = False
    reasons: list[str] = field(default_factory=list)
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    skipped: bool = False
    reason: str = ""
    seconds: float = 0.0
    effects: list[str] = field(default_factory=list)  # what the policy said it does
    confinement: str = ""  # the kernel's rules it ran under, or why it was not confined
    denied: str = ""       # what the confinement refused (the tool's error line)
    clients: dict = field(default_factory=dict)  # the host's count that kept a waived restart from running
    pid_starts: dict = field(default_factory=dict)  # start (ticks) of each live PID its output showed, read then

    @property
    def ran(self) -> bool:
        return not self.skipped and self.rc is not None

    @property
    def failed(self) -> bool:
        return self.ran and self.rc != 0


@dataclass
class Attempt:
    """One attempt: a plan from one source, its gate, what ran, and the health after it."""

    number: int
    source: str = "none"
    diagnosis: str = ""
    signature: str = ""
    commands: list[CommandRun] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)
    gate: str = "escalate"
    healthy: bool | None = None
    error_after: str = ""
    runbook: str = ""
    llm: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    recall: str = ""  # exact | offered | hint | "" (planner.Planner.recall_mode)
    undo: dict = field(default_factory=dict)  # what the host kept and put back (plugin_utils/undo.py)

    @property
    def key(self) -> tuple[str, ...]:
        return plan_key(self.commands)

    @property
    def change_key(self) -> tuple[str, ...] | None:
        return plan_change_key(self.commands)

    @property
    def ran(self) -> bool:
        return any(c.ran for c in self.commands)

    @property
    def ineffective(self) -> bool:
        """Its commands ran and the service is still failing."""
        return self.ran and self.healthy is False


@dataclass
class Incident:
    """A failing service on one host, from the first health check to its outcome."""

    host: str
    service: str
    error: str = ""
    signature: str = ""
    started: str = ""
    finished: str = ""
    state: str = "open"
    reason: str = ""
    approval: str = "none"
    approval_id: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    # Similar incidents offered to the model or shown as a hint (planner.public_recall).
    recalled: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> Incident:
        if not isinstance(data, Mapping) or not data.get("host") or not data.get("service"):
            raise IncidentError("an incident needs a mapping with 'host' and 'service'")
        attempts = []
        for raw in data.get("attempts") or []:
            raw = dict(raw)
            commands = [CommandRun(**_known(CommandRun, c)) for c in raw.pop("commands", []) or []]
            attempts.append(Attempt(commands=commands, **_known(Attempt, raw)))
        fields = _known(cls, data)
        fields.pop("attempts", None)
        return cls(attempts=attempts, **fields)

    @property
    def current_error(self) -> str:
        for attempt in reversed(self.attempts):
            if attempt.ran and attempt.error_after:
                return attempt.error_after
        return self.error

    def llm_totals(self) -> dict:
        totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for attempt in self.attempts:
            for key in totals:
                try:
                    totals[key] += int(attempt.llm.get(key) or 0)
                except (TypeError, ValueError):
                    continue
        return totals


def _known(cls, data: Mapping) -> dict:
    names = set(cls.__dataclass_fields__)
    return {k: v for k, v in dict(data).items() if k in names}


# ---------------------------------------------------------------------------- the rules

def ineffective_plans(incident: Incident) -> dict[tuple[str, ...], int]:
    """Plans that ran in this incident and did not heal: key -> attempt number."""
    return {a.key: a.number for a in incident.attempts if a.ineffective}


def ineffective_changes(incident: Incident) -> dict[tuple[str, ...], int]:
    """What the ineffective plans changed (non-empty, known): change key -> attempt number."""
    return {a.change_key: a.number for a in incident.attempts if a.ineffective and a.change_key}


def failed_commands(incident: Incident) -> dict[str, int]:
    """Commands that exited non-zero in this incident: key -> the last attempt it failed in."""
    failed: dict[str, int] = {}
    for attempt in incident.attempts:
        for command in attempt.commands:
            if command.failed:
                failed[command_key(command)] = attempt.number
    return failed


def _failed_changes(incident: Incident) -> dict[tuple[str, ...], int]:
    failed: dict[tuple[str, ...], int] = {}
    for attempt in incident.attempts:
        for command in attempt.commands:
            key = change_key(command)
            if command.failed and key:
                failed[key] = attempt.number
    return failed


def plan_problems(incident: Incident, commands: Sequence[Any]) -> list[str]:
    """Why this plan may not run in this incident (empty: it may).

    - the identical plan already ran here and did not heal, or a plan that changes the same
      things in the same order (the policy's effects; reads do not count);
    - a command that failed here (or one that changes the same things) comes first, or only
      after commands that change nothing new: nothing changed what made it fail.
    """
    problems = []
    key = plan_key(commands)
    done = ineffective_plans(incident)
    changes = plan_change_key(commands)
    done_changes = ineffective_changes(incident)
    if key and key in done:
        problems.append(f"this exact plan already ran in attempt {done[key]} and the service stayed broken")
    elif changes and changes in done_changes:
        problems.append(f"this plan changes what attempt {done_changes[changes]}'s plan changed "
                        f"({'; '.join(changes)[:200]}), which ran and left the service broken")
    failed = failed_commands(incident)
    failed_changes = _failed_changes(incident)
    ran_before = {command_key(c) for a in incident.attempts for c in a.commands if c.ran}
    changed_before = {change_key(c) for a in incident.attempts for c in a.commands if c.ran}
    new_before = False
    for command in commands:
        name, change = command_key(command), change_key(command)
        when = failed.get(name) or (failed_changes.get(change) if change else None)
        if when and not new_before:
            problems.append(f"`{name}` failed in attempt {when} (or a command doing the same did) and nothing "
                            "new runs before it (put the command that removes the cause first)")
        if when:
            continue
        if change is None:
            new_before = new_before or name not in ran_before
        elif change and change not in changed_before:
            new_before = True
    return problems


def exhausted_sources(incident: Incident) -> set[str]:
    """Sources whose plan ran here without healing; the model is asked again (with the
    history, for a different plan), the others have nothing new to offer."""
    return {a.source for a in incident.attempts if a.ineffective and a.source not in ("llm", "approved")}


def source_order(backend: str, llm_configured: bool, incident: Incident) -> list[str]:
    """The plan sources to try for the next attempt, best first."""
    if backend not in BACKEND_ORDERS:
        raise IncidentError(f"backend must be one of {', '.join(BACKEND_ORDERS)}, got {backend!r}")
    spent = exhausted_sources(incident)
    order = [s for s in BACKEND_ORDERS[backend] if s not in spent]
    if not llm_configured:
        order = [s for s in order if s != "llm"]
    return order


def gate(commands: Sequence[Mapping], *, auto_approve: bool = False, require_approval: bool = False,
         check_mode: bool = False) -> str:
    """execute | approval | escalate | dry_run for a checked plan (verdict dicts). ``auto_approve``
    (labs and tests) runs what the policy gates, but never a command an owner's note holds
    (``owner_hold``): a person on the host said to keep hands off, and only a person overrides that."""
    usable = [c for c in commands if c.get("verdict") in ("allow", "approval")]
    if not usable:
        return "escalate"
    if check_mode:
        return "dry_run"
    if any(c.get("owner_hold") for c in usable):
        return "approval"
    needs_human = require_approval or any(c.get("verdict") == "approval" for c in usable)
    if needs_human and not auto_approve:
        return "approval"
    return "execute"


def runnable(commands: Sequence[Mapping]) -> list[Mapping]:
    """The commands of a plan that may run once the gate is passed (refused ones never)."""
    return [c for c in commands if c.get("verdict") in ("allow", "approval")]


def conclude(incident: Incident, max_attempts: int) -> str:
    """The incident's state after its last attempt: open (try again), healed or escalated."""
    if max_attempts < 1:
        raise IncidentError(f"max_attempts must be at least 1, got {max_attempts}")
    if not incident.attempts:
        return "open"
    last = incident.attempts[-1]
    if last.healthy:
        return "healed"
    if len(incident.attempts) >= max_attempts:
        return "escalated"
    return "open"


def confinement_event(attempt: Attempt) -> str:
    """Why the attempt is a policy event because the kernel refused one of its commands an
    action its verdict did not declare (escalated, never retried), or ``""``."""
    for command in attempt.commands:
        if command.denied:
            return (f"confinement refused `{command.command}` an action the policy did not declare: {command.denied}; "
                    "a policy event: escalated, not retried")
    return ""


def escalation_reason(incident: Incident) -> str:
    last = incident.attempts[-1] if incident.attempts else None
    if last is None:
        return "no attempt was made"
    if last.gate == "escalate":
        return last.notes[0] if last.notes else "no safe command to run"
    return f"still failing after {len(incident.attempts)} attempt(s): {incident.current_error}"


ESCALATION_KINDS = vocabulary.ESCALATION_KINDS


def escalation_kind(incident: Incident) -> str:
    """Why a human is needed, as a word notifications are routed by: ``refused`` (the policy
    refused every command, or refuses an approved plan now), ``needs_human`` (no plan, or the
    planner itself asked for a human), ``llm_error`` (the model was asked and failed, nothing
    else planned), ``exhausted`` (plans ran and the service still fails, or only plans that
    already failed were left), ``rejected`` (an operator rejected the plan); ``""`` when the
    incident is not escalated."""
    if incident.state != "escalated":
        return ""
    if incident.approval == "rejected":
        return "rejected"
    last = incident.attempts[-1] if incident.attempts else None
    if last is None:
        return "needs_human"
    if last.gate == "approval":
        return "refused"  # an approved plan that no longer passes the policy or its hash
    if confinement_event(last):
        return "refused"
    if last.gate != "escalate":
        return "exhausted"
    if last.notes and str(last.notes[0]).startswith("not run:"):
        return "exhausted"
    if last.refused and not last.commands:
        return "refused"
    if last.source in ("none", "llm") and last.llm.get("used") and last.llm.get("error"):
        return "llm_error"
    return "needs_human"


# ---------------------------------------------------------------------------- views

def record_results(attempt: Attempt, results: Sequence[Mapping], output_max: int = OUTPUT_TAIL) -> None:
    """Fill the attempt's commands with what the host reported (same order as run)."""
    runnable_commands = [c for c in attempt.commands if not c.skipped]
    for command, result in zip(runnable_commands, results):
        rc = result.get("rc")
        command.rc = int(rc) if isinstance(rc, int) and not isinstance(rc, bool) else None
        command.stdout = both_ends(result.get("stdout"), output_max)
        command.stderr = _tail(result.get("stderr") or result.get("msg"), output_max)
        if result.get("afterwards"):
            # what the host showed after it (a start systemd skipped, a signalled process gone): the
            # history tells the model that, not only the exit code
            command.stderr = f"{command.stderr}\n[checked after it: {result['afterwards']}]".strip()
        command.skipped = bool(result.get("skipped"))
        command.reason = str(result.get("reason") or "")
        command.confinement = str(result.get("confinement") or "")
        command.denied = str(result.get("denied") or "")
        command.clients = dict(result.get("clients") or {}) if isinstance(result.get("clients"), Mapping) else {}
        starts = result.get("pid_starts") if isinstance(result.get("pid_starts"), Mapping) else {}
        command.pid_starts = {str(k): int(v) for k, v in starts.items()
                              if str(k).isdigit() and isinstance(v, int) and not isinstance(v, bool)}
        try:
            command.seconds = round(float(result.get("seconds") or 0.0), 3)
        except (TypeError, ValueError):
            command.seconds = 0.0
    # Commands after the first failure were not reached.
    for command in runnable_commands[len(results):]:
        command.skipped = True
        command.reason = command.reason or "not run: an earlier command of the plan failed"


def history(incident: Incident, tail: int = HISTORY_TAIL) -> list[dict]:
    """What each earlier attempt did, for the model: commands, rc, output tails, health after."""
    out = []
    for attempt in incident.attempts:
        if not attempt.commands and not attempt.refused:
            continue
        commands = []
        for c in attempt.commands:
            entry = {"command": c.command, "source": c.source}
            if c.ran:
                entry["rc"] = c.rc
                if change_key(c) == ():
                    # A read the model asked for to see the cause: what it printed is the point,
                    # its first lines as much as its last.
                    output = "\n".join(part for part in ((c.stdout or "").strip(), (c.stderr or "").strip()) if part)
                    if output:
                        entry["output"] = both_ends(output, max(tail, READ_TAIL))
                        entry["read"] = True
                else:
                    output = (c.stderr or c.stdout or "").strip()
                    if output:
                        entry["output"] = _tail(output, tail)
            else:
                entry["not_run"] = c.reason or "not run"
            commands.append(entry)
        out.append({
            "attempt": attempt.number,
            "source": attempt.source,
            "diagnosis": attempt.diagnosis,
            "commands": commands,
            "refused": [{"command": r.get("command", ""), "reasons": list(r.get("reasons") or [])[:2]}
                        for r in attempt.refused][:5],
            "healthy_after": attempt.healthy,
            "error_after": attempt.error_after,
            # What the engine put back after the attempt did not heal: the model must not build
            # on an edit that is no longer there (paths only, as the journal has them).
            "put_back": [str(p) for p in (attempt.undo or {}).get("restored") or []][:10]
            if (attempt.undo or {}).get("rolled_back") else [],
            # absolute, so the model can place each attempt against the evidence's change times
            "started": attempt.started,
            "finished": attempt.finished,
        })
    return out


_STARTS_UNIT = re.compile(r"^(?:starts|restarts) unit (?P<unit>\S+)$")
_CLEARS_UNIT = re.compile(r"^clears the failed state of (?P<unit>\S+)$")


def start_limited_unit(evidence: Mapping | None) -> str:
    """The systemd unit the evidence shows refused by its start limit (Result=start-limit-hit),
    or failed after automatic restarts (its restarts count against the same limit, so the
    next start may be refused with "start request repeated too quickly"), else ``""``. Until
    ``systemctl reset-failed`` (or StartLimitIntervalSec later) systemd refuses every start
    of it, whatever fixed the cause; on a failed unit the reset changes nothing else."""
    unit = (evidence or {}).get("unit") if isinstance(evidence, Mapping) else None
    if not isinstance(unit, Mapping):
        return ""
    result = str(unit.get("Result") or unit.get("result") or "").lower()
    active = str(unit.get("ActiveState") or "").lower()
    try:
        restarts = int(str(unit.get("NRestarts") or "0"))
    except ValueError:
        restarts = 0
    limited = result == "start-limit-hit" or (active == "failed" and restarts > 0)
    return str(unit.get("Id") or unit.get("id") or "") if limited else ""


def _unit_name(name: str) -> str:
    return name if "." in name else name + ".service"


def reset_before_start(checked: Sequence[Mapping], unit: str) -> int | None:
    """Where a plan must clear ``unit``'s start limit: the index of its first command that
    starts or restarts the unit, when no command before it clears the failed state; else None."""
    if not unit:
        return None
    wanted = _unit_name(unit)
    for index, command in enumerate(checked):
        effects = [str(e) for e in command.get("effects") or []]
        if any((m := _CLEARS_UNIT.match(e)) and _unit_name(m.group("unit")) == wanted for e in effects):
            return None
        if any((m := _STARTS_UNIT.match(e)) and _unit_name(m.group("unit")) == wanted for e in effects):
            return index
    return None


def episode(incident: Incident, attempt: Attempt, key_facts: Sequence[str] = ()) -> dict:
    """The memory record of one attempt that ran (docs/workflow.md, ``sentinel_memory``)."""
    return {
        "signature": attempt.signature or incident.signature,
        "service": incident.service,
        "host": incident.host,
        "error": incident.error if attempt.number == 1 else (_previous_error(incident, attempt) or incident.error),
        "diagnosis": attempt.diagnosis,
        "facts": list(key_facts)[:20],
        "commands": [dict({"command": c.command, "source": c.source, "verdict": c.verdict, "rc": c.rc},
                          **({"read_only": True} if change_key(c) == () else {}))
                     for c in attempt.commands if c.ran],
        "success": bool(attempt.healthy),
        "attempts": attempt.number,
        "started": attempt.started or incident.started,
        "finished": attempt.finished,
        "approval": incident.approval,
    }


def _previous_error(incident: Incident, attempt: Attempt) -> str:
    earlier = [a for a in incident.attempts if a.number < attempt.number and a.ran]
    return earlier[-1].error_after if earlier else ""


def recall_summary(incident: Incident) -> str:
    """How memory served the incident: ``offered`` when the model saw a similar incident's
    fix in any attempt, else ``hint`` when one was only shown, else ``exact`` when a plan
    came from a remembered fix of this very failure, else ``""``."""
    modes = {a.recall for a in incident.attempts}
    return next((m for m in ("offered", "hint", "exact") if m in modes), "")


def recall_note(recalled: Sequence[Mapping]) -> str:
    """The hint people read in an escalation: the similar incidents' fixes, not run."""
    parts = []
    for item in recalled[:3]:
        commands = "; ".join(f"`{c.get('command')}`" for c in item.get("commands") or [] if isinstance(c, Mapping))
        parts.append(f"{item.get('host') or 'another host'} (similarity {float(item.get('similarity') or 0):.2f}) "
                     f"healed with {commands}")
    return ("a similar incident (not run here; check it fits): " + " | ".join(parts)) if parts else ""


def outcome(incident: Incident) -> dict:
    """The report's record of the incident (docs/contracts.md, "Outcomes for the report")."""
    last = incident.attempts[-1] if incident.attempts else None
    recall = recall_summary(incident)
    recalled = [dict(r) for r in incident.recalled] if recall in ("offered", "hint") else []
    reason = incident.reason
    if incident.state == "escalated" and recalled and "similar incident" not in reason:
        reason = "; ".join(r for r in (reason, recall_note(recalled)) if r)
    commands = [{"command": c.command, "source": c.source, "verdict": c.verdict, "rc": c.rc,
                 "become": c.become, "attempt": a.number}
                | ({"skipped": c.reason} if not c.ran else {})
                | ({"output": _tail(c.stderr or c.stdout, HISTORY_TAIL)} if c.ran and (c.stderr or c.stdout) else {})
                | ({"confinement": c.confinement} if c.confinement else {})
                | ({"denied": c.denied} if c.denied else {})
                | ({"restart_cost": waived} if (waived := _waived(c)) else {})
                for a in incident.attempts for c in a.commands if c.ran or a.gate in ("execute",)]
    refused = [{"command": r.get("command", ""), "source": r.get("source", ""),
                "reasons": list(r.get("reasons") or [])} for a in incident.attempts for r in a.refused]
    pending = [{"command": c.command, "verdict": c.verdict, "source": c.source}
               for c in (last.commands if last and last.gate in ("approval", "dry_run") else [])]
    return {
        "service": incident.service,
        "state": incident.state,
        "attempts": len(incident.attempts),
        "signature": incident.signature,
        "diagnosis": last.diagnosis if last else "",
        "commands": commands,
        "planned": pending,
        "refused": refused,
        "llm": incident.llm_totals(),
        "llm_error": next((_llm_error(a.llm) for a in reversed(incident.attempts)
                           if a.llm.get("used") and a.llm.get("error")), ""),
        "sources": [a.source for a in incident.attempts],
        "reason": reason,
        "escalation": escalation_kind(incident),
        "recall": recall,
        "recalled": recalled,
        "approval_id": incident.approval_id,
        "started": incident.started,
        "finished": incident.finished,
        "timeline": [{"attempt": a.number, "source": a.source, "gate": a.gate, "healthy": a.healthy,
                      "error_after": a.error_after, "diagnosis": a.diagnosis, "runbook": a.runbook,
                      "recall": a.recall, "started": a.started, "finished": a.finished}
                     | ({"undo": a.undo} if a.undo else {})
                     for a in incident.attempts],
        "undo_id": next((a.undo.get("incident", "") for a in incident.attempts if a.undo.get("changed")), ""),
    }


def _llm_error(llm: Mapping) -> str:
    """``"<kind>: <message>"`` of a model that was asked and gave nothing usable."""
    kind, message = str(llm.get("error") or ""), str(llm.get("error_message") or "")
    return f"{kind}: {message}" if message and not message.startswith(kind) else (message or kind)


def service_outcome(service: str, state: str, reason: str = "") -> dict:
    """The outcome of a service that was not remediated (healthy, monitor only, check error)."""
    return {"service": service, "state": state, "attempts": 0, "signature": "", "diagnosis": "",
            "commands": [], "planned": [], "refused": [],
            "llm": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
            "llm_error": "", "sources": [], "reason": reason, "approval_id": "", "started": "", "finished": "",
            "timeline": []}
