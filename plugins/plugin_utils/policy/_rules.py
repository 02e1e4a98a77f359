# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judges of the policy engine: what an effect on a path, a unit or a process means.

Tool rules (``_tools``) read a command's arguments the way the tool does and
report its effects here: ``path(...)`` for every file it reads, writes, creates or
deletes, ``unit(...)`` for every unit it starts or stops, ``signal(...)`` for every
process it signals. Each judge decides at once, from the incident scope and the
policy, whether that effect is allowed, needs a human, or is refused, and records a
short effect line for approvers and the model. The verdict of a command is the
strictest of its effects.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._paths import Mode, alias_kind, canonical, depth, normalise
from ._scope import Scope, unit_base, unit_name

ALLOW, APPROVAL, REJECT = 0, 1, 2
VERDICTS = ("allow", "approval", "reject")

META = frozenset(("meta",))
READS = frozenset(("read", "cert", "config"))
WRITES = frozenset(("create", "write", "delete", "attr", "link"))
_VERB = {"meta": "inspects", "read": "reads", "cert": "reads the certificate", "config": "loads configuration",
         "create": "creates", "write": "writes", "delete": "deletes", "attr": "changes owner/mode of",
         "link": "links to"}
_MAX_EFFECTS = 12

GENTLE_SIGNALS = frozenset(("TERM", "HUP", "INT", "QUIT", "USR1", "USR2", "CONT", "WINCH", "ALRM", "PIPE"))
CORE_SIGNALS = frozenset(("ABRT", "SEGV", "BUS", "ILL", "TRAP", "SYS", "FPE", "XCPU", "XFSZ"))
_SIGNAL_NUMBERS = {"1": "HUP", "2": "INT", "3": "QUIT", "4": "ILL", "5": "TRAP", "6": "ABRT", "7": "BUS",
                   "8": "FPE", "9": "KILL", "10": "USR1", "11": "SEGV", "12": "USR2", "13": "PIPE",
                   "14": "ALRM", "15": "TERM", "17": "CHLD", "18": "CONT", "19": "STOP", "20": "TSTP",
                   "28": "WINCH", "0": "0"}
_SIGNAL_NAME = re.compile(r"^(?:SIG)?([A-Z][A-Z0-9]{1,9}|RTMIN(?:\+[0-9]{1,2})?|RTMAX(?:-[0-9]{1,2})?)$")


def q(token: str, limit: int = 80) -> str:
    """An untrusted token as it may appear in a reason: printable, bounded, in backticks."""
    if len(token) <= limit and token.isascii() and token.isprintable() and "`" not in token:
        return f"`{token}`"
    shown = "".join(c if 32 <= ord(c) < 127 and c != "`" else "?" for c in token[:limit])
    return f"`{shown}{'...' if len(token) > limit else ''}`"


def signal_name(raw: str) -> str | None:
    """`9`, `KILL`, `SIGKILL`, `sigkill` -> `KILL`; None when not a signal."""
    if raw.isdigit():
        return _SIGNAL_NUMBERS.get(raw.lstrip("0") or "0", f"#{raw}")
    match = _SIGNAL_NAME.match(raw.upper())
    if not match:
        return None
    name = match.group(1)
    return "IOT" if name == "IOT" else name


class Check:
    """Findings, effects and privilege of one command while its tool rule runs."""

    __slots__ = ("tool", "policy", "compiled", "scope", "findings", "effects", "pids", "become", "insert")

    def __init__(self, tool: str, policy: Mapping[str, Any], scope: Scope) -> None:
        self.tool = tool
        self.policy = policy
        self.compiled: dict[str, Any] = policy.compiled  # type: ignore[attr-defined]
        self.scope = scope
        self.findings: list[tuple[int, str]] = []
        self.effects: list[str] = []
        self.pids: list[int] = []
        self.become = False
        self.insert: list[str] = []   # flags the engine adds right after the tool name

    def reject(self, reason: str) -> None:
        self.findings.append((REJECT, reason))

    def approve(self, reason: str) -> None:
        self.findings.append((APPROVAL, reason))

    def effect(self, text: str) -> None:
        if text not in self.effects and len(self.effects) < _MAX_EFFECTS:
            self.effects.append(text)

    @property
    def rejected(self) -> bool:
        return any(level == REJECT for level, _reason in self.findings)

    def level(self) -> int:
        return max((level for level, _reason in self.findings), default=ALLOW)


