# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The incident's scope: which units, paths, processes and PIDs a fix may change.

``scope_from_service`` turns a service definition (``remediate_services`` item, contract
C1) and the evidence (C3: ``service_pids``, ``processes``) into a plain, JSON-friendly
dict; the engine compiles it into a ``Scope`` for matching. Without a scope, any
ordinary service counts as in scope: the default scope of the policy names where
services keep their configuration, data, runtime files and logs by convention.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._paths import canonical, normalise, pattern_regex

UNIT_TYPES = ("service", "socket", "target", "device", "mount", "automount", "swap", "timer", "path",
              "slice", "scope")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9@._:-]{1,200}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._+-]{0,63}$")
_KINDS = ("pidfile", "runtime", "log", "data", "config")
# Where an entry of the service's `paths` is, by convention.
_CONVENTION = (("/var/log/", "log"), ("/run/", "runtime"), ("/var/cache/", "runtime"), ("/var/lib/", "data"),
               ("/srv/", "data"), ("/var/www/", "data"), ("/var/spool/", "data"), ("/etc/", "config"))


class ScopeError(ValueError):
    """A service definition or evidence that cannot give a scope; the message names the key."""


def unit_name(name: str) -> str | None:
    """`nginx` -> `nginx.service`; None when the name is not a plain unit name."""
    if not _UNIT_NAME.match(name) or name.startswith("-") and name not in ("-.mount", "-.slice"):
        return None
    base, dot, suffix = name.rpartition(".")
    if dot and suffix in UNIT_TYPES and base:
        return name
    return name + ".service"


def unit_base(unit: str) -> str:
    """`postgresql@14-main.service` -> `postgresql`; `nginx.service` -> `nginx`."""
    stem = unit.rpartition(".")[0] or unit
    return stem.split("@", 1)[0]


def name_variants(name: str) -> list[str]:
    """Names a service goes by on disk: redis-server -> redis; sshd -> ssh; php8.2-fpm -> php."""
    out = [name]
    for suffix in ("-server", "-daemon", "-fpm", "d"):
        if name.endswith(suffix) and len(name) > len(suffix) + 1:
            out.append(name[: -len(suffix)])
    base = re.split(r"[0-9.@]", name, maxsplit=1)[0].rstrip("-")
    if base and base not in out and len(base) > 2:
        out.append(base)
    return out


def _strings(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence):
        raise ScopeError(f"service key '{key}' must be a list of strings, not {type(value).__name__}")
    out = []
    for item in value:
        if not isinstance(item, (str, int)) or isinstance(item, bool):
            raise ScopeError(f"service key '{key}' holds {item!r}, which is not a string")
        out.append(str(item))
    return out


def _paths(values: Iterable[str], key: str) -> list[str]:
    out = []
    for value in values:
        path, reason = normalise(value)
        if path is None:
            raise ScopeError(f"service key '{key}': {reason}")
        if path != "/" and path not in out:
            out.append(path)
    return out


def _ints(values: Iterable[Any], key: str) -> list[int]:
    out = []
    for value in values:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ScopeError(f"'{key}' holds {value!r}, which is not a number") from None
        if number > 0 and number not in out:
            out.append(number)
    return out


