# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tool layer of the policy engine: wrappers, allowed tools and their argument rules.

Input is an argv that the syntax layer accepted. The generic part reads a tool's
options and operands from its entry in the policy (``tools.<name>``); a named
``rule`` adds what a table cannot say (which signal, which path, which verb).
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from .policy_syntax import quote_token as _q

ALLOW, APPROVAL, REJECT = 0, 1, 2
VERDICTS = ("allow", "approval", "reject")

_PATH_CHARS = re.compile(r"^/[A-Za-z0-9._/@+:,=%-]*$")
_OWNER = re.compile(r"^([a-z_][a-z0-9_-]{0,31}|[0-9]{1,6})?(:([a-z_][a-z0-9_-]{0,31}|[0-9]{1,6})?)?$")
_SIGNALS = {"1": "HUP", "2": "INT", "3": "QUIT", "9": "KILL", "10": "USR1", "12": "USR2",
            "15": "TERM", "18": "CONT", "19": "STOP", "0": "0"}
_GENTLE_SIGNALS = {"TERM", "HUP", "INT", "QUIT", "USR1", "USR2", "CONT", "WINCH", "0"}
_STD_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


class Check:
    """State of one tool check: findings at a level, and whether root is needed."""

    __slots__ = ("tool", "args", "spec", "policy", "findings", "root", "options", "operands", "paths")

    def __init__(self, tool: str, args: list[str], spec: Mapping[str, Any], policy: Mapping[str, Any]) -> None:
        self.tool = tool
        self.args = args
        self.spec = spec
        self.policy = policy
        self.findings: list[tuple[int, str]] = []
        root = spec.get("root", False)
        self.root: bool = root is True
        self.options: list[tuple[str, str | None]] = []
        self.operands: list[str] = []
        self.paths: list[str] = []

    def reject(self, reason: str) -> None:
        self.findings.append((REJECT, reason))

    def approve(self, reason: str) -> None:
        self.findings.append((APPROVAL, reason))

    @property
    def rejected(self) -> bool:
        return any(finding[0] == REJECT for finding in self.findings)

    def has(self, *names: str) -> bool:
        return any(option[0] in names for option in self.options)

    def value(self, *names: str) -> str | None:
        for name, value in self.options:
            if name in names:
                return value
        return None


# ---------------------------------------------------------------- values and paths

def path_matches(path: str, pattern_segments: tuple[str, ...]) -> bool:
    """True when path is the pattern or beneath it (segment-wise glob match)."""
    segments = path.strip("/").split("/") if path != "/" else []
    if len(segments) < len(pattern_segments):
        return False
    return all(fnmatchcase(seg, pat) for seg, pat in zip(segments, pattern_segments))


def _under_any(path: str, patterns: list[tuple[str, ...]]) -> bool:
    return any(path_matches(path, pat) for pat in patterns)


def path_depth(path: str) -> int:
    return 0 if path == "/" else path.strip("/").count("/") + 1


def check_path(chk: Check, value: str, *, writes: bool | None = None) -> str | None:
    """Validate an absolute path argument; returns its normal form or None."""
    if not value.startswith("/"):
        chk.reject(f"{_q(value)} is not an absolute path; write the full path (the working directory is unknown)")
        return None
    bad = next((c for c in value if c in "*?[]"), None)
    if bad:
        chk.reject(f"{_q(value)} contains the glob character `{bad}`; name the path exactly")
        return None
    if not _PATH_CHARS.match(value):
        chk.reject(f"{_q(value)} contains characters unusual in a path (spaces or quotes); name the path plainly")
        return None
    if ".." in value.split("/"):
        chk.reject(f"{_q(value)} contains `..`; write the path without it")
        return None
    path = re.sub("/+", "/", posixpath.normpath(value))
    compiled = chk.policy.compiled
    if _under_any(path, compiled["secret_paths"]):
        chk.reject(f"{_q(path)} holds credentials, keys or sudo rules; no proposed command may touch it")
        return None
    if (chk.spec.get("writes") if writes is None else writes) and _under_any(path, compiled["protected_paths"]):
        chk.reject(f"{_q(path)} is a protected system path; changing it needs a human")
        return None
    if chk.spec.get("root") == "paths" and _under_any(path, compiled["system_paths"]):
        chk.root = True
    chk.paths.append(path)
    return path


def check_value(chk: Check, vtype: str | None, value: str, what: str) -> bool:
    if vtype is None:
        return True
    if vtype == "path":
        return check_path(chk, value) is not None
    pattern = chk.policy.compiled["value_types"].get(vtype)
    if pattern is None:
        chk.reject(f"the policy names an unknown value type `{vtype}` for {what}")
        return False
    if not pattern.match(value):
        chk.reject(f"{_q(value)} is not a valid {vtype.replace('_', ' ')} for {what}")
        return False
    return True


