# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Evidence about one failing service (contract C3), bounded and redacted on the host.

Shared by the evidence, service_health and execute_plan modules, so health, evidence and
a plan's verification can each be one round trip. :func:`collect` takes a resolved service
definition (``service_spec.resolve``) and returns ``{"evidence", "tools", "truncated"}``.
Runs on targets: standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import calendar
import glob
import json
import os
import re
import stat
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import client_connections, operator_notes
from ansible_collections.sentinel.remediation.plugins.module_utils import scheduled_jobs
from ansible_collections.sentinel.remediation.plugins.module_utils import (
    file_writers,
    host_probe,
    path_ownership,
    unit_conditions,
    start_files,
    tls_evidence,
    writer_records,
)
from ansible_collections.sentinel.remediation.plugins.module_utils.health_checks import (
    UNIT_STATE_KEYS,
    parse_show,
    show_unit,
)
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text, redact_value
from ansible_collections.sentinel.remediation.plugins.module_utils.service_spec import tool_candidates

MAX_LOG_FILES = 10
MAX_PROCESSES = 24
MAX_CMDLINE = 240
MAX_CONTEXTS = 3
MAX_NAMED_PATHS = 12
DIR_ENTRIES = 8
CONTEXT_LINES = 4
CONTEXT_LINE_WIDTH = 200
CONFIG_FILE_MAX = 1024 * 1024
OOM_LINES = 10
KERNEL_LOGS = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
_OOM_RE = re.compile(r"out of memory|oom-kill|oom_reaper|killed process|invoked oom-killer", re.IGNORECASE)
_OMITTED = "[omitted: max_bytes reached]"

# systemctl show properties that explain a unit's state; see systemd.unit(5) and
# org.freedesktop.systemd1(5). StatusText is what Type=notify services say of themselves.
UNIT_PROPERTIES = UNIT_STATE_KEYS + (
    "NRestarts", "ExecMainStatus", "ExecMainCode", "ExecMainPID", "MainPID", "FragmentPath", "DropInPaths",
    "NeedDaemonReload", "StatusText", "ActiveEnterTimestamp", "InactiveEnterTimestamp", "User", "Group",
    "ControlGroup", "Restart", "StartLimitBurst", "StartLimitIntervalUSec", "ConditionResult",
    # The directories the unit declares as its own (systemd creates and owns them) and its
    # PID file: the incident scope of a service nobody described in detail.
    "RuntimeDirectory", "StateDirectory", "LogsDirectory", "CacheDirectory", "ConfigurationDirectory", "PIDFile",
    # Units it cannot start without: one that does not exist (or is masked) stops every start.
    "Requires", "Requisite", "BindsTo",
) + ("ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop")
# The programs a unit runs, from its Exec*= properties ("{ path=/usr/sbin/nginx ; argv[]=... }"):
# reported as one ``Programs`` line, never the whole command lines (they may carry secrets).
_EXEC_PROPERTIES = ("ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop")
_EXEC_PATH = re.compile(r"(?:^|[{;]\s*)path=(/[^\s;]+)")
_HARD_DEPENDENCIES = ("Requires", "Requisite", "BindsTo")


# ---------------------------------------------------------------------------------------
# Budget