# ---------------------------------------------------------------- paths

# What editors, package managers and admins append to a file they keep a copy of: the copy holds
# what the file held (`server.key.bak`, `.env.swp`, `.pgpass~`, `sshd_config.dpkg-old`, a date stamp).
_BACKUP_SUFFIX = re.compile(r"(?:\.(?:bak|backup|bck|old|orig|original|save|sav|saved|prev|previous|copy|tmp|temp|"
                            r"swp|swo|swn|un~|new|dist|default|disabled|[0-9]{1,8}|dpkg-[a-z]+|rpm[a-z]+|ucf-[a-z]+)"
                            r"|[._-][0-9]{4}-?[0-9]{2}-?[0-9]{2}(?:[T_.-]?[0-9]{2,6})?|~|#|,v)$", re.IGNORECASE)
# Core files as kernels and core_pattern name them: `core`, `core.PID`, `core.COMM.UID.PID...`,
# compressed or not. A copy of a process's memory.
_CORE_FILE = re.compile(r"^(?:core|core(?:\.[A-Za-z0-9_@:+-]+)*?\.[0-9]+(?:\.(?:zst|lz4|xz|gz|bz2))?)$")


def backup_original(canon: str) -> str | None:
    """The path a backup or editor copy stands for (`/k/server.key.bak` -> `/k/server.key`), or None."""
    head, _sep, name = canon.rpartition("/")
    original = name
    while True:
        stripped = _BACKUP_SUFFIX.sub("", original)
        if stripped == original or not stripped.strip(".#"):
            break
        original = stripped
    if original == name:
        return None
    if name.startswith((".", "#")) and name.lower().endswith((".swp", ".swo", ".swn", "#")):
        original = original.lstrip(".#") or original  # vim's `.name.swp`, emacs's `#name#`
    return f"{head}/{original}"


def _secret(chk: Check, canon: str) -> str | None:
    """Why the path holds secret material, or None. A backup or editor copy of a file is judged
    as the file (`server.key.bak` is the key)."""
    found = _secret_itself(chk, canon)
    original = backup_original(canon) if found is None else None
    if original is not None:
        found = _secret_itself(chk, original)
        return f"is a copy of a file that {found}" if found else None
    return found


def _rerooted(canon: str) -> list[str]:
    """The path as seen from each directory above it taken as a root: a container's layer
    (`/var/lib/docker/overlay2/ID/merged/etc/shadow`), a chroot, a mounted disk or a backup tree
    holds another system's files under their own names."""
    segments = canon.strip("/").split("/")
    return ["/" + "/".join(segments[at:]) for at in range(len(segments))]


def _secret_itself(chk: Check, canon: str) -> str | None:
    c = chk.compiled
    if _CORE_FILE.match(canon.rpartition("/")[2]):
        return "is a core file, a copy of a process's memory (keys, passwords, sessions)"
    for view in _rerooted(canon):
        if c["secret_paths"] is not None and c["secret_paths"].match(view):
            return "holds credentials, keys, password hashes or process memory" + _under(view, canon)
        if c["credential_configs"] is not None and c["credential_configs"].match(view):
            return ("holds credentials by what it is for (a cluster cookie, a mail relay password map, a directory "
                    "bind, a server's user list)" + _under(view, canon))
    names = c["secret_names"]
    if names is not None:
        found = names.search(canon)
        if found and not (c["public_names"] is not None and c["public_names"].search(canon.rpartition("/")[2])
                          and found.end() == len(canon)):
            return "is named like a key, credential, shell history or store of secrets (mail, failed logins, saved logins)"
    return None


# Suffixes that only mark a program as set aside (`tool.disabled`, `tool.bak`, `tool~`): no shell,
# unit or script calls a command by such a name. Numbers are not among them (`python3.11`).
_SET_ASIDE = re.compile(r"(?:[._-](?:disabled?|off|inactive|bak|backup|orig|old|saved?|broken|quarantined?|unused)|~)$",
                        re.IGNORECASE)