# ---------------------------------------------------------------- generic options

def parse_arguments(chk: Check, args: list[str] | None = None) -> None:
    """Split args into options and operands following the tool's spec."""
    spec = chk.spec
    options: Mapping[str, Any] = spec.get("options") or {}
    deny: Mapping[str, str] = spec.get("deny_options") or {}
    approval: Mapping[str, str] = spec.get("approval_options") or {}
    bundle = bool(spec.get("bundle"))
    items = list(chk.args if args is None else args)
    i = 0
    only_operands = False
    while i < len(items):
        arg = items[i]
        i += 1
        if only_operands or arg == "-" or not arg.startswith("-"):
            chk.operands.append(arg)
            continue
        if arg == "--":
            only_operands = True
            continue
        if arg.startswith("--"):
            name, eq, inline = arg.partition("=")
            if not _known_option(chk, name, deny, approval, options):
                continue
            vtype = options[name]
            if vtype is None:
                if eq:
                    chk.reject(f"`{chk.tool} {name}` takes no value")
                chk.options.append((name, None))
                continue
            if not eq:
                if i >= len(items):
                    chk.reject(f"`{chk.tool} {name}` needs a value")
                    continue
                inline = items[i]
                i += 1
            check_value(chk, vtype, inline, f"`{chk.tool} {name}`")
            chk.options.append((name, inline))
            continue
        if arg in options or arg in deny or arg in approval or not bundle:
            if not _known_option(chk, arg, deny, approval, options):
                continue
            vtype = options[arg]
            value = None
            if vtype is not None:
                if i >= len(items):
                    chk.reject(f"`{chk.tool} {arg}` needs a value")
                    continue
                value = items[i]
                i += 1
                check_value(chk, vtype, value, f"`{chk.tool} {arg}`")
            chk.options.append((arg, value))
            continue
        # Combined short flags (-ltnp); a flag taking a value ends the bundle.
        for pos in range(1, len(arg)):
            name = "-" + arg[pos]
            if not _known_option(chk, name, deny, approval, options):
                break
            vtype = options[name]
            if vtype is None:
                chk.options.append((name, None))
                continue
            value = arg[pos + 1:]
            if not value:
                if i >= len(items):
                    chk.reject(f"`{chk.tool} {name}` needs a value")
                    break
                value = items[i]
                i += 1
            check_value(chk, vtype, value, f"`{chk.tool} {name}`")
            chk.options.append((name, value))
            break


def _known_option(chk: Check, name: str, deny: Mapping[str, str], approval: Mapping[str, str],
                  options: Mapping[str, Any]) -> bool:
    if name in deny:
        chk.reject(deny[name].replace("{tool}", chk.tool))
        return False
    if name in approval:
        chk.approve(approval[name].replace("{tool}", chk.tool))
        if name not in options:
            chk.options.append((name, None))
            return False
    if name not in options:
        chk.reject(f"{_q(name)} is not an option this policy allows for `{chk.tool}`")
        return False
    return True


def check_operands(chk: Check, operands: list[str] | None = None) -> None:
    rule = chk.spec.get("operands") or {"type": "word", "max": 0}
    items = chk.operands if operands is None else operands
    low, high = int(rule.get("min", 0)), int(rule.get("max", 16))
    if len(items) < low:
        chk.reject(f"`{chk.tool}` needs at least {low} argument(s) here")
    if len(items) > high:
        chk.reject(
            f"`{chk.tool}` takes no further arguments" if high == 0
            else f"`{chk.tool}` takes at most {high} argument(s) here"
        )
        return
    for item in items:
        check_value(chk, rule.get("type", "word"), item, f"`{chk.tool}`")


def check_generic(chk: Check) -> None:
    parse_arguments(chk)
    check_operands(chk)


def finish_generic(chk: Check) -> None:
    """Checks every tool gets after its rule: required options, root options, verdict."""
    spec = chk.spec
    for name in spec.get("requires") or ():
        if not chk.has(name):
            chk.reject(f"`{chk.tool}` needs `{name}` (without it, it waits for a keypress or runs unbounded)")
    any_of = spec.get("requires_any") or ()
    if any_of and not chk.has(*any_of):
        chk.reject(f"`{chk.tool}` needs one of {', '.join(f'`{x}`' for x in any_of)}")
    if chk.has(*(spec.get("root_options") or ())):
        chk.root = True
    if spec.get("verdict") == "approval":
        chk.approve((spec.get("reason") or "`{tool}` needs a human's approval").replace("{tool}", chk.tool))
    elif spec.get("verdict") == "reject":
        chk.reject((spec.get("reason") or "`{tool}` is not allowed").replace("{tool}", chk.tool))


