# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Autonomy by effect class: which commands the policy gated for a human run without one.

The policy engine gates a command with one reason per effect ("moves away `/etc/x`: an edit
of the service's configuration; a human should confirm"). Each such reason is put in an
effect class; the operator's table (policy key ``autonomy``, docs/policy.md) says which
classes run alone. A gated command runs without a human only when EVERY reason it was gated
for is in a class set to ``auto``; a reason in no class (a unit that changes what boots, a
signal to a stranger...) keeps today's verdict. Refused commands are never touched.

Classes, decided from what the command does and where, never from who proposed it:

- ``create_directory``: ``mkdir`` in the service's configuration;
- ``tighten_mode``: a mode that grants no write beyond the owner and sets no special bit; and a
  private key's mode that only takes access away from others (the policy's own reason for a
  key), when the key is among the service's own paths: the host keeps only its mode and owner
  (``meta``), never its bytes;
- ``restore_known_good``: ``cp`` of the known-good version the host staged for that very
  file (``restore/<sha256>`` under the known-good directory, named by the incident's drift),
  or a ``chmod``/``chown`` of a program the service's own unit runs that puts back exactly
  the mode or owner the host recorded for it at the last healthy pass (``known_good.runs_as``),
  or ``rm`` of a file NEW since the last healthy pass in the service's configuration or its own
  unit's drop-ins, whose bytes the host kept in its content store (the drift's ``aside``): the
  known-good state is the file's absence, and the snapshot puts it back if the attempt fails.
  Both also where the service definition names a path under the system's protected paths as
  the service's configuration (journald's ``/etc/systemd/journald.conf.d``): the policy gates any
  other change there, but going back to the recorded state is the same act anywhere;
- ``restore_membership``: adding the service's own account back to a group it was in at the
  last healthy pass and has lost since (``known_good.runs_as``); a membership it never held
  is an ``invented_value``, and the policy refuses the privileged groups whatever the table;
- ``move_aside_config``: ``mv`` of a configuration file within the service's configuration;
- ``config_edit``: a ``sed`` edit whose new text is on the known-good side of the file's
  diff, for a service with a config test;
- ``invented_value``: any other write of configuration (a value nobody saw working);
- ``weakens_security``: a restore, an edit back to known-good or a move aside that would take
  out a setting about security the file now has (``known_good_plan.weakens_security``: TLS,
  certificates, verification, authentication, keys, access rules), or whose content cannot be
  read whole to tell. Such a drift is often a deliberate tightening;
- ``owner_hold``: taking out or undoing a drifted file that expresses a hold
  (``known_good_plan.holds``: a condition or refusal that stops the service from starting, a
  "do not start" marker, a file a unit condition names). A hold is its owner's;