def leaves_search_path(chk: Check, source: str, target: str, landing: str) -> str:
    """Judge `mv` of ``source`` (landing at ``landing``, ``target`` as written) when it takes a
    name out of a search directory the local administrator fills (``local_search_paths``): to a
    place on no search path ("away"), or renamed in place with a suffix that only sets it aside
    ("renamed"; the destination is judged here too). The bytes are kept and no code is added,
    so it needs approval. "" when the move is something else (judged as usual)."""
    c = chk.compiled
    if c.get("local_search_paths") is None or c.get("search_paths") is None:
        return ""
    found = [normalise(raw)[0] for raw in (source, target, landing)]
    if any(value is None for value in found):
        return ""
    src, dest, land = (canonical(value) for value in found)
    head, _sep, name = src.rpartition("/")
    if not name or not c["local_search_paths"].match(head or "/") or alias_kind(src)[0] is not None \
            or _secret(chk, src) is not None:
        return ""
    land_head, _sep, land_name = land.rpartition("/")
    if land_head == head and land_name != name and land_name.startswith(name) \
            and _SET_ASIDE.fullmatch(land_name[len(name):]) and _secret(chk, land) is None:
        chk.become = True
        chk.effect(f"moves away {found[0]}")
        chk.effect(f"moves to {found[2]}")
        chk.approve(f"renames {q(found[0])} to {q(land_name)} in a search directory the administrator fills: the "
                    "command is set aside under a name nothing calls, its bytes kept; a human should confirm")
        return "renamed"
    if any(c["search_paths"].match(value) or c["search_ancestors"].match(value) for value in (dest, land)) \
            or c["search_paths"].match(land_head or "/"):
        return ""
    chk.become = True
    chk.effect(f"moves away {found[0]}")
    chk.approve(f"takes {q(found[0])} out of a search directory the administrator fills, to a place on no "
                "search path: the command is no longer found by name, its bytes are kept; a human should confirm")
    return "away"


def _on_search_path(c: Mapping[str, Any], canon: str) -> bool:
    """A search directory or a name in one."""
    paths = c.get("search_paths")
    return paths is not None and (paths.match(canon) is not None or paths.match(canon.rpartition("/")[0] or "/") is not None)


def _under(view: str, canon: str) -> str:
    return "" if view == canon else f" (it is {view} of the tree above it)"


def _private_key_file(chk: Check, canon: str) -> bool:
    """A key or credential file a daemon reads (its mode may be tightened with approval); not an
    account database (shadow, sudoers: who may log in and what they may do) and not a kernel view."""
    c = chk.compiled
    if canon.startswith(("/proc/", "/sys/", "/dev/")):
        return False
    if c["access_paths"].match(canon):
        # Access control lives there (sshd_config, shadow, sudoers); only the daemon's own key
        # files beside it (/etc/ssh/ssh_host_ed25519_key) qualify.
        return _KEY_FILE.search(canon.rpartition("/")[2]) is not None
    return True


# How private key files are named (a host key, a TLS key, an SSH identity).
_KEY_FILE = re.compile(r"(?:[._-]key|\.pem)$|^(?:id_(?:rsa|dsa|ecdsa|ed25519)|privkey)")