# ---------------------------------------------------------------- tool rules

def _rule_service(chk: Check) -> None:
    args = chk.args
    if args == ["--status-all"]:
        return
    if len(args) != 2:
        chk.reject("use `service NAME start|stop|restart|reload|status` (exactly a name and an action)")
        return
    name, verb = args
    if not check_value(chk, "service", name, "a service name"):
        return
    _service_action(chk, name, verb)


_SERVICE_OK = {"start", "restart", "reload", "force-reload", "status", "try-restart"}


def _service_action(chk: Check, name: str, verb: str) -> None:
    base = name[:-8] if name.endswith(".service") else name
    protected = base in chk.policy["protected_services"]
    if verb in _SERVICE_OK:
        return
    if verb in ("stop", "disable", "mask", "kill"):
        if protected:
            chk.reject(f"`{verb}` on `{base}` is refused: it protects remote access, login or the firewall")
        else:
            chk.approve(f"`{verb}` takes `{base}` down; remediation normally starts or restarts a service")
        return
    chk.reject(f"{_q(verb)} is not a `{chk.tool}` action this policy allows (start, restart, reload, status, stop)")


_SYSTEMCTL_READ = {"status", "is-active", "is-enabled", "is-failed", "show", "list-units",
                   "list-unit-files", "list-timers", "list-sockets", "cat", "list-dependencies"}
_SYSTEMCTL_RUN = {"start", "restart", "reload", "try-restart", "reload-or-restart",
                  "try-reload-or-restart", "reset-failed", "daemon-reload"}
_SYSTEMCTL_GATED = {"stop", "enable", "disable", "mask", "unmask", "kill"}
_SYSTEMCTL_OPTIONS = {"--no-pager": None, "-q": None, "--quiet": None, "--no-block": None,
                      "--now": None, "-l": None, "--full": None, "-a": None, "--all": None,
                      "-n": "int", "--lines": "int", "--type": "word", "-t": "word",
                      "--state": "word", "--no-legend": None, "--plain": None}


def _rule_systemctl(chk: Check) -> None:
    chk.spec = {**chk.spec, "options": {**_SYSTEMCTL_OPTIONS, **(chk.spec.get("options") or {})}}
    parse_arguments(chk)
    if not chk.has("--no-pager"):
        chk.reject("`systemctl` needs `--no-pager` (otherwise it may wait in a pager)")
    if not chk.operands:
        chk.reject("`systemctl` needs a verb, e.g. `systemctl restart nginx --no-pager`")
        return
    verb, units = chk.operands[0], chk.operands[1:]
    for unit in units:
        check_value(chk, "unit", unit, "a systemd unit")
    if verb in _SYSTEMCTL_READ:
        chk.root = False
    elif verb in _SYSTEMCTL_RUN:
        if verb not in ("daemon-reload", "reset-failed") and not units:
            chk.reject(f"`systemctl {verb}` needs a unit name")
    elif verb in _SYSTEMCTL_GATED:
        if not units:
            chk.reject(f"`systemctl {verb}` needs a unit name")
        for unit in units:
            _service_action(chk, unit, verb if verb != "unmask" else "stop")
    elif verb in ("reboot", "poweroff", "halt"):
        chk.approve(f"`systemctl {verb}` restarts or stops the whole host; every service on it goes down")
    else:
        chk.reject(f"{_q(verb)} is not a `systemctl` verb this policy allows")


def _signal_name(raw: str) -> str:
    name = raw.upper()
    name = name[3:] if name.startswith("SIG") else name
    return _SIGNALS.get(name, name)