- ``stale_state``: ``rm`` of a file, or its ``mv`` aside within its directory, when the host's
  evidence shows every process the file names (its writer) is gone (``stale_state.py``) and the
  file is the service's (its data or configuration) or its unit names it in a condition. Such a
  file (a lock, a guard, a tool's "in progress" marker of a finished run) means "while my
  writer runs"; with its writer gone it holds nothing, and the snapshot puts it back;
- ``end_idle_transaction``: ending one database session by its PID (``pg_terminate_backend(PID)``)
  when the incident's own view of its dependency's sessions (``blocking_sessions``) shows that
  session idle in a transaction for at least the policy's ``idle_transaction_seconds`` while
  other sessions wait on its lock. It changes no file: what it drops is a transaction that ran
  nothing for that long and was never committed (PostgreSQL's own
  ``idle_in_transaction_session_timeout`` ends such sessions); the host checks again, just
  before the command, that the PID is still that session in that transaction, still idle and
  still blocking (``session_check``), and does not run it otherwise;
- ``move_data_aside``, ``out_of_scope``, ``irreversible`` (deletion).
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sentinel.remediation.plugins.module_utils.server_sessions import IDLE_IN_TRANSACTION

from .known_good_plan import holds, takes_out_security, weakens_security
from .snapshot_paths import keep
from .stale_state import UNIT, stale_files

CLASSES = ("create_directory", "tighten_mode", "restore_known_good", "restore_membership", "move_aside_config",
           "config_edit", "stale_state", "end_idle_transaction", "weakens_security", "owner_hold", "move_data_aside", "invented_value", "out_of_scope",
           "irreversible")
UNCLASSED = "unclassed"
_GATED = re.compile(r"^(?P<verb>.*?)`(?P<path>[^`]+)`(?P<area>[^:`]*): (?P<why>.+); a human should confirm")
_QUOTED = re.compile(r"`([^`]+)`")
_OCTAL = re.compile(r"^0?[0-7]{3}$")
_SYMBOLIC = re.compile(r"^[ugoa]*-[rwxXst]+$")
_DIGEST = re.compile(r"/restore/[0-9a-f]{64}$")
_MEMBERSHIP_TOOLS = ("usermod", "gpasswd", "adduser")
_ADDS = re.compile(r"^adds (?P<user>\S+) to group (?P<group>\S+) ")
_UNIT_PROGRAM = "own unit runs (its Exec*= lines)"
# The policy's reason for a private key's mode that only takes access away (policy/_rules.path).
_KEY_MODE = re.compile(r"^`(?P<path>[^`]+)` [^;]*: mode `(?P<mode>[^`]+)` only takes access away from other users")
_OWN_PATHS = ("config_paths", "paths", "data_paths", "runtime_paths")
# The classes whose commands change no file: nothing for a snapshot to keep (``apply``).
WITHOUT_PATHS = ("end_idle_transaction",)
_ENDS_SESSION = re.compile(r"^`psql pg_terminate_backend` ")
_SESSION_EFFECT = re.compile(r"^pg_terminate_backend on backend PID (\d+)$")


def tight_mode(text: str) -> bool:
    """Whether a chmod mode grants no write to group or others and sets no special bit
    (an octal mode), or only takes permissions away (a symbolic ``go-w``)."""
    if _OCTAL.match(text):
        value = int(text, 8)
        return value & 0o022 == 0
    return bool(_SYMBOLIC.match(text))


def _sed_replacement(script: str) -> str | None:
    if len(script) < 4 or script[0] != "s":
        return None
    delim = script[1]
    parts = re.split(r"(?<!\\)" + re.escape(delim), script[2:])
    return parts[1].replace("\\" + delim, delim) if len(parts) >= 3 else None


def _known_good_side(diff: str) -> list[str]:
    return [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]


def _drift(evidence: Mapping | None) -> dict[str, Mapping]:
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    items = known.get("drift") if isinstance(known, Mapping) else None
    out = {}
    for item in items or []:
        if isinstance(item, Mapping):
            # one entry for paths that are one file (a link and what it names): each path is it
            for path in [item.get("path")] + list(item.get("same_file") or []):
                out.setdefault(str(path), item)
    return out


def _runs_as(evidence: Mapping | None) -> tuple[dict[str, set[str]], dict[str, Mapping]]:
    """``({user: lost groups}, {path: item})`` of the drift in what the service runs as and runs."""
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    items = known.get("runs_as") if isinstance(known, Mapping) else None
    lost: dict[str, set[str]] = {}
    paths: dict[str, Mapping] = {}
    for item in items or []:
        if not isinstance(item, Mapping):
            continue
        if item.get("change") == "groups" and item.get("account"):
            lost.setdefault(str(item["account"]), set()).update(str(g) for g in item.get("lost") or [])
        elif item.get("change") == "attributes" and item.get("path"):
            paths[str(item["path"])] = item
    return lost, paths


def _membership_class(effects: Sequence[str], lost: Mapping[str, set[str]]) -> str:
    """A membership the account held at the last healthy pass is put back; any other is new."""
    pairs = [(m.group("user"), m.group("group")) for m in (_ADDS.match(str(e)) for e in effects) if m]
    if pairs and all(group in lost.get(user, ()) for user, group in pairs):
        return "restore_membership"
    return "invented_value"


def _same_mode(given: str, recorded: Any) -> bool:
    try:
        return bool(_OCTAL.match(given) or re.match(r"^0?[0-7]{4}$", given)) and int(given, 8) == int(str(recorded), 8)
    except ValueError:
        return False


def _program_class(verb: str, path: str, items: Mapping[str, Mapping]) -> str:
    """A mode or owner of the unit's program put back to what the host recorded while healthy."""
    item = items.get(path)
    if not item or item.get("role") != "program":
        return UNCLASSED
    if verb.startswith("sets mode ") and item.get("mode"):
        return "restore_known_good" if _same_mode(verb[len("sets mode "):].split(" ", 1)[0], item["mode"]) \
            else UNCLASSED
    if verb.startswith("gives to ") and item.get("owner"):
        return "restore_known_good" if verb[len("gives to "):].split(" ", 1)[0] == item["owner"] else UNCLASSED
    return UNCLASSED


def _stale_target(verb: str, path: str, why: str, tool: str, argv: Sequence[str], stale: Mapping[str, str]) -> bool:
    """Whether this gated reason removes, or moves aside within its directory, a file the
    evidence shows as stale state that is the service's or its unit names."""
    if tool == "rm" and verb == "deletes":
        source = path
    elif tool == "mv" and verb in ("moves away", "moves to"):
        operands = [a for a in argv[1:] if not a.startswith("-")]
        if len(operands) != 2:
            return False
        source = operands[0]
        if verb == "moves to" and posixpath.dirname(path) != posixpath.dirname(posixpath.normpath(source)):
            return False
    else:
        return False
    where = stale.get(posixpath.normpath(source))
    ours = "the service's data" in why or "an edit of the service's configuration" in why
    return bool(where) and (ours or where == UNIT)


# The policy's reason for a path under the operating system's protected paths that the service
# definition itself names as the service's configuration (journald's drop-in directory).
_DECLARED = "that the service definition names as"


def _own_config(why: str) -> bool:
    """Whether a gated reason says the path is the service's configuration (its own, or one the
    service definition names under the system's protected paths) or its own unit's."""
    return "an edit of the service's configuration" in why or "the incident's own unit" in why or _DECLARED in why


def session_check(verdict: Mapping, evidence: Mapping | None) -> dict:
    """What the host checks before ``verdict``'s command ends a database session: the session
    the evidence showed (dependency, PID, ``identity``), and for one the autonomy table let run
    alone, that it is still idle this long and blocking (``min_idle``). {} for other commands."""
    if isinstance(verdict.get("idle_session"), Mapping):
        found = verdict["idle_session"]
        return {"dependency": str(found.get("dependency")), "pid": int(found.get("pid")),
                "identity": str(found.get("identity")), "min_idle": int(found.get("min_idle") or 0)}
    found = ended_session(verdict.get("effects") or [], evidence)
    return {"dependency": found["dependency"], "pid": int(found["pid"]), "identity": str(found["identity"])} \
        if found else {}


def ended_session(effects: Sequence[str], evidence: Mapping | None) -> dict:
    """The blocking session (``blocking_sessions``: dependency, PID, state, ages, identity) the
    verdict's ``effects`` end with ``pg_terminate_backend``, when they end exactly one and the
    incident's evidence shows it; else {}."""
    pids = [int(m.group(1)) for m in (_SESSION_EFFECT.match(str(e)) for e in effects) if m]
    views = evidence.get("blocking_sessions") if isinstance(evidence, Mapping) else None
    if len(pids) != 1 or not isinstance(views, Mapping):
        return {}
    for dependency, rows in views.items():
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, Mapping) and row.get("pid") == pids[0] and row.get("identity"):
                return dict(row, dependency=str(dependency))
    return {}