def path(chk: Check, raw: str, access: str, *, recursive: bool = False, what: str | None = None,
         owner: str | None = None, mode_text: str | None = None) -> str | None:
    """Judge one path effect; returns the normal path, or None when refused."""
    value, reason = normalise(raw)
    if value is None:
        chk.reject(reason or f"{q(raw)} is not a usable path")
        return None
    canon = canonical(value)
    c = chk.compiled
    alias, beneath = alias_kind(canon)
    if alias is not None and (beneath or access not in META):
        chk.reject(f"{q(value)} goes through /proc/PID/{alias}, another process's view of the file system "
                   "(it can reach any file, secrets included); name the real path")
        return None
    secret = _secret(chk, canon)
    if secret and access == "attr" and not recursive and mode_text is not None and Mode(mode_text).private \
            and _private_key_file(chk, canon):
        # A daemon refuses a key that others may read ("UNPROTECTED PRIVATE KEY FILE", "private key
        # file has group or world access"): taking access away reads and changes nothing of it.
        chk.become = True
        chk.effect(f"{what or 'sets the mode of'} {value}")
        chk.approve(f"{q(value)} {secret}: mode {q(mode_text)} only takes access away from other users (its "
                    "content is neither read nor changed); a human should confirm")
        return value
    if secret and access not in META:
        chk.reject(f"{q(value)} {secret}; no command may read, copy, change or send it")
        return None
    if access not in META and access != "cert" and c["keyish_names"] is not None \
            and (c["keyish_names"].search(canon) or c["keyish_names"].search(backup_original(canon) or "/"))\
            and not secret:
        chk.reject(f"{q(value)} may hold a private key; inspect certificates with `openssl x509 -noout -in FILE`")
        return None
    if canon.startswith("/dev/") and access in READS and canon in c["devices_ok"] and canon != "/dev/null":
        chk.reject(f"{q(value)} is an endless stream; reading it never ends")
        return None
    if canon.startswith("/dev/") and access not in META and canon not in c["devices_ok"] \
            and not canon.startswith(("/dev/shm/", "/dev/mqueue/")):
        chk.reject(f"{q(value)} is a device (or a device alias); reading or writing it can leak memory, "
                   "keystrokes or disk contents, or change hardware state")
        return None
    if canon == "/" or c["system_paths"] is not None and c["system_paths"].match(canon):
        chk.become = True
    if access == "config" and chk.scope.locate(canon) != "config" \
            and c["default_scope"].locate(canon) != "config":
        chk.reject(f"{q(value)} is outside the configuration directories (/etc or the service's own); a "
                   "configuration loaded from elsewhere can load modules and run code as root")
        return None
    if access == "link":
        # A symlink's target is not touched; the link makes it reachable where the link is.
        if depth(canon) <= 2 and c["secret_ancestors"].match(canon):
            # `/etc`, `/etc/ssl`, `/var/lib`, `/root`: every secret beneath would get a second name, one
            # no secret rule knows (`/etc/nginx/etc/credstore/db`).
            chk.reject(f"a link to {q(value)} gives the secrets beneath it (keys, credentials, shadow files) "
                       "another name; link the file or directory the service needs")
            return None
        chk.effect(f"links to {value}")
        if chk.scope.locate(canon) is None:
            chk.approve(f"the link makes {q(value)} reachable from elsewhere; a human should confirm")
        return value
    if access in READS or access in META:
        if recursive and access in READS and c["secret_ancestors"].match(canon):
            chk.reject(f"reading the whole tree {q(value)} would read the secrets beneath it (keys, "
                       "credentials, shadow files); name the files to read")
            return None
        chk.effect(f"{what or _VERB[access]} {value}{' recursively' if recursive else ''}")
        if access == "read" and c["app_areas"] is not None and c["app_areas"].match(canon) \
                and c["app_config_names"].match(canon.rpartition("/")[2]):
            chk.approve(f"{q(value)} is an application's configuration in its code area; such files hold its "
                        "database password: grep for the setting you need, or a human should confirm")
        unit = _unit_drop_in(canon)
        if access == "read" and unit is not None and not (chk.scope.explicit and chk.scope.has_unit(unit)) \
                and chk.scope.explicit:
            chk.approve(f"{q(value)} is a local unit file or drop-in of {unit}, outside the incident; its "
                        "Environment= lines give that service its secrets; a human should confirm")
        if access == "read" and c["data_file_names"] is not None and c["data_file_names"].search(canon):
            chk.approve(f"{q(value)} is a database file: reading it dumps application data (sessions, tokens, "
                        "personal data); a human should confirm")
        return value
    chk.become = True
    _judge_write(chk, value, canon, access, recursive, what, owner)
    return value