def _rule_kill(chk: Check) -> None:
    args = list(chk.args)
    if args in (["-l"], ["-L"]):
        chk.root = False
        return
    signal = "TERM"
    pids: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            pids.extend(args[i:])
            break
        if arg in ("-s", "-n", "--signal"):
            if i >= len(args):
                chk.reject(f"`kill {arg}` needs a signal")
                return
            signal = _signal_name(args[i])
            i += 1
        elif arg.startswith("-") and not pids:
            signal = _signal_name(arg[1:])
        else:
            pids.append(arg)
    if not pids:
        chk.reject("`kill` needs a numeric PID (find it with `pgrep -a NAME` or `ss -ltnp`)")
    for pid in pids:
        if pid.startswith("-") or pid == "0":
            chk.reject(f"{_q(pid)} signals a whole process group (`-1`: every process); name one PID")
        elif pid == "1":
            chk.reject("PID 1 is the init process; signalling it can stop the whole host or container")
        elif not re.fullmatch(r"[1-9][0-9]{0,9}", pid):
            chk.reject(f"{_q(pid)} is not a numeric PID; find it with `pgrep -a NAME` and name the number")
    if signal == "KILL":
        chk.approve("SIGKILL (`-9`) gives the process no chance to clean up; try plain `kill PID` first")
    elif signal == "STOP":
        chk.approve("SIGSTOP freezes the process until it gets SIGCONT")
    elif signal not in _GENTLE_SIGNALS:
        chk.reject(f"{_q(signal)} is not a signal this policy allows (TERM, HUP, INT, QUIT, USR1, USR2, KILL)")


def _rule_pkill(chk: Check) -> None:
    check_generic(chk)
    for name in chk.operands:
        if name.strip("^$") in chk.policy["protected_services"]:
            chk.reject(f"{_q(name)} matches a protected service (remote access, login or firewall)")


def _rule_rm(chk: Check) -> None:
    parse_arguments(chk)
    if not chk.operands:
        chk.reject("`rm` needs the path of the file to delete")
    recursive = chk.has("-r", "-R", "--recursive")
    min_depth = int(chk.policy["recursive_min_depth"])
    routine = chk.policy.compiled["routine_removals"]
    for raw in chk.operands:
        path = check_path(chk, raw)
        if path is None:
            continue
        if recursive and path_depth(path) < min_depth:
            chk.reject(f"`rm -r {path}` would delete a whole system directory tree")
        elif recursive:
            chk.approve(f"`rm -r` deletes the directory tree {_q(path)}; a human should confirm")
        elif path_depth(path) <= 1:
            chk.reject(f"{_q(path)} sits directly under `/`; deleting it needs a human")
        elif not any(_glob_path(path, pat) for pat in routine):
            chk.approve(f"`rm` deletes {_q(path)}; a human should confirm it is not needed")


def _glob_path(path: str, pattern: tuple[str, ...]) -> bool:
    """Whole-path match (not prefix), segment by segment."""
    segments = path.strip("/").split("/")
    return len(segments) == len(pattern) and all(fnmatchcase(s, p) for s, p in zip(segments, pattern))


def _owned_paths(chk: Check, what: str) -> None:
    recursive = chk.has("-R", "--recursive")
    system = chk.policy.compiled["system_paths"]
    min_depth = int(chk.policy["recursive_min_depth"])
    if len(chk.operands) < 2:
        chk.reject(f"`{chk.tool}` needs {what} and at least one path")
        return
    for raw in chk.operands[1:]:
        path = check_path(chk, raw)
        if path is None:
            continue
        if recursive and path_depth(path) < min_depth:
            chk.reject(f"`{chk.tool} -R` on {_q(path)} would change a whole system directory tree")
        elif _under_any(path, system) or path_depth(path) <= 1:
            chk.approve(f"`{chk.tool}` changes {what} of the system path {_q(path)}; a human should confirm")


def _rule_chown(chk: Check) -> None:
    parse_arguments(chk)
    if chk.operands and not (chk.operands[0] and _OWNER.match(chk.operands[0])):
        chk.reject(f"{_q(chk.operands[0])} is not an owner such as `redis:redis`")
    _owned_paths(chk, "the owner")


def _rule_chmod(chk: Check) -> None:
    parse_arguments(chk)
    if chk.operands:
        mode = chk.operands[0]
        if re.fullmatch(r"[0-7]{4}", mode) and mode[0] in "24567" or "s" in mode and not mode.isdigit():
            chk.reject("setuid/setgid bits make a program run with its owner's rights; never set automatically")
        elif not check_value(chk, "mode", mode, "`chmod`"):
            pass
        elif mode[-1:] in "2367" and mode.isdigit() or re.search(r"[oa]*[+=][rwxXt]*w", mode) and re.search(r"(^|,)[oa]", mode):
            chk.reject(f"mode {_q(mode)} makes files writable by every user; pick a tighter mode")
    _owned_paths(chk, "the permissions")