def _session_class(effects: Sequence[str], evidence: Mapping | None, idle_seconds: int) -> str:
    """A session idle in its transaction this long, blocking others, is ended alone; any other
    session end stays a human's (a busy session, a young one, one the evidence does not show)."""
    session = ended_session(effects, evidence)
    if (session and str(session.get("state")) in IDLE_IN_TRANSACTION and int(session.get("blocks") or 0) > 0
            and int(session.get("state_s") or -1) >= idle_seconds):
        return "end_idle_transaction"
    return UNCLASSED


def _own_path(path: str, definition: Mapping | None) -> bool:
    """Whether ``path`` is one of the service definition's own paths or beneath one."""
    path = posixpath.normpath(path)
    for key in _OWN_PATHS:
        for own in (definition or {}).get(key) or []:
            own = posixpath.normpath(str(own))
            if own != "/" and (path == own or path.startswith(own.rstrip("/") + "/")):
                return True
    return False


def classify_reason(reason: str, argv: Sequence[str], *, drift: Mapping[str, Mapping], config_test: bool,
                    effects: Sequence[str] = (), runs_as: tuple[Mapping, Mapping] = ({}, {}),
                    stale: Mapping[str, str] | None = None, held: Mapping[str, str] | None = None,
                    evidence: Mapping | None = None, idle_seconds: int | None = None,
                    definition: Mapping | None = None) -> str:
    """The effect class of one gated reason of a command (``UNCLASSED`` when none fits).
    ``effects``: the command's verdict's; ``runs_as``: ``_runs_as`` of the incident's evidence;
    ``stale``: the files the evidence shows as stale state (stale_state.stale_files); ``held``: the
    drifted files that express a hold (known_good_plan.holds); ``evidence`` and ``idle_seconds``
    (the policy's ``idle_transaction_seconds``; None: no session is ended alone): for a session
    the command ends. ``definition``: the service's, whose own paths a key must be among."""
    tool = argv[0].rsplit("/", 1)[-1] if argv else ""
    lost, programs = runs_as
    if _ENDS_SESSION.match(reason):
        return _session_class(effects, evidence, idle_seconds) if idle_seconds is not None else UNCLASSED
    key = _KEY_MODE.match(reason)
    if key:
        if tool != "chmod" or not tight_mode(key.group("mode")):
            return UNCLASSED
        return "tighten_mode" if _own_path(key.group("path"), definition) else "out_of_scope"
    if tool in _MEMBERSHIP_TOOLS and "changes an account" in reason:
        return _membership_class(effects, lost)
    found = _GATED.match(reason)
    if not found:
        return UNCLASSED
    verb, path, why = found.group("verb").strip(), found.group("path"), found.group("why")
    if _UNIT_PROGRAM in why:
        return _program_class(verb, path, programs)
    if stale and _stale_target(verb, path, why, tool, argv, stale):
        return "stale_state"
    if held and path in held and (verb in ("deletes", "moves away", "copies to") or verb.startswith("applies")):
        return "owner_hold"
    new = drift.get(path) if tool == "rm" and verb == "deletes" else None
    if new and new.get("change") == "new" and _own_config(why) and [a for a in argv[1:] if not a.startswith("-")] == [path] \
            and {a for a in argv[1:] if a.startswith("-")} <= {"-f", "--force"}:
        # Back to the last healthy state: a file that appeared since, its bytes kept by the host.
        if not re.fullmatch(r"[0-9a-f]{64}", str(new.get("aside") or "")):
            return "irreversible"
        return "weakens_security" if takes_out_security(new, drift.values()) else "restore_known_good"
    if "outside the incident's scope" in why or "not a service's runtime, log or data path" in why:
        return "out_of_scope"
    if "the service's data" in why:
        return "move_data_aside"
    # Under the system's protected paths, only the staged known-good copy (below) goes back alone.
    if "an edit of the service's configuration" not in why and not (_DECLARED in why and tool == "cp"):
        return UNCLASSED
    if verb.startswith("deletes"):
        return "irreversible"
    if verb == "creates" and tool == "mkdir":
        return "create_directory"
    if verb.startswith("sets mode "):
        return "tighten_mode" if tight_mode(verb[len("sets mode "):].split(" ", 1)[0]) else UNCLASSED
    item = drift.get(path)
    if verb in ("moves away", "moves to") and tool == "mv":
        if verb == "moves away" and (not item or item.get("change") != "new" or takes_out_security(item)):
            # Only a file that appeared since the last known-good pass, and says nothing about
            # security, is moved aside alone: a file the healthy service read is its configuration.
            return "weakens_security" if item and item.get("change") == "new" else "invented_value"
        return "move_aside_config"
    if verb == "copies to" and tool == "cp":
        sources = [a for a in argv[1:-1] if not a.startswith("-")]
        staged = str((item or {}).get("restore") or "")
        if item and staged and _DIGEST.search(staged) and sources == [staged] and argv[-1] == path:
            return "weakens_security" if takes_out_security(item, drift.values()) else "restore_known_good"
        return "invented_value"
    if verb.startswith("applies"):
        script = _QUOTED.search(verb)
        new = _sed_replacement(script.group(1)) if script else None
        good = _known_good_side(str((item or {}).get("diff") or ""))
        if config_test and new and new.strip() and any(new.strip() in line for line in good):
            return "weakens_security" if weakens_security(str((item or {}).get("diff") or "")) else "config_edit"
        return "invented_value"
    if verb.startswith(("copies", "writes", "creates", "truncates", "links")):
        return "invented_value"
    return UNCLASSED