def _judge_write(chk: Check, value: str, canon: str, access: str, recursive: bool, what: str | None,
                 owner: str | None) -> None:
    c = chk.compiled
    verb = what or _VERB[access]
    chk.effect(f"{verb} {value}{' recursively' if recursive else ''}")
    if c["protected_paths"].match(canon):
        unit = _own_unit_file(chk.scope, canon)
        declared = getattr(chk.scope, "declared", None)
        if unit is None and declared is not None and declared.match(canon) and _secret(chk, canon) is None \
                and not c["access_paths"].match(canon):
            if recursive and access == "delete":
                chk.reject(f"recursive deletion of {q(value)} destroys the service's configuration")
                return
            chk.approve(f"{verb} {q(value)}: a file of the operating system that the service definition names as "
                        f"{chk.scope.service}'s configuration; a human should confirm")
            return
        if unit is None and access == "attr" and not recursive and canon in getattr(chk.scope, "programs", ()) \
                and _secret(chk, canon) is None:
            chk.approve(f"{verb} {q(value)}: a program {chk.scope.service}'s own unit runs (its Exec*= lines); "
                        "a human should confirm")
            return
        if unit is None and _on_search_path(c, canon):
            local = c.get("local_search_paths")
            out = local is not None and local.match(canon.rpartition("/")[0] or "/") is not None
            chk.reject(f"{q(value)} is on a search path (a name there is a command shells, services and cron run); "
                       "a command may not put, replace or change one there"
                       + (" (`mv` that only takes it out needs approval)" if out else ""))
            return
        if unit is None:
            chk.reject(f"{q(value)} belongs to the operating system (boot, init and unit files, accounts, "
                       "login, scheduler, libraries, kernel interfaces); a command may not change it")
            return
        if recursive and access == "delete":
            chk.reject(f"recursive deletion of {q(value)} destroys {unit}'s local unit configuration")
            return
        chk.approve(f"{verb} {q(value)}: the local unit file or drop-in of {unit}, the incident's own unit "
                    "(systemd reads it at `systemctl daemon-reload`); a human should confirm")
        return
    scope = chk.scope
    kind = scope.locate(canon)
    if recursive and depth(canon) < int(chk.policy["recursive_min_depth"]) and kind is None:
        chk.reject(f"{verb} {q(value)} recursively would touch a whole system directory tree")
        return
    if kind is None and access == "delete" and not scope.explicit and c["routine_removals"] is not None \
            and c["routine_removals"].match(canon):
        kind = "pidfile"
    if kind is None and scope.explicit:
        default_kind = c["default_scope"].locate(canon)
        if recursive and access == "delete":
            chk.reject(f"recursive deletion of {q(value)}, outside the incident's scope, is mass deletion")
            return
        area = f" ({_KIND_WORDS[default_kind]} of another service)" if default_kind else ""
        chk.approve(f"{verb} {q(value)}{area}: outside the incident's scope ({scope.service}); "
                    "a human should confirm")
        return
    if kind is None:
        if recursive and access == "delete":
            chk.reject(f"recursive deletion of {q(value)} is mass deletion outside any service's files")
            return
        chk.approve(f"{verb} {q(value)}: not a service's runtime, log or data path; a human should confirm")
        return
    if owner is not None and not scope.explicit and kind == "data" and not _owner_fits(owner, canon):
        chk.approve(f"`{chk.tool}` gives the data under {q(value)} to {q(owner)}, an account that does not look "
                    "like the service's own; a human should confirm")
    if owner is not None and scope.explicit and kind in ("data", "runtime", "log"):
        user, _sep, group = owner.replace(".", ":", 1).partition(":")
        allowed = scope.users | {"root", "0", ""}
        if user not in allowed or (group and group not in allowed | {"adm"} and group != user):
            chk.approve(f"`{chk.tool}` gives {q(value)} to {q(owner)}, not the service's account "
                        f"({', '.join(sorted(scope.users)) or 'unknown'}); a human should confirm")
        elif kind == "data" and user in ("root", "0") and scope.users - {"root", "0"}:
            # Root may own a log directory or a pid file; a service's data owned by root is data
            # the service (which runs as its own account) can no longer write: an outage, not a fix.
            chk.approve(f"`{chk.tool}` gives the service's data {q(value)} to root, away from its account "
                        f"({', '.join(sorted(scope.users - {'root', '0'}))}): the service can no longer write it; "
                        "a human should confirm")
    if kind == "config":
        if access == "delete" and recursive:
            chk.reject(f"recursive deletion of {q(value)} destroys the service's configuration")
            return
        chk.approve(f"{verb} {q(value)}: an edit of the service's configuration; a human should confirm")
    elif kind == "data":
        if access == "delete" and recursive:
            chk.reject(f"recursive deletion of {q(value)} destroys the service's data")
        elif access in ("delete", "write"):
            chk.approve(f"{verb} {q(value)}: it moves, overwrites or deletes the service's data; "
                        "a human should confirm")
    elif kind in ("runtime", "log") and access == "delete" and recursive:
        chk.approve(f"recursive deletion of {q(value)}; a human should confirm nothing else lives there")