def _rule_dd(chk: Check) -> None:
    seen: dict[str, str] = {}
    for arg in chk.args:
        key, eq, value = arg.partition("=")
        if not eq or key not in ("if", "of", "bs", "count", "conv", "status", "skip", "seek", "iflag", "oflag"):
            chk.reject(f"{_q(arg)} is not a `dd` operand this policy allows (if=, of=, bs=, count=, status=)")
            continue
        seen[key] = value
    target = seen.get("of")
    if target is None:
        chk.reject("`dd` without `of=` is not a remediation")
        return
    if target.startswith("/dev/") and target not in ("/dev/null",):
        chk.reject(f"`dd of={target}` overwrites a device (a disk or partition); never automatic")
        return
    if "if" in seen:
        check_path(chk, seen["if"], writes=False)
    check_path(chk, target, writes=True)


def _rule_nginx(chk: Check) -> None:
    check_generic(chk)
    signal = chk.value("-s")
    if signal is not None:
        if signal in ("stop", "quit"):
            chk.approve(f"`nginx -s {signal}` stops nginx; remediation normally reloads or restarts")
        elif signal not in ("reload", "reopen"):
            chk.reject(f"{_q(signal)} is not an `nginx -s` signal this policy allows (reload, reopen)")
    conf = chk.value("-c")
    if conf is not None and not path_matches(re.sub("/+", "/", posixpath.normpath(conf)), ("etc", "nginx")):
        chk.reject("`nginx -c` outside /etc/nginx loads a config that can run code; use the system config")
    if chk.has("-v", "-V") and len(chk.options) == 1:
        chk.root = False


_REDIS_READ = {"ping", "info", "dbsize", "time", "lastsave", "role", "echo"}
_REDIS_READ_PAIRS = {("config", "get"), ("memory", "stats"), ("memory", "doctor"), ("slowlog", "get"),
                     ("slowlog", "len"), ("client", "list"), ("latency", "doctor")}
_REDIS_GATED = {"save", "bgsave", "bgrewriteaof", "shutdown"}


def _rule_redis_cli(chk: Check) -> None:
    args = chk.args
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt = args[i]
        if opt in ("--no-auth-warning", "--raw"):
            i += 1
        elif opt in ("-p", "-n") and i + 1 < len(args):
            check_value(chk, "int", args[i + 1], f"`redis-cli {opt}`")
            i += 2
        elif opt == "-h" and i + 1 < len(args):
            if args[i + 1] not in ("127.0.0.1", "localhost", "::1"):
                chk.reject("`redis-cli -h` may only name the local Redis (127.0.0.1)")
            i += 2
        elif opt in ("-a", "--pass", "--user", "--askpass"):
            chk.reject("passwords on the command line leak into process lists and logs; configure auth another way")
            return
        else:
            chk.reject(f"{_q(opt)} is not a `redis-cli` option this policy allows (-h, -p, -n, --raw)")
            return
    words = [w.lower() for w in args[i:]]
    if not words:
        chk.reject("`redis-cli` needs a command (e.g. `redis-cli ping`); the interactive prompt has nobody to answer")
        return
    head = words[0]
    for word in args[i:]:
        check_value(chk, "word", word, "`redis-cli`")
    if head in _REDIS_READ or tuple(words[:2]) in _REDIS_READ_PAIRS:
        return
    if head in _REDIS_GATED:
        chk.approve(f"`redis-cli {head}` writes to disk or stops Redis; a human should confirm")
        return
    chk.reject(
        f"`redis-cli {display_word(args[i])}` is not a read-only Redis command this policy allows "
        "(`CONFIG SET`, `MODULE`, `EVAL` and friends can write files or run code)"
    )


def display_word(word: str) -> str:
    return _q(word)[1:-1]


def _rule_logrotate(chk: Check) -> None:
    check_generic(chk)
    for path in chk.paths:
        if path != "/etc/logrotate.conf" and not path_matches(path, ("etc", "logrotate.d")):
            chk.reject("logrotate configs can run scripts (`postrotate`); only /etc/logrotate.conf "
                       "and /etc/logrotate.d/* are allowed")


def _rule_tar(chk: Check) -> None:
    if chk.args and not chk.args[0].startswith("-"):
        chk.reject("old-style `tar` options (`tar czf`) are ambiguous; use dashed options (`tar -czf`)")
        return
    check_generic(chk)


_APT_ALLOW = {"update", "check", "clean", "autoclean", "show", "policy", "list", "search"}
_APT_GATED = {"install", "reinstall", "remove", "purge", "autoremove", "upgrade",
              "dist-upgrade", "full-upgrade"}
_APT_OPTIONS = {"-y": None, "--yes": None, "--assume-yes": None, "-q": None, "-qq": None,
                "--quiet": None, "--no-install-recommends": None, "-f": None, "--fix-broken": None,
                "--reinstall": None, "--purge": None, "-s": None, "--simulate": None,
                "--dry-run": None, "--only-upgrade": None, "--installed": None}