def scope_from_service(service_def: Mapping[str, Any], pids: Iterable[int] = (),
                       evidence: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The incident scope of one service (contract C1) and its evidence (C3)."""
    if not isinstance(service_def, Mapping):
        raise ScopeError(f"a service definition must be a mapping, not {type(service_def).__name__}")
    name = service_def.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ScopeError(f"service key 'name' must be a service name such as nginx, not {name!r}")
    variants = name_variants(name)
    units = []
    for raw in _strings(service_def.get("units"), "units") or [name]:
        unit = unit_name(raw)
        if unit is None:
            raise ScopeError(f"service key 'units' holds {raw!r}, which is not a unit name")
        units.append(unit)
    daemons = [v + "d" for v in variants if not v.endswith("d")]
    processes = _strings(service_def.get("processes"), "processes") or variants + daemons
    user = service_def.get("user")
    if user is not None and (not isinstance(user, str) or not _NAME.match(user)):
        raise ScopeError(f"service key 'user' must be an account name, not {user!r}")
    config = _paths(_strings(service_def.get("config_paths"), "config_paths"), "config_paths")
    data = _paths(_strings(service_def.get("data_paths"), "data_paths"), "data_paths")
    runtime = _paths(_strings(service_def.get("runtime_paths"), "runtime_paths"), "runtime_paths")
    pid_files = _paths(_strings(service_def.get("pid_files"), "pid_files"), "pid_files")
    logs = _paths(_strings(service_def.get("logs"), "logs"), "logs")
    log_paths = _paths(_strings(service_def.get("log_paths"), "log_paths"), "log_paths")
    if not log_paths:
        log_paths = [posixpath.dirname(p) for p in logs if posixpath.dirname(p) not in ("/", "/var/log")]
        log_paths = [p for i, p in enumerate(log_paths) if p not in log_paths[:i]] or list(logs)
    declared = list(config)  # before the conventions below add their guesses
    kinds: dict[str, list[str]] = {"config": config, "data": data, "runtime": runtime, "log": log_paths}
    # Entries of `paths` and the naming conventions fill the kinds not given.
    for path in _paths(_strings(service_def.get("paths"), "paths"), "paths"):
        probe = canonical(path) + "/"
        for prefix, kind in _CONVENTION:
            if probe.startswith(prefix) and probe.count("/") > prefix.count("/"):
                if path not in kinds[kind]:
                    kinds[kind].append(path)
                break
    for variant in variants:
        for prefix, kind in _CONVENTION:
            if kind == "data" and prefix != "/var/lib/":
                continue
            guess = prefix + variant
            if service_def.get(f"{kind}_paths" if kind != "log" else "log_paths") is None \
                    and guess not in kinds[kind]:
                kinds[kind].append(guess)
        for guess in (f"/run/{variant}.pid", f"/run/{variant}.sock"):
            if service_def.get("pid_files") is None and guess not in pid_files:
                pid_files.append(guess)
    # The environment its own start reads, as the host says it (evidence ``environment_files``:
    # the units' EnvironmentFile= paths, the files its init script sources). Evidence from before
    # that reading falls back on Debian's convention, /etc/default/UNIT. The host's known-good
    # baseline watches the same files as this service's.
    named = _environment_files(evidence)
    if named is None:
        named = [f"/etc/default/{base}" for base in (unit.rsplit(".", 1)[0].split("@", 1)[0] for unit in units)
                 if base and _NAME.match(base)]
    for path in named:
        if path not in kinds["config"]:
            kinds["config"].append(path)
    all_pids = _ints(pids or (), "pids")
    known: dict[str, str] = {}
    table: list[list[Any]] = []
    if evidence is not None:
        if not isinstance(evidence, Mapping):
            raise ScopeError(f"evidence must be a mapping, not {type(evidence).__name__}")
        all_pids += [p for p in _ints(evidence.get("service_pids") or (), "evidence.service_pids")
                     if p not in all_pids]
        for pid, proc in _processes(evidence):
            comm = str(proc.get("comm") or "")[:64]
            if comm:
                known[str(pid)] = comm
            if len(table) < _MAX_TABLE:
                table.append([pid, comm, str(proc.get("cmdline") or proc.get("args") or "")[:256]])
            if pid in all_pids and comm and comm not in processes and _NAME.match(comm):
                processes.append(comm)
            if pid in all_pids and user is None and isinstance(proc.get("user"), str) \
                    and _NAME.match(proc["user"]) and proc["user"] != "root":
                user = proc["user"]
    if evidence is not None:
        _from_evidence(service_def, evidence, kinds, pid_files, all_pids)
        if user is None:
            user = _unit_user(evidence)
    depends = []
    for raw in _strings(service_def.get("depends_on"), "depends_on"):
        unit = unit_name(raw)
        if unit is None:
            raise ScopeError(f"service key 'depends_on' holds {raw!r}, which is not a service name")
        depends.append(unit)
    containers = _strings(service_def.get("containers"), "containers") or [name]
    unit = evidence.get("unit") if isinstance(evidence, Mapping) and isinstance(evidence.get("unit"), Mapping) else {}
    programs = [canonical(p) for p in str(unit.get("Programs") or "").split() if p.startswith("/")][:16]
    path_groups = _path_groups(evidence) if evidence is not None else {}
    known_good_groups = _known_good_groups(evidence) if evidence is not None else {}
    role_attributes = _role_attributes(evidence) if evidence is not None else {}
    return {
        "service": name,
        "units": units,
        "processes": processes,
        "user": user,
        "config_paths": kinds["config"],
        # Only what the service definition names itself (never a guess from the name): a
        # file the operating system owns can still be this service's configuration
        # (journald.conf.d), and then a change needs approval instead of being refused.
        "declared_config_paths": declared,
        "data_paths": kinds["data"],
        "runtime_paths": kinds["runtime"],
        "log_paths": kinds["log"],
        "pid_files": pid_files,
        "ports": _ints(service_def.get("ports") or (), "ports"),
        "pids": all_pids,
        "known_pids": known,
        # The host's process table from the evidence ([pid, comm, cmdline]): what a process
        # pattern (`pkill -f`, `killall -r`) would match on the host.
        "process_table": table,
        "depends_on": depends,
        "containers": containers,
        # The programs the service's own unit runs (its Exec*= lines, from the host): a
        # program of the operating system's areas that one of them is may have its mode or
        # owner changed with a human's approval, never more.
        "unit_programs": programs,
        # Groups that own the service's declared paths, or the paths its own errors name, as
        # the host reports them ({group: path}): the groups its account may need to be in.
        "path_groups": path_groups,
        # Memberships the service's accounts held at its last healthy pass and have lost since
        # ({user: [group]}, the host's known-good baseline): what putting them back restores.
        "known_good_groups": known_good_groups,
        # Database roles' attributes as the host read them ({role: [SUPERUSER, CREATEROLE, ...]}):
        # a role granted to another must not carry powers beyond data access.
        "role_attributes": role_attributes,
    }


def _role_attributes(evidence: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{role: [ATTRIBUTE]}`` from the evidence's ``role_attributes``: per role a list of the
    attribute keywords of CREATE ROLE, or ``\\du``'s comma-separated text (`Superuser, Create
    role`); each attribute upper-cased without blanks (bounded)."""
    found = evidence.get("role_attributes")
    if not isinstance(found, Mapping):
        return {}
    out: dict[str, list[str]] = {}
    for role, attributes in list(found.items())[:200]:
        if isinstance(attributes, str):
            attributes = attributes.split(",")
        if isinstance(attributes, (list, tuple)):
            out[str(role)] = [re.sub(r"\s+", "", str(a)).upper() for a in attributes if str(a).strip()][:16]
    return out


_MAX_ENV_FILES = 12


def _environment_files(evidence: Mapping[str, Any] | None) -> list[str] | None:
    """The environment files the host says the service's start reads (evidence
    ``environment_files``), normalised; None when the evidence holds no such reading. A path
    that is not a plain absolute file path (a glob, ``..``) is left out."""
    if not isinstance(evidence, Mapping) or not isinstance(evidence.get("environment_files"), (list, tuple)):
        return None
    out: list[str] = []
    for value in list(evidence["environment_files"])[:_MAX_ENV_FILES]:
        if not isinstance(value, str) or any(c in value for c in "*?[") or ".." in value.split("/"):
            continue
        path, _reason = normalise(value)
        if path is not None and path != "/" and path not in out:
            out.append(path)
    return out


def _known_good_groups(evidence: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{user: [group]}``: the memberships the host's known-good baseline says each account
    of the service lost since its last healthy pass (evidence ``known_good.runs_as``)."""
    known = evidence.get("known_good") if isinstance(evidence.get("known_good"), Mapping) else {}
    found: dict[str, list[str]] = {}
    for item in known.get("runs_as") or ():
        if not isinstance(item, Mapping) or item.get("change") != "groups":
            continue
        user = str(item.get("account") or "")
        lost = [str(g) for g in item.get("lost") or () if _NAME.match(str(g))]
        if _NAME.match(user) and lost:
            found[user] = lost
    return found


# `owner nginx:ssl-cert, mode 0640` in a described path's line (host_probe.describe_path).
_OWNER_MODE = re.compile(r"owner [^:\s]+:(?P<group>[^,\s]+), mode (?P<mode>[0-7]{3,4})")
# Where a named path was named: the service's own output, not another program's.
_OWN_OUTPUT = re.compile(r"^(?:error|config_test|status|journal|log /)")


def _path_groups(evidence: Mapping[str, Any]) -> dict[str, str]:
    """``{group: path}``: the owning groups of the service's declared paths (evidence ``paths``)
    and of the paths its own errors, configuration test, journal or logs name (evidence
    ``named_paths``), each only when the group's mode bits give it access. Host data, never
    the model's: a membership of one of these groups is what the service's files need."""
    found: dict[str, str] = {}

    def add(group: str, mode: str, path: str) -> None:
        if _NAME.match(group) and group != "root" and len(mode) >= 3 and int(mode[-2]) & 6 and group not in found:
            found[group] = path

    paths = evidence.get("paths")
    for path, line in (paths.items() if isinstance(paths, Mapping) else ()):
        text = str(line).split("\n", 1)[0]
        match = _OWNER_MODE.search(text)
        if match and not text.startswith(("missing", "not accessible")):
            add(match.group("group"), match.group("mode"), str(path))
    named = evidence.get("named_paths")
    for path, facts in (named.items() if isinstance(named, Mapping) else ()):
        if not isinstance(facts, Mapping) or facts.get("type") in (None, "missing", "inaccessible"):
            continue
        if not _OWN_OUTPUT.match(str(facts.get("named_in") or "")):
            continue
        owner, mode = str(facts.get("owner") or ""), str(facts.get("mode") or "")
        if ":" in owner and re.fullmatch(r"[0-7]{3,4}", mode):
            add(owner.split(":", 1)[1], mode, str(path))
    return found


# systemd's directory settings (systemd.exec(5)): each names directories under one root.
_UNIT_DIRECTORIES = (("RuntimeDirectory", "/run/", "runtime"), ("StateDirectory", "/var/lib/", "data"),
                     ("LogsDirectory", "/var/log/", "log"), ("CacheDirectory", "/var/cache/", "runtime"),
                     ("ConfigurationDirectory", "/etc/", "config"))
_DIR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}(?:/[A-Za-z0-9][A-Za-z0-9._@-]{0,63}){0,3}$")
_MAX_TABLE = 400
_SYSTEM_ACCOUNTS = frozenset(("root", "nobody", "daemon", "bin", "sys", "adm", "systemd-network",
                              "systemd-resolve", "systemd-timesync", "messagebus", "syslog", "_apt"))


def _processes(evidence: Mapping[str, Any]):
    """``(pid, process)`` of each well-formed entry of the evidence's process table."""
    for proc in evidence.get("processes") or ():
        if not isinstance(proc, Mapping):
            continue
        try:
            yield int(proc.get("pid")), proc
        except (TypeError, ValueError):
            continue


def _unit_user(evidence: Mapping[str, Any]) -> str | None:
    unit = evidence.get("unit") if isinstance(evidence.get("unit"), Mapping) else {}
    user = str(unit.get("User") or "")
    return user if _NAME.match(user) and user not in _SYSTEM_ACCOUNTS else None


def _from_evidence(service_def: Mapping[str, Any], evidence: Mapping[str, Any], kinds: dict[str, list[str]],
                   pid_files: list[str], pids: list[int]) -> None:
    """What the host says belongs to the service, for the kinds its definition leaves out:
    the directories its systemd unit declares (RuntimeDirectory=mysqld is /run/mysqld) and
    its PIDFile=, and the conventional paths of the accounts and programs its own processes
    run as (mongod runs as mongodb: /var/lib/mongodb). Host data, never the model's."""
    unit = evidence.get("unit") if isinstance(evidence.get("unit"), Mapping) else {}
    for prop, root, kind in _UNIT_DIRECTORIES:
        for name in str(unit.get(prop) or "").split():
            if _DIR_NAME.match(name) and ".." not in name.split("/"):
                path = root + name
                if path not in kinds[kind]:
                    kinds[kind].append(path)
    pid_file = str(unit.get("PIDFile") or "")
    if service_def.get("pid_files") is None and pid_file.startswith("/run/") and ".." not in pid_file \
            and pid_file not in pid_files:
        pid_files.append(pid_file)
    names = []
    for pid, proc in _processes(evidence):
        reasons = " ".join(str(r) for r in proc.get("reasons") or [])
        if pid not in pids or not re.search(r"\b(?:unit|name|pid file)\b", reasons):
            continue  # only the service's own processes (a stray holder of its port says nothing)
        for name in (proc.get("user"), proc.get("comm")):
            name = str(name or "")
            if _NAME.match(name) and name not in _SYSTEM_ACCOUNTS and name not in names:
                names.append(name)
    for name in names:
        for prefix, kind in _CONVENTION:
            if kind == "config" or (kind == "data" and prefix != "/var/lib/"):
                continue  # a process name says nothing about /etc, /srv or /var/www
            key = f"{kind}_paths" if kind != "log" else "log_paths"
            guess = prefix + name
            if service_def.get(key) is None and guess not in kinds[kind]:
                kinds[kind].append(guess)


class Scope:
    """A compiled scope. ``explicit`` is False for the policy's default (no incident given)."""

    __slots__ = ("explicit", "service", "units", "unit_bases", "related", "processes", "users", "pids",
                 "known_pids", "process_table", "containers", "regex", "lists", "ports", "declared", "path_groups",
                 "seen_pids", "programs", "known_good_groups", "role_attributes")

    def __init__(self, data: Mapping[str, Any], explicit: bool) -> None:
        self.explicit = explicit
        self.service = str(data.get("service") or "")
        self.units = {u for u in (unit_name(str(x)) for x in data.get("units") or ()) if u}
        self.unit_bases = {unit_base(u) for u in self.units}
        self.related = {u for u in (unit_name(str(x)) for x in data.get("depends_on") or ()) if u}
        self.processes = {str(p) for p in data.get("processes") or ()}
        self.users = {str(data["user"])} if data.get("user") else set()
        self.pids = {int(p) for p in data.get("pids") or () if str(p).isdigit()}
        self.known_pids = {str(k): str(v) for k, v in (data.get("known_pids") or {}).items()}
        # PIDs read in the output of this incident's own reads (read_pids.py): judged as the
        # evidence's, and checked on the host to be the service's before a signal (execute_plan).
        self.seen_pids = {int(p) for p in data.get("seen_pids") or () if str(p).isdigit()} if explicit else set()
        self.process_table: list[tuple[int, str, str]] = []
        for row in data.get("process_table") or ():
            if isinstance(row, (list, tuple)) and len(row) == 3 and str(row[0]).isdigit():
                self.process_table.append((int(row[0]), str(row[1]), str(row[2])))
        self.containers = {str(c) for c in data.get("containers") or ()}
        groups = data.get("path_groups") if isinstance(data.get("path_groups"), Mapping) else {}
        self.path_groups = {str(k): str(v) for k, v in groups.items()} if explicit else {}
        held = data.get("known_good_groups") if isinstance(data.get("known_good_groups"), Mapping) else {}
        self.known_good_groups = {str(k): {str(g) for g in v or ()} for k, v in held.items()} if explicit else {}
        attributes = data.get("role_attributes") if isinstance(data.get("role_attributes"), Mapping) else {}
        self.role_attributes = {str(k): {str(a).upper() for a in v or ()} for k, v in attributes.items()} \
            if explicit else {}
        self.ports = {int(p) for p in data.get("ports") or () if str(p).isdigit()}
        declared = [canonical(str(p)) for p in data.get("declared_config_paths") or () if str(p).startswith("/")]
        self.declared = pattern_regex(declared, beneath=True) if explicit and declared else None
        self.programs = {canonical(str(p)) for p in data.get("unit_programs") or () if str(p).startswith("/")} \
            if explicit else set()
        self.lists: dict[str, list[str]] = {}
        self.regex: dict[str, list[tuple[re.Pattern[str], int]]] = {}
        for kind, key in (("pidfile", "pid_files"), ("runtime", "runtime_paths"), ("log", "log_paths"),
                          ("data", "data_paths"), ("config", "config_paths")):
            paths = [canonical(p) if p.startswith("/") else p for p in (str(x) for x in data.get(key) or ())]
            self.lists[kind] = paths
            compiled = []
            for path in paths:
                regex = pattern_regex([path], beneath=kind != "pidfile")
                if regex is not None:
                    compiled.append((regex, path.count("/")))
            self.regex[kind] = compiled

    def locate(self, path: str) -> str | None:
        """The kind of scope path that holds `path` (the most specific wins), or None."""
        best: tuple[int, int] | None = None
        found = None
        for rank, kind in enumerate(_KINDS):
            for regex, size in self.regex[kind]:
                if regex.match(path):
                    key = (size, rank)
                    if best is None or key > best:
                        best, found = key, kind
        return found

    def has_unit(self, unit: str) -> bool:
        return unit in self.units or unit_base(unit) in self.unit_bases

    def has_process(self, name: str) -> bool:
        return name in self.processes


def compile_scope(scope: Mapping[str, Any] | None, default: Mapping[str, Any],
                  additions: Mapping[str, Any] | None = None) -> Scope:
    """The Scope to judge with: the incident's (plus the policy's additions) or the default."""
    if scope is None:
        merged = dict(default)
        explicit = False
    else:
        if not isinstance(scope, Mapping):
            raise ScopeError(f"the scope must be a mapping (from scope_from_service), not {type(scope).__name__}")
        merged = dict(scope)
        explicit = True
        if "service" not in scope and "name" in scope:
            merged = scope_from_service(scope, scope.get("pids") or (), scope.get("evidence"))
            if scope.get("seen_pids"):
                merged["seen_pids"] = list(scope["seen_pids"])
    for key, values in (additions or {}).items():
        if isinstance(values, list):
            merged[key] = list(merged.get(key) or []) + [v for v in values if v not in (merged.get(key) or [])]
    return Scope(merged, explicit)


def describe_scope(scope: Mapping[str, Any] | None, access_paths: re.Pattern[str] | None = None) -> list[str]:
    """Short lines for the LLM prompt: what the model may do in this incident without approval.
    ``access_paths`` (the policy's compiled pattern): configuration under it (sshd's, PAM's) is
    access control, which no command may change, so the lines say refused, not approval."""
    if not scope:
        return [
            "No incident scope was given: the service's own unit, its files under /run, /var/log, "
            "/var/lib and its processes count as in scope.",
            "Allowed without approval: read-only diagnostics of non-secret state; start, restart or "
            "reload an ordinary service; create its runtime and log directories and fix their owner "
            "and mode; delete its stale PID files; send TERM/HUP/USR1 to its processes.",
            "Needs approval: editing, moving or deleting configuration under /etc, deleting or "
            "moving data, SIGKILL, stopping a service, installing packages.",
            _REFUSED,
            "Do not write sudo: the policy decides which commands run as root.",
        ]
    lines = []
    units = ", ".join(scope.get("units") or []) or "none"
    procs = ", ".join(scope.get("processes") or []) or "none"
    user = scope.get("user") or "unknown"
    lines.append(f"Incident scope: service {scope.get('service', '?')} (units {units}; processes {procs}; "
                 f"runs as {user}).")
    allowed = [f"start, restart or reload {units}"]
    writable = (scope.get("runtime_paths") or []) + (scope.get("log_paths") or [])
    if writable:
        allowed.append("create files and directories and fix owner/mode under " + ", ".join(writable[:8]))
    if scope.get("data_paths"):
        allowed.append("fix owner/mode of " + ", ".join(scope["data_paths"][:6]))
    if scope.get("pid_files"):
        allowed.append("delete stale PID files " + ", ".join(scope["pid_files"][:6]))
    if scope.get("pids"):
        allowed.append("signal its PIDs " + ", ".join(str(p) for p in scope["pids"][:12]))
    if scope.get("seen_pids"):
        allowed.append("signal a PID your reads in this incident printed (the host signals it only if it is then "
                       f"one of {scope.get('service', 'the service')}'s processes)")
    lines.append("Allowed without approval: read-only diagnostics of non-secret state; " + "; ".join(allowed) + ".")
    gated = []
    config = list(scope.get("config_paths") or [])
    access = [c for c in config if access_paths is not None and access_paths.match(canonical(c))]
    config = [c for c in config if c not in access]
    if config:
        gated.append("editing, moving or deleting its configuration (" + ", ".join(config[:6]) + ")")
    if scope.get("data_paths"):
        gated.append("moving or deleting its data (" + ", ".join(scope["data_paths"][:6]) + ")")
    if scope.get("depends_on"):
        gated.append("restarting the services it depends on (" + ", ".join(scope["depends_on"]) + "; starting "
                     "them is allowed)")
    gated.append("any change to other services, paths or processes; stopping the service; SIGKILL outside "
                 "its PIDs; installing packages")
    lines.append("Needs approval: " + "; ".join(gated) + ".")
    if access:
        lines.append("Refused whatever the incident: changing its access-control configuration ("
                     + ", ".join(access[:6]) + "): who may log in and how. Only host keys are handled there, with "
                     "approval (creating missing ones, tightening a key file's mode). When the fix is an edit of "
                     "a configuration file there, escalate and write the exact edit in the rationale.")
    lines.append(_REFUSED)
    lines.append("Do not write sudo: the policy decides which commands run as root.")
    return lines


_REFUSED = ("Refused: reading or sending secrets (keys, credentials, shadow files, histories, kubeconfigs, "
            "process environments, devices), power (reboot, shutdown targets), firewall, users and "
            "passwords, database roles and grants included (except, with approval, a service's own account or "
            "database role given back its group, grants, setting or expiry: `usermod -aG GROUP USER`, `GRANT "
            "GROUP_ROLE TO ROLE`, `GRANT SELECT,... ON T TO ROLE`, `ALTER ROLE R RESET SETTING|VALID UNTIL "
            "'T'`), package removal, kernel "
            "settings, mount changes, recursive or mass deletion.")