_LOCAL_UNIT = re.compile(r"^/etc/systemd/system/(?P<unit>[A-Za-z0-9@._:-]+\.(?:service|socket|timer|path|mount))"
                         r"(?:\.d(?:/[^/]+\.conf(?:\.[A-Za-z0-9_-]+)?)?)?$")


def _unit_drop_in(canon: str) -> str | None:
    """The unit whose local unit file or drop-in ``canon`` is, else None."""
    found = _LOCAL_UNIT.match(canon)
    return found.group("unit") if found else None


def _own_unit_file(scope: Any, canon: str) -> str | None:
    """The incident's unit whose local unit file or drop-in (``/etc/systemd/system/UNIT``,
    ``UNIT.d/NAME.conf``) ``canon`` is, else None. Only an explicit incident scope has units."""
    found = _LOCAL_UNIT.match(canon)
    if not found or not getattr(scope, "explicit", False) or not scope.has_unit(found.group("unit")):
        return None
    return found.group("unit")


def _owner_fits(owner: str, canon: str) -> bool:
    """Without an incident: does the account look like the one of the service the data belongs to?"""
    user = owner.replace(".", ":", 1).partition(":")[0]
    if user in ("", "root", "0"):
        return True
    parts = canon.strip("/").split("/")
    area = parts[2] if len(parts) > 2 and parts[0] == "var" else parts[1] if len(parts) > 1 else ""
    name = re.sub(r"(?:-data|-server|d)$", "", user)
    size = min(len(name), len(area))
    return size >= 3 and (area.startswith(name) or name.startswith(area))


_KIND_WORDS = {"pidfile": "a PID file", "runtime": "runtime files", "log": "logs", "data": "data",
               "config": "configuration"}


def mode(chk: Check, text: str, target: str | None = None) -> bool:
    """Judge a chmod-style mode; False when it is not valid."""
    parsed = Mode(text)
    if not parsed.valid:
        chk.reject(f"{q(text)} is not a file mode (use octal like 0750 or symbolic like u+rwx)")
        return False
    if parsed.setuid:
        chk.reject("the setuid bit makes a program run with its owner's rights; never set by a command here")
    elif parsed.setid:
        chk.approve(f"mode {q(text)} sets the setgid bit (files created inside inherit the group; a program would "
                    "run with the group's rights); a human should confirm")
    elif parsed.world_writable:
        tmp = target is not None and canonical(target) in chk.compiled["tmp_dirs"]
        if parsed.sticky and tmp:
            chk.approve(f"mode {q(text)} makes {q(target or '')} world-writable (sticky, as /tmp); "
                        "a human should confirm")
        else:
            chk.reject(f"mode {q(text)} lets every user write there; root and services read those "
                       "files, so any user could change what they run or load")
    elif parsed.unsure:
        chk.approve(f"mode {q(text)} depends on the umask or copies other bits; write an explicit mode "
                    "such as 0755")
    return True


# ---------------------------------------------------------------- units

def unit_category(chk: Check, unit: str) -> str:
    c = chk.compiled
    base = unit_base(unit)
    kind = unit.rpartition(".")[2]
    if c["power_units"].search(unit):
        return "power"
    if kind in ("mount", "automount", "swap"):
        return "mount"
    if kind in ("slice", "scope", "device"):
        return "system"
    if c["firewall_units"].match(base):
        return "firewall"
    scope = chk.scope
    protected = bool(c["protected_units"].match(base))
    if scope.explicit and scope.has_unit(unit):
        return "scope-protected" if protected else "scope"
    if kind == "target":
        return "target"
    if unit in scope.related or base in {unit_base(u) for u in scope.related}:
        return "related"
    if c["infrastructure_units"].match(base):
        return "infra"
    if protected:
        return "protected"
    return "ordinary"


