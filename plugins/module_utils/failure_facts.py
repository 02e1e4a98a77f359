# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Facts about a failure, read from the evidence: the vocabulary runbooks match on.

A runbook for a fault must be chosen by the evidence that tells that fault from the
others (a port held by another program, a PID file naming a dead process, a config test
naming a file and line), never by words every broken service shows ("not running").
This module turns evidence, structured (contract C3: ``processes``, ``unit``,
``named_paths``...) or the older text sections, into typed facts:

``{"fact": "port_held_by_other", "class": "cause", "port": 80, "process": "python3",
"pid": 4242, "evidence": "0.0.0.0:80 held by python3 (pid 4242)"}``

Every fact has a class:

* ``symptom``: what any broken service shows (``not_running``, ``not_listening``);
* ``cause``: specific evidence of why (``port_held_by_other``, ``stale_pid_file``,
  ``config_invalid``, ``path_missing``, ``unit_masked``...), and ``log_error``: an
  error in the recent log that no specific fact explains (an unknown cause);
* ``weak``: a sign that something is wrong that any cause would also show (the unit
  is in the failed state, systemd's start limit was hit);
* ``info``: context that changes no plan by itself (``killed``: an OOM or SIGKILL).

``runbooks.match_runbooks`` uses the classes: a runbook must explain every cause the
evidence shows, and a runbook that requires no cause (a plain start) is also stopped by
weak facts. So "not running" alone selects only a plain-start runbook.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import (
    SERVICE_PORTS,
    listeners,
)

SYMPTOM, CAUSE, WEAK, INFO = "symptom", "cause", "weak", "info"


@dataclass(frozen=True)
class FactKind:
    klass: str
    attrs: tuple[str, ...]
    meaning: str


FACTS: dict[str, FactKind] = {
    "not_running": FactKind(SYMPTOM, (), "the service has no running process or its init system says it is down"),
    "not_listening": FactKind(SYMPTOM, ("port",), "nothing listens on one of the service's ports"),
    "port_held_by_other": FactKind(CAUSE, ("port", "process", "pid"),
                                   "a process that is not the service listens on the service's port"),
    "address_in_use": FactKind(CAUSE, ("port",), "the service could not bind its address (already in use)"),
    "stale_pid_file": FactKind(CAUSE, ("path", "pid"), "a PID file exists but names no process of the service"),
    "path_missing": FactKind(CAUSE, ("path",), "a path the service needs (probed or named in an error) is missing"),
    "permission_denied": FactKind(CAUSE, ("path",), "an error says permission denied on a path"),
    "path_not_writable": FactKind(CAUSE, ("path", "user", "owner", "mode"),
                                  "a data or runtime path is not writable by the service's user"),
    "disk_full": FactKind(CAUSE, ("path",), "no space left on a filesystem the service writes to"),
    "config_invalid": FactKind(CAUSE, ("file", "line", "message"),
                               "the configuration test (or a start) reports a configuration error"),
    "binary_missing": FactKind(CAUSE, ("name",), "the service's executable is not on the host"),
    "process_stopped": FactKind(CAUSE, ("pid", "process"), "a process of the service is stopped (SIGSTOP or traced)"),
    "process_zombie": FactKind(CAUSE, ("pid", "process"), "a process of the service is a zombie"),
    "unit_masked": FactKind(CAUSE, ("unit",), "the systemd unit is masked"),
    "unit_not_found": FactKind(CAUSE, ("unit",), "systemd has no such unit"),
    "required_unit_missing": FactKind(CAUSE, ("unit", "required"),
                                      "the unit requires a unit systemd cannot load (not found or masked)"),
    # Weak: systemd says so of any unit that failed too often, whatever made it fail; a
    # runbook for that cause still applies (a start after StartLimitIntervalSec, or after
    # `systemctl reset-failed`, is accepted again).
    "start_limit_hit": FactKind(WEAK, ("unit",), "systemd refuses to start the unit: start limit hit"),
    "unit_changed_on_disk": FactKind(CAUSE, ("unit",), "the unit file changed on disk; systemd needs daemon-reload"),
    "unit_bad_setting": FactKind(CAUSE, ("unit", "message"),
                                 "systemd refuses the unit's settings (its file or a drop-in is invalid)"),
    "unit_failed": FactKind(WEAK, ("unit", "result"), "the unit is in the failed state"),
    # systemd's own exit statuses 200-243 ("status=217/USER", "Failed at step USER
    # spawning ..."): the process never ran because systemd could not set up one step of its
    # execution (user, group, working directory, namespaces, credentials...). The step names
    # the cause; step EXEC is binary_missing.
    "exec_step_failed": FactKind(CAUSE, ("step",), "systemd could not set up the process (a step of its execution failed)"),
    # A start systemd skips on a path condition of the unit (ConditionPathExists=!GUARD) exits 0
    # and starts nothing. ``writer``: whether the process the path names still runs (gone, alive,
    # or none when it names no process): a guard whose writer is gone is stale state.
    "start_condition_unmet": FactKind(CAUSE, ("condition", "writer"),
                                      "a path condition of the unit is not met, so systemd skips every start"),
    "log_error": FactKind(CAUSE, ("line",), "a recent log or journal line reports an error that no other fact explains"),
    "killed": FactKind(INFO, ("pid", "process"), "a process of the service was killed (OOM killer, SIGKILL)"),
}

# How many of a log's last lines are read for specific facts, and for unexplained errors.
LOG_LINES = 30
RECENT_LOG_LINES = 10

_ERROR_LINE = re.compile(
    r"\[(?:emerg|alert|crit|error)\]|\b(?:fatal|error|errors|failed|failure|cannot|can't|could not|unable|"
    r"denied|refused|abort(?:ed|ing)?|panic|segfault|corrupt(?:ed|ion)?|unrecoverable|exception|traceback|"
    r"bad file format|invalid|bad (?:directive|option|argument|value|setting)|wrong number of arguments|"
    r"unknown (?:directive|option|setting|keyword))\b", re.IGNORECASE)
_WARNING_LINE = re.compile(r"\bwarn(?:ing)?\b|\[warn\]", re.IGNORECASE)
# A failure the program itself says it carried on after (systemd: "Failed to get cgroup ID
# of ..., ignoring: Operation not permitted") is not why the service is down.
_CARRIED_ON = re.compile(r",\s*ignoring\b|\bignoring:\s", re.IGNORECASE)
# Error lines this close after a line a specific fact explained are its consequences
# ("bind() failed" then "still could not bind()"; ENOSPC then "Background saving error").
FOLLOW_LINES = 2
_COMMAND_HEADER = re.compile(r"^\s*(?:\$ .*|rc -?\d+)\s*$")
_SUMMARY_LINE = re.compile(
    r"configuration file .* test failed|\btest failed\b|FATAL CONFIG FILE ERROR|^\s*\*\*\*|^\s*>>>"
    r"|Reading the configuration file", re.IGNORECASE)
_CONFIG_OK = re.compile(r"syntax is ok|test is successful|configuration (?:file )?ok\b|^\s*Syntax OK\s*$",
                        re.IGNORECASE)
_NOT_RUNNING = re.compile(
    r"not running|\binactive\b|\bdead\b|\bstopped\b|connection refused|could not connect|nothing listens"
    r"|not listening|no process|is down\b|not active", re.IGNORECASE)
_ENOENT = re.compile(r"No such file or directory|\(2: |\bENOENT\b|does not exist", re.IGNORECASE)
_EACCES = re.compile(r"Permission denied|\(13: |\bEACCES\b|Operation not permitted", re.IGNORECASE)
_ENOSPC = re.compile(r"No space left on device|\bENOSPC\b|disk full|Disk quota exceeded", re.IGNORECASE)
_EADDRINUSE = re.compile(r"Address already in use|\bEADDRINUSE\b|could not bind|bind\(\) to \S+ failed"
                         r"|Only one usage of each socket address", re.IGNORECASE)
_CONFIG_WORDS = re.compile(r"\bconfig|directive|syntax|unknown (?:option|setting|keyword)|bad (?:option|directive)"
                           r"|\[emerg\]", re.IGNORECASE)
_NOT_FOUND_CMD = re.compile(r"(?P<name>[\w.+-]+): (?:command )?not found|Failed to (?:execute|locate executable)"
                            r" (?P<path>/\S+)|status=203/EXEC|Failed at step EXEC", re.IGNORECASE)
_FILE_LINE = re.compile(r"(?:\bin |at |^|\s|[\"'])(?P<file>/[\w.+@/-]+?)(?::(?P<line>\d+)|, line (?P<line2>\d+))\b")
_QUOTED = re.compile(r"[\"'`](/[^\"'`\s]+)[\"'`]")
_PATH = re.compile(r"(?<![\w.:/])(/(?:[\w.+@-]+/)*[\w.+@-]+)")
_MASKED = re.compile(r"\bis masked\b|\bmasked\b.*\bunit\b|unit \S+ is masked", re.IGNORECASE)
_START_LIMIT = re.compile(r"start-limit-hit|Start request repeated too quickly", re.IGNORECASE)
_CHANGED = re.compile(r"changed on disk|daemon-reload", re.IGNORECASE)
_UNIT_NOT_FOUND = re.compile(r"Unit (\S+?) (?:not found|could not be found)", re.IGNORECASE)
_EXEC_STEP = re.compile(r"\bstatus=2(?:[0-3]\d|4[0-3])/(?P<status>[A-Z_]+)\b|\bFailed at step (?P<step>[A-Z_]+) spawning")
_UNIT_FAILED = re.compile(r"Failed with result|Failed to start|Main process exited, code=|Control process exited"
                          r"|entered failed state|Scheduled restart job", re.IGNORECASE)
_KILLED = re.compile(r"Killed process (?P<pid>\d+) \((?P<name>[^)]+)\)|oom-kill|status=9/KILL|killed by signal 9"
                     r"|code=killed, status=9|Failed with result 'signal'", re.IGNORECASE)
# An error about one client request (nginx "client: ...", Apache "[client ...]") says nothing
# about why a service is down: it counts only while the service runs (a 403, a 502).
_REQUEST_LINE = re.compile(r",\s*client: \S+|\brequest: \"|\[client [^\]]+\]", re.IGNORECASE)
_BOUND_PORT = re.compile(r"(?<![\w:.])(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:]*\]|\*|localhost|::):(\d{1,5})\b"
                         r"|\bport (\d{1,5})\b", re.IGNORECASE)
_JOURNAL_SEGMENT = re.compile(r"\b(?:Starting|Stopping) \S", re.IGNORECASE)
_EXEC_DIRS = ("/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/", "/usr/local/sbin/", "/usr/local/bin/")
_RUNNING_STATES = {"running", "sleeping", "disk-sleep", "idle", "r", "s", "d", "i", "waking"}
_STOPPED_STATES = {"stopped", "tracing-stop", "traced", "t"}
_ZOMBIE_STATES = {"zombie", "z", "dead", "x"}


@dataclass
class PathState:
    """What the evidence says about one path."""

    path: str
    missing: bool = False
    kind: str = ""
    owner: str | None = None
    group: str | None = None
    mode: int | None = None
    used_pct: int | None = None
    text: str = ""
    access: str | None = None       # what the service's user may do there ("r-x"), as the host judged it
    access_user: str | None = None
    existing_parent: str | None = None   # for a missing path: its nearest existing parent


@dataclass
class FailureFacts:
    """The facts of one failure, and what they were read from."""

    service: str
    facts: list[dict] = field(default_factory=list)
    paths: dict[str, PathState] = field(default_factory=dict)
    names: frozenset[str] = frozenset()
    user: str | None = None
    init: str | None = None
    unit: str | None = None

    def of(self, name: str) -> list[dict]:
        return [f for f in self.facts if f["fact"] == name]

    def has(self, name: str) -> bool:
        return any(f["fact"] == name for f in self.facts)

    def lines(self) -> list[str]:
        """One line per fact, for the failure text, the prompt and reports."""
        return [describe(f) for f in self.facts]


def describe(fact: Mapping) -> str:
    """``port_held_by_other port=80 process=python3 pid=4242``."""
    kind = FACTS.get(str(fact.get("fact")))
    attrs = kind.attrs if kind else ()
    parts = [f"{name}={fact[name]}" for name in attrs if fact.get(name) not in (None, "")]
    return " ".join([str(fact.get("fact"))] + parts)


def service_name(service: str | None) -> str:
    name = (service or "").strip().lower()
    return name[: -len(".service")] if name.endswith(".service") else name


def own_names(service: str, service_def: Mapping | None = None) -> frozenset[str]:
    """Names the service's processes and units go by.

    The service definition's ``processes`` and ``units`` are authoritative; without them
    the usual daemon spellings of the name are assumed (redis / redis-server, ssh /
    sshd, cron / crond, postgresql / postgres).
    """
    name = service_name(service)
    names = {name} if name else set()
    base = re.sub(r"-(?:server|daemon)$", "", name)
    if base:
        names |= {base, base + "-server", base + "d"}
        if base.endswith("d") and len(base) > 4:
            names.add(base[:-1])
        if base.endswith("ql"):
            names.add(base[:-2])
    definition = service_def or {}
    for key in ("processes", "units"):
        for item in definition.get(key) or []:
            names.add(service_name(str(item)).split("@", maxsplit=1)[0])
    return frozenset(n for n in names if n)


def _ports(service: str, error: str, service_def: Mapping | None) -> set[int]:
    ports = {int(p) for p in (service_def or {}).get("ports") or [] if str(p).isdigit()}
    if not ports:
        ports = set(SERVICE_PORTS.get(service_name(service), ()))
    for match in re.finditer(r"(?:(?<=:)|\bport\s+)(\d{2,5})\b", error or "", re.IGNORECASE):
        if 0 < int(match.group(1)) < 65536:
            ports.add(int(match.group(1)))
    return ports


# ---------------------------------------------------------------------- text sections

@dataclass
class _Section:
    key: str
    kind: str          # error | status | config | log | journal | oom | other
    lines: list[str]
    recent_from: int = 0   # lines[recent_from:] are "recent" for unexplained errors


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _sections(error: str | None, evidence) -> list[_Section]:
    out = []
    if error:
        out.append(_Section("error", "error", str(error).splitlines()))
    if isinstance(evidence, (str, bytes)):
        lines = (evidence.decode("utf-8", "replace") if isinstance(evidence, bytes) else evidence).splitlines()
        lines = lines[-LOG_LINES:]
        return out + [_Section("text", "log", lines, max(0, len(lines) - RECENT_LOG_LINES))]
    if not isinstance(evidence, Mapping):
        return out
    structured = {"listeners", "paths", "pid_files", "processes", "named_paths", "unit", "other_units", "init",
                  "service_pids", "tools", "config_context", "user", "disk", "dependencies", "dependency_up",
                  "client_connections", "blocking_sessions", "recent_changes", "certificates", "environment",
                  "includes", "conditions", "environment_files", "data_markers"}
    for key in sorted(evidence, key=str):
        value = evidence[key]
        if key in structured or value is None:
            continue
        if key == "status":
            out.append(_Section("status", "status", _text(value).splitlines()))
        elif key == "config_test":
            out.append(_Section("config_test", "config", _text(value).splitlines()))
        elif key == "oom":
            out.append(_Section("oom", "oom", _text(value).splitlines()))
        elif key == "journal":
            lines = _text(value).splitlines()
            start = 0
            for index, line in enumerate(lines):
                if _JOURNAL_SEGMENT.search(line):
                    start = index
            lines = lines[start:][-LOG_LINES:]
            out.append(_Section("journal", "journal", lines, 0))
        elif key == "logs" and isinstance(value, Mapping):
            for path in sorted(value, key=str):
                text = _text(value[path])
                if text.strip() in ("missing", "no file matches", "(empty)", "not a regular file") or \
                        text.startswith("unreadable:"):
                    continue
                lines = text.splitlines()[-LOG_LINES:]
                out.append(_Section(f"logs.{path}", "log", lines, max(0, len(lines) - RECENT_LOG_LINES)))
        else:
            lines = _text(value).splitlines()[-LOG_LINES:]
            out.append(_Section(str(key), "log", lines, max(0, len(lines) - RECENT_LOG_LINES)))
    return out


# ---------------------------------------------------------------------- path states

_OWNER = re.compile(r"\bowner (?P<user>[\w.-]+)(?::(?P<group>[\w.-]+))?")
_MODE = re.compile(r"\bmode (?P<mode>0?[0-7]{3,4})\b")
_USED = re.compile(r"(\d+)% used")
_PARENT = re.compile(r"nearest existing parent (/[^\s:;,)]*)")
# The evidence module's judgement of the service user's access: "; user redis may r-x"
_ACCESS = re.compile(r"\buser (?P<user>[\w.-]+) may (?P<access>[r-][w-][x-])")


def parse_path_state(path: str, state) -> PathState:
    """A path state from the evidence module's line or a C3 ``named_paths`` entry."""
    item = PathState(path=str(path))
    if isinstance(state, Mapping):
        text = _text(state)
        kind = str(state.get("type") or state.get("kind") or state.get("state") or "").lower()
        item.missing = state.get("exists") is False or kind in ("missing", "absent") or \
            "dangling" in kind or state.get("dangling") is True
        if isinstance(state.get("user_access"), str):
            item.access = state["user_access"]
        if isinstance(state.get("existing_parent"), str):
            item.existing_parent = state["existing_parent"]
        item.kind = kind
        owner = state.get("owner")
        if isinstance(owner, str) and ":" in owner and not state.get("group"):
            owner, group = owner.split(":", 1)
            item.group = group
        item.owner = str(owner) if owner else None
        item.group = str(state.get("group")) if state.get("group") else item.group
        mode = state.get("mode")
        if isinstance(mode, int):
            item.mode = mode if mode < 0o10000 else None
        elif isinstance(mode, str) and re.fullmatch(r"0?[0-7]{3,4}", mode.strip()):
            item.mode = int(mode.strip(), 8)
        used = state.get("used_pct") if "used_pct" in state else state.get("used_percent")
        if isinstance(used, (int, float)):
            item.used_pct = int(used)
    else:
        text = _text(state)
        first = text.split(";")[0].strip().lower()
        item.missing = first.startswith(("missing", "no such", "dangling")) or "dangling symlink" in first
        item.kind = first.split(",")[0].split(" ")[0] if first else ""
    item.text = text
    head = text.split(";")[0] if not isinstance(state, Mapping) else text
    if item.owner is None and not item.missing:
        owner = _OWNER.search(head)
        if owner:
            item.owner, item.group = owner.group("user"), owner.group("group")
    if item.mode is None and not item.missing:
        mode = _MODE.search(head)
        if mode:
            item.mode = int(mode.group("mode"), 8)
    if item.used_pct is None:
        used = _USED.search(text)
        if used:
            item.used_pct = int(used.group(1))
    access = _ACCESS.search(text)
    if access:
        item.access_user, item.access = access.group("user"), access.group("access")
    parent = _PARENT.search(text)
    if item.missing and item.existing_parent is None and parent:
        item.existing_parent = parent.group(1)
    return item


def volatile(path: str) -> bool:
    """A path on the runtime filesystem (``/run``, ``/var/run``): emptied at every boot, so
    whatever a service needs there its start creates (systemd's ``RuntimeDirectory=``, an
    init script's ``mkdir``), and a stop may remove it."""
    return re.match(r"^(?:/var)?/run/.", path) is not None


def created_at_start(state: PathState) -> bool:
    """A missing path the service's start creates, so its absence while the service is down
    is no fault: a file (a name with an extension: a PID file, a socket, a log) in a
    directory that exists, or anything on the runtime filesystem (see ``volatile``). When
    the start does fail for want of it, the error line naming it is still a fact."""
    name = state.path.rstrip("/").rsplit("/", 1)[-1]
    parent = state.path.rstrip("/").rsplit("/", 1)[0] or "/"
    if state.missing and volatile(state.path):
        return True
    return state.missing and bool(re.search(r"\.[A-Za-z0-9]{1,8}$", name)) and state.existing_parent == parent


def writable_by(state: PathState, user: str) -> bool | None:
    """Whether ``user`` may write ``state``'s path (None when the evidence cannot tell).

    The group is taken to be the user's own group when it has the user's name (the
    Debian convention, ``redis:redis``); membership of other groups is not known.
    """
    if state.missing:
        return None
    directory = state.kind.startswith("dir")
    if state.access and state.access_user in (None, user):
        # The host judged it with the account's real groups: better than the mode bits.
        return "w" in state.access and (not directory or "x" in state.access)
    if state.mode is None or state.owner is None:
        return None
    if user == "root":
        return True
    need = 0o3 if directory else 0o2   # write, plus search for a directory
    if state.owner == user:
        return (state.mode >> 6) & need == need
    if state.group and state.group == user:
        return (state.mode >> 3) & need == need
    return state.mode & need == need


# ---------------------------------------------------------------------- extraction

class _Collector:
    def __init__(self, result: FailureFacts):
        self.result = result
        self.keys: set[tuple] = set()
        self.used: set[tuple[str, int]] = set()
        # Lines read and set aside (an error the program says it carried on after): not
        # reported, and unlike a line a fact explains, not the cause of the lines after it.
        self.dismissed: set[tuple[str, int]] = set()

    def add(self, fact_name: str, evidence: str, source: str = "probe", **attrs) -> None:
        """Record a fact; ``source`` is where it was read: a probe of the current state
        (``probe``, ``status``, ``config``, ``error``) or history (``log``, ``journal``)."""
        name = fact_name
        kind = FACTS[name]
        attrs = {k: v for k, v in attrs.items() if k in kind.attrs}
        key = (name,) + tuple((k, str(attrs.get(k))) for k in kind.attrs)
        if key in self.keys:
            return
        self.keys.add(key)
        fact = {"fact": name, "class": kind.klass}
        fact.update({k: v for k, v in attrs.items() if v is not None})
        fact["source"] = source
        fact["evidence"] = " ".join(str(evidence).split())[:300]
        self.result.facts.append(fact)


def _paths_in(line: str) -> list[str]:
    found = _QUOTED.findall(line) or _PATH.findall(line)
    return [p.rstrip(".,:;)") for p in found if len(p) > 1]


def extract_facts(service: str, error: str | None, evidence, host_tools: Mapping | None = None,
                  service_def: Mapping | None = None) -> FailureFacts:
    """Every fact the evidence shows about this failure of ``service``.

    ``evidence`` is the evidence module's dict (text sections or C3 structured keys) or a
    text; ``service_def`` is the service's definition (contract C1), used for its user,
    processes, units, ports and data/runtime paths when given.
    """
    definition = service_def or {}
    names = own_names(service, definition)
    result = FailureFacts(service=service_name(service), names=names)
    facts = _Collector(result)
    ev = evidence if isinstance(evidence, Mapping) else {}
    sections = _sections(error, evidence)
    result.init = str(ev.get("init") or "").lower() or ("systemd" if isinstance(ev.get("unit"), Mapping) else None)
    result.user = str(definition.get("user") or ev.get("user") or "") or None

    _process_facts(result, facts, ev, names)
    _listener_facts(facts, ev, evidence, names, _ports(service, error or "", definition))
    _pid_file_facts(facts, ev, sections, names)
    _path_facts(result, facts, ev, definition, names, host_tools)
    _unit_facts(result, facts, ev, sections, definition)
    _condition_facts(facts, ev)
    _line_facts(facts, sections, names)
    _symptoms(result, facts, ev, sections, names)
    _drop_contradicted_history(result)
    _unexplained_errors(facts, sections)
    _drop_passed_config_history(result, sections, definition)
    return result


_DENIED = re.compile(r"permission denied|access denied|not permitted|EACCES|EPERM", re.IGNORECASE)


def _drop_passed_config_history(result: FailureFacts, sections, definition: Mapping) -> None:
    """A configuration complaint read from a log or journal, about a file the service's own
    configuration test accepts now, is a past incident: the file was put right since (a
    deploy rolled back, an operator's edit) and what is left is its aftermath (a unit at its
    start limit, a stale PID file). Complaints of access (permission denied) stay: a test run
    as root passes where the service's user cannot read."""
    tests = [s for s in sections if s.kind == "config"]
    if not tests or not all(_test_rc(s) == 0 for s in tests):
        return
    roots = set()
    for section in tests:
        for line in section.lines:
            for path in _paths_in(line):
                if path.startswith("/etc/"):
                    roots.add(path.rsplit("/", 1)[0] if "." in path.rsplit("/", 1)[-1] else path)
    for path in definition.get("config_paths") or ():
        roots.add(str(path).rstrip("/"))
    roots.discard("/etc")
    if not roots:
        return

    def about_config(fact: Mapping) -> bool:
        text = str(fact.get("evidence") or "")
        return not _DENIED.search(text) and any(
            p == root or p.startswith(root + "/") for p in _paths_in(text) for root in roots)

    result.facts[:] = [f for f in result.facts
                       if not (f.get("source") in ("log", "journal") and f["fact"] in ("config_invalid", "log_error")
                               and about_config(f))]


_RC_LINE = re.compile(r"^\s*rc (-?\d+)\s*$")
_KILLED_LINE = re.compile(r"^timed out after \d+s$")


def killed_at_timeout(text: str) -> bool:
    """Whether an evidence command's text (``$ argv`` / ``rc N`` / output) says the command was
    killed at its timeout: its own rc line (the first) is 124 and its last line is the note the
    host adds (host_probe.run_argv), not words its output could print anywhere. On a loaded host
    the same command finishes a minute later, so what it printed says nothing of the failure."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    rc = next((m.group(1) for m in map(_RC_LINE.match, lines) if m), None)
    return rc == "124" and bool(lines) and bool(_KILLED_LINE.match(lines[-1].strip()))


def _unfinished(section) -> bool:
    """A config test killed at its timeout: no fact of the failure (the failure's signature reads
    facts, and an approval holds to the signature)."""
    return killed_at_timeout("\n".join(section.lines))


def _test_rc(section) -> int | None:
    return next((int(m.group(1)) for m in (re.match(r"^\s*rc (-?\d+)", x) for x in section.lines) if m), None)


def _drop_contradicted_history(result: FailureFacts) -> None:
    """Logs keep history: a fact read from a log or journal that a probe of the current
    state contradicts is a past incident, not this one (an old "Address already in use"
    while nothing listens on the port, an old ENOSPC on a filesystem with room now; an
    error about one client request while the service is not running at all)."""
    down = any(f["fact"] == "not_running" for f in result.facts)
    free_ports = {f.get("port") for f in result.facts if f["fact"] == "not_listening"}
    held = any(f["fact"] == "port_held_by_other" for f in result.facts)
    usages = [s.used_pct for s in result.paths.values() if s.used_pct is not None]
    kept = []
    for fact in result.facts:
        if fact.get("source") in ("log", "journal"):
            name = fact["fact"]
            if name == "address_in_use" and not held and free_ports and \
                    (fact.get("port") in free_ports or fact.get("port") is None):
                continue
            if name == "path_missing" and fact.get("path") in result.paths and \
                    not result.paths[fact["path"]].missing:
                continue
            if name == "disk_full" and usages and max(usages) < 90:
                continue
            if down and _REQUEST_LINE.search(fact.get("evidence", "")):
                continue
        kept.append(fact)
    result.facts[:] = kept


def _process_facts(result, facts, ev, names) -> None:
    processes = ev.get("processes")
    if not isinstance(processes, list):
        return
    running_users = set()
    for proc in processes:
        if not isinstance(proc, Mapping):
            continue
        comm = str(proc.get("comm") or proc.get("name") or "").lower()
        if comm not in names:
            continue
        state = str(proc.get("state") or "").lower()
        pid = proc.get("pid")
        if state in _STOPPED_STATES:
            facts.add("process_stopped", f"process {pid} ({comm}) is {state}", pid=pid, process=comm)
        elif state in _ZOMBIE_STATES:
            facts.add("process_zombie", f"process {pid} ({comm}) is a zombie", pid=pid, process=comm)
        elif proc.get("user") and proc.get("user") != "root":
            running_users.add(str(proc["user"]))
    if result.user is None and len(running_users) == 1:
        result.user = running_users.pop()


def _holders_from_processes(ev) -> list[dict]:
    out = []
    for proc in ev.get("processes") or [] if isinstance(ev.get("processes"), list) else []:
        if not isinstance(proc, Mapping):
            continue
        for port in proc.get("ports") or []:
            if str(port).isdigit():
                out.append({"port": int(port), "process": str(proc.get("comm") or proc.get("name") or ""),
                            "pid": proc.get("pid"), "likely": False,
                            "line": f"port {port} held by {proc.get('comm')} (pid {proc.get('pid')})"})
    return out


def _listener_facts(facts, ev, evidence, names, ports: set[int]) -> None:
    # The evidence module's listener section only lists the service's own ports.
    section_ports = set()
    if isinstance(ev.get("listeners"), str):
        section_ports = {item["port"] for item in listeners({"listeners": ev["listeners"]})}
        for match in re.finditer(r"^port (\d+): nothing listening", ev["listeners"], re.MULTILINE):
            facts.add("not_listening", match.group(0), port=int(match.group(1)))
    wanted = ports | section_ports
    holders = listeners(evidence) + _holders_from_processes(ev)
    for item in holders:
        if item["port"] not in wanted:
            continue
        name = (item.get("process") or "").lower()
        if name and name in names:
            continue
        line = item.get("line") or f"port {item['port']} held by {name or 'an unseen process'} (pid {item['pid']})"
        facts.add("port_held_by_other", line, port=item["port"], process=name or None, pid=item["pid"])


def _pid_file_facts(facts, ev, sections, names) -> None:
    pid_files = ev.get("pid_files")
    found = False
    if isinstance(pid_files, Mapping):
        for path, state in pid_files.items():
            text = _text(state)
            lowered = text.lower()
            pid = re.search(r"\bpid (\d+)", lowered)
            pid = int(pid.group(1)) if pid else None
            stale = "not running" in lowered or "stale" in lowered
            if not stale and "is running" in lowered:
                # The PID was reused by a program that is not the service.
                runs = lowered.split(":", 1)[1] if ":" in lowered else ""
                words = set(re.findall(r"[\w.-]+", runs.replace("/", " ")))
                stale = bool(runs.strip()) and not words & names
            if stale:
                found = True
                facts.add("stale_pid_file", f"{path}: {text}", path=str(path), pid=pid)
    if found:
        return
    for section in sections:
        if section.kind != "status":
            continue
        for line in section.lines:
            if re.search(r"pid ?file exists|stale pid", line, re.IGNORECASE):
                facts.add("stale_pid_file", line, source="status", path=None)
                return
        # LSB init scripts (`service NAME status`) exit 1 for "dead, but the PID file exists"
        # (3 is "not running"); systemctl's codes differ, so only SysV status counts.
        command = next((x for x in section.lines if x.startswith("$ ")), "")
        rc = next((x.strip() for x in section.lines if re.match(r"^\s*rc -?\d+\s*$", x)), "")
        if re.match(r"^\$ (?:service \S+ status|/etc/init\.d/\S+ status)", command) and rc == "rc 1":
            facts.add("stale_pid_file", f"{command[2:]}: exit 1 (LSB: dead, PID file exists)", source="status",
                      path=None)


def _path_facts(result, facts, ev, definition, names, host_tools) -> None:
    states: dict[str, PathState] = {}
    for key in ("paths", "named_paths"):
        section = ev.get(key)
        if isinstance(section, Mapping):
            for path, state in section.items():
                states[str(path)] = parse_path_state(str(path), state)
        elif isinstance(section, list):
            for entry in section:
                if isinstance(entry, Mapping) and entry.get("path"):
                    states[str(entry["path"])] = parse_path_state(str(entry["path"]), entry)
    result.paths = states
    for path, state in sorted(states.items()):
        if state.missing:
            base = path.rstrip("/").rsplit("/", 1)[-1].lower()
            if path.startswith(_EXEC_DIRS) and base in names:
                facts.add("binary_missing", f"{path}: {state.text}", name=base)
            elif created_at_start(state):
                continue   # an error line that names it still makes it a fact (_line_fact)
            else:
                facts.add("path_missing", f"{path}: {state.text.splitlines()[0] if state.text else 'missing'}",
                          path=path)
        if state.used_pct is not None and state.used_pct >= 98:
            facts.add("disk_full", f"{path}: {state.used_pct}% used", path=path)
    absent = {str(t).lower() for t in (host_tools or {}).get("absent") or []}
    present = {str(t).lower() for t in (host_tools or {}).get("present") or []}
    binaries = {service_name(str(p)) for p in definition.get("processes") or []} or \
        {n for n in names if n in (result.service, re.sub(r"-(?:server|daemon)$", "", result.service) + "-server")}
    missing = sorted(binaries & absent)
    if missing and not (binaries & present):
        facts.add("binary_missing", f"the host has no {', '.join(missing)}", name=missing[0])


def _unit_facts(result, facts, ev, sections, definition) -> None:
    unit = ev.get("unit")
    name = None
    if isinstance(unit, Mapping):
        props = {str(k).lower(): str(v) for k, v in unit.items() if v is not None}
        name = props.get("id") or props.get("names", "").split(" ")[0] or None
        load = props.get("loadstate", "").lower()
        file_state = props.get("unitfilestate", "").lower()
        active = props.get("activestate", "").lower()
        res = props.get("result", "").lower()
        if load == "masked" or file_state.startswith("masked"):
            facts.add("unit_masked", f"unit LoadState={load} UnitFileState={file_state}", unit=name)
        if load == "not-found":
            facts.add("unit_not_found", f"unit LoadState={load}", unit=name)
        if load in ("bad-setting", "error"):
            # The journal says which setting; daemon-reload and restart cannot help until the
            # file or drop-in is corrected.
            why = _journal_refusal(sections)
            facts.add("unit_bad_setting", f"unit LoadState={load}" + (f": {why}" if why else ""), unit=name,
                      message=why or None)
        for other, state in _NOT_LOADED.findall(props.get("requirednotloaded", "")):
            facts.add("required_unit_missing", f"unit requires {other} ({state})", unit=name, required=other)
        if res == "start-limit-hit":
            facts.add("start_limit_hit", f"unit Result={res}", unit=name)
        if props.get("needdaemonreload", "").lower() in ("yes", "true", "1"):
            facts.add("unit_changed_on_disk", "unit NeedDaemonReload=yes", unit=name)
        if res in ("signal", "oom-kill") or (res and props.get("execmainstatus") == "9"):
            facts.add("killed", f"unit Result={res} ExecMainStatus={props.get('execmainstatus', '')}", unit=name)
        elif active == "failed" or (res and res not in ("success", "start-limit-hit")):
            facts.add("unit_failed", f"unit ActiveState={active} Result={res}", unit=name, result=res or None)
    if not name:
        units = [str(u) for u in (definition.get("units") or [])]
        name = units[0] if units else None
    result.unit = name


def _condition_facts(facts, ev) -> None:
    """Unmet path conditions of the unit (the evidence's ``conditions``), in a stable form: the
    condition and whether its path's writer runs, never a PID or a time."""
    conditions = ev.get("conditions")
    if not isinstance(conditions, Mapping):
        return
    for condition, text in conditions.items():
        text = _text(text)
        if not text.startswith("NOT met now"):
            continue
        writer = "gone" if "writer gone:" in text else "alive" if "writer alive:" in text else "none"
        facts.add("start_condition_unmet", f"{condition} is not met (writer {writer})", condition=str(condition),
                  writer=writer)


_REFUSAL = re.compile(r"Refusing|bad unit file setting|Invalid (?:argument|section|setting)|Unknown (?:key|section)|"
                      r"has more than one|Failed to parse|is not allowed", re.IGNORECASE)


# The evidence module's RequiredNotLoaded: "stunnel@redis.service (not-found) old.service (masked)".
_NOT_LOADED = re.compile(r"(\S+) \(([\w-]+)\)")


def _journal_refusal(sections) -> str:
    """The newest journal line where systemd says why it refuses a unit's settings."""
    for section in sections:
        if section.kind == "journal":
            for line in reversed(section.lines):
                if _REFUSAL.search(line):
                    return line.split(": ", 1)[-1].strip()[:300] if "]: " in line else line.strip()[:300]
    return ""


def _log_config_error(facts, section, summaries: list[int]) -> None:
    """A daemon that reports a configuration error over several log lines (a summary such
    as "*** FATAL CONFIG FILE ERROR ***", then "at line N", the offending line, the reason):
    one config_invalid fact, with the line number and the reason when they are there."""
    first = summaries[0]
    who = _EMITTER.match(section.lines[first])
    window = []
    for line in section.lines[first:first + 6]:
        other = _EMITTER.match(line)
        if who and (not other or other.group("who") != who.group("who")):
            break     # in a journal, only the lines of the same process belong to the message
        window.append(line)
    if any((section.key, index) in facts.used for index in range(max(0, first - 3), first + len(window))
           if index not in summaries):
        return    # a line of the message gave a specific fact ("Permission denied" on the path named)
    said = [line.split("]: ", 1)[-1].strip() for line in window]
    number = next((int(m.group(1)) for m in (re.search(r"\bline (\d+)", x) for x in said) if m), None)
    reason = next((x for x in said if x and not _SUMMARY_LINE.search(x)), "")
    offending = next((x[3:].strip() for x in said if x.startswith(">>>")), "")
    message = "; ".join(x for x in (reason, f"at line {number}: {offending}" if number and offending else offending) if x)
    facts.add("config_invalid", source=section.kind, evidence=window[0], line=number,
              message=message or section.lines[first].strip())
    for index in range(first, first + len(window)):
        facts.used.add((section.key, index))


def _line_facts(facts, sections, names) -> None:
    """Specific facts read from error lines; each line used is marked as explained."""
    for section in sections:
        if section.kind == "oom":
            for index, line in enumerate(section.lines):
                match = _KILLED.search(line)
                if match and (not match.group("name") or match.group("name").lower() in names):
                    facts.add("killed", source=section.kind, evidence=line, pid=int(match.group("pid")) if match.group("pid") else None,
                              process=(match.group("name") or "").lower() or None)
            continue
        if section.kind == "config" and _unfinished(section):
            continue  # a test that did not finish in time said nothing of the configuration
        produced = False
        summaries = []
        for index, line in enumerate(section.lines):
            if _COMMAND_HEADER.match(line) or not line.strip():
                continue
            if section.kind in ("log", "journal") and _CARRIED_ON.search(line):
                facts.dismissed.add((section.key, index))
                continue
            if section.kind == "config" and _CONFIG_OK.search(line):
                continue
            if section.kind == "config" and _runtime_only(line, facts.result.paths):
                # A config test run outside the start procedure misses what the start
                # creates (sshd -t: "Missing privilege separation directory: /run/sshd").
                facts.used.add((section.key, index))
                produced = True
                continue
            if _line_fact(facts, section, line, names):
                facts.used.add((section.key, index))
                produced = True
            elif section.kind == "config" and _SUMMARY_LINE.search(line):
                summaries.append(index)
            elif _SUMMARY_LINE.search(line) and (_ERROR_LINE.search(line) or _CONFIG_WORDS.search(line)):
                summaries.append(index)
        # A summary ("test failed", "*** FATAL CONFIG FILE ERROR ***") repeats what the lines
        # around it said; alone, it still says the configuration is wrong.
        for index in summaries:
            facts.used.add((section.key, index))
        if section.kind == "config" and summaries and not produced:
            facts.add("config_invalid", source=section.kind, evidence=section.lines[summaries[0]], message=section.lines[summaries[0]].strip())
        config_summaries = [i for i in summaries if _CONFIG_WORDS.search(section.lines[i])]
        if section.kind in ("log", "journal") and config_summaries and not facts.result.has("config_invalid"):
            _log_config_error(facts, section, config_summaries)
        if section.kind == "config" and not produced and not summaries:
            _config_exit(facts, section, names)


def _runtime_only(line: str, states: Mapping[str, PathState]) -> bool:
    """Whether every path ``line`` names is a runtime path that is missing now (or was not
    probed), and it names at least one."""
    paths = _paths_in(line)
    return bool(paths) and all(volatile(p) and (p not in states or states[p].missing) for p in paths)


def _config_exit(facts, section, names) -> None:
    """A config test that failed without a line any rule knows: its exit code decides."""
    rc = _test_rc(section) or 0
    command = next((x[2:].split()[0] for x in section.lines if x.startswith("$ ") and x[2:].split()), "")
    output = [x for x in section.lines if x.strip() and not _COMMAND_HEADER.match(x) and not _CONFIG_OK.search(x)]
    if rc == 127:
        # The test's program is missing: when it is the service's own binary, so is the service.
        name = command.rsplit("/", 1)[-1].lower()
        if name in names:
            facts.add("binary_missing", source=section.kind, evidence=f"$ {command}: rc 127 (not found)", name=name)
        return
    if rc != 0 and output:
        errors = [x for x in output if _ERROR_LINE.search(x)] or output
        facts.add("config_invalid", source=section.kind, evidence=errors[0], message=errors[0].strip())


# "2026-11-26T13:09:09+0000 host prog[42]:" (short-iso) or "Nov 26 13:09:09 host prog[42]:" (short)
_EMITTER = re.compile(r"^(?:[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}|\S+)\s+\S+\s+(?P<who>[\w.@()-]+\[\d+\]):")


def _context_paths(section, line: str, back: int = 3) -> list[str]:
    """Paths named by the lines just before ``line`` that belong to the same message: a
    daemon that reports an error over several lines (redis: ``>>> 'dir /var/lib/redis'``
    then ``Permission denied``). In a journal only lines of the same process count."""
    try:
        index = section.lines.index(line)
    except ValueError:
        return []
    who = _EMITTER.match(line)
    found: list[str] = []
    for previous in reversed(section.lines[max(0, index - back):index]):
        if who:
            other = _EMITTER.match(previous)
            if not other or other.group("who") != who.group("who"):
                break
        if _EACCES.search(previous) or _ENOENT.search(previous):
            break    # an earlier, separate error
        found.extend(p for p in _PATH.findall(previous) if len(p) > 1)
        if found:
            break
    return [p.rstrip(".,:;)'\"") for p in found]


def _line_fact(facts, section, line: str, names) -> bool:
    """Record the specific fact one line shows; whether it showed one."""
    kind = section.kind
    if _ENOSPC.search(line):
        paths = _paths_in(line)
        facts.add("disk_full", source=section.kind, evidence=line, path=paths[0] if paths else None)
        return True
    if _EADDRINUSE.search(line):
        port = _BOUND_PORT.search(line)
        facts.add("address_in_use", source=section.kind, evidence=line, port=int(port.group(1) or port.group(2)) if port else None)
        return True
    if _MASKED.search(line) and kind in ("error", "status", "journal"):
        facts.add("unit_masked", source=section.kind, evidence=line)
        return True
    if _START_LIMIT.search(line):
        facts.add("start_limit_hit", source=section.kind, evidence=line)
        return True
    if _CHANGED.search(line) and kind in ("status", "journal", "error"):
        facts.add("unit_changed_on_disk", source=section.kind, evidence=line)
        return True
    unit = _UNIT_NOT_FOUND.search(line)
    if unit:
        facts.add("unit_not_found", source=section.kind, evidence=line, unit=unit.group(1))
        return True
    command = _NOT_FOUND_CMD.search(line)
    if command:
        name = command.group("name") or (command.group("path") or "").rsplit("/", 1)[-1]
        if not name or name.lower() in names or command.group(0).lower().startswith(("status=203", "failed at")):
            facts.add("binary_missing", source=section.kind, evidence=line, name=(name or "").lower() or None)
            return True
    error_line = _ERROR_LINE.search(line) or kind == "config"
    if _EACCES.search(line):
        for path in _paths_in(line)[:2] or _context_paths(section, line)[:1] or [None]:
            facts.add("permission_denied", source=section.kind, evidence=line, path=path)
        return True
    if _ENOENT.search(line) and error_line:
        paths = _paths_in(line)
        if paths:
            for path in paths[:2]:
                base = path.rsplit("/", 1)[-1].lower()
                if path.startswith(_EXEC_DIRS) and base in names:
                    facts.add("binary_missing", source=section.kind, evidence=line, name=base)
                else:
                    facts.add("path_missing", source=section.kind, evidence=line, path=path)
            return True
    step = _EXEC_STEP.search(line)
    if step and kind in ("status", "journal", "error"):
        facts.add("exec_step_failed", source=section.kind, evidence=line, step=step.group("status") or step.group("step"))
        return True
    if kind == "journal" and _KILLED.search(line):
        facts.add("killed", source=section.kind, evidence=line)
        return True
    if kind == "journal" and _UNIT_FAILED.search(line):
        facts.add("unit_failed", source=section.kind, evidence=line)
        return True
    if (kind == "config" and _ERROR_LINE.search(line) and not _SUMMARY_LINE.search(line)) or \
            (kind in ("log", "journal") and _CONFIG_WORDS.search(line) and _ERROR_LINE.search(line)
             and _FILE_LINE.search(line)):
        located = _FILE_LINE.search(line)
        file = located.group("file") if located else None
        number = (located.group("line") or located.group("line2")) if located else None
        facts.add("config_invalid", source=section.kind, evidence=line, file=file, line=int(number) if number else None, message=line.strip())
        return True
    return False


def _symptoms(result, facts, ev, sections, names) -> None:
    processes = ev.get("processes")
    if isinstance(processes, list):
        own = [p for p in processes if isinstance(p, Mapping) and str(p.get("comm") or p.get("name") or "").lower()
               in names]
        if not any(str(p.get("state") or "running").lower() in _RUNNING_STATES for p in own):
            facts.add("not_running", "no running process of the service")
    elif isinstance(processes, str) and re.search(r"^no process", processes.strip(), re.IGNORECASE):
        facts.add("not_running", processes.strip().splitlines()[0])
    unit = ev.get("unit")
    if isinstance(unit, Mapping):
        active = str(unit.get("ActiveState") or unit.get("activestate") or "").lower()
        if active in ("inactive", "failed", "deactivating"):
            facts.add("not_running", f"unit ActiveState={active}")
    for section in sections:
        if section.kind not in ("status", "error"):
            continue
        for line in section.lines:
            if not _COMMAND_HEADER.match(line) and _NOT_RUNNING.search(line):
                facts.add("not_running", line, source=section.kind)
                break
    # One not_running is enough; keep the first (most direct) piece of evidence.
    first = next((f for f in result.facts if f["fact"] == "not_running"), None)
    result.facts[:] = [f for f in result.facts if f["fact"] != "not_running" or f is first]


def _same_emitter(earlier: str, line: str) -> bool:
    """Whether two log lines may be one program's message and its consequence: in a journal,
    only lines of the same process (a daemon's own error that reaches the journal just after
    systemd's "Failed with result" is not a consequence of it); elsewhere, any two lines."""
    first, second = _EMITTER.match(earlier), _EMITTER.match(line)
    return not (first and second) or first.group("who") == second.group("who")


def _unexplained_errors(facts, sections) -> None:
    down = facts.result.has("not_running")
    for section in sections:
        if section.kind not in ("log", "journal"):
            continue
        explained = {i for key, i in facts.used if key == section.key}
        dismissed = {i for key, i in facts.dismissed if key == section.key}
        for index in range(section.recent_from, len(section.lines)):
            line = section.lines[index]
            if index in explained or index in dismissed or _COMMAND_HEADER.match(line) or _WARNING_LINE.search(line):
                continue
            if any(index - back in explained and _same_emitter(section.lines[index - back], line)
                   for back in range(1, FOLLOW_LINES + 1)):
                explained.add(index)
                continue
            if down and _REQUEST_LINE.search(line):
                continue
            if _ERROR_LINE.search(line):
                facts.add("log_error", source=section.kind, evidence=line, line=" ".join(line.split())[:200])