def apply(checked: Sequence[Mapping], table: Mapping[str, str] | None, *, evidence: Mapping | None,
          definition: Mapping, undoable: bool = True, idle_seconds: int | None = None) -> list[dict[str, Any]]:
    """The checked plan with each gated command whose every gated reason is in an ``auto``
    class of ``table`` allowed (its reasons say which classes); every other verdict as it was.
    Each gated command gets ``autonomy``: its classes, in reason order.

    Only what can be undone runs alone: the host must keep a snapshot of every path the verdict
    says the command changes (``undoable``: the attempt's snapshots are on and put back an
    attempt that did not heal; the verdict declares at least one path to keep), except a command
    whose every class changes no file (``WITHOUT_PATHS``). ``idle_seconds``: see
    :func:`classify_reason`."""
    table = dict(table or {})
    drift = _drift(evidence)
    running = _runs_as(evidence)
    stale = stale_files(evidence)
    held = holds("", evidence) if isinstance(evidence, Mapping) else {}
    config_test = bool(definition.get("config_test"))
    out = []
    for item in checked:
        item = dict(item)
        if item.get("verdict") != "approval":
            out.append(item)
            continue
        argv = [str(a) for a in item.get("argv") or []]
        gated = [r for r in item.get("reasons") or [] if str(r).endswith("a human should confirm")]
        effects = [str(e) for e in item.get("effects") or []]
        classes = [classify_reason(str(r), argv, drift=drift, config_test=config_test, effects=effects,
                                   runs_as=running, stale=stale, held=held, evidence=evidence,
                                   idle_seconds=idle_seconds, definition=definition) for r in gated]
        item["autonomy"] = classes
        undone = all(c in WITHOUT_PATHS for c in classes) or keep(item)
        if classes and all(table.get(c) == "auto" for c in classes) and undoable and undone:
            names = ", ".join(dict.fromkeys(classes))
            if "end_idle_transaction" in classes:  # the host checks the session again just before
                item["idle_session"] = dict(ended_session(item.get("effects") or [], evidence), min_idle=idle_seconds)
            item["verdict"] = "allow"
            item["reasons"] = [f"runs without a human: {names} (the policy's autonomy table)"] + [
                r for r in item.get("reasons") or [] if r not in gated]
        out.append(item)
    return out