_UNIT_REASONS = {
    "power": "powers off, reboots, suspends or isolates the host, unmounts everything or opens a root shell on a "
             "console; never run by a command here",
    "mount": "mounts or unmounts a file system; mount changes are never run by a command here",
    "system": "acts on a slice, scope or device unit (whole groups of processes or hardware); never run here",
    "firewall": "changes the firewall; firewall changes are never run by a command here",
}

VERB_CLASS = {
    **dict.fromkeys(("status", "show", "cat", "is-active", "is-enabled", "is-failed", "list-dependencies",
                     "help", "list-units", "list-unit-files", "list-sockets", "list-timers", "list-jobs",
                     "list-automounts", "list-paths", "is-system-running", "get-default", "show-environment"),
                    "read"),
    "start": "start",
    **dict.fromkeys(("restart", "try-restart", "reload-or-restart", "try-reload-or-restart", "condrestart",
                     "force-reload", "reload-or-try-restart", "force-restart"), "restart"),
    **dict.fromkeys(("reload", "condreload"), "reload"),
    **dict.fromkeys(("stop", "kill", "freeze", "force-stop"), "stop"),
    **dict.fromkeys(("enable", "reenable", "preset", "revert", "unmask", "link", "add-wants", "add-requires"),
                    "boot"),
    **dict.fromkeys(("disable", "mask"), "unboot"),
    "clean": "clean",
    "thaw": "start",
    "reset-failed": "reset",
}


def unit(chk: Check, raw: str, verb: str, *, shown_verb: str | None = None) -> None:
    """Judge one unit action (`verb` is a class from VERB_CLASS or a systemctl verb)."""
    name = unit_name(raw)
    if name is None:
        chk.reject(f"{q(raw)} is not a unit name (letters, digits, `@._:-`; no globs)")
        return
    action = VERB_CLASS.get(verb, verb)
    word = shown_verb or verb
    if action == "read":
        chk.effect(f"reads the state of {name}")
        return
    if action == "reset":
        chk.effect(f"clears the failed state of {name}")
        return
    chk.become = True
    category = unit_category(chk, name)
    effect_verb = {"start": "starts", "restart": "restarts", "reload": "reloads", "stop": "stops",
                   "boot": f"{word}s" if not word.endswith("e") else f"{word}s", "unboot": f"{word}s",
                   "clean": "cleans"}.get(action, word)
    chk.effect(f"{effect_verb} unit {name}")
    if category in _UNIT_REASONS:
        chk.reject(f"`{word} {name}` {_UNIT_REASONS[category]}")
        return
    incident = chk.scope.service or "the incident"
    if action in ("start", "restart", "reload"):
        if category in ("scope", "scope-protected"):
            return
        if category == "related":
            if action != "start":
                chk.approve(f"`{word} {name}` restarts a service that {incident} depends on; other users of it "
                            "are interrupted, so a human should confirm (starting it is allowed)")
            return
        if category in ("ordinary", "protected") and not chk.scope.explicit:
            return
        if category == "infra":
            chk.approve(f"`{word} {name}` acts on a system service ({unit_base(name)}) that the incident is not "
                        "about; a human should confirm")
        elif category == "target":
            chk.approve(f"`{word} {name}` pulls in a whole target; a human should confirm")
        else:
            chk.approve(f"`{word} {name}`: {name} is outside the incident's scope ({incident}); a human should "
                        "confirm")
        return
    if action in ("stop", "unboot") and category == "target":
        # A target groups units: stopping or masking it stops or keeps down every unit it pulls in.
        chk.reject(f"`{word} {name}` stops or keeps down every unit the target pulls in (services, sockets, "
                   "mounts, the network); refused")
        return
    if action == "stop":
        if category in ("protected", "scope-protected", "infra"):
            chk.reject(f"`{word} {name}` would take down remote access, login, messaging or networking; refused")
        else:
            chk.approve(f"`{word} {name}` takes a service down; remediation normally starts or restarts, so a "
                        "human should confirm")
        return
    if action == "unboot":
        if category in ("protected", "scope-protected", "infra"):
            chk.reject(f"`{word} {name}` would keep remote access, login, messaging or networking from "
                       "starting; refused")
        else:
            chk.approve(f"`{word} {name}` keeps a service from starting; a human should confirm")
        return
    if action == "boot" and word == "revert" and category in ("protected", "scope-protected", "infra"):
        chk.reject(f"`{word} {name}` drops the local configuration of a unit the host needs (remote access, login, "
                   "networking); refused")
        return
    if action == "boot":
        chk.approve(f"`{word} {name}` changes what starts at boot; a human should confirm")
        return
    if action == "clean":
        chk.approve(f"`{word} {name}` deletes the unit's runtime, cache, state or log directories; a human "
                    "should confirm")
        return
    chk.reject(f"{q(word)} is not a unit action this policy knows")