def json_len(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8"))


class EvidenceBudget:
    """Hands out the ``max_bytes`` budget: each text is redacted, then cut to the smaller of
    its own cap and what is left of the total; structured sections are counted as JSON and
    lose their last items first."""

    def __init__(self, total: int):
        self.remaining = max(0, total)
        self.truncated = False

    def take(self, text: str, cap: int, keep: str = "tail") -> str:
        text = redact_text(text)  # before cutting, so a cut cannot hide a secret from the rules
        limit = min(cap, self.remaining)
        if limit <= 0 and text:
            self.truncated = True
            return ""
        clipped, cut = host_probe.clip_text(text, limit, keep)
        self.truncated = self.truncated or cut
        self.remaining -= host_probe.byte_len(clipped)
        return clipped

    def take_all(self, texts: dict, cap: int, keep: str = "tail") -> dict:
        """Share ``cap`` between the entries; an entry's unused share passes to the next."""
        result = {}
        section_left = min(cap, self.remaining)
        items = list(texts.items())
        for index, (key, text) in enumerate(items):
            share = section_left // (len(items) - index)
            before = self.remaining
            result[key] = self.take(text, share, keep)
            section_left -= before - self.remaining
        return result

    def take_keyed(self, texts: dict, cap: int, keep: str = "head") -> dict:
        """:meth:`take_all` with the keys counted too (long paths are most of a small section):
        the entries whose keys do not fit are left out, the rest share what the keys leave."""
        limit = min(cap, self.remaining)
        kept, used = {}, 2
        for key, text in texts.items():
            key = redact_text(key)
            size = json_len(key) + 4  # the colon, the comma and the value's quotes
            if used + size > limit:
                self.truncated = True
                break
            kept[key] = text
            used += size
        self.remaining -= used
        return self.take_all(kept, limit - used, keep)

    def _fit(self, items: list, cap: int) -> list:
        """The first of ``items`` (redacted) whose JSON list fits in ``cap`` bytes."""
        limit = min(cap, self.remaining)
        kept, used = [], 2
        for item in items:
            item = redact_value(item)
            size = json_len(item) + 2
            if used + size > limit:
                self.truncated = True
                break
            kept.append(item)
            used += size
        return kept

    def take_items(self, items: list, cap: int) -> list:
        """As many of ``items`` (redacted) as fit in ``cap`` bytes of JSON, in order."""
        kept = self._fit(items, cap)
        self.remaining -= json_len(kept)
        return kept

    def take_mapping(self, mapping: dict, cap: int) -> dict:
        kept = dict((key, value) for key, value in self._fit([[k, v] for k, v in mapping.items()], cap))
        self.remaining -= json_len(kept)
        return kept


# ---------------------------------------------------------------------------------------
# Commands

def command_text(argv: list, timeout: int) -> tuple:
    """``(text, rc, output)``: ``$ argv`` / ``rc N`` / output, as evidence shows a command."""
    rc, out, err = host_probe.run_argv(argv, timeout=timeout)
    output = "\n".join(part.rstrip("\n") for part in (out, err) if part.strip())
    return "$ %s\nrc %d\n%s" % (" ".join(argv), rc, output or "(no output)"), rc, output


def status_text(defn: dict, init: str, timeout: int) -> str:
    if init == "systemd":
        text, _rc, _out = command_text(["systemctl", "status", "--no-pager", "--lines=0"] + defn["units"], timeout)
        return text
    argv = host_probe.status_argv(defn["name"], host_probe.detect_init(), verbose=True)
    if argv is None:
        return "no init tool found (no systemctl, service or /etc/init.d)"
    return command_text(argv, timeout)[0]


def unit_properties(defn: dict, timeout: int) -> dict:
    """``{unit: {property: value}}`` of the service's units (only the non-empty values); the
    units it requires that systemd cannot load are named in ``RequiredNotLoaded``."""
    result = {}
    for unit in defn["units"]:
        props, problem = show_unit(unit, UNIT_PROPERTIES, timeout)
        props = dict((k, v) for k, v in props.items() if v not in ("", "[not set]"))
        programs = []
        for key in _EXEC_PROPERTIES:
            for path in _EXEC_PATH.findall(props.pop(key, "")):
                if path not in programs:
                    programs.append(path)
        if programs:
            props["Programs"] = " ".join(programs)
        missing = unloadable_units(" ".join(props.get(k, "") for k in _HARD_DEPENDENCIES).split(), timeout)
        if missing:
            props["RequiredNotLoaded"] = " ".join("%s (%s)" % item for item in missing)
        result[unit] = props or {"error": problem}
    return result


def unloadable_units(units: list, timeout: int) -> list:
    """``[(unit, load state)]`` of the units systemd has no usable definition of (not-found,
    masked, bad-setting, error); one ``systemctl show`` for all of them."""
    names = [u for u in dict.fromkeys(units) if u and not u.startswith("-")][:40]
    if not names:
        return []
    rc, out, _err = host_probe.run_argv(["systemctl", "show", "--no-pager", "-p", "Id,LoadState"] + names,
                                        timeout=timeout)
    if rc != 0:
        return []
    found = []
    for block in (out or "").split("\n\n"):
        props = parse_show(block)
        if props.get("LoadState") in ("not-found", "masked", "bad-setting", "error"):
            found.append((props.get("Id") or "?", props["LoadState"]))
    return found


def journal_text(defn: dict, lines: int, timeout: int) -> str:
    argv = ["journalctl", "--no-pager", "-o", "short-iso", "-n", str(lines)]
    for unit in defn["units"]:
        argv += ["-u", unit]
    return command_text(argv, timeout)[0]


def dependency_states(defn: dict, init: str, timeout: int, checked=None) -> tuple:
    """For each service it depends on: its own health checks' verdict when this same call
    checked it (``checked``: name -> health result), else the init system's one-line answer
    (which can say "active" for an umbrella unit while the real server is down). Returns
    (states, up): the sentences the planner reads, and name -> True (up), False (down) or
    None (unknown) for the engine, which never parses the sentences."""
    states, up = {}, {}
    checked = checked or {}
    for name in defn["depends_on"]:
        if name in checked:
            result = checked[name]
            up[name] = bool(result.get("healthy"))
            if result.get("healthy"):
                states[name] = "healthy: its own checks passed in this same check"
            else:
                states[name] = "FAILING its own checks in this same check: %s" % (result.get("error") or "unknown")
            continue
        if init == "systemd":
            unit = name if "." in name else name + ".service"
            argv = ["systemctl", "is-active", unit]
        else:
            argv = host_probe.status_argv(name, host_probe.detect_init())
        if argv is None:
            states[name], up[name] = "unknown: no init tool", None
            continue
        rc, out, err = host_probe.run_argv(argv, timeout=timeout)
        said = host_probe.last_line(out) or host_probe.last_line(err) or "no output"
        states[name] = "%s (rc %d): %s" % ("running" if rc == 0 else "not running", rc, said)
        up[name] = rc == 0
    return states, up


# ---------------------------------------------------------------------------------------
# Processes of the service

def _names_match(names: set, wanted: list, service: str) -> bool:
    if wanted:
        return bool(names & set(wanted))
    # nothing declared: programs named like the service (nginx, sshd for ssh, redis-server)
    for name in names:
        if len(name) >= 2 and (name == service or name.startswith(service)
                               or (len(name) >= 4 and service.startswith(name))):
            return True
    return False


def _pid_file_line(path: str) -> str:
    """The first line of a PID file, where every daemon puts its PID (PostgreSQL's
    postmaster.pid and others add more lines after it). Raises IOError/OSError."""
    with open(path, "rb") as handle:
        raw = handle.read(256).decode("utf-8", "replace")
    return (raw.strip().splitlines() or [""])[0].strip()


def _pid_from_file(path: str):
    try:
        raw = _pid_file_line(path)
    except (IOError, OSError):
        return None
    return int(raw) if raw.isdigit() else None


_USUAL_STATES = ("sleeping", "running", "idle")


def service_processes(defn: dict, init: str, socks: list) -> tuple:
    """``(processes, service_pids)``: the processes that belong to the service, each with
    ``reasons`` saying why, and their PIDs.

    A process belongs when its program is one of ``processes`` (or named like the
    service), a PID file names it, it sits in one of the service's systemd units (its
    cgroup), it holds one of the service's ports, or its parent belongs. Zombies and
    stopped processes are included: their state is the point. At most MAX_PROCESSES are
    described (those in an unusual state first); ``service_pids`` lists them all.
    """
    btime = host_probe.boot_time()
    skip = host_probe.own_lineage()
    records = {}
    for pid in host_probe.pids():
        if pid in skip:
            continue
        record = host_probe.process_record(pid, btime)
        if record is None or (not record["cmdline"] and record["state"] != "zombie"):
            continue  # kernel threads have no command line
        records[pid] = record
    reasons = {}

    def add(pid, why):
        if pid in records:
            reasons.setdefault(pid, [])
            if why not in reasons[pid]:
                reasons[pid].append(why)

    for pid, record in records.items():
        info = {"pid": pid, "name": record["comm"], "cmdline": record["cmdline"]}
        if _names_match(host_probe.process_names(info), defn["processes"], defn["name"]):
            add(pid, "name %s" % record["comm"])
        if init == "systemd":
            cgroups = host_probe.cgroup_paths(pid)
            for unit in defn["units"]:
                if host_probe.in_unit(cgroups, unit):
                    add(pid, "unit %s" % unit)
    for path in defn["pid_files"]:
        pid = _pid_from_file(path)
        if pid is not None:
            add(pid, "pid file %s" % path)
    ports = set(int(p) for p in defn["ports"])
    held = host_probe.socket_holders(s["inode"] for s in socks if s["port"] in ports)
    for sock in socks:
        for holder in held.get(sock["inode"], []):
            add(holder["pid"], "holds port %d" % sock["port"])
    # children of the service's processes (nginx workers, a zombie child) belong too
    changed = True
    while changed:
        changed = False
        for pid, record in records.items():
            if pid not in reasons and record["ppid"] in reasons:
                add(pid, "child of %d" % record["ppid"])
                changed = True
    listed = sorted(reasons)
    if len(listed) > MAX_PROCESSES:
        # many workers: keep every process in an unusual state, then the lowest PIDs (masters)
        unusual = [p for p in listed if records[p]["state"] not in _USUAL_STATES]
        usual = [p for p in listed if p not in unusual]
        listed = sorted(unusual[:MAX_PROCESSES] + usual[:max(0, MAX_PROCESSES - len(unusual))])
    found = []
    for pid in listed:
        record = dict(records[pid])
        record["ports"], _visible = host_probe.listening_ports_of(pid, socks)
        record["cmdline"] = record["cmdline"][:MAX_CMDLINE]
        record["reasons"] = reasons[pid]
        del record["uid"]
        found.append(record)
    return found, sorted(reasons)


def current_pids(defn: dict) -> list:
    """The service's PIDs now, found as the evidence finds them (its programs, PID files,
    units' cgroups, ports, and their children): a server restarted since the evidence was
    read has new PIDs, and a count of its clients must not miss them."""
    return service_processes(defn, host_probe.init_system(), host_probe.listening_sockets())[1]


# ---------------------------------------------------------------------------------------
# Lines a configuration test names

_PATH = r"/[^\s:\"'(),;<>\[\]{}]+"
_LEAD = r"(?<![\w/:.~-])"
# (a file, a line): FILE:LINE (nginx "in /etc/nginx/nginx.conf:12"); FILE line N (sshd
# "/etc/ssh/sshd_config line 5", "FILE: line 5", postgres 'file "FILE" line 4');
# line N of [configuration] file FILE.
_FILE_LINE = (
    re.compile(_LEAD + r"(?P<file>" + _PATH + r"):(?P<line>\d+)\b"),
    re.compile(_LEAD + r"(?P<file>" + _PATH + r")\"?:?,?\s+(?:at\s+|on\s+)?line\s+(?P<line>\d+)", re.IGNORECASE),
    re.compile(r"\bline\s+(?P<line>\d+)\s+(?:of|in)\s+(?:the\s+)?(?:configuration\s+|config\s+)?file\s+\"?"
               r"(?P<file>" + _PATH + r")", re.IGNORECASE),
)
# A line alone (redis "at line 3", postgres "line 4 of configuration file"): the file is
# the one the message, the test's command line or the service's configuration names.
_LINE_ONLY = re.compile(r"\bline\s+(?P<line>\d+)\b", re.IGNORECASE)
_CONFIG_WORD = re.compile(r"conf", re.IGNORECASE)


def config_references(text: str) -> list:
    """``[(file or None, line, message line)]`` in the order the text names them; a line
    without a file (None) only from a message that speaks of configuration."""
    refs = []
    for message in (text or "").splitlines():
        found = False
        for pattern in _FILE_LINE:
            for match in pattern.finditer(message):
                refs.append((match.group("file"), int(match.group("line")), message.strip()))
                found = True
        # a bare line number counts only in a message about configuration
        if not found and _CONFIG_WORD.search(message):
            for match in _LINE_ONLY.finditer(message):
                refs.append((None, int(match.group("line")), message.strip()))
    return refs


def _under(path: str, roots: list) -> bool:
    for root in roots:
        root = root.rstrip("/") or "/"
        if path == root or path.startswith(root + "/") or root == "/":
            return True
    return False


def config_files_allowed(defn: dict) -> tuple:
    """``(roots, named)``: configuration may be quoted from files under ``roots`` (the
    service's config_paths, else /etc) or named in its config test's command line."""
    roots = [os.path.realpath(p) for p in defn["config_paths"]] or ["/etc"]
    named = [os.path.realpath(a) for a in defn["config_test"][1:] if a.startswith("/")]
    return roots, named


def _quotable(path: str, roots: list, named: list) -> bool:
    real = os.path.realpath(path)
    if real not in named and not _under(real, roots):
        return False
    try:
        st = os.stat(real)
    except OSError:
        return False
    return os.path.isfile(real) and st.st_size <= CONFIG_FILE_MAX


def _default_config_file(defn: dict, roots: list, named: list, text: str):
    """The file a bare "line N" refers to: a quotable file the same output names, else
    one in the test's command line, else a declared configuration file."""
    for match in re.finditer(_LEAD + r"(" + _PATH + r")", text or ""):
        if _quotable(match.group(1), roots, named):
            return match.group(1)
    for path in named:
        if _quotable(path, roots, named):
            return path
    for path in defn["config_paths"]:
        if os.path.isfile(path) and _quotable(path, roots, named):
            return path
    return None


def context_lines(path: str, line: int, around: int = CONTEXT_LINES) -> str:
    """Lines ``line - around`` .. ``line + around`` of ``path``, numbered, the named one
    marked with ``>``; long lines are cut."""
    try:
        with open(path, "rb") as handle:
            lines = handle.read(CONFIG_FILE_MAX).decode("utf-8", "replace").splitlines()
    except (IOError, OSError) as exc:
        return "unreadable: %s" % (exc.strerror or exc)
    if line < 1 or line > len(lines):
        return "the file has %d lines; line %d is past its end" % (len(lines), line)
    out = []
    for number in range(max(1, line - around), min(len(lines), line + around) + 1):
        text = lines[number - 1]
        if len(text) > CONTEXT_LINE_WIDTH:
            text = text[:CONTEXT_LINE_WIDTH - 3] + "..."
        out.append("%s%5d  %s" % (">" if number == line else " ", number, text))
    return "\n".join(out)


def config_context(defn: dict, texts: list) -> list:
    """The lines around each place in a configuration file that the texts (config test
    output first) name: ``[{"file", "line", "said", "text"}]``, at most MAX_CONTEXTS."""
    roots, named = config_files_allowed(defn)
    result, seen = [], set()
    for text in texts:
        for path, line, said in config_references(text):
            if path is None:
                path = _default_config_file(defn, roots, named, text)
                if path is None:
                    continue
            elif not _quotable(path, roots, named):
                continue
            key = (os.path.realpath(path), line)
            if key in seen:
                continue
            seen.add(key)
            result.append({"file": path, "line": line, "said": redact_text(said)[:CONTEXT_LINE_WIDTH],
                           "text": redact_text(context_lines(path, line))})
            if len(result) >= MAX_CONTEXTS:
                return result
    return result


# ---------------------------------------------------------------------------------------
# Paths named in messages

_NAMED_PATH = re.compile(_LEAD + r"(/(?:[\w.@+~=-]+/?)+)")
_HTTP_METHOD = re.compile(r"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT|TRACE)\s+$")
_PSEUDO_ROOTS = ("/proc/", "/sys/", "/dev/fd/")


def paths_named_in(text: str) -> list:
    """Absolute paths a text names, in order, without duplicates. Request paths of HTTP
    log lines (``"GET /x HTTP/1.1"``) are not file paths and are left out, so are paths
    with a single component that does not exist (``/favicon.ico``)."""
    found = []
    for match in _NAMED_PATH.finditer(text or ""):
        path = match.group(1).rstrip("/.") or "/"
        before = text[max(0, match.start() - 10):match.start()]
        after = text[match.end():match.end() + 6]
        if _HTTP_METHOD.search(before) or after.startswith(" HTTP/"):
            continue
        if path == "/" or path.startswith(_PSEUDO_ROOTS):
            continue
        if path.count("/") < 2 and not os.path.lexists(path):
            continue
        if path not in found:
            found.append(path)
    return found


_QUOTED_NAME = re.compile(r"""['"`]([\w][\w.@+-]{0,100})['"`]""")


def relative_names_in(text: str, roots: list) -> list:
    """Quoted bare names in a message (cron: "'crontabs' is not a directory") that exist
    under one of ``roots`` (the service's own directories): the paths the message means."""
    found = []
    for match in _QUOTED_NAME.finditer(text or ""):
        name = match.group(1)
        if name in (".", ".."):
            continue
        for root in roots:
            candidate = os.path.join(root, name)
            if os.path.lexists(candidate) and candidate not in found:
                found.append(candidate)
    return found


def named_paths(sources: list, user, limit: int = MAX_NAMED_PATHS, roots=None) -> dict:
    """``{path: facts}`` (host_probe.path_facts) for the paths named in ``sources``, a list
    of ``(where, text)`` in priority order; each entry says where it was named. With
    ``roots``, a quoted bare name that exists in one of those directories counts too."""
    result = {}
    for where, text in sources:
        for path in paths_named_in(text) + relative_names_in(text, roots or []):
            if path in result:
                continue
            facts = host_probe.path_facts(path, DIR_ENTRIES, user)
            facts["named_in"] = where
            facts.update(file_head_facts(path, facts))
            if facts.get("type") == "file":
                # a file that names a process (a lock, a guard, a marker): does its writer still run?
                writer = file_writers.writer_state(path)
                if writer is not None:
                    facts["writer"] = writer["line"]
            result[path] = facts
            if len(result) >= limit:
                return result
    return result


FIRST_LINES = 3
FIRST_LINES_READ = 4096
FIRST_LINE_WIDTH = 160
OWNERSHIP_SCAN = 80


def file_head_facts(path: str, facts: dict) -> dict:
    """For a named regular file: its ``first_lines`` (unless its name suggests a secret; the
    budget redacts them) and ``managed_by``, what the host says about who manages it
    (path_ownership); for any other path, only ``managed_by`` when there is something to say."""
    out = {}
    head = ""
    if facts.get("type") == "file" and not _SECRETISH_NAME.search(os.path.basename(path)):
        try:
            with open(path, "rb") as handle:
                raw = handle.read(FIRST_LINES_READ)
        except (IOError, OSError):
            raw = b""
        if b"\0" not in raw:
            head = raw.decode("utf-8", "replace")
            lines = [line[:FIRST_LINE_WIDTH] for line in head.splitlines()[:FIRST_LINES]]
            if lines:
                out["first_lines"] = lines
    if facts.get("type") in ("file", "directory", "symlink"):
        notes = path_ownership.ownership(path, head)
        if notes:
            out["managed_by"] = notes
    return out


def ownership_of(paths: list, limit: int = 8) -> dict:
    """``{path: "notes; ..."}`` for the files among ``paths`` of which the host says who
    manages them (a header, a package's conffile, a deploy tree); the others are left out."""
    out = {}
    for path in dict.fromkeys(p for p in paths if isinstance(p, str) and p.startswith("/")):
        if len(out) >= limit:
            break
        if not os.path.isfile(path):
            continue
        head = None if not _SECRETISH_NAME.search(os.path.basename(path)) else ""
        notes = path_ownership.ownership(path, head)
        # a conffile as its package installed it is the normal case of /etc: said only in named_paths
        notes = [n for n in notes if not n.endswith("(as the package installed it)")]
        if notes:
            out[path] = "; ".join(notes)
    return out


def _newest_first(text: str) -> str:
    """Log lines newest first, so the paths of recent errors win the MAX_NAMED_PATHS slots."""
    return "\n".join(reversed((text or "").splitlines()))


# ---------------------------------------------------------------------------------------
# Older sections: PID files, paths, listeners, OOM, logs

def pid_file_text(path: str) -> str:
    try:
        raw = _pid_file_line(path)
    except (IOError, OSError) as exc:
        return "missing" if getattr(exc, "errno", None) == 2 else "unreadable: %s" % (exc.strerror or exc)
    if not raw.isdigit():
        return "empty (no PID)" if not raw else "first line %r is not a PID" % raw[:64]
    pid = int(raw)
    stat_fields = host_probe.read_stat(pid)
    if stat_fields is not None and stat_fields["state"] == "Z":
        return "pid %d is a zombie (exited, not reaped by its parent %d)" % (pid, stat_fields["ppid"])
    info = host_probe.process_info(pid) if host_probe.pid_alive(pid) else None
    if info is None:
        return "pid %d is not running (stale PID file)" % pid
    try:
        written_at = os.stat(path).st_mtime
    except OSError:
        written_at = None
    judged = file_writers.judge_pid(pid, written_at)
    if judged.get("reused"):
        return "stale PID file, writer gone: " + judged["why"]
    state = host_probe.state_name(stat_fields["state"]) if stat_fields else "running"
    text = "pid %d is running as user %s: %s" % (pid, host_probe.user_name(info["uid"]),
                                                 info["cmdline"] or info["name"])
    return text + (" (state %s)" % state if state in ("stopped", "tracing-stop", "disk-sleep") else "")


def listeners_text(ports: list) -> str:
    socks = host_probe.listeners(ports)
    lines = []
    for port in ports:
        on_port = [s for s in socks if s["port"] == port]
        if not on_port:
            lines.append("port %d: nothing listening" % port)
        for sock in on_port:
            where = host_probe.format_address(sock["address"], sock["port"])
            if sock["holders"]:
                lines.append("%s held by %s" % (where, host_probe.describe_holders(sock["holders"])))
            else:
                user = host_probe.user_name(sock["uid"])
                runs = host_probe.describe_holders(host_probe.likely_holders(sock)) or "no process"
                lines.append("%s listening as user %s (holder not visible; that user runs %s)" % (where, user, runs))
    return "\n".join(lines)


def oom_text(timeout: int) -> str:
    notes = []
    rc, out, err = host_probe.run_argv(["dmesg"], timeout=timeout)
    source, text = None, None
    if rc == 0:
        source, text = "dmesg", out
    else:
        said = host_probe.last_line(err) or "rc %d" % rc
        notes.append(said if said.startswith("dmesg") else "dmesg: %s" % said)
        for path in KERNEL_LOGS:
            try:
                text = host_probe.tail_file(path, 5000)
            except (IOError, OSError):
                continue
            source = path
            break
    cgroup = _cgroup_oom_kills()
    if source is None:
        result = "unavailable: %s; no readable kernel log file (%s)" % ("; ".join(notes), ", ".join(KERNEL_LOGS))
    else:
        hits = [line for line in text.splitlines() if _OOM_RE.search(line)][-OOM_LINES:]
        result = ("OOM kills in %s:\n%s" % (source, "\n".join(hits))) if hits else "no OOM kill in %s" % source
    if cgroup is not None:
        result += "\ncgroup memory.events oom_kill: %d" % cgroup
    return result


def _cgroup_oom_kills():
    try:
        with open("/sys/fs/cgroup/memory.events") as handle:
            for line in handle:
                name, _sep, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (IOError, OSError, ValueError):
        return None
    return None


def log_texts(patterns: list, lines: int) -> tuple:
    files, notes = host_probe.expand_globs(patterns, limit=MAX_LOG_FILES + 1)
    more = len(files) > MAX_LOG_FILES
    texts = {}
    for path in files[:MAX_LOG_FILES]:
        try:
            texts[path] = host_probe.tail_file(path, lines) or "(empty)"
        except (IOError, OSError) as exc:
            texts[path] = "unreadable: %s" % (exc.strerror or exc)
    texts.update(notes)
    return texts, more


def described_paths(defn: dict) -> dict:
    """One line per declared path (configuration, data, runtime, logs, others), with what
    the service's user may do there."""
    ordered = []
    for key in ("config_paths", "data_paths", "runtime_paths", "log_paths", "paths"):
        for path in defn[key]:
            if path not in ordered:
                ordered.append(path)
    return dict((p, _with_access(host_probe.describe_path(p), host_probe.user_access_text(p, defn["user"])))
                for p in ordered)


def _with_access(description, access):
    """The account's access goes on the description's first line: the lines after it (the
    largest files of a full filesystem) stay one file per line."""
    first, sep, rest = description.partition("\n")
    return first + access + sep + rest


# Recently changed configuration: most incidents follow a change, and the changed file is
# what a planner (and an SRE) reads first.
RECENT_FILES = 3
RECENT_DAYS = 30
RECENT_CONTENT_MAX = 1500
RECENT_WALK_MAX = 400
_SECRETISH_NAME = re.compile(r"key|secret|passw|token|credential|shadow|htpasswd|\.(?:pem|crt|cer|p12|pfx|der|jks|kdbx)$",
                             re.IGNORECASE)


def _iso(moment: float) -> str:
    """An absolute UTC time, as the request's "Now" is written."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _age_text(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return "%d s ago" % seconds
    if seconds < 7200:
        return "%d min ago" % (seconds // 60)
    if seconds < 172800:
        return "%d h ago" % (seconds // 3600)
    return "%d days ago" % (seconds // 86400)


def _config_roots(defn: dict, units: dict) -> list:
    """The service's configuration paths and, on systemd, its units' local files: the
    drop-ins systemd reads and a unit file written under /etc/systemd/system."""
    roots = list(defn["config_paths"])
    for props in (units or {}).values():
        if not isinstance(props, dict):
            continue
        roots.extend(p for p in str(props.get("DropInPaths") or "").split() if p.startswith("/"))
        fragment = str(props.get("FragmentPath") or "")
        if fragment.startswith("/etc/systemd/system/"):
            roots.append(fragment)
    return [r for i, r in enumerate(roots) if r not in roots[:i]]


def _walk_files(roots: list):
    seen = 0
    for root in roots:
        if os.path.isfile(root):
            seen += 1
            yield root
            continue
        if not os.path.isdir(root):
            continue
        base = root.rstrip("/").count("/")
        for here, dirs, files in os.walk(root):
            if here.rstrip("/").count("/") - base >= 2:
                dirs[:] = []
            for name in sorted(files):
                seen += 1
                if seen > RECENT_WALK_MAX:
                    return
                yield os.path.join(here, name)


RECENT_READ_MAX = 262144
_ACTIVE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


HINT_HEAD = 800


def _active_lines(raw: bytes, hint: str, path: str = "") -> str:
    """The settings of a large configuration file: its lines that are neither comments nor
    blank, numbered; when they do not fit, the lines naming a word of ``hint`` (the health
    error, the newest log lines) first, then the others in file order."""
    lines = []
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        text = line.strip()
        if text and not text.startswith(("#", ";", "//")):
            lines.append((number, redact_text(text)[:200]))
    # The lines a message names by number first, then those naming a word of the health error
    # or the config test (the head of ``hint``), then a word of the newest log lines, then the rest.
    named = set(int(n) for n in re.findall(re.escape(path) + r"\"?:?,?\s*(?:line\s+)?(\d+)", hint or "")) if path else set()
    strong = set(w.lower() for w in _ACTIVE_WORD.findall((hint or "")[:HINT_HEAD]))
    words = set(w.lower() for w in _ACTIVE_WORD.findall(hint or ""))

    def rank(item):
        said = set(w.lower() for w in _ACTIVE_WORD.findall(item[1]))
        return (0 if item[0] in named else 1 if said & strong else 2 if said & words else 3), item[0]
    ranked = sorted(lines, key=rank)
    shown, size = [], 0
    for number, text in ranked:
        entry = "%d: %s" % (number, text)
        if size + len(entry) + 1 > RECENT_CONTENT_MAX:
            break
        shown.append((number, entry))
        size += len(entry) + 1
    shown.sort()
    left = len(lines) - len(shown)
    head = "settings (comments and blank lines left out%s):\n" % (
        "; %d more not shown, those naming words of the error first" % left if left else "")
    return head + "\n".join(entry for _n, entry in shown)


def recent_config_changes(defn: dict, units: dict, now=None, files=None, hint: str = "") -> dict:
    """The service's configuration files changed in the last RECENT_DAYS days, newest first
    (at most RECENT_FILES): when, how big, and the content of a small text file whose name
    does not suggest a secret (redacted); of a larger one, its settings (the lines naming
    words of ``hint`` first). ``{path: text}``."""
    moment = time.time() if now is None else now
    found = []
    for path in files if files is not None else _walk_files(_config_roots(defn, units)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if moment - st.st_mtime <= RECENT_DAYS * 86400:
            found.append((st.st_mtime, path, st.st_size))
    found.sort(reverse=True)
    out = {}
    for mtime, path, size in found[:RECENT_FILES]:
        head = "modified %s (%s), %d bytes" % (_iso(mtime), _age_text(moment - mtime), size)
        notes = path_ownership.ownership(path, None if not _SECRETISH_NAME.search(os.path.basename(path)) else "")
        if notes:
            head += ", managed by what it says: " + "; ".join(notes)
        if _SECRETISH_NAME.search(os.path.basename(path)):
            out[path] = head + " (content not shown: the name suggests a key or secret)"
            continue
        if size > RECENT_READ_MAX:
            out[path] = head + " (content not shown: larger than %d bytes)" % RECENT_READ_MAX
            continue
        try:
            with open(path, "rb") as handle:
                raw = handle.read(RECENT_READ_MAX)
        except (IOError, OSError) as exc:
            out[path] = head + " (unreadable: %s)" % (exc.strerror or exc)
            continue
        if b"\0" in raw:
            out[path] = head + " (binary)"
            continue
        if size > RECENT_CONTENT_MAX:
            out[path] = head + ", " + _active_lines(raw, hint, path)
            continue
        out[path] = head + ":\n" + redact_text(raw.decode("utf-8", "replace")).rstrip("\n")
    return out


CERT_FILES = 6
_CERT_NAME = re.compile(r"\.(?:crt|cer|pem)$", re.IGNORECASE)
_ENDDATE = re.compile(r"notAfter=(.+)")


def certificates(defn: dict, timeout: int, now=None, files=None, named=(), keys=False) -> dict:
    """The X.509 certificates under the service's configuration paths: subject, expiry and
    whether it has passed (``openssl x509 -noout``: never a private key). ``{path: text}``;
    files holding a private key are left out unread by openssl. ``named``: certificate files
    its configuration names (read first, wherever they are); ``keys``: each also with its public
    key's algorithm and size or curve and its signature algorithm (a TLS handshake failed)."""
    openssl = host_probe.find_tool("openssl")
    if not openssl:
        return {}
    moment = time.time() if now is None else now
    out = {}
    walked = files if files is not None else _walk_files(list(defn["config_paths"]))
    for path in list(named) + [p for p in walked if p not in named]:
        if (path not in named and not _CERT_NAME.search(path)) or path in out or len(out) >= CERT_FILES:
            continue
        try:
            with open(path, "rb") as handle:
                head = handle.read(65536)
        except (IOError, OSError):
            continue
        if b"PRIVATE KEY" in head or b"BEGIN CERTIFICATE" not in head:
            continue
        rc, said, err = host_probe.run_argv([openssl, "x509", "-noout", "-subject", "-enddate", "-in", path],
                                            timeout=timeout)
        if rc != 0:
            out[path] = "openssl could not read it: %s" % (host_probe.last_line(err) or "rc %d" % rc)
            continue
        text = " ".join(said.split())
        found = _ENDDATE.search(said)
        if found:
            try:
                ends = calendar.timegm(time.strptime(found.group(1).strip().replace(" GMT", ""),
                                                     "%b %d %H:%M:%S %Y"))
                if ends < moment:
                    text += " (EXPIRED %s)" % _age_text(moment - ends)
                else:
                    text += " (valid %d more days)" % int((ends - moment) // 86400)
            except ValueError:
                pass
        if keys:
            facts = tls_evidence.certificate_key(path, timeout)
            text += ("; " + facts) if facts else ""
        out[path] = redact_text(text)
    return out


# ---------------------------------------------------------------------------------------
# What a start reads besides the configuration: environment files, included files

ENV_FILES = 6
ENV_LINES = 20
ENV_READ_MAX = 65536
_ENV_PROPERTIES = ("EnvironmentFiles", "Environment", "PassEnvironment", "ExecStartPre", "ExecStart",
                   "ExecStartPost")
_EXEC_ARGV = re.compile(r"argv\[\]=(.*?) ; ignore_errors=")
_ENV_REF = re.compile(r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|\$(?P<word>[A-Za-z_][A-Za-z0-9_]*)")
_ENV_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=")
_ENV_SETTING = re.compile(r"""(?:^|\s)["']?([A-Za-z_][A-Za-z0-9_]*)=""")
INIT_SCRIPTS = "/etc/init.d"
DEFAULTS_DIR = "/etc/default"
# What systemd itself puts in a service's environment (systemd.exec(5), "Environment
# Variables in Spawned Processes"): a reference to one of these is not an unset variable.
_SYSTEMD_SETS = frozenset((
    "PATH", "LANG", "USER", "LOGNAME", "HOME", "SHELL", "INVOCATION_ID", "JOURNAL_STREAM", "NOTIFY_SOCKET",
    "MAINPID", "MANAGERPID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_PID", "WATCHDOG_USEC",
    "TERM", "RUNTIME_DIRECTORY", "STATE_DIRECTORY", "CACHE_DIRECTORY", "LOGS_DIRECTORY",
    "CONFIGURATION_DIRECTORY", "CREDENTIALS_DIRECTORY", "SERVICE_RESULT", "EXIT_CODE", "EXIT_STATUS",
    "MONITOR_SERVICE_RESULT", "TRIGGER_UNIT", "TRIGGER_PATH", "SYSTEMD_EXEC_PID", "PIDFILE",
))


def _show_lines(unit: str, timeout: int) -> list:
    """``[(property, value)]`` of the unit's start environment, one pair per line: systemctl
    prints one ``EnvironmentFiles=`` and one ``ExecStartPre=`` line per entry."""
    rc, out, _err = host_probe.run_argv(["systemctl", "show", "--no-pager", "-p", ",".join(_ENV_PROPERTIES), unit],
                                        timeout=timeout)
    if rc != 0:
        return []
    pairs = []
    for line in (out or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in _ENV_PROPERTIES and value.strip():
            pairs.append((key, value.strip()))
    return pairs


def env_file_text(path: str, optional: bool, reader: str) -> tuple:
    """``(text, names)``: the settings of an environment file (comments and blank lines left
    out, at most ENV_LINES, redacted) and the variable names it sets; or why there are none."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(ENV_READ_MAX)
    except (IOError, OSError) as exc:
        if getattr(exc, "errno", None) == 2:
            if optional:
                return "missing (optional: %s goes on without it)" % reader, set()
            return "missing, and required: %s stops without it" % reader, set()
        return "unreadable: %s" % (exc.strerror or exc), set()
    if b"\0" in raw:
        return "binary, not an environment file", set()
    lines = [line.strip() for line in raw.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith(("#", ";"))]
    names = set(m.group(1) for m in (_ENV_ASSIGN.match(line) for line in lines) if m)
    if not lines:
        return "no settings (only comments and blank lines)", names
    shown = [redact_text(line)[:CONTEXT_LINE_WIDTH] for line in lines[:ENV_LINES]]
    more = len(lines) - len(shown)
    return "settings:\n" + "\n".join(shown) + ("\n(%d more lines)" % more if more else ""), names


def _systemd_environment(defn: dict, timeout: int, found=None) -> dict:
    """``found``: a dict given here gets ``files``, the paths the units name in ``EnvironmentFile=``,
    and ``answered``, whether systemd described one of the units at all."""
    out, assigned, referenced = {}, set(), []
    found = {} if found is None else found
    files = found.setdefault("files", [])
    found.setdefault("answered", False)
    for unit in defn["units"]:
        pairs = _show_lines(unit, timeout)
        found["answered"] = found["answered"] or bool(pairs)
        for key, value in pairs:
            if key == "EnvironmentFiles":
                # "/etc/default/cron (ignore_errors=yes)"; a "-" prefix in the unit file is ignore_errors=yes
                path, optional = start_files.systemd_environment_file(value)
                matches = glob.glob(path) if any(c in path for c in "*?[") else [path]
                for item in matches[:ENV_FILES] or [path]:
                    if item not in files and not any(c in item for c in "*?["):
                        files.append(item)
                    if len(out) < ENV_FILES and item not in out:
                        text, names = env_file_text(item, optional, "the start of %s" % unit)
                        out[item] = text
                        assigned.update(names)
            elif key in ("Environment", "PassEnvironment"):
                assigned.update(_ENV_SETTING.findall(" " + value) if key == "Environment" else value.split())
                if key == "Environment":
                    out["Environment= of %s" % unit] = redact_text(value)[:400]
            else:
                for argv in _EXEC_ARGV.findall(value):
                    referenced.append((unit, key, argv.replace("$$", "")))
    unset = {}
    for unit, key, argv in referenced:
        # Only ${VAR}: unset, it is an empty argument. A bare $VAR word unset is zero arguments,
        # systemd's idiom for optional options (Debian's cron -f $EXTRA_OPTS), not a fault.
        for match in _ENV_REF.finditer(argv):
            name = match.group("braced")
            if not name or name in assigned or name in _SYSTEMD_SETS:
                continue
            form = "${%s} (an empty argument)" % name
            unset.setdefault("%s of %s" % (key, unit), [])
            if form not in unset["%s of %s" % (key, unit)]:
                unset["%s of %s" % (key, unit)].append(form)
    for where, forms in unset.items():
        out["unset in %s" % where] = "uses %s, set by no Environment=/EnvironmentFile=" % ", ".join(forms)
    return out


def _sysv_environment(defn: dict) -> dict:
    """The environment files the service's init script reads: those it sources (``. F``,
    ``source F``, its variables put in) and the ``/etc/default`` files it names."""
    out = {}
    sourced = start_files.sysv_environment_files(defn, INIT_SCRIPTS) or []
    for name in start_files.init_script_names(defn):
        script = os.path.join(INIT_SCRIPTS, name)
        try:
            with open(script, "rb") as handle:
                said = handle.read(ENV_READ_MAX).decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        # the files the script names, else the usual one when it is there
        named = re.findall(re.escape(DEFAULTS_DIR.rstrip("/")) + r"/[\w.@-]+", said)
        wanted = [p for p in dict.fromkeys(named) if not p.endswith(".")]
        own = os.path.join(DEFAULTS_DIR, name)
        if own not in wanted and (os.path.lexists(own) or DEFAULTS_DIR.rstrip("/") + "/$" in said):
            wanted.append(own)
        for path in [p for p in sourced if p not in wanted] + wanted:
            if len(out) < ENV_FILES and path not in out:
                out[path] = env_file_text(path, True, "the init script")[0]
    return out


def start_environment(defn: dict, init: str, timeout: int) -> dict:
    """What the service's start reads from the environment: on systemd, each
    ``EnvironmentFile=`` of its units (settings, or missing and whether that stops the start),
    their ``Environment=``, and the variables its ``ExecStartPre``/``ExecStart``/``ExecStartPost``
    use that nothing sets; under SysV, the files its init script sources or names in
    ``/etc/default``. ``{path or what: text}``."""
    return start_environment_and_files(defn, init, timeout)[0]


def start_environment_and_files(defn: dict, init: str, timeout: int) -> tuple:
    """``(start_environment, files)``: ``files`` are the environment files the host says the
    start reads - the units' ``EnvironmentFile=`` paths, or what the init script sources from
    under ``/etc`` - for the policy's scope; None when nothing on the host says (systemd answered
    for no unit, there is no init script)."""
    if init == "systemd":
        found = {}
        out = _systemd_environment(defn, timeout, found)
        return out, (found["files"] if found["answered"] else None)
    return _sysv_environment(defn), start_files.sysv_environment_files(defn, INIT_SCRIPTS)


# ---------------------------------------------------------------------------------------
# Small files at the top of the service's data directories

# What a data directory says of itself is in its small files (a version stamp, a PID file, a
# signal or lock a tool left): a version of another major, a stale marker. The data files
# themselves are larger; only small regular files are read, and never one whose name suggests
# a secret (its attributes are still listed).
MARKER_MAX_BYTES = 256
MARKER_FILES = 20
MARKER_SCAN = 400


def _data_directories(defn: dict, units: dict) -> list:
    """The service's data directories: its definition's ``data_paths`` and the
    ``StateDirectory=`` its units declare (under /var/lib)."""
    dirs = list(defn.get("data_paths") or [])
    for props in (units or {}).values():
        if isinstance(props, dict):
            dirs.extend("/var/lib/" + name for name in str(props.get("StateDirectory") or "").split()
                        if ".." not in name.split("/"))
    return [d for d in dict.fromkeys(dirs) if d.startswith("/")]


def _marker_text(path: str, st) -> str:
    """One small file: owner, mode, size, modification time and its content (redacted)."""
    head = "owner %s:%s, mode %04o, %d bytes, modified %s" % (
        host_probe.user_name(st.st_uid), host_probe.group_name(st.st_gid), stat.S_IMODE(st.st_mode), st.st_size,
        _iso(st.st_mtime))
    if _SECRETISH_NAME.search(os.path.basename(path)):
        return head + " (content not shown: the name suggests a key or secret)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return head + " (unreadable: %s)" % (exc.strerror or exc)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return head + " (replaced while read)"
        raw = os.read(fd, MARKER_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if b"\0" in raw:
        return head + " (binary)"
    text = redact_text(raw.decode("utf-8", "replace")).rstrip("\n")
    if not text.strip():
        return head + " (empty)" if not raw else head + " (blank)"
    return head + (":\n" if "\n" in text else ": ") + text


# A log line that states why the service stopped (PostgreSQL's FATAL or PANIC, nginx's [emerg]).
_CAUSE_LINE = re.compile(r"\b(?:FATAL|PANIC|CRITICAL)\b|\[(?:emerg|crit|alert)\]")


def cause_kept(text: str, limit: int) -> str:
    """``text`` as a log's tail of ``limit`` bytes would keep it, but with its newest line that
    states a fatal cause kept ahead of the tail when the tail alone would cut it off (the lines
    a failed start logs after its FATAL, a HINT, a shutdown, pg_ctl's own, fill a short tail)."""
    if host_probe.byte_len(text or "") <= limit:
        return text
    lines = (text or "").splitlines()
    newest = next((i for i in range(len(lines) - 1, -1, -1) if _CAUSE_LINE.search(lines[i])), None)
    if newest is None:
        return text
    after = "\n".join(lines[newest + 1:])
    if host_probe.byte_len("\n".join(lines[newest:])) <= limit:
        return "\n".join(lines[newest:])  # from the cause on, whole
    cause = host_probe.clip_text(lines[newest], limit // 2, "head")[0]
    tail, _cut = host_probe.clip_text(after, max(0, limit - host_probe.byte_len(cause) - 1), "tail")
    return cause + "\n" + tail


# Bytes of the data markers the logs leave room for (PG_VERSION and a marker or two).
MARKERS_AFTER_LOGS = 400


def data_markers(defn: dict, units: dict = None) -> dict:
    """The small regular files (at most MARKER_MAX_BYTES) at the top level of the service's data
    directories, with owner, mode, time and content (redacted): ``{path: text}``, at most
    MARKER_FILES, each directory's in name order. Links are not followed; subdirectories and
    larger files are left out (a last entry counts the small files left out, if any), and so are
    the files other sections show (the declared PID files and logs)."""
    out, left = {}, 0
    shown = set(os.path.realpath(p) for key in ("pid_files", "logs") for p in defn.get(key) or [])
    for directory in _data_directories(defn, units):
        try:
            names = sorted(os.listdir(directory))[:MARKER_SCAN]
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size > MARKER_MAX_BYTES or os.path.realpath(path) in shown:
                continue
            if len(out) >= MARKER_FILES:
                left += 1
                continue
            out[path] = _marker_text(path, st)
    if left:
        out["(left out)"] = "%d more small file(s) in the data directories" % left
    return out


INCLUDE_DIRECTIVES = 8
INCLUDE_ENTRIES = 10
INCLUDE_SCAN_FILES = 60
_INCLUDE = re.compile(
    r"""^\s*[!$@]?(?P<word>include(?:_dir|_if_exists|dir|optional|config)?)(?:\s*=\s*|\s+)["']?"""
    r"""(?P<target>[\w./~*?\[-][^"';\s]*)""",
    re.IGNORECASE)


def _scan_candidates(defn: dict, walked=None) -> list:
    """The configuration files to read for include directives, each once (a file linked
    from sites-enabled is read where it lives). ``walked``: the files of the service's
    config_paths when the caller has walked them already (``_walk_files``)."""
    files = [os.path.realpath(a) for a in defn["config_test"][1:] if a.startswith("/") and os.path.isfile(a)]
    for path in walked if walked is not None else _walk_files(list(defn["config_paths"])):
        if len(files) >= INCLUDE_SCAN_FILES:
            break
        real = os.path.realpath(path)
        if real not in files and os.path.isfile(real) and not _SECRETISH_NAME.search(os.path.basename(real)):
            files.append(real)
    return files


def _entry_text(path: str) -> str:
    name = os.path.basename(path.rstrip("/")) or path
    if os.path.islink(path):
        target = os.readlink(path)
        return "%s -> %s%s" % (name, target, "" if os.path.exists(path) else " (target missing)")
    if os.path.isdir(path):
        return name + "/"
    return name


def _include_matches(pattern: str, word: str) -> str:
    """What an include pattern matches now: the names (symlinks with their targets, those
    whose target is missing marked), a directory's entries, or that it matches nothing."""
    if any(c in pattern for c in "*?["):
        found = sorted(glob.glob(pattern))
        if not found:
            parent = os.path.dirname(pattern)
            while any(c in parent for c in "*?["):
                parent = os.path.dirname(parent)
            return "matches nothing" + ("" if os.path.isdir(parent) else " (directory %s missing)" % parent)
        head = "%d match%s" % (len(found), "" if len(found) == 1 else "es")
    elif os.path.isdir(pattern):
        try:
            found = sorted(os.path.join(pattern, n) for n in os.listdir(pattern))
        except OSError as exc:
            return "directory, unreadable: %s" % (exc.strerror or exc)
        if not found:
            return "empty directory"
        head = "directory of %d" % len(found)
    elif os.path.lexists(pattern):
        return _entry_text(pattern) if os.path.islink(pattern) else ""
    else:
        optional = word.lower() in ("include_if_exists", "includeoptional")
        return "missing" + (" (optional)" if optional else "")
    shown = [_entry_text(p) for p in found[:INCLUDE_ENTRIES]]
    more = len(found) - len(shown)
    return head + ": " + ", ".join(shown) + (", and %d more" % more if more else "")


def _resolve_include(target: str, here: str, roots: list) -> str:
    """An absolute pattern as is; a relative one against the including file's directory,
    else the first configuration directory where it matches (nginx resolves from its prefix,
    PostgreSQL from the including file)."""
    if target.startswith("/"):
        return target
    bases = [here] + [r for r in roots if os.path.isdir(r) and r != here]
    for base in bases:
        candidate = os.path.normpath(os.path.join(base, target))
        if glob.glob(candidate) or os.path.lexists(candidate):
            return candidate
    return os.path.normpath(os.path.join(here, target))


def include_matches(defn: dict, files=None) -> dict:
    """The include directives (``include``, ``include_dir``, ``Include``, ``!includedir``...)
    in the service's configuration files, each with what it matches on the host now:
    ``{"FILE:LINE include PATTERN": text}``, at most INCLUDE_DIRECTIVES."""
    out = {}
    roots = [p.rstrip("/") for p in defn["config_paths"]]
    for path in files if files is not None else _scan_candidates(defn):
        try:
            if os.path.getsize(path) > RECENT_READ_MAX:
                continue
            with open(path, "rb") as handle:
                raw = handle.read(RECENT_READ_MAX)
        except (IOError, OSError):
            continue
        if b"\0" in raw or b"nclude" not in raw and b"NCLUDE" not in raw:
            continue
        for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
            match = _INCLUDE.match(line)
            if not match:
                continue
            target = match.group("target")
            resolved = _resolve_include(target, os.path.dirname(path), roots)
            matches = _include_matches(resolved, match.group("word"))
            if not matches:
                continue  # one file that is there (mime.types): nothing to tell
            key = "%s:%d %s %s" % (path, number, match.group("word"), target)
            out[key[:300]] = matches + ("" if resolved == target else " (as %s)" % resolved)
            if len(out) >= INCLUDE_DIRECTIVES:
                return out
    return out


# ---------------------------------------------------------------------------------------
# Everything

def collect(defn: dict, max_bytes: int = 6000, log_lines: int = 30, timeout: int = 15, error: str = "",
            tools=None, checked=None, logs_first: bool = False) -> dict:
    """Evidence (C3) for a resolved service definition: ``{"evidence", "tools", "truncated"}``.

    The short, most diagnostic sections are taken first, each capped at a fifth of
    ``max_bytes``; the log tails share what is left. ``error`` (the health error) is
    searched for configuration lines and paths like the config test output.
    ``logs_first``: the journal and the log tails keep up to half of ``max_bytes`` whatever the
    sections before them take (a dependency read for its own lines on a dependent's failure:
    on systemd the unit's sections had left its log empty).
    """
    init = host_probe.init_system()
    budget = EvidenceBudget(max_bytes)
    cap = max(200, max_bytes // 5)
    # absolute, so each change time in it can be placed against the incident's
    evidence = {"init": init, "collected_at": _iso(time.time())}
    budget.remaining -= json_len(evidence)

    # gather first: paths and config lines are searched in texts collected later
    status = status_text(defn, init, timeout)
    units = unit_properties(defn, timeout) if init == "systemd" else {}
    test_text = test_output = ""
    if defn["config_test"]:
        test_text, _rc, test_output = command_text(defn["config_test"], timeout)
    journal = ""
    if init == "systemd" and host_probe.find_tool("journalctl"):
        journal = journal_text(defn, log_lines, timeout)
    logs, more_logs = log_texts(defn["logs"], log_lines) if defn["logs"] else ({}, False)
    held_for_logs = 0
    if logs_first:
        held_for_logs = min(max_bytes // 2, json_len(journal) + sum(json_len(text) for text in logs.values()))
        budget.remaining -= held_for_logs
    socks = host_probe.listening_sockets()
    processes, service_pids = service_processes(defn, init, socks)

    evidence["status"] = budget.take(status, cap)
    # What the host's people left for the next operator about this service (the login message,
    # the banners): the owner's word, ahead of what the host says of itself.
    notes = operator_notes.by_file(defn)
    if notes:
        evidence["operator_notes"] = budget.take_keyed(notes, cap, keep="head")
    # What runs on a schedule against the service (a clean-up under /run, a reaper that kills its
    # processes): the cause that comes back after every fix.
    jobs = scheduled_jobs.by_file(defn)
    if jobs:
        evidence["scheduled_jobs"] = budget.take_keyed(jobs, cap, keep="head")
    if units:
        first = defn["units"][0]
        evidence["unit"] = budget.take_mapping(dict(units[first], Id=first), cap)
        if len(units) > 1:
            evidence["other_units"] = budget.take_mapping(
                dict((u, p) for u, p in units.items() if u != first), cap)
        # The path conditions of its unit files, each with its path's state now and, when the
        # path names a process, whether that writer runs: a start skipped on one exits 0.
        conditions = unit_conditions.describe(units[first], defn["user"], unit=first)
        if conditions:
            evidence["conditions"] = budget.take_keyed(conditions, cap)
        # A guard the unit waits on that names its writer: the writer's own last record
        # (its logs and journal lines), found by its name, next to whether it still runs.
        records = writer_records.records_for(guard_files(units[first], first), secretish=_SECRETISH_NAME.search,
                                             timeout=timeout)
        if records:
            evidence["writer_records"] = budget.take_keyed(records, cap, keep="both")
    if defn["config_test"]:
        evidence["config_test"] = budget.take(test_text, cap, keep="both")
    # The service's own log files count too (PostgreSQL on SysV names pg_hba.conf's line
    # there, not in a journal); newest lines first, so the latest error's place wins.
    contexts = config_context(defn, [test_output, error or "", status, _newest_first(journal)]
                              + [_newest_first(text) for text in logs.values()])
    if contexts:
        evidence["config_context"] = budget.take_items(contexts, cap)
    # One walk of the configuration (and the units' local files) serves both sections.
    config_files = list(_walk_files(_config_roots(defn, units)))
    hint = [error or "", test_output, _newest_first(journal)[:2000]]
    hint.extend(_newest_first(text)[:2000] for text in logs.values())
    recent = recent_config_changes(defn, units, files=config_files, hint="\n".join(hint))
    if recent:
        evidence["recent_changes"] = budget.take_all(recent, cap, keep="head")
    # A handshake that failed: the TLS directives in effect and each certificate's key.
    tls, named_certs = "", []
    if tls_evidence.handshake_failed([error, test_output, journal, status] + list(logs.values())):
        tls, named_certs = tls_evidence.tls_text(defn, timeout)
    certs = certificates(defn, timeout, files=config_files, named=named_certs, keys=bool(tls))
    if tls:
        evidence["tls"] = budget.take(tls, cap + cap // 2, keep="head")
    if certs:
        evidence["certificates"] = budget.take_all(certs, cap // 2, keep="head")
    # What the start reads besides the configuration: each is small and said in a few lines.
    environment, environment_files = start_environment_and_files(defn, init, timeout)
    if environment:
        evidence["environment"] = budget.take_keyed(environment, cap)
    if environment_files is not None:
        # For the engine (the policy's scope): which files the host says the start reads; the
        # environment section above is what the planner reads of them.
        evidence["environment_files"] = environment_files[:ENV_FILES]
        budget.remaining -= json_len(evidence["environment_files"])
    # The walk above, its config_paths part (they come first; the units' local files follow).
    includes = include_matches(defn, files=_scan_candidates(
        defn, [path for path in config_files if _under(path, defn["config_paths"])]))
    if includes:
        evidence["includes"] = budget.take_keyed(includes, cap * 3 // 4)
    evidence["processes"] = budget.take_items(processes, cap + cap // 2)
    # Every PID a plan may signal, the holders of the service's ports first. Not cut by the
    # budget: a PID left out here is one the policy would not let a plan signal (known gap: a
    # host with hundreds of matching processes makes the evidence exceed max_bytes).
    evidence["service_pids"] = pid_priority(service_pids, processes)
    budget.remaining -= json_len(service_pids)
    if service_pids:
        # what a restart would drop (the engine weighs a stateful service's restart by it)
        evidence["client_connections"] = client_connections.count(service_pids)
        budget.remaining -= json_len(evidence["client_connections"])
    if defn["ports"]:
        evidence["listeners"] = budget.take(listeners_text(defn["ports"]), cap, keep="head")
    sources = [("error", error or ""), ("config_test", test_output)]
    if init != "systemd":
        # an init script says what it could not find in its status (on systemd the journal does)
        sources.append(("status", status))
    sources.append(("journal", _newest_first(journal)))
    sources.extend(("log %s" % path, _newest_first(text)) for path, text in logs.items())
    roots = [p for key in ("data_paths", "runtime_paths", "config_paths", "paths") for p in defn.get(key) or []
             if os.path.isdir(p)]
    found = named_paths(sources, defn["user"], roots=roots)
    if found:
        # Ranked (path_rank), so that the budget cuts whole entries of the least relevant, each
        # group in the order the texts named them; what was cut is named with how to ask for it.
        found = dict(sorted(found.items(), key=lambda kv: (path_rank(kv[1]), list(found).index(kv[0]))))
        evidence["named_paths"] = budget.take_mapping(found, cap)
        # a lock or marker an error names, that names its writer: that writer's last record too
        named_guards = [(p, [], []) for p, facts in evidence["named_paths"].items()
                        if isinstance(facts, dict) and facts.get("writer") and p not in evidence.get("writer_records", {})]
        more = writer_records.records_for(named_guards, secretish=_SECRETISH_NAME.search, timeout=timeout,
                                          limit=max(0, 2 - len(evidence.get("writer_records", {}))))
        if more:
            evidence.setdefault("writer_records", {}).update(budget.take_keyed(more, cap, keep="both"))
        dropped = [k for k in found if k not in evidence["named_paths"]]
        if dropped:
            evidence["named_paths_left_out"] = budget.take(
                "%d more named path(s) left out for size: %s (ask with `stat PATH`)" % (len(dropped), ", ".join(dropped)),
                400, keep="head")
    if defn["pid_files"]:
        evidence["pid_files"] = budget.take_all(dict((p, pid_file_text(p)) for p in defn["pid_files"]), cap, keep="head")
    # Who manages the files of this incident, as the host says it: the files the errors name,
    # the recently changed ones, the unit's drop-ins and local unit file, the start's
    # environment files and the declared configuration files.
    owned = ownership_of(
        [c.get("file") for c in contexts if isinstance(c, dict)] + list(found or {}) + list(recent or {})
        + [p for props in units.values() if isinstance(props, dict)
           for p in str(props.get("DropInPaths") or "").split() + [str(props.get("FragmentPath") or "")]]
        + list(environment or {}) + list(defn["config_paths"]) + config_files[:OWNERSHIP_SCAN])
    if owned:
        evidence["ownership"] = budget.take_keyed(owned, cap)
    declared = described_paths(defn)
    if declared:
        evidence["paths"] = budget.take_all(declared, cap, keep="head")
    # What the data directories say of themselves: version stamps, PID files, markers. Read
    # here, kept after the logs (below): what the service logged says more, and a marker
    # section must not push its FATAL line out of the budget.
    markers = data_markers(defn, units)
    if defn["depends_on"]:
        states, up = dependency_states(defn, init, timeout, checked)
        evidence["dependencies"] = budget.take_all(states, cap, keep="head")
        evidence["dependency_up"] = up
    budget.remaining += held_for_logs
    if journal:
        evidence["journal"] = budget.take(journal, cap)
    evidence["oom"] = budget.take(oom_text(timeout), cap // 2)
    if logs:
        # the logs take what is left, but for a little room for the data markers' first files
        room = min(json_len(markers), MARKERS_AFTER_LOGS) if markers else 0
        share = max(0, budget.remaining - room)
        evidence["logs"] = budget.take_all(dict((path, cause_kept(text, share // len(logs)))
                                                for path, text in logs.items()), share)
        budget.truncated = budget.truncated or more_logs
    if markers:
        evidence["data_markers"] = budget.take_keyed(markers, cap * 3 // 4, keep="head")
    _mark_omitted(evidence, budget)
    names = tools if tools is not None else tool_candidates(defn)
    return {"evidence": evidence, "tools": host_probe.tools_report(names), "truncated": budget.truncated}


def guard_files(props: dict, unit: str) -> list:
    """``[(path, comments, comms)]`` for the unit's unmet path conditions on a regular file (a
    guard that blocks the start): the comment lines of the unit file that sets it and the
    names of the live processes the file names (writer_records.records_for)."""
    out = []
    for directive, value, source in unit_conditions.conditions_of(props):
        path, met = unit_conditions.evaluate(directive, value, unit)
        if met is not False or not path.startswith("/") or not os.path.isfile(path):
            continue
        writer = file_writers.writer_state(path, bare=True) or {}
        comms = [j.get("comm") for j in writer.get("pids") or [] if j.get("state") == file_writers.ALIVE]
        out.append((path, writer_records.unit_comments(source, path), comms))
    return out


def path_rank(facts: dict) -> int:
    """Which named paths the budget keeps first: what cannot be opened (missing, dangling,
    inaccessible) and is named by the health error or the config test (0), by anything else
    (1); then the other paths the error or the config test names (2); then the rest (3)."""
    named = facts.get("named_in") in ("error", "config_test")
    broken = facts.get("type") in ("missing", "inaccessible") or bool(facts.get("dangling"))
    return (0 if named else 1) if broken else (2 if named else 3)


def pid_priority(service_pids: list, processes: list) -> list:
    """``service_pids`` reordered: PIDs of processes that listen on a port first, then those of
    the described processes, then the rest, each group in its original order."""
    listening = [p.get("pid") for p in processes if isinstance(p, dict) and p.get("ports")]
    described = [p.get("pid") for p in processes if isinstance(p, dict)]
    rank = dict((pid, 0) for pid in listening)
    for pid in described:
        rank.setdefault(pid, 1)
    return sorted(service_pids, key=lambda pid: rank.get(pid, 2))


def _mark_omitted(section: dict, budget: EvidenceBudget) -> None:
    """Say so where the budget left a text empty, while the budget has room for saying it."""
    for key, value in section.items():
        if isinstance(value, dict):
            _mark_omitted(value, budget)
        elif value == "" and budget.truncated and budget.remaining >= len(_OMITTED):
            section[key] = _OMITTED
            budget.remaining -= len(_OMITTED)