_APT_DENY = {name: "`{tool} " + name + "` sets APT options or config files, and options such as "
             "`DPkg::Pre-Invoke` run programs; not allowed"
             for name in ("-o", "--option", "-c", "--config-file")}


def _rule_apt(chk: Check) -> None:
    chk.spec = {**chk.spec, "options": _APT_OPTIONS, "deny_options": _APT_DENY, "bundle": False}
    parse_arguments(chk)
    if not chk.operands:
        chk.reject(f"`{chk.tool}` needs an action such as `install` or `update`")
        return
    verb, packages = chk.operands[0], chk.operands[1:]
    for pkg in packages:
        check_value(chk, "package", pkg, "a package name")
    simulate = chk.has("-s", "--simulate", "--dry-run")
    if verb in _APT_ALLOW:
        return
    if verb not in _APT_GATED:
        chk.reject(f"{_q(verb)} is not an action this policy allows for `{chk.tool}`")
        return
    if verb in ("remove", "purge", "autoremove"):
        for pkg in packages:
            if pkg.split("=")[0] in chk.policy["protected_packages"]:
                chk.reject(f"removing `{pkg}` would break access to or management of the host")
    if not simulate:
        action = "installs or upgrades" if verb in ("install", "reinstall") or "upgrade" in verb else "removes"
        chk.approve(f"`{chk.tool} {verb}` {action} packages; a human should confirm")


_DPKG_READ = {"-l", "--list", "-L", "--listfiles", "-s", "--status", "-S", "--search", "--audit",
              "-C", "--get-selections", "--print-architecture", "-V", "--verify"}