# ---------------------------------------------------------------- processes

def protected_process(chk: Check, name: str, pid: int | None = None) -> bool:
    """A process never signalled: the host's own, or an interpreter the evidence does not tie
    to the incident (an interpreter holding the service's port, or running it, is in scope)."""
    if chk.compiled["protected_processes"].match(name):
        return True
    if chk.compiled["interpreter_processes"].match(name):
        return not (pid is not None and chk.scope.explicit and pid in chk.scope.pids)
    return False


def signal_pid(chk: Check, signal: str, raw_pid: str) -> None:
    """Judge sending `signal` (a name from signal_name) to one PID."""
    if raw_pid.startswith("-") or raw_pid in ("0",):
        chk.reject(f"{q(raw_pid)} signals a whole process group (`-1`: every process); name one PID")
        return
    if not re.fullmatch(r"[1-9][0-9]{0,9}", raw_pid):
        chk.reject(f"{q(raw_pid)} is not a PID; find it with `pgrep -a NAME` or `ss -ltnp` and name the number")
        return
    pid = int(raw_pid)
    if pid == 1:
        chk.reject("PID 1 is the init process; signalling it can stop the whole host or container")
        return
    scope = chk.scope
    comm = scope.known_pids.get(raw_pid)
    chk.become = True
    chk.pids.append(pid)
    chk.effect(f"sends {signal} to PID {pid}{f' ({comm})' if comm else ''}")
    if comm and protected_process(chk, comm, pid):
        chk.reject(f"PID {pid} is {q(comm)}, a process the host needs (init, login, remote access, the "
                   "automation itself) or an interpreter the evidence does not tie to this incident; refused")
        return
    seen = scope.explicit and pid not in scope.pids and pid in scope.seen_pids
    if seen:
        # Text is not trusted: the host signals it only if /proc then shows one of the service's processes.
        chk.effect(f"PID {pid} was read in this incident's output: the host checks it is one of "
                   f"{scope.service}'s processes before the signal")
    judge_signal(chk, signal, in_scope=(pid in scope.pids or seen) if scope.explicit else None, what=f"PID {pid}")


def judge_signal(chk: Check, signal: str, *, in_scope: bool | None, what: str, many: bool = False) -> None:
    """in_scope: True/False in an incident, None without one (ordinary processes count as in scope)."""
    if signal == "0":
        return
    outside = in_scope is False
    if signal in GENTLE_SIGNALS:
        if outside:
            chk.approve(f"{what} is not one of the incident's processes; a human should confirm the {signal}")
        return
    if signal == "KILL":
        if in_scope is True and not many:
            return
        chk.approve(f"SIGKILL gives {what} no chance to clean up; try TERM first, or have a human confirm")
        return
    if signal in ("STOP", "TSTP", "TTIN", "TTOU"):
        chk.approve(f"SIG{signal} freezes {what} until it gets SIGCONT; a human should confirm")
        return
    if signal in CORE_SIGNALS:
        chk.approve(f"SIG{signal} makes {what} crash (and dump core); a human should confirm")
        return
    chk.reject(f"{q(signal)} is not a signal this policy sends (TERM, HUP, INT, QUIT, USR1, USR2, KILL, ...)")