def _rule_dpkg(chk: Check) -> None:
    args = chk.args
    if not args:
        chk.reject("`dpkg` needs an action such as `--configure -a`")
        return
    action, rest = args[0], args[1:]
    if action == "--configure":
        if rest != ["-a"] and not (rest and all(re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", p) for p in rest)):
            chk.reject("use `dpkg --configure -a` or `dpkg --configure PACKAGE`")
        return
    if action in _DPKG_READ:
        chk.root = False
        for item in rest:
            check_value(chk, "text", item, "`dpkg`")
            if item.startswith("-"):
                chk.reject(f"{_q(item)} is not allowed after `dpkg {action}`")
        return
    if action in ("-i", "--install"):
        for item in rest:
            check_path(chk, item, writes=False)
        if not rest:
            chk.reject("`dpkg -i` needs the path of a .deb file")
        chk.approve("`dpkg -i` installs a package file; a human should confirm where it came from")
        return
    if action in ("-r", "--remove", "-P", "--purge"):
        for item in rest:
            check_value(chk, "package", item, "a package name")
            if item in chk.policy["protected_packages"]:
                chk.reject(f"removing `{item}` would break access to or management of the host")
        chk.approve(f"`dpkg {action}` removes packages; a human should confirm")
        return
    if action.startswith("--pre-invoke") or action.startswith("--post-invoke") or action in (
            "--root", "--admindir", "--instdir") or action.startswith("--force"):
        chk.reject(f"`dpkg {action.split('=')[0]}` can run programs or bypass package safety; not allowed")
        return
    chk.reject(f"{_q(action)} is not a `dpkg` action this policy allows (--configure -a, -l, -s, -i, -r)")


def _rule_firewall(chk: Check) -> None:
    tool, args = chk.tool, chk.args
    disables = "turns the firewall off or opens the host; never automatic"
    if tool in ("iptables", "ip6tables"):
        listing = {"-L", "--list", "-S", "--list-rules", "-n", "--numeric", "-v", "--verbose",
                   "--line-numbers", "-x", "-t", "--table", "-nL", "-vnL", "-nvL", "-Ln"}
        if any(a in ("-F", "--flush", "-X", "--delete-chain", "-P", "--policy", "-Z") for a in args):
            chk.reject(f"`{tool}` with `-F`/`-X`/`-P` {disables}")
        elif all(a in listing or re.fullmatch(r"[A-Za-z_-]{1,30}", a) for a in args) and args:
            return
        else:
            chk.approve(f"`{tool}` changes firewall rules; a human should confirm")
    elif tool == "ufw":
        if args[:1] == ["status"] and all(a in ("verbose", "numbered") for a in args[1:]):
            chk.root = True
        elif args[:1] in (["disable"], ["reset"]):
            chk.reject(f"`ufw {args[0]}` {disables}")
        else:
            chk.approve("`ufw` changes firewall rules; a human should confirm")
    else:  # nft
        if args[:1] == ["list"]:
            return
        if args[:1] in (["flush"], ["delete"]):
            chk.reject(f"`nft {args[0]}` {disables}")
        else:
            chk.approve("`nft` changes firewall rules; a human should confirm")
    for arg in args:
        check_value(chk, "word", arg, f"`{tool}`")


_IP_FLAGS = {"-4", "-6", "-s", "-d", "-br", "-brief", "-c", "-color", "-j", "-json", "-o",
             "-oneline", "-details", "-stats"}
_IP_OBJECTS = {"a", "addr", "address", "l", "link", "r", "route", "n", "neigh", "neighbour",
               "rule", "maddr", "tuntap"}


def _rule_ip(chk: Check) -> None:
    args = chk.args
    flags = [a for a in args if a.startswith("-")]
    rest = [a for a in args if not a.startswith("-")]
    for flag in flags:
        if flag not in _IP_FLAGS:
            chk.reject(f"{_q(flag)} is not an `ip` option this policy allows (`-b` and `netns exec` run commands)")
    if not rest:
        chk.reject("`ip` needs an object such as `addr` or `route`")
        return
    if rest[0] not in _IP_OBJECTS:
        chk.reject(f"{_q(rest[0])} is not an `ip` object this policy allows (addr, link, route, neigh, rule)")
        return
    for word in rest:
        check_value(chk, "word", word, "`ip`")
    verb = rest[1] if len(rest) > 1 else "show"
    if verb in ("show", "list", "ls", "lst", "get"):
        return
    chk.root = True
    if verb == "flush" or "down" in rest:
        chk.reject("taking links down or flushing addresses/routes can cut the host off the network")
    else:
        chk.approve("`ip` changes network configuration; a human should confirm")


_FIND_ARG = {"-name", "-iname", "-path", "-ipath", "-type", "-user", "-group", "-perm", "-size",
             "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-maxdepth", "-mindepth",
             "-links", "-inum", "-printf", "-regex", "-newer"}
_FIND_FLAG = {"-print", "-print0", "-ls", "-xdev", "-mount", "-empty", "-readable", "-writable",
              "-executable", "-nouser", "-nogroup", "-o", "-or", "-a", "-and", "-not", "!",
              "(", ")", "-true", "-false", "-quit"}
_FIND_DENY = {
    "-exec": "`find -exec` runs a program for every match; propose the command for named files",
    "-execdir": "`find -execdir` runs a program for every match; propose the command for named files",
    "-ok": "`find -ok` runs a program for every match; propose the command for named files",
    "-okdir": "`find -okdir` runs a program for every match; propose the command for named files",
    "-delete": "`find -delete` deletes every match; propose `rm` of the named files",
    "-fprint": "`find -fprint*` writes its output to a file; not allowed",
    "-fprint0": "`find -fprint*` writes its output to a file; not allowed",
    "-fprintf": "`find -fprint*` writes its output to a file; not allowed",
    "-fls": "`find -fls` writes its output to a file; not allowed",
}


def _rule_find(chk: Check) -> None:
    args = chk.args
    i = 0
    while i < len(args) and args[i] in ("-L", "-H", "-P"):
        i += 1
    start = i
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("!", "(", ")"):
        check_path(chk, args[i])
        i += 1
    if i == start:
        chk.reject("`find` needs a starting path (absolute)")
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in _FIND_DENY:
            chk.reject(_FIND_DENY[arg])
        elif arg in _FIND_FLAG:
            continue
        elif arg in _FIND_ARG:
            if i >= len(args):
                chk.reject(f"`find {arg}` needs a value")
                return
            value = args[i]
            i += 1
            if arg == "-newer":
                check_path(chk, value)
            else:
                check_value(chk, "text", value, f"`find {arg}`")
        else:
            chk.reject(f"{_q(arg)} is not a `find` expression this policy allows")


def _rule_grep(chk: Check) -> None:
    parse_arguments(chk)
    operands = chk.operands if chk.has("-e") else chk.operands[1:]
    if not chk.has("-e"):
        if not chk.operands:
            chk.reject("`grep` needs a pattern and a file")
            return
        check_value(chk, "text", chk.operands[0], "the `grep` pattern")
    if not operands:
        chk.reject("`grep` needs a file to read (absolute path)")
    for path in operands:
        check_path(chk, path)


RULES: dict[str, Callable[[Check], None]] = {
    "service": _rule_service, "systemctl": _rule_systemctl, "kill": _rule_kill, "pkill": _rule_pkill,
    "rm": _rule_rm, "chown": _rule_chown, "chmod": _rule_chmod, "dd": _rule_dd, "nginx": _rule_nginx,
    "redis_cli": _rule_redis_cli, "logrotate": _rule_logrotate, "tar": _rule_tar, "apt": _rule_apt,
    "dpkg": _rule_dpkg, "firewall": _rule_firewall, "ip": _rule_ip, "find": _rule_find,
    "grep": _rule_grep, "generic": check_generic,
}


# ---------------------------------------------------------------- wrappers

def resolve_wrappers(argv: list[str], policy: Mapping[str, Any],
                     findings: list[tuple[int, str]]) -> tuple[bool, int]:
    """Skip a leading sudo and wrapper programs; returns (had_sudo, index of the tool).

    Findings are appended; the index is -1 when no tool could be resolved.
    """
    i = 0
    had_sudo = False
    if argv[0] == "sudo":
        had_sudo = True
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i] == "-n":
                i += 1
                continue
            findings.append((REJECT, _sudo_option_reason(argv[i])))
            return had_sudo, -1
    wrappers: Mapping[str, Any] = policy["wrappers"]
    depth = 0
    while i < len(argv):
        name = argv[i]
        if name == "sudo":
            findings.append((REJECT, "`sudo` may only come first, once, as plain `sudo` or `sudo -n`"))
            return had_sudo, -1
        if name not in wrappers:
            return had_sudo, i
        depth += 1
        if depth > 4:
            findings.append((REJECT, "too many wrapper programs in a row; propose the command directly"))
            return had_sudo, -1
        i = _skip_wrapper(name, wrappers[name] or {}, argv, i + 1, policy, findings)
        if i < 0:
            return had_sudo, -1
    findings.append((REJECT, "no program to run after the wrapper(s); propose the command itself"))
    return had_sudo, -1


def _sudo_option_reason(option: str) -> str:
    if option in ("-s", "-i", "--shell", "--login"):
        return f"`sudo {option}` opens a root shell; only a plain leading `sudo` is allowed"
    if option.startswith("-u") or option.startswith("--user") or option.startswith("-g"):
        return "`sudo -u`/`-g` runs as another user; only a plain leading `sudo` is allowed"
    if option in ("-e", "--edit"):
        return "`sudo -e` opens an editor; only a plain leading `sudo` is allowed"
    return f"{_q(option)}: sudo options are not allowed (only plain `sudo` or `sudo -n`)"


def _skip_wrapper(name: str, spec: Mapping[str, Any], argv: list[str], i: int,
                  policy: Mapping[str, Any], findings: list[tuple[int, str]]) -> int:
    options: Mapping[str, Any] = spec.get("options") or {}
    probe = Check(name, [], {}, policy)
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if spec.get("numeric_flag") and re.fullmatch(r"-[0-9]{1,2}", arg):
            i += 1
            continue
        key, eq, inline = arg.partition("=")
        if key not in options:
            findings.append((REJECT, f"{_q(arg)} is not an option this policy allows for the wrapper `{name}`"))
            return -1
        i += 1
        if options[key] is not None:
            if not eq:
                if i >= len(argv):
                    findings.append((REJECT, f"`{name} {key}` needs a value"))
                    return -1
                inline = argv[i]
                i += 1
            check_value(probe, options[key], inline, f"`{name} {key}`")
    for vtype in spec.get("positional") or ():
        if i >= len(argv):
            findings.append((REJECT, f"`{name}` needs a {vtype} before the command"))
            return -1
        check_value(probe, vtype, argv[i], f"`{name}`")
        i += 1
    if name == "env" and i < len(argv) and "=" in argv[i]:
        findings.append((REJECT, "`env NAME=value` changes the program's environment (`LD_PRELOAD` and "
                                 "similar load code); not allowed"))
        return -1
    findings.extend(probe.findings)
    return -1 if probe.rejected else i


def tool_name(word: str, findings: list[tuple[int, str]]) -> str | None:
    """The tool a word names. Paths are refused: the host's PATH picks the binary,
    and a path could point anywhere (`/tmp/service`)."""
    if not word:
        findings.append((REJECT, "the program name is empty"))
        return None
    if "/" not in word:
        return word
    if word.rpartition("/")[0] in _STD_BIN_DIRS:
        findings.append((REJECT, f"name the tool without its path (`{word.rpartition('/')[2]}`, "
                                 f"not {_q(word)}); the host's PATH decides which binary runs"))
    else:
        findings.append((REJECT, f"{_q(word)} runs a program from a path; only allowed tools, named "
                                 "without a path, may run"))
    return None
