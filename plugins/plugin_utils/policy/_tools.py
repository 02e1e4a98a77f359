# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tool rules of the policy engine: what a tool's arguments mean.

Each rule reads the arguments as the tool would (``_options``) and reports the
effects to the judges in ``_rules``: the paths it reads or changes, the units it
acts on, the processes it signals. Simple read-only tools are described as data in
``defaults.yml`` and read by ``generic``; tools whose arguments carry meaning
(verbs, signals, modes, SQL, firewall commands) have a rule here or in
``_apps``.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any

from . import _destinations as destinations
from . import _rules as judge
from ._options import OptionSpec, Parsed, parse_options, spec_from_table
from ._paths import canonical
from ._rules import Check, q, signal_name
from ._scope import unit_name
from ._table import by_table

Rule = Callable[[Check, list[str], Mapping[str, Any]], None]


# ---------------------------------------------------------------- helpers

def parse(chk: Check, spec: OptionSpec, args: list[str]) -> Parsed:
    parsed = parse_options(spec, args, chk.tool)
    for problem in parsed.problems:
        chk.reject(problem)
    for reason in parsed.approvals:
        chk.approve(reason)
    return parsed


def value(chk: Check, vtype: str | None, text: str, what: str) -> bool:
    """Check an option value or operand against a value type (or a path access)."""
    if vtype is None:
        return True
    if vtype.startswith("path:"):
        return judge.path(chk, text, vtype[5:]) is not None
    pattern = chk.compiled["value_types"].get(vtype)
    if pattern is None:
        chk.reject(f"the policy names an unknown value type `{vtype}` for {what}")
        return False
    if not pattern.match(text):
        chk.reject(f"{q(text)} is not a valid {vtype.replace('_', ' ')} for {what}")
        return False
    return True


def option_values(chk: Check, spec: OptionSpec, parsed: Parsed) -> None:
    for name, text in parsed.options:
        if text is None:
            continue
        option = spec.short.get(name) or spec.long.get(name)
        if option is not None:
            value(chk, option.vtype, text, f"`{chk.tool} {name}`")


def parse_judged(chk: Check, spec: OptionSpec, args: list[str]) -> Parsed | None:
    """``parse`` and every option's value judged (``option_values``); None once refused."""
    parsed = parse(chk, spec, args)
    if chk.rejected:
        return None
    option_values(chk, spec, parsed)
    return None if chk.rejected else parsed


def count_bounds(chk: Check, items: list[str], low: int, high: int, what: str = "argument") -> bool:
    if len(items) < low:
        chk.reject(f"`{chk.tool}` needs at least {low} {what}(s) here")
        return False
    if len(items) > high:
        chk.reject(f"`{chk.tool}` takes no {what}s here" if high == 0
                   else f"`{chk.tool}` takes at most {high} {what}(s) here")
        return False
    return True


def _table(data: Mapping[str, Any], **kwargs: Any) -> OptionSpec:
    return spec_from_table(data, **kwargs)


def insert_flag(chk: Check, parsed: Parsed, flag: str, *aliases: str) -> None:
    """Add a safe flag (`--no-pager`) the proposal left out, right after the tool name."""
    if not parsed.has(flag, *aliases) and flag not in chk.insert:
        chk.insert.append(flag)


# ---------------------------------------------------------------- generic tools (data)

def generic(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    """A tool described in the policy: options with value types, operands with an access."""
    ospec: OptionSpec = spec["_options"]
    parsed = parse(chk, ospec, args)
    option_values(chk, ospec, parsed)
    operands = spec.get("operands") or {}
    recursive = parsed.has(*(spec.get("recursive") or ()))
    if count_bounds(chk, parsed.operands, int(operands.get("min", 0)), int(operands.get("max", 16 if operands else 0))):
        access = operands.get("access")
        vtype = operands.get("type")
        # Leading operands may mean something else than the rest (`named-checkzone ZONE FILE`):
        # each takes its own value type, a path access included, so a file is never read as text.
        leading = list(operands.get("positional") or ())
        for index, item in enumerate(parsed.operands):
            if index < len(leading):
                value(chk, leading[index], item, f"`{chk.tool}` operand {index + 1}")
            elif access:
                judge.path(chk, item, access, recursive=recursive)
            else:
                value(chk, vtype or "text", item, f"`{chk.tool}`")
    for name in spec.get("requires") or ():
        if not parsed.has(name):
            chk.reject(f"`{chk.tool}` needs `{name}` here (without it, it waits for input or runs without end)")
    become = spec.get("become", "paths")
    if become is True or parsed.has(*(spec.get("root_options") or ())):
        chk.become = True
    elif become is False:
        chk.become = False
    if spec.get("effect"):
        chk.effect(str(spec["effect"]))
    for flag in spec.get("add_flags") or ():
        insert_flag(chk, parsed, flag)


# ---------------------------------------------------------------- systemd

_SYSTEMCTL = _table({
    "-t|--type": "word", "--state": "word", "-p|--property": "word", "-P": "word", "-a|--all": None,
    "-r|--recursive": None, "--reverse": None, "--failed": None, "--after": None, "--before": None, "--with-dependencies": None,
    "-l|--full": None, "--value": None, "--show-types": None, "--job-mode": "word", "--fail": None,
    "-i|--ignore-inhibitors": None, "--check-inhibitors": "word", "--dry-run": None, "-q|--quiet": None,
    "--no-warn": None, "--wait": None, "--no-block": None, "--no-legend": None, "--legend": "word",
    "--no-pager": None, "--no-ask-password": None, "--system": None, "--runtime": None, "--now": None,
    "-n|--lines": "int", "-o|--output": "word", "--plain": None, "--kill-whom": "word", "-s|--signal": "word",
    "--kill-value": "int", "--what": "word", "--timestamp": "word", "--marked": None, "--no-reload": None,
    "--force": {"approval": "`systemctl --force` overrides safety checks (existing links, jobs); a human "
                            "should confirm"},
    "--preset-mode": "word", "--firmware-setup": {"deny": "`systemctl --firmware-setup` reboots into firmware"},
    "--boot-loader-menu": {"deny": "boot loader options reboot the host"},
    "--boot-loader-entry": {"deny": "boot loader options reboot the host"},
    "--reboot-argument": {"deny": "reboot arguments reboot the host"},
    "-H|--host": {"deny": "`systemctl --host` acts on another machine; not from here"},
    "-M|--machine": {"deny": "`systemctl --machine` acts on a container or another machine; not from here"},
    "--root": {"deny": "`systemctl --root` edits another file system's units"},
    "--image": {"deny": "`systemctl --image` edits a disk image's units"},
    "--user": {"deny": "`systemctl --user` acts on a user manager; system services are managed here"},
    "--global": {"deny": "`systemctl --global` changes every user's units"},
})
_LIST_VERBS = {"list-units", "list-unit-files", "list-sockets", "list-timers", "list-jobs", "list-automounts",
               "list-paths", "list-dependencies", "is-system-running", "get-default", "show-environment",
               "list-machines"}
_UNIT_VERBS = set(judge.VERB_CLASS) - _LIST_VERBS
_SYSTEMCTL_REFUSED = {
    **dict.fromkeys(("reboot", "poweroff", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep",
                     "suspend-then-hibernate", "soft-reboot", "emergency", "rescue", "default", "exit",
                     "switch-root", "isolate", "sleep"),
                    "powers off, reboots, suspends or isolates the host; never run by a command here"),
    **dict.fromkeys(("set-environment", "unset-environment", "import-environment"),
                    "changes the environment of every service started later (`LD_PRELOAD` and the like); refused"),
    "edit": "opens an editor (nobody is at the terminal) and rewrites unit files; a human edits units",
    "set-default": "changes the target the host boots into; a human does that",
    "bind": "bind-mounts paths into a unit's namespace; refused", "mount-image": "mounts images; refused",
}


def systemctl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _SYSTEMCTL, args)
    insert_flag(chk, parsed, "--no-pager")
    verb = parsed.operands[0] if parsed.operands else "list-units"
    units = parsed.operands[1:]
    if verb in _SYSTEMCTL_REFUSED:
        chk.reject(f"`systemctl {verb}` {_SYSTEMCTL_REFUSED[verb]}")
        return
    job_mode = parsed.last("--job-mode")
    if job_mode is not None and job_mode not in ("fail", "replace", "ignore-dependencies", "ignore-requirements"):
        # `isolate` stops every unit the target does not pull in (a runlevel change); `flush` and
        # `replace-irreversibly` cancel or pin jobs of the whole system.
        chk.reject(f"`systemctl --job-mode={job_mode}` acts on every unit of the host (isolate changes the "
                   "system state); never run by a command here")
        return
    for prop in parsed.values("-p", "-P"):
        # Environment= and SetCredential= (SetCredentialEncrypted=) carry the secrets themselves;
        # LoadCredential= and ImportCredential= only name where they come from.
        if re.search(r"(?i)environment|^env|set[a-z]*credential", prop):
            chk.reject("printing a unit's Environment or inline credentials (SetCredential=) shows the secrets "
                       "services get (passwords, tokens); read the property you need instead")
            return
    if verb == "show-environment":
        chk.reject("`systemctl show-environment` prints the service manager's environment (secrets can live "
                   "there)")
        return
    if verb in _LIST_VERBS:
        chk.effect("reads the state of units")
        for pattern in units:
            value(chk, "unit_pattern", pattern, "a unit pattern")
        return
    if verb in ("daemon-reload",):
        insert_flag(chk, parsed, "--no-ask-password")
        chk.become = True
        chk.effect("reloads systemd's unit files")
        count_bounds(chk, units, 0, 0)
        return
    if verb in ("daemon-reexec", "cancel", "log-level", "log-target", "service-watchdogs"):
        if verb == "log-level" and not units:
            chk.effect("reads systemd's log level")
            return
        chk.become = True
        insert_flag(chk, parsed, "--no-ask-password")
        chk.approve(f"`systemctl {verb}` changes the service manager itself; a human should confirm")
        return
    if verb in ("service-log-level", "service-log-target") and len(units) == 1:
        judge.unit(chk, units[0], "status")
        chk.effect(f"reads the log {verb[12:]} of {units[0]}")
        return
    if verb in ("set-property", "service-log-level", "service-log-target"):
        if not units:
            chk.reject(f"`systemctl {verb}` needs a unit")
            return
        chk.become = True
        if verb == "set-property" and unit_name(units[0]) is not None and judge.unit_category(
                chk, unit_name(units[0]) or "") in ("protected", "scope-protected", "infra"):
            # Resource limits can starve a unit as surely as stopping it (CPUQuota=1%, MemoryMax=1M).
            chk.reject(f"`systemctl set-property {unit_name(units[0])}` limits a unit the host needs (remote access, "
                       "login, messaging, networking); refused")
            return
        if verb == "set-property":
            chk.effect(f"changes the resource settings of {unit_name(units[0]) or units[0]}"
                       + ("" if parsed.has("--runtime") else " (kept across boots)"))
            chk.approve(f"`systemctl set-property {units[0]}` changes a unit's resource limits; a human should confirm")
            return
        by_table(chk, "systemctl", [verb], True, "systemd", unit=units[0])
        return
    if verb not in _UNIT_VERBS:
        if by_table(chk, "systemctl", [verb], True, "systemd") is None:
            chk.reject(f"{q(verb)} is not a `systemctl` verb this policy knows")
        return
    action = judge.VERB_CLASS[verb]
    if verb in ("cat", "show") and not (verb == "show" and parsed.values("-p", "-P")):
        _whole_unit_read(chk, verb, units)
    if action == "read":
        if verb == "status":
            chk.become = True
        for name in units:
            if unit_name(name) is None:
                value(chk, "unit_pattern", name, "a unit pattern")
            else:
                judge.unit(chk, name, verb)
        if not units:
            chk.effect("reads the state of units")
        return
    insert_flag(chk, parsed, "--no-ask-password")
    if verb == "reset-failed":
        chk.become = True
        for name in units:
            judge.unit(chk, name, verb)
        if not units:
            chk.effect("clears the failed state of every unit")
        return
    if not units:
        chk.reject(f"`systemctl {verb}` needs a unit name, e.g. `systemctl {verb} nginx`")
        return
    if verb == "kill":
        signal = signal_name(parsed.last("-s", "--signal") or "TERM")
        if signal is None:
            chk.reject("`systemctl kill --signal` needs a signal name")
            return
        action = "reload" if signal in ("HUP", "USR1", "USR2", "WINCH") else "stop"
        if signal not in judge.GENTLE_SIGNALS | {"KILL"}:
            judge.judge_signal(chk, signal, in_scope=None, what="the unit's processes")
    if parsed.has("--now") and action in ("boot", "unboot"):
        for name in units:
            judge.unit(chk, name, "start" if action == "boot" else "stop", shown_verb=f"{verb} --now")
    for name in units:
        judge.unit(chk, name, action if verb == "kill" else verb, shown_verb=verb)


def _whole_unit_read(chk: Check, verb: str, units: list[str]) -> None:
    """`systemctl cat`, a full `systemctl show` and `systemd-analyze dump` print a unit's
    Environment= (the secrets a service is given): inside the incident the output is redacted
    before the model sees it; another service's, or the manager's own, needs approval. A pattern
    (`'*'`, `'ssh*'`) prints every unit it matches, whichever service they belong to."""
    shown = f"{chk.tool} {verb}"
    if not units:
        chk.approve(f"`{shown}` without a unit prints the service manager's properties, its environment "
                    "included; name the unit and property you need, or a human should confirm")
        return
    for raw in units:
        if unit_name(raw) is None and re.search(r"[*?\[]", raw):
            chk.approve(f"`{shown} {raw}` prints every unit the pattern matches, with the Environment= (the secrets) "
                        "each service is given; name the incident's unit, or a human should confirm")
            return
    if not chk.scope.explicit:
        return
    for raw in units:
        name = unit_name(raw)
        if name is not None and not chk.scope.has_unit(name) and name not in chk.scope.related:
            chk.approve(f"`{shown} {name}` prints the unit's Environment= (the secrets {name} is given), "
                        "outside the incident; read the property you need (`-p`), or a human should confirm")
            return


_SERVICE_VERBS = {"start": "start", "stop": "stop", "restart": "restart", "reload": "reload",
                  "force-reload": "restart", "status": "status", "try-restart": "restart",
                  "condrestart": "restart", "configtest": "configtest", "graceful": "reload",
                  "rotate": "reload", "force-stop": "stop", "reopen": "reload", "upgrade": "upgrade",
                  "check-reload": "configtest", "test-config": "configtest"}


def _init_action(chk: Check, name: str, verb: str, tool: str) -> None:
    if not re.fullmatch(r"[a-z0-9][a-z0-9@._+-]{0,63}", name):
        chk.reject(f"{q(name)} is not a service name")
        return
    action = _SERVICE_VERBS.get(verb)
    if action is None:
        chk.reject(f"{q(verb)} is not a `{tool}` action this policy allows "
                   "(start, restart, reload, status, stop, configtest)")
        return
    chk.become = True
    if action == "configtest":
        chk.effect(f"tests the configuration of {name}")
        return
    if action == "upgrade":
        chk.approve(f"`{tool} {name} upgrade` replaces the running binary; a human should confirm")
        return
    judge.unit(chk, name, action, shown_verb=verb)


def service(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if args == ["--status-all"]:
        chk.become = True
        chk.effect("reads the state of every init script")
        return
    if len(args) == 2 and args[1] == "--full-restart":
        args = [args[0], "restart"]
    if len(args) != 2:
        chk.reject(f"use `{chk.tool} NAME start|restart|reload|status|stop` (exactly a name and an action)")
        return
    _init_action(chk, args[0], args[1], chk.tool)


def initscript(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    """`/etc/init.d/NAME ACTION`: the tool name holds the script's name."""
    name = chk.tool.rpartition("/")[2]
    if len(args) != 1:
        chk.reject(f"use `/etc/init.d/{name} start|restart|reload|status|stop` (exactly one action)")
        return
    _init_action(chk, name, args[0], f"/etc/init.d/{name}")


def invoke_rc_d(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    rest = [a for a in args if a not in ("--quiet", "--disclose-deny")]
    if any(a.startswith("-") for a in rest):
        chk.reject("`invoke-rc.d` options other than --quiet change policy-rc.d decisions; not allowed")
        return
    if len(rest) != 2:
        chk.reject("use `invoke-rc.d NAME ACTION`")
        return
    _init_action(chk, rest[0], rest[1], chk.tool)


def update_rc_d(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    rest = [a for a in args if a != "-f"]
    if len(rest) < 2:
        chk.reject("use `update-rc.d NAME defaults|enable|disable`")
        return
    name, verb = rest[0], rest[1]
    if verb in ("defaults", "enable", "defaults-disabled"):
        judge.unit(chk, name, "boot", shown_verb=f"update-rc.d {verb}")
    elif verb in ("disable", "remove"):
        judge.unit(chk, name, "unboot", shown_verb=f"update-rc.d {verb}")
    else:
        chk.reject(f"{q(verb)} is not an `update-rc.d` action this policy allows")


_JOURNALCTL = _table({
    "-u|--unit": "text", "--user-unit": "text", "-t|--identifier": "text", "-T|--exclude-identifier": "text",
    "-p|--priority": "word", "--facility": "word", "-g|--grep": "text", "--case-sensitive": "?word",
    "-S|--since": "timestamp", "-U|--until": "timestamp", "-n|--lines": "?word", "-b|--boot": "?word",
    "--list-boots": None, "-k|--dmesg": None, "-x|--catalog": None, "-e|--pager-end": None, "-r|--reverse": None,
    "-o|--output": "word", "--output-fields": "word", "-a|--all": None, "-q|--quiet": None, "-m|--merge": None,
    "-D|--directory": "path:read", "-i|--file": "path:read", "--namespace": "word", "--no-hostname": None,
    "--no-full": None, "-l|--full": None, "--utc": None, "--disk-usage": None, "--verify": None, "--header": None,
    "-F|--field": "word", "-N|--fields": None, "--list-catalog": None, "--dump-catalog": None, "--system": None,
    "--no-tail": None, "--truncate-newline": None, "--no-pager": None, "--show-cursor": None,
    "-c|--cursor": "text", "--after-cursor": "text", "--all-namespaces": None,
    # what changes the journal is judged from the subcommand table (service_cli_table: journalctl)
    "--vacuum-size": "size", "--vacuum-time": "word", "--vacuum-files": "int", "--rotate": None, "--flush": None,
    "--sync": None, "--relinquish-var": None, "--smart-relinquish-var": None, "--update-catalog": None,
    "-f|--follow": {"deny": "`journalctl --follow` never ends; use `journalctl -u UNIT -n 100`"},
    "--setup-keys": {"deny": "`journalctl --setup-keys` creates sealing keys; not a remediation"},
    "--verify-key": {"deny": "`journalctl --verify-key` takes a secret key on the command line"},
    "--cursor-file": {"deny": "`journalctl --cursor-file` writes a file"},
    "--root": {"deny": "`journalctl --root` reads another file system's journal"},
    "--image": {"deny": "`journalctl --image` reads a disk image"},
    "-M|--machine": {"deny": "`journalctl --machine` reads a container's journal"},
    "-H|--host": {"deny": "`journalctl --host` reads another machine's journal"},
    "--user": {"deny": "`journalctl --user` reads a user's journal; system logs are read here"},
})
_JOURNAL_MATCH = re.compile(r"^(?:[A-Z0-9_]{1,64}=[ -~]{0,200}|\+)$")
_BOOT_OR_LINES = re.compile(r"^(?:[+-]?[0-9]{1,9}|[0-9a-f]{32}(?:[+-][0-9]{1,4})?|all)$")


def journalctl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    # journalctl takes the next word as the value of a bare -n/-b when it looks like one.
    merged: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        merged.append(word)
        if word in ("-n", "--lines", "-b", "--boot") and i + 1 < len(args) and _BOOT_OR_LINES.match(args[i + 1]):
            merged[-1] = f"{word}={args[i + 1]}" if word.startswith("--") else f"{word}{args[i + 1]}"
            i += 1
        i += 1
    parsed = parse(chk, _JOURNALCTL, merged)
    option_values(chk, _JOURNALCTL, parsed)
    for name, text in parsed.options:
        if name in ("-n", "-b") and text is not None and not _BOOT_OR_LINES.match(text):
            chk.reject(f"{q(text)} is not a line count or boot id for `journalctl {name}`")
    insert_flag(chk, parsed, "--no-pager")
    chk.become = True
    _vacuum_floor(chk, parsed)
    for item in parsed.operands:
        if item.startswith("/"):
            judge.path(chk, item, "meta")
        elif not _JOURNAL_MATCH.match(item):
            chk.reject(f"{q(item)} is not a journal match (FIELD=value) or a path")
    changes = [name for name, _text in parsed.options if name.startswith("--")]
    judged = [name for name in dict.fromkeys(changes)
              if by_table(chk, "journalctl", [name], _journald_in_scope(chk), "systemd-journald") is not None]
    units = parsed.values("-u")
    if not judged or parsed.operands or units:
        chk.effect("reads the journal" + (f" of {', '.join(units[:4])}" if units else ""))


def _journald_in_scope(chk: Check) -> bool:
    scope = chk.scope
    return not scope.explicit or "systemd-journald" in scope.unit_bases or scope.service == "systemd-journald"


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_TIME_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1, "sec": 1, "second": 1, "seconds": 1,
               "": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600,
               "hours": 3600, "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800,
               "weeks": 604800, "M": 2629800, "month": 2629800, "months": 2629800, "y": 31557600, "year": 31557600,
               "years": 31557600}
# Below these, a vacuum keeps (nearly) nothing: the journal, the record of what happened, is erased.
_VACUUM_FLOOR = {"--vacuum-size": 64 << 20, "--vacuum-time": 86400, "--vacuum-files": 2}


def _vacuum_kept(name: str, text: str) -> float | None:
    """What `journalctl --vacuum-*` keeps (bytes, seconds or files); None when unreadable."""
    if name == "--vacuum-files":
        return float(text) if text.isdigit() else None
    if name == "--vacuum-size":
        found = re.fullmatch(r"([0-9]{1,12})([KMGTPE]?)(?:iB|B)?", text)
        return float(int(found.group(1)) * _SIZE_UNITS[found.group(2)]) if found else None
    total = 0.0
    for number, unit in re.findall(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)", text):
        if unit not in _TIME_UNITS:
            return None
        total += float(number) * _TIME_UNITS[unit]
    return total if re.fullmatch(r"(?:\s*[0-9]+(?:\.[0-9]+)?\s*[A-Za-z]*)+\s*", text) else None


def _vacuum_floor(chk: Check, parsed: Parsed) -> None:
    for name, text in parsed.options:
        if name in _VACUUM_FLOOR and text is not None:
            kept = _vacuum_kept(name, text)
            if kept is None or kept < _VACUUM_FLOOR[name]:
                chk.reject(f"`journalctl {name}={text}` keeps (almost) none of the journal: it erases the record of "
                           "what happened on the host; keep at least a day, 64M or 2 files")


# ---------------------------------------------------------------- signals

def kill(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if args and args[0] in ("-l", "-L", "--list", "--table"):
        chk.effect("lists signal names")
        return
    signal = "TERM"
    pids: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if pids and not word.startswith("-") or word == "--":
            pids.extend(args[i - 1:] if word != "--" else args[i:])
            break
        if word in ("-s", "-n", "--signal"):
            if i >= len(args):
                chk.reject(f"`kill {word}` needs a signal")
                return
            name = signal_name(args[i])
            i += 1
        elif word.startswith("--signal="):
            name = signal_name(word.partition("=")[2])
        elif word.startswith("-") and not pids and len(word) > 1 and not word[1:].isdigit() \
                or word.startswith("-") and not pids and len(word) > 1 and word[1:].isdigit() and i < len(args):
            name = signal_name(word[1:])
        else:
            pids.append(word)
            continue
        if name is None:
            chk.reject(f"{q(word)} is not a signal `kill` knows")
            return
        signal = name
    if not pids:
        chk.reject("`kill` needs a numeric PID (find it with `pgrep -a NAME` or `ss -ltnp`)")
        return
    for pid in pids:
        judge.signal_pid(chk, signal, pid)


_PKILL = _table({
    "-f|--full": None, "-x|--exact": None, "-i|--ignore-case": None, "-n|--newest": None, "-o|--oldest": None,
    "-e|--echo": None, "-c|--count": None, "-u|--euid": "word", "-U|--uid": "word", "-G|--group": "word",
    "-P|--parent": "word", "-t|--terminal": "word", "-r|--runstates": "word", "--signal": "word",
    "-q|--queue": "int", "-l|--list-name": None, "-a|--list-full": None, "-d|--delimiter": "text",
    "-w|--lightweight": None, "-F|--pidfile": "path:read", "-L|--logpidfile": None, "--older": "int",
    "--require-handler": None, "-H": None, "-A|--ignore-ancestors": None, "--cgroup": "word", "--env": "text",
    "-v|--inverse": {"deny": "`{tool} -v` matches every process EXCEPT the pattern"},
    "-g|--pgroup": {"deny": "`{tool} -g` selects whole process groups; name processes instead"},
    "-s|--session": {"deny": "`{tool} -s` selects whole sessions; name processes instead"},
    "--ns": {"deny": "`{tool} --ns` selects by namespace; name processes instead"},
    "--nslist": {"deny": "`{tool} --nslist` selects by namespace; name processes instead"},
})


def _matches_protected(chk: Check, pattern: re.Pattern[str], full: bool, exact: bool) -> str | None:
    samples = chk.compiled["protected_names"] + (chk.compiled["protected_cmdlines"] if full else [])
    for sample in samples:
        hit = pattern.fullmatch(sample) if exact else pattern.search(sample)
        if hit:
            return sample
    return None


def _process_reach(chk: Check, pattern: re.Pattern[str], full: bool, exact: bool) -> tuple[list[str], list[str]]:
    """What a process pattern matches on the host: (the incident's processes, the others).

    The host is the evidence's process table (pid, name, command line: the service's own
    processes and those holding its ports) plus the policy's sample command lines of common
    services, which stand in for the processes the evidence does not list. A process is the
    incident's when its name is one of the incident's process names or the evidence
    attributes its PID to the incident."""
    scope = chk.scope
    rows: list[tuple[int | None, str, str]] = list(scope.process_table)
    for line in chk.compiled["process_samples"]:
        argv0 = line.split(" ", 1)[0]
        rows.append((None, posixpath.basename(argv0.rstrip(":"))[:15], line))
    own: list[str] = []
    other: list[str] = []
    for pid, comm, cmdline in rows:
        text = (cmdline or comm) if full else comm[:15]
        if not text or not (pattern.fullmatch(text) if exact else pattern.search(text)):
            continue
        mine = comm in scope.processes or pid is not None and pid in scope.pids
        (own if mine else other).append(f"{comm}" + (f" (PID {pid})" if pid is not None else ""))
    return own, other


def _pattern_in_scope(chk: Check, raw: str, pattern: re.Pattern[str], full: bool, exact: bool) -> bool | None:
    """True when the pattern matches only the incident's processes on the host; False when it
    matches others only; None after a refusal (it matches the incident's and other services')."""
    own, other = _process_reach(chk, pattern, full, exact)
    if own and other:
        others = ", ".join(list(dict.fromkeys(other))[:3])
        chk.reject(f"{q(raw)} matches processes of other services too ({others}), not only "
                   f"{chk.scope.service or 'the incident'}'s; name the incident's processes exactly (`-x NAME`) "
                   "or signal PIDs")
        return None
    if other:
        return False
    if own:
        return True
    names = chk.scope.processes
    return any((pattern.fullmatch(n) if exact else pattern.search(n)) for n in names)


def pkill(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    """pkill and pgrep (pgrep only reads)."""
    reading = chk.tool == "pgrep"
    signal = "TERM"
    rest = []
    for word in args:
        sig = signal_name(word[1:]) if not reading and re.fullmatch(r"-[A-Za-z0-9+]{1,14}", word) \
            and (word[1:].isdigit() or word[1:].upper().startswith("SIG") or word[1:].isupper()) else None
        if sig is not None and (word[1:].isdigit() or word[1:].upper() == word[1:]):
            signal = sig
        else:
            rest.append(word)
    parsed = parse(chk, _PKILL, rest)
    option_values(chk, _PKILL, parsed)
    if parsed.has("--signal"):
        sig = signal_name(parsed.last("--signal") or "")
        if sig is None:
            chk.reject("`--signal` needs a signal name")
            return
        signal = sig
    if reading:
        chk.effect("reads the process table")
        if not count_bounds(chk, parsed.operands, 0, 1, "pattern"):
            return
        return
    if len(parsed.operands) > 1:
        chk.reject(f"`{chk.tool}` takes one pattern")
        return
    pidfile = parsed.last("-F")
    if not parsed.operands and pidfile is None and not parsed.has("-u", "-U", "-P", "-G", "-t"):
        chk.reject(f"`{chk.tool}` needs a process name")
        return
    users = parsed.values("-u", "-U")
    if users and not parsed.operands and pidfile is None:
        for user in users:
            if user in ("root", "0") or user not in chk.scope.users:
                chk.reject(f"`{chk.tool} -u {user}` signals every process of an account; name the processes")
                return
    if parsed.has("-P", "-G", "-t") and not parsed.operands:
        chk.reject(f"`{chk.tool}` by parent, group or terminal alone signals unknown processes; name them")
        return
    chk.become = True
    in_scope: bool | None = None
    what = "the matching processes"
    if parsed.operands:
        raw = parsed.operands[0]
        full = parsed.has("-f")
        exact = parsed.has("-x")
        flags = re.IGNORECASE if parsed.has("-i") else 0
        try:
            pattern = re.compile(raw, flags)
        except re.error:
            chk.reject(f"{q(raw)} is not a pattern the policy can read; name the process exactly with `-x`")
            return
        if pattern.search("") or pattern.search("a") and pattern.search("Z9") and pattern.search("/"):
            chk.reject(f"{q(raw)} matches every process")
            return
        hit = _matches_protected(chk, pattern, full, exact)
        if hit:
            chk.reject(f"{q(raw)} also matches {q(hit)}, a process the host needs (init, login, remote access, "
                       "the automation itself); refused")
            return
        if chk.scope.explicit:
            in_scope = _pattern_in_scope(chk, raw, pattern, full, exact)
            if in_scope is None:
                return
        what = f"every process matching {q(raw)}"
    elif pidfile is not None:
        path = judge.path(chk, pidfile, "read")
        if path is None:
            return
        if chk.scope.explicit:
            in_scope = chk.scope.locate(path) in ("pidfile", "runtime")
        what = f"the process in {path}"
    elif users and chk.scope.explicit:
        # An account is not a service: www-data, nobody or daemon run the workers of several
        # services (nginx, PHP-FPM, Apache), and the policy cannot see which share it.
        in_scope = False
        what = f"every process of the account {users[0]} (whichever service runs under it)"
    chk.effect(f"sends {signal} to {what}")
    judge.judge_signal(chk, signal, in_scope=in_scope, what=what, many=True)


_KILLALL = _table({
    "-e|--exact": None, "-I|--ignore-case": None, "-q|--quiet": None, "-r|--regexp": None,
    "-s|--signal": "word", "-u|--user": "word", "-v|--verbose": None, "-w|--wait": None, "-y|--younger-than": "word",
    "-o|--older-than": "word", "-V|--version": None, "-Z|--context": "word",
    "-i|--interactive": {"deny": "`killall -i` asks a question nobody can answer"},
    "-g|--process-group": {"deny": "`killall -g` signals whole process groups"},
    "-n|--ns": {"deny": "`killall --ns` selects by namespace"},
})


def killall(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    signal = "TERM"
    rest = []
    for word in args:
        if re.fullmatch(r"-[A-Z0-9]{1,12}", word) and not word[1:].isalpha() or re.fullmatch(r"-(SIG)?[A-Z]{2,9}", word):
            sig = signal_name(word[1:])
            if sig is not None:
                signal = sig
                continue
        rest.append(word)
    parsed = parse(chk, _KILLALL, rest)
    if parsed.has("-s"):
        sig = signal_name(parsed.last("-s") or "")
        if sig is None:
            chk.reject("`killall -s` needs a signal name")
            return
        signal = sig
    if not parsed.operands:
        chk.reject("`killall` needs a process name")
        return
    chk.become = True
    regex = parsed.has("-r")
    for raw in parsed.operands:
        try:
            pattern = re.compile(raw if regex else re.escape(raw), re.IGNORECASE if parsed.has("-I") else 0)
        except re.error:
            chk.reject(f"{q(raw)} is not a pattern the policy can read")
            return
        if regex and (pattern.search("") or pattern.search("a")):
            chk.reject(f"{q(raw)} matches every process")
            return
        hit = _matches_protected(chk, pattern, False, not regex)
        if hit:
            chk.reject(f"{q(raw)} matches {q(hit)}, a process the host needs; refused")
            return
        in_scope = None
        if chk.scope.explicit:
            in_scope = _pattern_in_scope(chk, raw, pattern, False, not regex)
            if in_scope is None:
                return
        chk.effect(f"sends {signal} to every process named {raw}")
        judge.judge_signal(chk, signal, in_scope=in_scope, what=f"every process named {q(raw)}", many=True)


_FUSER = _table({
    "-a|--all": None, "-i|--interactive": {"deny": "`fuser -i` asks questions nobody can answer"},
    "-I|--inode": None, "-k|--kill": None, "-l|--list-signals": None, "-m|--mount": None, "-M|--ismountpoint": None,
    "-n|--namespace": "word", "-s|--silent": None, "-u|--user": None, "-v|--verbose": None, "-w|--writeonly": None,
    "-4|--ipv4": None, "-6|--ipv6": None, "-V|--version": None,
})
_SOCKET = re.compile(r"^[0-9]{1,5}(?:,[0-9A-Za-z.:]*){0,3}/(?:tcp|udp)$|^[0-9]{1,5}$")


def fuser(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    signal = "KILL"
    rest = []
    for word in args:
        if re.fullmatch(r"-(SIG)?[A-Z]{2,9}|-[0-9]{1,2}", word):
            sig = signal_name(word[1:])
            if sig is not None:
                signal = sig
                continue
        rest.append(word)
    parsed = parse(chk, _FUSER, rest)
    option_values(chk, _FUSER, parsed)
    if parsed.has("-l"):
        return
    chk.become = True
    space = parsed.last("-n")
    if not parsed.operands:
        chk.reject("`fuser` needs a file, mount point or port (e.g. `fuser -v 80/tcp`)")
        return
    ports_in_scope = True
    for item in parsed.operands:
        if space in ("tcp", "udp") and re.fullmatch(r"[0-9]{1,5}", item) or _SOCKET.match(item) and not item.startswith("/"):
            port = int(item.split("/")[0].split(",")[0])
            chk.effect(f"finds the processes using port {port}")
            ports_in_scope = ports_in_scope and (port in chk.scope.ports if chk.scope.explicit else True)
        else:
            path = judge.path(chk, item, "meta")
            if path is None:
                return
            if parsed.has("-k") and (parsed.has("-m", "-M") or path.count("/") <= 1):
                chk.reject(f"`fuser -k` on {q(path)} kills every process using a whole file system")
                return
            ports_in_scope = ports_in_scope and (chk.scope.locate(path) is not None if chk.scope.explicit else True)
    if parsed.has("-k") and not ports_in_scope:
        chk.reject("`fuser -k` would signal whatever holds a port or file outside the incident's scope (another "
                   "service, remote access); name the PID after `fuser -v`")
        return
    if parsed.has("-k"):
        chk.effect(f"sends {signal} to every process found")
        chk.approve(f"`fuser -k` sends {signal} to whatever processes it finds, unseen; check with `fuser -v` "
                    "and name the PID, or have a human confirm")
        if signal not in judge.GENTLE_SIGNALS | {"KILL"}:
            judge.judge_signal(chk, signal, in_scope=None, what="those processes")


_PS_BSD = set("auxfjlsvmrwhcnTSHLgeO") - {"e", "O"}
_PS_BSD_VALUE = set("opktUO")
# A dashed word whose last letter takes the next word as its value (`-eo FORMAT`, `--sort KEY`).
_PS_NEEDS_VALUE = re.compile(r"^(?:-[A-Za-z]*[oOpCuUgGstqn]|--(?:format|sort|pid|ppid|user|User|group|Group|sid|tty|"
                             r"cols|columns|width|lines|rows|quick-pid))$")
_PS = _table({
    "-e": None, "-A": None, "-a": None, "-d": None, "-N|--deselect": None, "-f": None, "-F": None, "-l": None,
    "-j": None, "-H": None, "-w": None, "-y": None, "-L": None, "-T": None, "-m": None, "-M": None, "-Z": None,
    "-c": None, "-P": None, "-o|--format": "text", "-O": "text", "-p|--pid": "word", "-q|--quick-pid": "word",
    "-C": "word", "-u|--user": "word", "-U|--User": "word", "-g|--group": "word", "-G|--Group": "word",
    "-s|--sid": "word", "-t|--tty": "word", "--ppid": "word", "--sort": "word", "--forest": None,
    "--no-headers|--no-heading": None, "--headers": None, "--cols|--columns|--width": "int", "--lines|--rows": "int",
    "-V|--version": None, "--help": "?word", "-n": "text", "--context": None, "--cumulative": None,
    "--signames": None,
})


def ps(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    dashed = []
    i = 0
    wants_value = False
    while i < len(args):
        word = args[i]
        i += 1
        if wants_value:
            dashed.append(word)
            wants_value = False
            continue
        if word.startswith("-"):
            dashed.append(word)
            wants_value = bool(_PS_NEEDS_VALUE.match(word))
            continue
        if not re.fullmatch(r"[A-Za-z]+", word):
            chk.reject(f"{q(word)} is not a `ps` option")
            return
        for pos, letter in enumerate(word):
            if letter == "e":
                chk.reject("`ps e` prints every process's environment (passwords and tokens live there); "
                           "use `ps aux` or `ps -ef`")
                return
            if letter in _PS_BSD_VALUE:
                if pos != len(word) - 1 or i >= len(args):
                    chk.reject(f"`ps {word}`: the BSD option `{letter}` needs a value")
                    return
                i += 1
                break
            if letter not in _PS_BSD:
                chk.reject(f"`{letter}` in `ps {word}` is not a `ps` option this policy knows")
                return
    parsed = parse(chk, _PS, dashed)
    if parsed.operands:
        chk.reject("`ps` takes options only here")
    for fmt in parsed.values("-o", "-O"):
        if re.search(r"(?i)environ|\benv\b", fmt):
            chk.reject("that `ps` format prints process environments (passwords and tokens live there)")
    chk.effect("reads the process table")


# ---------------------------------------------------------------- files: reading

_GREP = _table({
    "-E|--extended-regexp": None, "-F|--fixed-strings": None, "-G|--basic-regexp": None, "-P|--perl-regexp": None,
    "-e|--regexp": "text", "-f|--file": "path:read", "-i|--ignore-case|-y": None, "--no-ignore-case": None,
    "-v|--invert-match": None, "-w|--word-regexp": None, "-x|--line-regexp": None, "-c|--count": None,
    "--color|--colour": "?word", "-L|--files-without-match": None, "-l|--files-with-matches": None,
    "-m|--max-count": "int", "-o|--only-matching": None, "-q|--quiet|--silent": None, "-s|--no-messages": None,
    "-b|--byte-offset": None, "-H|--with-filename": None, "-h|--no-filename": None, "--label": "text",
    "-n|--line-number": None, "-T|--initial-tab": None, "-Z|--null": None, "-z|--null-data": None,
    "-A|--after-context": "int", "-B|--before-context": "int", "-C|--context": "int", "-a|--text": None,
    "-I": None, "--binary-files": "word", "-D|--devices": "word", "-d|--directories": "word",
    "--exclude": "text", "--exclude-dir": "text", "--include": "text", "--exclude-from": "path:read",
    "-r|--recursive": None, "-R|--dereference-recursive": None, "--line-buffered": None, "-U|--binary": None,
}, numeric="-C")
_GREP_IMPLIED = {"egrep": "-E", "fgrep": "-F", "rgrep": "-r", "zgrep": None, "zegrep": "-E", "zfgrep": "-F"}
_BASE64_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7vbqajDw4o6gJy+UtmIbE"


def grep(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    implied = _GREP_IMPLIED.get(chk.tool)
    parsed = parse(chk, _GREP, ([implied] if implied else []) + args)
    option_values(chk, _GREP, parsed)
    patterns = parsed.values("-e")
    files = list(parsed.operands)
    if not patterns and not parsed.has("-f"):
        if not files:
            chk.reject(f"`{chk.tool}` needs a pattern and a file")
            return
        patterns = [files.pop(0)]
    recursive = parsed.has("-r", "-R") or parsed.last("-d") == "recurse"
    if not files:
        chk.reject(f"`{chk.tool}` needs a file or directory to read (absolute path)")
        return
    hunting = chk.compiled["secret_hunt"]
    listing_only = parsed.has("-l", "-L", "-c", "-q")
    paths = []
    for item in files:
        found = judge.path(chk, item, "read", recursive=recursive)
        if found is None:
            return
        paths.append(found)
    logs_only = all(chk.compiled["log_areas"].match(p) for p in paths)
    for pattern in patterns:
        if not logs_only and (hunting.search(pattern) or _grep_selects_secrets(chk, pattern, parsed)):
            chk.reject(f"searching files for {q(pattern)} hunts for secrets (passwords, keys, tokens); "
                       "search the logs, or read the specific setting another way")
            return
        if recursive and not listing_only:
            catch_all = parsed.has("-v") or _grep_matches_base64(chk, pattern, parsed)
            if catch_all:
                chk.reject(f"a recursive `{chk.tool}` whose pattern matches any text would print whole "
                           "files (keys included); search for the specific message")
                return


# What a pattern selects, not how it is spelled: `pass.ord`, `pa[s]sw`, `requ\?irepass` or `auth`
# select the lines below that carry secrets while selecting none of the ordinary lines.
_SECRET_LINES = (
    "requirepass s3cr3tValue", "masterauth s3cr3tValue", "password = s3cr3tValue", "DB_PASSWORD=s3cr3tValue",
    "passwd: s3cr3tValue", "PGPASSWORD=s3cr3tValue", "secret_key_base: 0a1b2c3d", "client_secret=0a1b2c3d",
    "api_key: 0a1b2c3d", "apikey=0a1b2c3d", "token: 0a1b2c3d", "access_token=0a1b2c3d", "credentials: s3cr3tValue",
    "auth_pass s3cr3tValue", "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENGbPxRfiCYEXAMPLEKEY",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9",
    "Authorization: Basic YWRtaW46czNjcjN0", "root:$6$rounds$Hd8w0kqEc1:19000:0:99999:7:::",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0 admin", "postgres://app:s3cr3tValue@db.internal/app",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345", "xoxb-1234-5678-abcdefghij",
)
_ORDINARY_LINES = (
    "user www-data;", "worker_processes auto;", "pid /run/nginx.pid;", "listen 80 default_server;",
    "server_name example.com www.example.com;", "error_log /var/log/nginx/error.log warn;",
    "include /etc/nginx/conf.d/*.conf;", "ssl_certificate /etc/ssl/certs/site.pem;", "location / { try_files $uri =404; }",
    "proxy_pass http://127.0.0.1:3000;", "port 6379", "bind 127.0.0.1 ::1", "maxmemory-policy allkeys-lru",
    "dir /var/lib/redis", "appendonly no", "listen_addresses = 'localhost'", "max_connections = 100",
    "data_directory = '/var/lib/postgresql/15/main'", "Port 22", "UsePAM yes", "LogLevel INFO",
    "SHELL=/bin/sh", "17 * * * * root cd / && run-parts --report /etc/cron.hourly",
    "2024-05-01 12:00:01 [error] 1234#0: *5 connect() failed (111: Connection refused) while connecting to upstream",
    "May  1 12:00:01 web01 systemd[1]: Starting nginx.service - A high performance web server and a reverse proxy",
    "FATAL:  could not bind IPv4 address \"127.0.0.1\": Address already in use", "QUIT 0 QUERY 9 EXIT",
    "Version: 1.22.1-9; Status: install ok installed; Depends: libc6 (>= 2.34), zlib1g",
)
_POSIX_CLASSES = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
                  "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct": "!-/:-@\\[-`{-~", "xdigit": "0-9A-Fa-f",
                  "print": " -~", "graph": "!-~", "cntrl": "\\x00-\\x1f"}


def _grep_python_regex(pattern: str, basic: bool) -> str:
    """A grep pattern as a Python regular expression: POSIX classes spelled out and, for basic
    regular expressions, the escaped and plain meta characters swapped (`\\|` is alternation)."""
    out: list[str] = []
    i, bracket = 0, False
    while i < len(pattern):
        char = pattern[i]
        if bracket:
            klass = re.match(r"\[:([a-z]+):\]", pattern[i:])
            if klass and klass.group(1) in _POSIX_CLASSES:
                out.append(_POSIX_CLASSES[klass.group(1)])
                i += len(klass.group(0))
                continue
            if char == "]":
                bracket = False
            out.append("\\" + char if char in "\\[" else char)
            i += 1
            continue
        if char == "[":
            bracket = True
            out.append(char)
            if pattern[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1:i + 2] == "]":
                out.append("\\]")
                i += 1
            i += 1
            continue
        if char == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in "<>":
                out.append(r"\b")
            elif basic and nxt in "|(){}+?":
                out.append(nxt)
            else:
                out.append("\\" + nxt)
            i += 2
            continue
        out.append("\\" + char if basic and char in "|(){}+?" else char)
        i += 1
    return "".join(out)


def _grep_regex(chk: Check, pattern: str, parsed: Parsed) -> str:
    """The pattern as a Python regular expression, in the dialect grep reads it: Perl (`-P`) as
    written (`\\d` inside brackets is a digit there), POSIX basic or extended converted."""
    if parsed.has("-P"):
        return pattern
    return _grep_python_regex(pattern, not (parsed.has("-E") or chk.tool == "egrep"))


def _top_level_alternatives(regex: str) -> list[str]:
    parts, depth, start, i, bracket = [], 0, 0, 0, False
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 2
            continue
        if bracket:
            bracket = char != "]"
        elif char == "[":
            bracket = True
            if regex[i + 1:i + 2] == "]":
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(regex[start:i])
            start = i + 1
        i += 1
    parts.append(regex[start:])
    return parts


def _grep_selects_secrets(chk: Check, pattern: str, parsed: Parsed) -> bool:
    """Would the pattern (or one of its alternatives) pick the lines that carry secrets while
    leaving ordinary configuration and log lines alone? A pattern the policy cannot read counts."""
    flags = re.IGNORECASE if parsed.has("-i") else 0
    if parsed.has("-F"):
        alternatives = [re.escape(p) for p in pattern.split("\n")]
    else:
        alternatives = _top_level_alternatives(_grep_regex(chk, pattern, parsed))
    for body in alternatives:
        if parsed.has("-w"):
            body = rf"(?<!\w)(?:{body})(?!\w)"
        try:
            compiled = re.compile(body, flags)
        except (re.error, OverflowError):
            return True
        if any(compiled.search(line) for line in _SECRET_LINES) and \
                not any(compiled.search(line) for line in _ORDINARY_LINES):
            return True
    return False


def _grep_matches_base64(chk: Check, pattern: str, parsed: Parsed) -> bool:
    """Would the pattern print the body lines of a key file (base64 of any length, a PEM line,
    an OpenSSH line, a WireGuard key)? Read in grep's own dialect (a basic expression's `\\{64\\}`
    is a count, `[[:alnum:]]` a class), whole-line and whole-word matching as grep applies them."""
    if parsed.has("-F"):
        return any(p == "" or p in line for p in pattern.split("\n") for line in _BASE64_LINES)
    body = _grep_regex(chk, pattern, parsed)
    if parsed.has("-x"):
        body = rf"^(?:{body})$"
    elif parsed.has("-w"):
        body = rf"(?<!\w)(?:{body})(?!\w)"
    try:
        compiled = re.compile(body, re.IGNORECASE if parsed.has("-i") else 0)
    except (re.error, OverflowError):
        return True
    return any(compiled.search(line) for line in _BASE64_LINES) or compiled.search("") is not None


# Body lines of key files: a PEM line (64 characters), its last line, an OpenSSH key line (70), a
# WireGuard key (44), a longer run as some tools write it.
_BASE64_LINES = (_BASE64_LINE[:64], "AoIBAQC7vbqajDw4o6gJy+UtmIbE==",
                 "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
                 "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=", _BASE64_LINE)


_FIND_VALUE = {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-type", "-xtype", "-user",
               "-group", "-uid", "-gid", "-perm", "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime",
               "-cmin", "-maxdepth", "-mindepth", "-links", "-inum", "-printf", "-regex", "-iregex", "-regextype",
               "-fstype", "-used", "-lname", "-ilname", "-context"}
_FIND_PATH = {"-newer", "-anewer", "-cnewer", "-samefile"}
_FIND_FLAG = {"-print", "-print0", "-ls", "-xdev", "-mount", "-empty", "-readable", "-writable", "-executable",
              "-nouser", "-nogroup", "-o", "-or", "-a", "-and", "-not", "!", "(", ")", ",", "-true", "-false",
              "-quit", "-prune", "-depth", "-d", "-daystart", "-follow", "-ignore_readdir_race",
              "-noignore_readdir_race", "-noleaf", "-warn", "-nowarn"}
_FIND_DENY = {
    "-exec": "`find -exec` runs a program for every match; propose the command for named files",
    "-execdir": "`find -execdir` runs a program for every match; propose the command for named files",
    "-ok": "`find -ok` runs a program for every match", "-okdir": "`find -okdir` runs a program for every match",
    "-delete": "`find -delete` deletes every match: mass deletion; propose `rm` of named files",
    "-fprint": "`find -fprint*` writes to a file", "-fprint0": "`find -fprint*` writes to a file",
    "-fprintf": "`find -fprint*` writes to a file", "-fls": "`find -fls` writes to a file",
    "-files0-from": "`find -files0-from` reads its starting points from a file; name them",
}


def find(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    i = 0
    while i < len(args) and (args[i] in ("-L", "-H", "-P") or re.fullmatch(r"-O[0-3]", args[i])):
        i += 1
    if i < len(args) and args[i] == "-D":
        i += 2
    start = i
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("!", "(", ")", ","):
        if judge.path(chk, args[i], "meta", recursive=True, what="lists the tree") is None:
            return
        i += 1
    if i == start:
        chk.reject("`find` needs a starting path (absolute)")
        return
    while i < len(args):
        word = args[i]
        i += 1
        if word in _FIND_DENY:
            chk.reject(_FIND_DENY[word])
            return
        if word in _FIND_FLAG:
            continue
        if word in _FIND_VALUE or word in _FIND_PATH or re.fullmatch(r"-newer[acmBt][acmBt]", word):
            if i >= len(args):
                chk.reject(f"`find {word}` needs a value")
                return
            item = args[i]
            i += 1
            if word in _FIND_PATH or word.startswith("-newer") and word[-1] != "t":
                if judge.path(chk, item, "meta") is None:
                    return
            elif not value(chk, "text", item, f"`find {word}`"):
                return
            continue
        chk.reject(f"{q(word)} is not a `find` expression this policy knows")
        return


# ---------------------------------------------------------------- files: changing

_RM = _table({"-f|--force": None, "-i": None, "-I": None, "--interactive": "?word", "-r|-R|--recursive": None,
              "-d|--dir": None, "-v|--verbose": None, "--one-file-system": None, "--preserve-root": "?word",
              "--no-preserve-root": {"deny": "`--no-preserve-root` exists only to delete `/`"}})


def rm(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _RM, args)
    if not parsed.operands:
        chk.reject("`rm` needs the path of the file to delete")
        return
    if len(parsed.operands) > int(chk.policy["mass_deletion"]):
        chk.reject(f"`rm` of {len(parsed.operands)} paths at once is mass deletion; a human does that")
        return
    recursive = parsed.has("-r")
    for item in parsed.operands:
        found = judge.path(chk, item, "delete", recursive=recursive)
        if found is not None and found.count("/") <= 1 and found != "/":
            chk.reject(f"{q(found)} sits directly under `/`; deleting it is not a remediation")


_RMDIR = _table({"-p|--parents": None, "-v|--verbose": None, "--ignore-fail-on-non-empty": None})


def rmdir(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _RMDIR, args)
    if not count_bounds(chk, parsed.operands, 1, int(chk.policy["mass_deletion"]), "directory"):
        return
    for item in parsed.operands:
        found = judge.path(chk, item, "delete")
        if found and parsed.has("-p"):
            parent = posixpath.dirname(found)
            while parent.count("/") > 1:
                judge.path(chk, parent, "delete")
                parent = posixpath.dirname(parent)


_MKDIR = _table({"-p|--parents": None, "-v|--verbose": None, "-m|--mode": "word",
                 "-Z": None, "--context": {"deny": "SELinux contexts are set by a human"}})


def mkdir(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _MKDIR, args)
    if not count_bounds(chk, parsed.operands, 1, 16, "directory"):
        return
    mode_text = parsed.last("-m")
    for item in parsed.operands:
        found = judge.path(chk, item, "create")
        if found is not None and mode_text is not None:
            judge.mode(chk, mode_text, found)


_TOUCH = _table({"-a": None, "-c|--no-create": None, "-m": None, "-h|--no-dereference": None, "-f": None,
                 "-d|--date": "timestamp", "-t": "word", "-r|--reference": "path:meta", "--time": "word"})


def touch(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _TOUCH, args)
    option_values(chk, _TOUCH, parsed)
    if not count_bounds(chk, parsed.operands, 1, 16, "file"):
        return
    for item in parsed.operands:
        judge.path(chk, item, "attr" if parsed.has("-c") else "create")


_OWNER = re.compile(r"^(?:[a-z_][a-z0-9_.-]{0,31}\$?|[0-9]{1,9})?(?:[:.](?:[a-z_][a-z0-9_.-]{0,31}|[0-9]{1,9})?)?$")
_CHOWN = _table({"-R|--recursive": None, "-v|--verbose": None, "-c|--changes": None, "-f|--silent|--quiet": None,
                 "-h|--no-dereference": None, "--dereference": None, "-H": None, "-P": None,
                 "--from": "word", "--reference": "path:meta", "--preserve-root": None,
                 "-L": {"deny": "`-L` follows every symlink while recursing, out of the tree; use `-R` alone"},
                 "--no-preserve-root": {"deny": "`--no-preserve-root` exists only to change all of `/`"}})


def chown(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _CHOWN, args)
    option_values(chk, _CHOWN, parsed)
    operands = list(parsed.operands)
    owner = None
    if not parsed.has("--reference"):
        if not operands:
            chk.reject(f"`{chk.tool}` needs an owner and a path")
            return
        owner = operands.pop(0)
        if not owner or not _OWNER.match(owner):
            chk.reject(f"{q(owner)} is not an owner such as `redis:redis`")
            return
        if chk.tool == "chgrp":
            owner = ":" + owner
    if not count_bounds(chk, operands, 1, 16, "path"):
        return
    recursive = parsed.has("-R")
    for item in operands:
        judge.path(chk, item, "attr", recursive=recursive, what=f"gives to {owner}" if owner else None,
                   owner=owner)


_CHMOD = _table({"-R|--recursive": None, "-v|--verbose": None, "-c|--changes": None, "-f|--silent|--quiet": None,
                 "--reference": "path:meta", "--preserve-root": None, "-h|--no-dereference": None,
                 "--no-preserve-root": {"deny": "`--no-preserve-root` exists only to change all of `/`"}})


def chmod(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    # `chmod -w FILE` / `chmod -x FILE`: a mode that looks like an option.
    fixed = [a if not re.fullmatch(r"-[rwxXst]+", a) else "\0" + a for a in args]
    parsed = parse(chk, _CHMOD, fixed)
    operands = [a.lstrip("\0") for a in parsed.operands]
    option_values(chk, _CHMOD, parsed)
    text = None
    if not parsed.has("--reference"):
        if not operands:
            chk.reject("`chmod` needs a mode and a path")
            return
        text = operands.pop(0)
    if not count_bounds(chk, operands, 1, 16, "path"):
        return
    recursive = parsed.has("-R")
    for item in operands:
        found = judge.path(chk, item, "attr", recursive=recursive, what=f"sets mode {text} on" if text else None,
                           mode_text=text)
        if found is not None and text is not None:
            judge.mode(chk, text, found)
    if text is None:
        chk.approve("`chmod --reference` copies a mode the policy cannot see; a human should confirm")


_MV = _table({"-f|--force": None, "-i|--interactive": None, "-n|--no-clobber": None, "-u|--update": "?word",
              "-v|--verbose": None, "-T|--no-target-directory": None, "-t|--target-directory": "text",
              "-b": None, "--backup": "?word", "-S|--suffix": "word", "--strip-trailing-slashes": None,
              "--exchange": None, "--no-copy": None, "-Z|--context": None})


def _sources_target(chk: Check, parsed: Parsed) -> tuple[list[str], str | None, bool]:
    target_dir = parsed.last("-t")
    operands = list(parsed.operands)
    if target_dir is not None:
        return operands, target_dir, True
    if len(operands) < 2:
        chk.reject(f"`{chk.tool}` needs a source and a destination")
        return [], None, False
    return operands[:-1], operands[-1], len(operands) > 2


def _landing(dest: str, source: str, into_dir: bool) -> str:
    """Where a copied or moved ``source`` lands: ``dest`` itself, or beneath it by name."""
    return posixpath.join(dest, posixpath.basename(source.rstrip("/"))) if into_dir else dest


def mv(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _MV, args)
    sources, target, into_dir = _sources_target(chk, parsed)
    if target is None:
        return
    set_aside = {item: judge.leaves_search_path(chk, item, target, _landing(target, item, into_dir))
                 for item in sources}
    for item in sources:
        if set_aside[item]:
            continue
        found = judge.path(chk, item, "delete", what="moves away")
        if found is None:
            return
        if found.count("/") <= 1:
            chk.reject(f"moving {q(found)} (directly under `/`) is not a remediation")
    if set_aside and all(kind == "renamed" for kind in set_aside.values()):
        return
    dest = judge.path(chk, target, "create", what="moves into" if into_dir else "moves to")
    if dest is not None and not all(destinations.copy_into(chk, item, dest, into_dir, "moving") for item in sources):
        return
    if dest is not None and not all(destinations.pid_file_content(chk, _landing(dest, item, into_dir), "moves to")
                                    for item in sources):
        return
    if dest is not None and not into_dir and len(sources) == 1:
        base = posixpath.basename(dest)
        if chk.compiled["secret_names"] is not None and chk.compiled["secret_names"].search("/" + base):
            chk.reject(f"moving a file to {q(dest)} gives it the name of a key or credential file")


_CP = _table({"-a|--archive": None, "-p": None, "--preserve": "?word", "--no-preserve": "word", "-r|-R|--recursive": None,
              "-f|--force": None, "-n|--no-clobber": None, "-i|--interactive": None, "-v|--verbose": None,
              "-T|--no-target-directory": None, "-t|--target-directory": "text", "-b": None, "--backup": "?word",
              "-S|--suffix": "word", "-d": None, "-P|--no-dereference": None, "-L|--dereference": None, "-H": None,
              "-u|--update": "?word", "-x|--one-file-system": None, "--parents": None, "--sparse": "word",
              "--reflink": "?word", "--remove-destination": None, "--attributes-only": None, "-Z": None,
              "-l|--link": None, "-s|--symbolic-link": None, "--strip-trailing-slashes": None})


def cp(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _CP, args)
    sources, target, into_dir = _sources_target(chk, parsed)
    if target is None:
        return
    recursive = parsed.has("-a", "-r")
    for item in sources:
        if judge.path(chk, item, "read", recursive=recursive, what="copies") is None:
            return
    dest = judge.path(chk, target, "create", what="copies into" if into_dir else "copies to")
    if dest is None:
        return
    if parsed.has("-s", "-l"):
        # `cp -s` / `cp -l` make links, not copies: judged as links at the destination.
        for item in sources:
            if not destinations.link(chk, posixpath.join(dest, posixpath.basename(item)) if into_dir else dest,
                                     item, parsed.has("-s")):
                return
    if not all(destinations.copy_into(chk, item, dest, into_dir) for item in sources):
        return
    if not all(destinations.pid_file_content(chk, _landing(dest, item, into_dir), "copies to") for item in sources):
        return
    if recursive:
        chk.approve("a recursive copy takes whatever lies in the tree (keys and credentials included); a human "
                    "should confirm")
    elif _keeps_mode(parsed):
        _kept_modes(chk, sources)


def _keeps_mode(parsed: Parsed) -> bool:
    """Whether `cp` gives the copy its source's mode (`-p`, `-a`, `--preserve` alone or with
    `mode`/`all`), as GNU cp reads them in order (a later `--no-preserve` takes it back)."""
    keeps = False
    for name, text in parsed.options:
        # cp reads each listed attribute with argmatch, which takes any unambiguous
        # abbreviation (`--preserve=mo` is mode, `--preserve=a` is all).
        names_mode = any(item and ("mode".startswith(item) or "all".startswith(item))
                         for item in (text or "").split(","))
        if name in ("-p", "-a") or name == "--preserve" and (text is None or names_mode):
            keeps = True
        elif name == "--no-preserve" and names_mode:
            keeps = False
    return keeps


def _kept_modes(chk: Check, sources: list[str]) -> None:
    """A copy that keeps its source's mode keeps a set-user-ID or set-group-ID bit too (root
    copies it with the owner root): a file of the operating system (`/usr/bin/passwd`, a helper
    under `/usr/lib`) copied so becomes a privileged program wherever the copy lands, a mode
    nobody reviewed (as `chmod --reference` would set). The policy cannot see the source's mode."""
    for item in sources:
        canon = canonical(posixpath.normpath(item))
        if chk.compiled["protected_paths"].match(canon):
            chk.approve(f"the copy keeps the mode of {q(item)}, a file of the operating system (a set-user-ID bit "
                        "included), which the policy cannot see; copy without `-p`/`--preserve`, or a human should "
                        "confirm")


_LN = _table({"-s|--symbolic": None, "-f|--force": None, "-n|--no-dereference": None, "-T|--no-target-directory": None,
              "-t|--target-directory": "text", "-r|--relative": None, "-v|--verbose": None, "-i|--interactive": None,
              "-b": None, "--backup": "?word", "-S|--suffix": "word", "-L|--logical": None, "-P|--physical": None})


def ln(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _LN, args)
    target_dir = parsed.last("-t")
    operands = list(parsed.operands)
    if target_dir is None and len(operands) < 2:
        chk.reject("`ln` needs a target and a link path (the working directory is unknown)")
        return
    if target_dir is not None:
        targets, links = operands, [posixpath.join(target_dir, posixpath.basename(t)) for t in operands]
    elif len(operands) == 2:
        targets, links = [operands[0]], [operands[1]]
    else:
        targets, links = operands[:-1], [posixpath.join(operands[-1], posixpath.basename(t)) for t in operands[:-1]]
    symbolic = parsed.has("-s")
    for target, link in zip(targets, links):
        where = judge.path(chk, link, "create", what="creates the link")
        if where is None:
            return
        resolved = target if target.startswith("/") else posixpath.normpath(
            posixpath.join(posixpath.dirname(where), target))
        if judge.path(chk, resolved, "link" if symbolic else "read", what="links to") is None:
            return
        if not destinations.link(chk, where, resolved, symbolic):
            return
        if not symbolic and not destinations.copy_into(chk, resolved, where, False, "hard-linking"):
            return
        if parsed.has("-f"):
            judge.path(chk, where, "delete", what="replaces")


_TRUNCATE = _table({"-s|--size": "size", "-c|--no-create": None, "-o|--io-blocks": None,
                    "-r|--reference": "path:meta"})


def truncate(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _TRUNCATE, args)
    option_values(chk, _TRUNCATE, parsed)
    if not parsed.has("-s", "-r"):
        chk.reject("`truncate` needs `-s SIZE` (e.g. `-s 0`)")
        return
    if not count_bounds(chk, parsed.operands, 1, 8, "file"):
        return
    for item in parsed.operands:
        found = judge.path(chk, item, "write", what="truncates")
        if found is not None and _holds_data(chk, found):
            chk.reject(f"truncating {q(found)} destroys the data it holds (a database or data file cannot be "
                       "recovered from a cut); move it aside, or a human decides")


def _holds_data(chk: Check, path: str) -> bool:
    """A file with a service's data: under the incident's (or any service's) data paths, or named like a database."""
    names = chk.compiled["data_file_names"]
    kind = chk.scope.locate(path) if chk.scope.explicit else chk.compiled["default_scope"].locate(path)
    return kind == "data" or names is not None and names.search(path) is not None


_INSTALL = _table({"-d|--directory": None, "-m|--mode": "word", "-o|--owner": "word", "-g|--group": "word",
                   "-D": None, "-t|--target-directory": "text", "-T|--no-target-directory": None, "-v|--verbose": None,
                   "-p|--preserve-timestamps": None, "-C|--compare": None, "-b": None, "--backup": "?word",
                   "-S|--suffix": "word", "-Z": None,
                   "-s|--strip": {"deny": "`install -s` runs a strip program"},
                   "--strip-program": {"deny": "`install --strip-program` runs a program"}})


def install(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _INSTALL, args)
    owner = parsed.last("-o")
    group = parsed.last("-g")
    who = None if owner is None and group is None else f"{owner or ''}{':' + group if group else ''}"
    if who is not None and not _OWNER.match(who):
        chk.reject(f"{q(who)} is not an owner")
        return
    if parsed.has("-d"):
        if not count_bounds(chk, parsed.operands, 1, 16, "directory"):
            return
        targets = parsed.operands
    else:
        sources, target, into_dir = _sources_target(chk, parsed)
        if target is None:
            return
        for item in sources:
            if judge.path(chk, item, "read", what="copies") is None:
                return
            if not destinations.copy_into(chk, item, target, into_dir):
                return
            if not destinations.pid_file_content(chk, _landing(target, item, into_dir), "installs to"):
                return
        targets = [target]
    for item in targets:
        found = judge.path(chk, item, "create", owner=who)
        if found is not None and parsed.last("-m") is not None:
            judge.mode(chk, parsed.last("-m") or "", found)


def dd(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    seen: dict[str, str] = {}
    for arg in args:
        key, eq, text = arg.partition("=")
        if not eq or key not in ("if", "of", "bs", "ibs", "obs", "count", "conv", "status", "skip", "seek",
                                 "iflag", "oflag"):
            chk.reject(f"{q(arg)} is not a `dd` operand this policy allows (if=, of=, bs=, count=, status=)")
            return
        seen[key] = text
    if "of" not in seen:
        chk.reject("`dd` without `of=` only copies to the output; not a remediation")
        return
    if "if" in seen and seen["if"] not in ("/dev/zero", "/dev/urandom", "/dev/random"):
        if judge.path(chk, seen["if"], "read") is None:
            return
    if seen["of"] != "/dev/null":
        if judge.path(chk, seen["of"], "write") is not None:
            destinations.pid_file_content(chk, seen["of"], "writes")
    chk.become = True
    chk.approve("`dd` writes raw bytes; a human should confirm the source and the target")


_TAR = _table({"-c|--create": None, "-x|--extract|--get": None, "-t|--list": None, "-z|--gzip": None,
               "-j|--bzip2": None, "-J|--xz": None, "--zstd": None, "-a|--auto-compress": None, "-v|--verbose": None,
               "-p|--preserve-permissions": None, "-f|--file": "text", "-C|--directory": "text",
               "--exclude": "text", "-k|--keep-old-files": None, "--one-file-system": None, "-P|--absolute-names": None,
               "--numeric-owner": None, "-O|--to-stdout": None, "--strip-components": "int", "-W|--verify": None,
               **dict.fromkeys(("--checkpoint-action", "--checkpoint", "--to-command", "-I|--use-compress-program",
                                "-F|--info-script|--new-volume-script", "--rsh-command", "--rmt-command",
                                "-T|--files-from", "-X|--exclude-from", "-r|--append", "-u|--update",
                                "--delete", "-A|--catenate|--concatenate", "-M|--multi-volume"),
                               {"deny": "that `tar` option runs a program, reads a list of names or rewrites an "
                                        "archive in place; not allowed"})})


def tar(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if args and not args[0].startswith("-"):
        chk.reject("old-style `tar` options (`tar czf`) are ambiguous; use dashed options (`tar -czf`)")
        return
    parsed = parse(chk, _TAR, args)
    modes = [m for m in ("-c", "-x", "-t") if parsed.has(m)]
    if len(modes) != 1:
        chk.reject("`tar` needs exactly one of -c, -x or -t")
        return
    archive = parsed.last("-f")
    if archive is None:
        chk.reject("`tar` needs `-f ARCHIVE` (an absolute path)")
        return
    directory = parsed.last("-C")
    chk.become = True
    if modes[0] == "-t":
        judge.path(chk, archive, "read")
        return
    if modes[0] == "-c":
        for item in parsed.operands:
            if judge.path(chk, item, "read", recursive=True, what="archives") is None:
                return
        judge.path(chk, archive, "create")
    else:
        if judge.path(chk, archive, "read") is None:
            return
        for member in parsed.operands:
            # A member is the file it was archived from (`etc/shadow` is /etc/shadow): one that is a
            # secret by path or name stays one in a backup, and -O prints it.
            if judge.path(chk, "/" + member.lstrip("/"), "read", what="extracts the member") is None:
                return
        if directory is None and not parsed.has("-O"):
            chk.reject("`tar -x` needs `-C DIR` (the working directory is unknown)")
            return
        if directory is not None:
            judge.path(chk, directory, "create", recursive=True, what="extracts into")
    chk.approve("`tar` writes or unpacks many files at once; a human should confirm the paths")


_GZIP = _table({"-d|--decompress|--uncompress": None, "-k|--keep": None, "-c|--stdout|--to-stdout": None,
                "-f|--force": None, "-t|--test": None, "-l|--list": None, "-v|--verbose": None, "-q|--quiet": None,
                "-n|--no-name": None, "-N|--name": None, "--rsyncable": None, "-S|--suffix": "word",
                "-T|--threads": "int", "-e|--extreme": None, "-z|--compress": None,
                **{f"-{n}": None for n in range(1, 10)}, "--fast": None, "--best": None,
                "-r|--recursive": {"approval": "a recursive compression rewrites a whole tree; a human should confirm"}})


def compress(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _GZIP, args)
    if not count_bounds(chk, parsed.operands, 1, 16, "file"):
        return
    reading = parsed.has("-c", "-t", "-l") or chk.tool in ("zcat", "bzcat", "xzcat", "zstdcat")
    for item in parsed.operands:
        if reading:
            judge.path(chk, item, "read")
        else:
            found = judge.path(chk, item, "write", what="compresses" if not parsed.has("-d") else "decompresses")
            if found is not None and not parsed.has("-k"):
                judge.path(chk, found, "delete", what="replaces")


# ---------------------------------------------------------------- packages

_APT = _table({"-y|--yes|--assume-yes": None, "-q|--quiet": "?int", "-s|--simulate|--dry-run|--just-print|--no-act|--recon": None,
               "-f|--fix-broken": None, "--no-install-recommends": None, "--install-recommends": None,
               "--reinstall": None, "--only-upgrade": None, "--no-upgrade": None, "-d|--download-only": None,
               "-m|--fix-missing|--ignore-missing": None, "--purge": None, "-t|--target-release|--default-release": "word",
               "-V|--verbose-versions": None, "--installed": None, "--upgradable": None, "-a|--all-versions": None,
               "--no-download": None, "--auto-remove|--autoremove": None, "--show-upgraded": None, "-u": None,
               "--allow-downgrades": {"approval": "a downgrade needs a human"},
               "--allow-change-held-packages": {"approval": "changing held packages needs a human"},
               "--allow-remove-essential": {"deny": "removing essential packages breaks the host"},
               "--force-yes": {"deny": "`--force-yes` installs unauthenticated or downgraded packages"},
               "--allow-unauthenticated": {"deny": "unauthenticated packages may be anything"},
               "--allow-insecure-repositories": {"deny": "insecure repositories may serve anything"},
               "-o|--option": {"deny": "`{tool} -o` sets APT options, and options such as `DPkg::Pre-Invoke` "
                                       "run programs; not allowed"},
               "-c|--config-file": {"deny": "`{tool} -c` loads another APT configuration (which can "
                                            "run programs); not allowed"}})
_APT_READ = {"show", "policy", "list", "search", "depends", "rdepends", "madison", "showsrc", "changelog", "check",
             "showpkg", "stats", "unmet", "pkgnames", "showhold", "showmanual", "showauto"}
_APT_FREE = {"update", "clean", "autoclean", "auto-clean"}
_APT_INSTALL = {"install", "reinstall", "upgrade", "dist-upgrade", "full-upgrade", "build-dep", "satisfy"}
_APT_REMOVE = {"remove", "purge", "autoremove", "autopurge"}
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,127}(?::[a-z0-9-]{1,16})?(?:=[A-Za-z0-9.+:~-]{1,64}|/[a-z0-9.-]{1,40})?[+-]?$")


def apt(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _APT, args)
    option_values(chk, _APT, parsed)
    if not parsed.operands:
        chk.reject(f"`{chk.tool}` needs an action such as `install` or `update`")
        return
    verb, packages = parsed.operands[0], parsed.operands[1:]
    simulate = parsed.has("-s")
    if chk.tool == "apt-cache" and verb in ("gencaches", "dumpavail"):
        chk.reject(f"`apt-cache {verb}` rewrites caches; not needed for a remediation")
        return
    if verb in _APT_READ:
        chk.effect("reads the package database")
        return
    chk.become = True
    if verb in _APT_FREE:
        chk.effect("refreshes package lists" if verb == "update" else "deletes downloaded package files")
        return
    local = [p for p in packages if p.startswith("/")]
    for item in local:
        if judge.path(chk, item, "read") is None:
            return
        if not _verified_package_file(item):
            chk.reject(f"{q(item)} is a package file apt did not download: its maintainer scripts would run as root "
                       "and nothing vouches for where it came from; install by package name, or a human does it")
            return
    names = [p for p in packages if not p.startswith("/")]
    for name in names:
        if not _PACKAGE.match(name):
            chk.reject(f"{q(name)} is not a package name")
            return
    removing = verb in _APT_REMOVE or parsed.has("--auto-remove") and verb not in _APT_READ \
        or any(n.endswith("-") for n in names if verb in _APT_INSTALL)
    if removing:
        chk.effect("removes packages")
        if not simulate:
            chk.reject("removing packages is never run by a command here (it can take away what the host "
                       "and its services need); a human does that")
        return
    if verb not in _APT_INSTALL:
        chk.reject(f"{q(verb)} is not an action this policy allows for `{chk.tool}`")
        return
    if verb in ("install", "reinstall") and not names and not local and not parsed.has("-f"):
        chk.reject(f"`{chk.tool} {verb}` needs package names")
        return
    chk.effect(("would install " if simulate else "installs ") + (", ".join(names + local) or "pending fixes"))
    if not simulate:
        chk.approve(f"`{chk.tool} {verb}` installs or upgrades software; a human should confirm")


def _verified_package_file(item: str) -> bool:
    """A .deb in apt's own archive cache, where only packages whose signatures apt checked land."""
    return re.fullmatch(r"/var/cache/apt/archives/[A-Za-z0-9.+~:%_-]+\.deb", item) is not None and "/../" not in item


_DPKG_READ = {"-l", "--list", "-L", "--listfiles", "-s", "--status", "-S", "--search", "-p", "--print-avail",
              "--audit", "-C", "--get-selections", "--print-architecture", "--print-foreign-architectures",
              "-V", "--verify", "--compare-versions", "--version", "--help", "--yet-to-unpack"}
_DPKG_QUERY = re.compile(r"^[A-Za-z0-9*?+.:_=<>$,{}\[\]/ -]{1,200}$")


def dpkg(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if not args:
        chk.reject("`dpkg` needs an action such as `--configure -a` or `-l`")
        return
    flags = [a for a in args if a.startswith("-")]
    for flag in flags:
        name = flag.split("=")[0]
        if name.startswith(("--force", "--no-force", "--refuse")) or name in (
                "--root", "--admindir", "--instdir", "--pre-invoke", "--post-invoke", "--path-include",
                "--path-exclude", "--log", "--status-fd", "--status-logger", "--debug", "-D"):
            chk.reject(f"`dpkg {name}` can run programs or bypass package safety; not allowed")
            return
    action = next((a for a in args if a.startswith("-") and a not in ("--no-pager",)), "")
    rest = [a for a in args if a != action]
    if chk.tool == "dpkg-query" or action in _DPKG_READ:
        if chk.tool == "dpkg-query" and action not in ("-W", "--show", "-l", "--list", "-s", "--status", "-L",
                                                       "--listfiles", "-S", "--search", "-p", "--print-avail",
                                                       "-f", "--showformat"):
            chk.reject(f"{q(action)} is not a `dpkg-query` action this policy knows")
            return
        for item in rest:
            if item.startswith("-") and not item.startswith(("-f", "--showformat")) or not _DPKG_QUERY.match(item) \
                    and not item.startswith("--showformat="):
                chk.reject(f"{q(item)} is not allowed after `{chk.tool} {action}`")
                return
        chk.effect("reads the package database")
        return
    chk.become = True
    if action == "--configure":
        if rest != ["-a"] and not (rest and all(_PACKAGE.match(p) for p in rest)):
            chk.reject("use `dpkg --configure -a` or `dpkg --configure PACKAGE`")
            return
        chk.effect("finishes configuring unpacked packages")
        return
    if action in ("-i", "--install", "--unpack"):
        if not rest:
            chk.reject(f"`dpkg {action}` needs the path of a .deb file")
            return
        for item in rest:
            if judge.path(chk, item, "read") is None:
                return
            if not _verified_package_file(item):
                chk.reject(f"{q(item)} is a package file apt did not download: its maintainer scripts would run as "
                           "root and nothing vouches for where it came from; install from the archive (apt-get "
                           "install NAME), or a human does it")
                return
        chk.effect("installs " + ", ".join(rest))
        chk.approve(f"`dpkg {action}` installs a package file; a human should confirm where it came from")
        return
    if action in ("-r", "--remove", "-P", "--purge"):
        chk.effect("removes packages")
        chk.reject("removing packages is never run by a command here; a human does that")
        return
    chk.reject(f"{q(action)} is not a `dpkg` action this policy allows (--configure -a, -l, -s, -L, -S, -i)")


def apt_mark(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if not args:
        chk.reject("`apt-mark` needs an action")
        return
    verb = args[0]
    if verb in ("showhold", "showmanual", "showauto", "showinstall", "showremove", "showpurge"):
        chk.effect("reads the package database")
        return
    if verb in ("hold", "unhold", "auto", "manual", "minimize-manual"):
        if not all(_PACKAGE.match(p) for p in args[1:]):
            chk.reject("`apt-mark` takes package names")
            return
        chk.become = True
        chk.approve(f"`apt-mark {verb}` changes how packages are upgraded; a human should confirm")
        return
    chk.reject(f"{q(verb)} is not an `apt-mark` action this policy allows")


# ---------------------------------------------------------------- firewall

_IPT_READ_SHORT = set("LSnvxwV")
_IPT_READ_LONG = {"--list", "--list-rules", "--numeric", "--verbose", "--exact", "--line-numbers", "--wait",
                  "--version", "--help", "--table", "--check"}
_TABLES = {"filter", "nat", "mangle", "raw", "security", "broute"}


def firewall(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    tool = chk.tool
    refused = f"`{tool}` with these arguments changes the firewall (or may); firewall changes are never run here"
    chk.become = True
    base = tool.split("-")[0] if tool.startswith(("iptables", "ip6tables")) else tool
    if tool.endswith("-save"):
        for arg in args:
            if arg not in ("-c", "--counters") and not arg.startswith(("-t", "--table")) and arg not in _TABLES:
                chk.reject(refused)
                return
        chk.effect("reads the firewall rules")
        return
    if base in ("iptables", "ip6tables", "ebtables", "arptables"):
        listing = False
        i = 0
        while i < len(args):
            arg = args[i]
            i += 1
            if arg in ("-t", "--table"):
                if i >= len(args) or args[i] not in _TABLES:
                    chk.reject(refused)
                    return
                i += 1
                continue
            if arg.startswith("--"):
                name = arg.split("=")[0]
                if name not in _IPT_READ_LONG or name == "--table" and arg.partition("=")[2] not in _TABLES:
                    chk.reject(refused)
                    return
                listing = listing or name in ("--list", "--list-rules", "--check")
                continue
            if arg.startswith("-"):
                letters = set(arg[1:])
                if arg.startswith("-t") and arg[2:] in _TABLES:
                    continue
                if arg.startswith("-w") and arg[2:].isdigit():
                    continue
                if not letters <= _IPT_READ_SHORT:
                    chk.reject(refused)
                    return
                listing = listing or bool(letters & {"L", "S"})
                continue
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,30}", arg):
                chk.reject(refused)
                return
        chk.effect("reads the firewall rules")
        return
    if tool == "nft":
        words = []
        for arg in args:
            if arg.startswith("-"):
                if arg not in ("-a", "--handle", "-n", "--numeric", "-s", "--stateless", "-t", "--terse", "-j",
                               "--json", "-N", "-S", "--service", "-u", "--guid", "-y", "--numeric-priority",
                               "-p", "--numeric-protocol", "-T", "--numeric-time", "-nn", "-nnn", "-V", "-v",
                               "--version"):
                    chk.reject(refused)
                    return
                continue
            words.append(arg)
        statements = [s.split() for s in re.split(r"[;\n]", " ".join(words)) if s.strip()]
        for statement in statements:
            if statement[0] not in ("list", "describe") or not all(
                    re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", w) for w in statement):
                chk.reject(refused)
                return
        chk.effect("reads the firewall rules")
        return
    if tool == "ufw":
        reads = {("status",), ("status", "verbose"), ("status", "numbered"), ("version",), ("app", "list")}
        if tuple(args) in reads or len(args) == 2 and args[0] == "show" and args[1] in (
                "raw", "added", "listening", "builtins", "before-rules", "user-rules", "after-rules",
                "logging-rules") or len(args) == 3 and args[:2] == ["app", "info"]:
            chk.effect("reads the firewall rules")
            return
        chk.reject(refused)
        return
    if tool == "firewall-cmd":
        allowed = re.compile(r"^--(?:state|list-[a-z-]+|get-[a-z-]+|query-[a-z-]+|info-[a-z-]+|zone|permanent|"
                             r"version|help|quiet)(?:=[A-Za-z0-9_./:-]{1,64})?$")
        if not args or not all(allowed.match(a) for a in args):
            chk.reject(refused)
            return
        chk.effect("reads the firewall rules")
        return
    chk.reject(refused)


# ---------------------------------------------------------------- network and system state

_IP_OBJECTS = ("address", "addrlabel", "maddress", "route", "rule", "neighbor", "neighbour", "ntable", "ntbl", "link",
               "l2tp", "fou", "ila", "macsec", "tunnel", "tuntap", "tap", "token", "tcpmetrics", "tcp_metrics",
               "monitor", "xfrm", "mroute", "mrule", "netns", "netconf", "vrf", "sr", "nexthop", "mptcp", "ioam",
               "stats")
_IP_READ_OBJECTS = {"address", "addrlabel", "maddress", "route", "rule", "neighbor", "neighbour", "ntable", "ntbl",
                    "link", "tunnel", "tuntap", "tap", "token", "tcpmetrics", "tcp_metrics", "mroute", "netns",
                    "netconf", "vrf", "nexthop", "stats"}
_IP_FLAGS = {"-4", "-6", "-0", "-s", "-stats", "-statistics", "-d", "-details", "-r", "-resolve", "-o", "-oneline",
             "-c", "-color", "-br", "-brief", "-j", "-json", "-p", "-pretty", "-h", "-human", "-human-readable",
             "-t", "-timestamp", "-ts", "-tshort", "-iec", "-a", "-all", "-N", "-Numeric"}
_IP_SHOW_ABBREV = {"address", "route", "neighbor", "neighbour", "rule", "maddress"}


def ip(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        i += 1
        if flag.startswith("--"):
            flag = flag[1:]
        if flag in ("-f", "-family"):
            i += 1
            continue
        if re.fullmatch(r"-c(?:olor)?=\w+", flag):
            continue
        if flag not in _IP_FLAGS:
            chk.reject(f"{q(flag)} is not an `ip` option this policy allows (`-b`/`-batch` and `-n`/`-netns` run "
                       "other commands or act in other namespaces)")
            return
    if i >= len(args):
        chk.reject("`ip` needs an object such as `addr` or `route`")
        return
    word = args[i]
    obj = next((o for o in _IP_OBJECTS if o.startswith(word)), None)
    if obj is None or obj not in _IP_READ_OBJECTS:
        chk.reject(f"{q(word)} is not an `ip` object this policy allows to read (addr, link, route, neigh, rule)")
        return
    rest = args[i + 1:]
    command = rest[0] if rest else "show"
    reads = {"show", "list", "lst"} | ({"get"} if obj in ("route", "neighbor", "neighbour", "netconf") else set())
    if obj in _IP_SHOW_ABBREV and command in ("s", "sh", "sho", "l", "li", "lis", "ls"):
        reads.add(command)
    if obj == "netns" and command in ("list", "show"):
        rest = rest[:1]
    # `ip addr dev eth0` is an implicit show with a filter.
    implicit_show = command == "dev" if obj == "link" else command in ("dev", "up", "scope", "to", "table", "label")
    if rest and command not in reads and not implicit_show:
        chk.reject(f"`ip {obj} {command}` changes network configuration (or is not a read this policy knows); "
                   "network changes can cut the host off and are never run here")
        return
    for item in rest:
        if not re.fullmatch(r"[A-Za-z0-9_.:/@%+-]{1,64}", item):
            chk.reject(f"{q(item)} is not an `ip` argument this policy knows")
            return
    chk.effect(f"reads network state ({obj})")


def mount(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    rest = list(args)
    i = 0
    while i < len(rest):
        word = rest[i]
        i += 1
        if word in ("-l", "--show-labels", "-v", "--verbose", "-h", "--help", "-V", "--version"):
            continue
        if word in ("-t", "--types") and i < len(rest) and re.fullmatch(r"[a-z0-9,]{1,64}", rest[i]):
            i += 1
            continue
        chk.reject("`mount` with a device, mount point or option changes what is mounted; mount changes "
                   "are never run here (list mounts with `mount` or `findmnt`)")
        return
    chk.effect("lists mounted file systems")


def swapon(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if all(a in ("--show", "-s", "--summary", "--noheadings", "--bytes", "--raw") or a.startswith("--show=")
           for a in args) and args:
        chk.effect("lists swap areas")
        return
    chk.reject("`swapon` with these arguments enables swap; only listing (`swapon --show`) is allowed")


_SYSCTL_NAME = re.compile(r"[a-z0-9_*-]+(?:[./][a-z0-9_*-]+)*")


def sysctl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    for word in args:
        if word in ("-a", "--all", "-A", "-X", "-n", "--values", "-N", "--names", "-e", "--ignore", "-b",
                    "--binary", "-q", "--quiet", "-h", "--help", "-V", "--version", "-d"):
            continue
        if word.startswith("-") or "=" in word:
            chk.reject("`sysctl` with -w, -p, --system or NAME=VALUE changes kernel settings; never run here "
                       "(reading a setting is allowed)")
            return
        # sysctl opens /proc/sys/NAME, reading `.` and `/` both as separators: an empty or `..`
        # component would name a file outside /proc/sys (`kernel/../../../etc/shadow`).
        if len(word) > 128 or not _SYSCTL_NAME.fullmatch(word):
            chk.reject(f"{q(word)} is not a kernel setting name (parts of letters, digits, `_`, `-` or `*`, "
                       "one `.` or `/` between them)")
            return
    chk.effect("reads kernel settings")


_GETENT_DBS = {"passwd", "group", "hosts", "ahosts", "ahostsv4", "ahostsv6", "services", "protocols", "networks",
               "rpc", "ethers", "netgroup", "initgroups", "aliases"}


def getent(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    words = [a for a in args if not a.startswith("-")]
    for flag in (a for a in args if a.startswith("-")):
        if flag not in ("--no-idn", "-i", "--no-addrconfig", "-A"):
            chk.reject(f"{q(flag)} is not a `getent` option this policy allows")
            return
    if not words:
        chk.reject("`getent` needs a database such as `passwd` or `hosts`")
        return
    if words[0] in ("shadow", "gshadow", "tcb"):
        chk.reject(f"`getent {words[0]}` prints password hashes; never read by a command here")
        return
    if words[0] not in _GETENT_DBS:
        chk.reject(f"{q(words[0])} is not a `getent` database this policy knows")
        return
    for key in words[1:]:
        value(chk, "name", key, "a `getent` key")
    chk.effect(f"reads the {words[0]} database")


def crontab(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    rest = list(args)
    user = None
    if "-u" in rest:
        at = rest.index("-u")
        if at + 1 >= len(rest):
            chk.reject("`crontab -u` needs a user")
            return
        user = rest[at + 1]
        del rest[at:at + 2]
        value(chk, "name", user, "a user")
    if rest == ["-l"]:
        chk.become = True
        chk.effect(f"reads the crontab of {user or 'root'}")
        return
    chk.reject("`crontab` other than `-l` installs or removes scheduled commands; a human does that")


_CTL_PROBLEM = {"-H": "acts on another machine", "--host": "acts on another machine", "-M": "acts on a container",
                "--machine": "acts on a container"}


def _ctl(chk: Check, args: list[str], reads: set[str], gated: set[str], refused: set[str],
         value_opts: set[str], extra_ok: set[str] | None = None) -> tuple[str, list[str]] | None:
    verb = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        name = word.split("=")[0]
        if name in _CTL_PROBLEM:
            chk.reject(f"`{chk.tool} {name}` {_CTL_PROBLEM[name]}; not from here")
            return None
        if word.startswith("-"):
            if name in value_opts and "=" not in word:
                i += 1
            elif name not in value_opts and name not in (extra_ok or set()) | {
                    "--no-pager", "--no-ask-password", "-a", "--all", "-l", "--full", "--value", "--no-legend",
                    "-q", "--quiet", "--json", "-p", "--property", "--legend"}:
                chk.reject(f"{q(word)} is not a `{chk.tool}` option this policy knows")
                return None
            continue
        if verb is None:
            verb = word
        else:
            rest.append(word)
    verb = verb or "status"
    if verb in refused:
        chk.reject(f"`{chk.tool} {verb}` changes sessions, networking or the host in a way never run here")
        return None
    if verb in gated:
        chk.become = True
        chk.approve(f"`{chk.tool} {verb}` changes host settings; a human should confirm")
        return verb, rest
    if verb not in reads:
        chk.reject(f"{q(verb)} is not a `{chk.tool}` verb this policy knows")
        return None
    return verb, rest


def timedatectl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    got = _ctl(chk, args, {"status", "show", "timesync-status", "show-timesync", "list-timezones"},
               {"set-time", "set-timezone", "set-local-rtc", "set-ntp", "ntp-servers", "revert"}, set(),
               {"-p", "--property"}, {"--adjust-system-clock"})
    if got and got[0] not in ("set-time", "set-timezone", "set-local-rtc", "set-ntp", "ntp-servers", "revert"):
        chk.effect("reads time settings")
    if got and "--no-pager" not in args:
        chk.insert.append("--no-pager")


def hostnamectl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    got = _ctl(chk, args, {"status", "show"}, {"set-hostname", "set-icon-name", "set-chassis", "set-deployment",
                                               "set-location"}, set(), set(),
               {"--static", "--transient", "--pretty"})
    if got and got[0] in ("status", "show"):
        chk.effect("reads the host name")


def hostnamectl_verbs(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    words = [a for a in args if not a.startswith("-")]
    if words and words[0] in ("hostname", "chassis", "deployment", "location", "icon-name"):
        if len(words) == 1:
            chk.effect("reads the host name")
            return
        chk.become = True
        chk.approve(f"`hostnamectl {words[0]} VALUE` changes the host's identity; a human should confirm")
        return
    hostnamectl(chk, args, spec)


def loginctl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    got = _ctl(chk, args, {"list-sessions", "list-users", "list-seats", "session-status", "show-session",
                           "user-status", "show-user", "seat-status", "show-seat", "status"},
               {"enable-linger", "disable-linger"},
               {"terminate-session", "terminate-user", "terminate-seat", "kill-session", "kill-user", "lock-session",
                "lock-sessions", "unlock-session", "unlock-sessions", "activate", "attach", "flush-devices"},
               {"-p", "--property", "-n", "--lines", "-o", "--output", "-s", "--signal", "--kill-whom"})
    if got:
        if got[0] not in ("enable-linger", "disable-linger"):
            chk.effect("reads login sessions")
        if "--no-pager" not in args:
            chk.insert.append("--no-pager")


def resolvectl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    words = [a for a in args if not a.startswith("-")]
    verb = words[0] if words else "status"
    if verb in ("dns", "domain", "default-route", "llmnr", "mdns", "dnssec", "dnsovertls", "nta") and len(words) > 2:
        chk.become = True
        chk.approve(f"`resolvectl {verb} LINK VALUE` changes name resolution; a human should confirm")
        return
    if verb == "revert":
        chk.become = True
        chk.approve("`resolvectl revert` resets a link's DNS settings; a human should confirm")
        return
    if verb == "log-level" and len(words) > 1:
        # With a value it sets the resolver's logging (at debug: every name the host looks up).
        chk.become = True
        chk.approve("`resolvectl log-level LEVEL` changes systemd-resolved's logging; a human should confirm")
        return
    if verb == "monitor":
        chk.reject("`resolvectl monitor` never ends")
        return
    if verb not in ("status", "statistics", "query", "service", "openpgp", "tlsa", "dns", "domain", "default-route",
                    "llmnr", "mdns", "dnssec", "dnsovertls", "nta", "flush-caches", "reset-statistics",
                    "reset-server-features", "show-cache", "show-server-state", "log-level"):
        chk.reject(f"{q(verb)} is not a `resolvectl` verb this policy knows")
        return
    for flag in (a for a in args if a.startswith("-")):
        if not re.fullmatch(r"-[46]|-[itpc][A-Za-z0-9]*|--(?:interface|type|class|protocol|legend|cname|search|"
                            r"raw|no-pager|validate|synthesize|cache|zone|trust-anchor|network|stale-data|"
                            r"relax-single-label|json)(?:=[A-Za-z0-9-]+)?", flag):
            chk.reject(f"{q(flag)} is not a `resolvectl` option this policy knows")
            return
    if verb in ("flush-caches", "reset-statistics", "reset-server-features"):
        chk.become = True
    chk.effect("reads or refreshes name resolution state")


def networkctl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    got = _ctl(chk, args, {"list", "status", "lldp", "label", "cat"}, {"reload", "reconfigure", "renew", "forcerenew"},
               {"up", "down", "delete", "edit", "mask", "unmask", "persistent-storage"}, set())
    if got and got[0] in ("list", "status", "lldp", "label", "cat"):
        chk.effect("reads network state")
        if "--no-pager" not in args:
            chk.insert.append("--no-pager")


_ANALYZE_ELSEWHERE = "`systemd-analyze {name}` looks at another system; not from here"
_ANALYZE = _table({
    "--no-pager": None, "--system": None, "--man": "?word", "--generators": "?word", "--order": None,
    "--require": None, "--fuzz": "word", "--iterations": "int", "--base-time": "timestamp",
    "--recursive-errors": "word", "--offline": "word", "--threshold": "int", "--json": "word",
    "--no-legend": None, "-q|--quiet": None, "--tldr": None,
    # The policy file is opened and read as the command's user, whatever the option's spelling.
    "--security-policy": "path:read",
    **{name: {"type": "text", "deny": _ANALYZE_ELSEWHERE.replace("{name}", name.split("|", maxsplit=1)[0])}
       for name in ("-H|--host", "-M|--machine", "--root", "--image")},
    **{name: {"deny": _ANALYZE_ELSEWHERE.replace("{name}", name)} for name in ("--user", "--global")},
})


def systemd_analyze(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse_judged(chk, _ANALYZE, args)
    if parsed is None:
        return
    words = parsed.operands
    verb = words[0] if words else "time"
    if verb not in ("time", "blame", "critical-chain", "dot", "dump", "cat-config", "unit-files", "unit-paths",
                    "verify", "security", "calendar", "timespan", "timestamp", "condition", "syscall-filter",
                    "exit-status", "capability", "inspect-elf", "fdstore", "log-level", "log-target",
                    "service-watchdogs") or verb in ("log-level", "log-target", "service-watchdogs") and len(words) > 1:
        chk.reject(f"{q(verb)} is not a read-only `systemd-analyze` verb")
        return
    for item in words[1:]:
        if verb == "cat-config" and not item.startswith("/"):
            # A relative name is looked up beneath each configuration root (`cat-config sudoers`
            # prints /etc/sudoers): it reads the file of that name in every one of them.
            for root in _CONFIG_ROOTS:
                if judge.path(chk, f"{root}/{item}", "read") is None:
                    return
        elif item.startswith("/") or verb == "inspect-elf" or verb == "verify" and "/" in item:
            # A file operand (`verify ./x.service`, `inspect-elf bash`) is opened relative to an
            # unknown working directory unless absolute: judged as a path, which must be.
            if judge.path(chk, item, "read") is None:
                return
    if verb == "dump":
        _whole_unit_read(chk, verb, words[1:])
    insert_flag(chk, parsed, "--no-pager")
    chk.effect("reads boot and unit analysis")


# Where systemd tools look up a configuration name given without a directory.
_CONFIG_ROOTS = ("/etc", "/run", "/usr/local/lib", "/usr/lib")


def dmesg(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    ospec = _DMESG
    parsed = parse(chk, ospec, args)
    option_values(chk, ospec, parsed)
    if parsed.operands:
        chk.reject("`dmesg` takes options only")
    insert_flag(chk, parsed, "--nopager", "-P")
    chk.become = True
    chk.effect("reads the kernel log")


_DMESG = _table({
    "-T|--ctime": None, "-t|--notime": None, "-H|--human": None, "-x|--decode": None, "-l|--level": "word",
    "-f|--facility": "word", "-k|--kernel": None, "-u|--userspace": None, "-L|--color": "?word",
    "-e|--reltime": None, "-r|--raw": None, "-d|--show-delta": None, "--time-format": "word", "-S|--syslog": None,
    "-s|--buffer-size": "int", "-F|--file": "path:read", "-P|--nopager": None, "-p|--force-prefix": None,
    "--since": "timestamp", "--until": "timestamp", "-J|--json": None, "-V|--version": None,
    "-c|--read-clear": {"deny": "`dmesg -c` clears the kernel log for everyone; read without -c"},
    "-C|--clear": {"deny": "`dmesg -C` clears the kernel log"},
    "-D|--console-off": {"deny": "`dmesg -D` changes kernel console logging"},
    "-E|--console-on": {"deny": "`dmesg -E` changes kernel console logging"},
    "-n|--console-level": {"deny": "`dmesg -n` changes kernel console logging"},
    "-w|--follow": {"deny": "`dmesg --follow` never ends"}, "-W|--follow-new": {"deny": "`dmesg -W` never ends"},
})


def top(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _TOP, args)
    option_values(chk, _TOP, parsed)
    if not parsed.has("-b") or not parsed.has("-n"):
        chk.reject("`top` is interactive; use `top -b -n 1`")
        return
    if int(parsed.last("-n") or "0") > 10:
        chk.reject("`top -n` above 10 iterations runs too long")
    chk.effect("reads the process table")


_TOP = _table({"-b": None, "-n": "int", "-d": "word", "-o": "word", "-p": "word", "-u|-U": "word", "-c": None,
               "-H": None, "-i": None, "-w": "?int", "-1": None, "-E": "word", "-e": "word", "-s": None, "-S": None},
              bundle=True)


def stat_loop(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    """vmstat / iostat / mpstat / pidstat: numbers at the end are interval and count."""
    ospec: OptionSpec = spec["_options"]
    parsed = parse(chk, ospec, args)
    option_values(chk, ospec, parsed)
    numbers = []
    for item in reversed(parsed.operands):
        if item.isdigit():
            numbers.insert(0, int(item))
        else:
            break
    others = parsed.operands[: len(parsed.operands) - len(numbers)]
    for item in others:
        value(chk, "word", item, f"`{chk.tool}`")
    if len(numbers) == 1:
        chk.reject(f"`{chk.tool} INTERVAL` without a count never ends; add a count (e.g. `{chk.tool} 1 5`)")
        return
    if len(numbers) >= 2 and (numbers[-1] > 60 or numbers[-2] > 60):
        chk.reject(f"`{chk.tool}` with that interval and count runs too long (at most 60 of each)")
        return
    if len(numbers) > 2:
        chk.reject(f"`{chk.tool}` takes an interval and a count")
        return
    chk.effect("reads system statistics")


def sleep(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if len(args) != 1 or not re.fullmatch(r"[0-9]{1,3}(?:\.[0-9]{1,3})?s?", args[0]):
        chk.reject("`sleep` takes one duration in seconds (e.g. `sleep 5`)")
        return
    if float(args[0].rstrip("s")) > 300:
        chk.reject("`sleep` longer than 300 s only delays the remediation")
        return
    chk.effect(f"waits {args[0]}")


_TMPFILES_DELETES = ("`systemd-tmpfiles --remove/--clean/--purge` deletes files across the system; refused")
_TMPFILES = _table({
    "--create": None, "--boot": None, "--prefix": "text", "--exclude-prefix": "text", "-E": None,
    "--cat-config": None, "--tldr": None, "--no-pager": None, "--graceful": None, "--dry-run": None,
    "--user": None, "--version": None, "-h|--help": None,
    **dict.fromkeys(("--remove", "--clean", "--purge"), {"deny": _TMPFILES_DELETES}),
    **dict.fromkeys(("--root", "--image", "--replace"),
                    {"type": "text", "deny": "`systemd-tmpfiles --root/--image/--replace` acts on another tree or "
                                             "loads its files in place of the system's; refused"}),
})


def systemd_tmpfiles(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    # Read as getopt_long reads it: an abbreviation (`--rem`), an attached or separate value
    # (`--prefix=/run/x`, `--prefix /run/x`) and options after operands are the program's options.
    parsed = parse(chk, _TMPFILES, args)
    if chk.rejected:
        return
    files = parsed.operands
    if parsed.has("--cat-config", "--tldr"):
        chk.effect("reads tmpfiles configuration")
        return
    if not parsed.has("--create"):
        chk.reject("`systemd-tmpfiles` is allowed with `--create` (or `--cat-config`)")
        return
    chk.become = True
    for item in files:
        # Each line of a tmpfiles.d file creates, writes or chmods any path as root: only files from the
        # system's tmpfiles.d directories are configuration; one from elsewhere is a root write primitive.
        tmpfiles_dir = re.fullmatch(r"/(?:etc|usr/lib|lib|run|usr/local/lib)/tmpfiles\.d/[A-Za-z0-9@._-]+\.conf", item)
        if judge.path(chk, item, "read" if tmpfiles_dir and "/../" not in item else "config") is None:
            return
        if not tmpfiles_dir:
            chk.reject(f"{q(item)} is not in a tmpfiles.d directory; a tmpfiles file from elsewhere can create or "
                       "change any file as root")
            return
    prefixes = parsed.values("--prefix")
    if prefixes:
        for prefix in prefixes:
            judge.path(chk, prefix, "create", recursive=True, what="creates what tmpfiles.d declares under")
    else:
        chk.effect("creates the files and directories tmpfiles.d declares")
        chk.approve("`systemd-tmpfiles --create` without `--prefix` acts on every tmpfiles.d entry; "
                    "a human should confirm")


def logrotate(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _LOGROTATE, args)
    state = parsed.last("-s")
    if state is not None and state not in ("/var/lib/logrotate/status", "/var/lib/logrotate/logrotate.status"):
        chk.reject("`logrotate -s` with another state file rotates everything again; use the system one")
        return
    if not count_bounds(chk, parsed.operands, 1, 1, "configuration file"):
        return
    config = judge.path(chk, parsed.operands[0], "read")
    if config is None:
        return
    chk.become = True
    if config != "/etc/logrotate.conf" and not config.startswith("/etc/logrotate.d/"):
        chk.reject("logrotate configurations run scripts (`postrotate`) as root; only /etc/logrotate.conf and "
                   "/etc/logrotate.d/* are allowed")
        return
    if parsed.has("-d"):
        chk.effect("tests log rotation (changes nothing)")
        return
    target = config.rpartition("/")[2]
    chk.effect(f"rotates the logs of {config}")
    if config == "/etc/logrotate.conf":
        chk.approve("rotating with /etc/logrotate.conf rotates every log on the host; a human should confirm")
    elif chk.scope.explicit and not any(target == v or target.startswith(v) for v in chk.scope.processes
                                        | {chk.scope.service}):
        chk.approve(f"{config} rotates another service's logs than {chk.scope.service}'s; a human should confirm")


_LOGROTATE = _table({"-f|--force": None, "-d|--debug": None, "-v|--verbose": None, "-s|--state": "text",
                     "--version": None, "--skip-state-lock": None,
                     "-m|--mail": {"deny": "`logrotate --mail` names a program to mail logs with; it would run it"},
                     "-l|--log": {"deny": "`logrotate --log` writes a file"}})


_LSOF_OPTIONAL = {"-i", "-s", "-g", "-F", "-T", "-o", "-S", "-K", "-x", "-L", "+L"}


def lsof(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    """lsof reads the next word as an optional value when it is not an option or a file."""
    merged: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word in _LSOF_OPTIONAL and i + 1 < len(args) and not args[i + 1].startswith(("-", "+", "/")):
            merged.append(word + args[i + 1])
            i += 2
            continue
        merged.append(word)
        i += 1
    # `+D DIR` / `+d DIR` / `+L1`: lsof's plus options, parsed as their own words.
    plus = [w for w in merged if w.startswith("+")]
    rest = [w for w in merged if not w.startswith("+")]
    for j, word in enumerate(merged):
        if word in ("+D", "+d") and j + 1 < len(merged):
            rest.remove(merged[j + 1]) if merged[j + 1] in rest else None
            judge.path(chk, merged[j + 1], "meta", recursive=word == "+D")
        elif word.startswith("+") and not re.fullmatch(r"\+(?:D|d|E|L[0-9]*|c[0-9]*|w|f[cgn]*|r[0-9]*)", word):
            chk.reject(f"{q(word)} is not an `lsof` option this policy knows")
        elif word.startswith("+r"):
            chk.reject("`lsof +r` repeats without end")
    del plus
    generic(chk, rest, spec)


_VERB_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")


def verbs(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    """A service's control tool described as data: each verb (``postfix check``), action
    option (``postqueue -p``) or value of a verb option (``squid -k parse``) is ``read``
    (allowed), ``approval`` or a reason it is refused; anything not listed is refused.
    ``flags``, ``value_options`` and ``path_options`` (a configuration the tool loads, judged as
    a path) are the other options it takes; a value option naming a file is judged as a read
    of that file. Operands are plain
    words (program or queue names), at most ``max_operands``."""
    table: Mapping[str, Any] = spec.get("verbs") or {}
    option_table: Mapping[str, Any] = spec.get("option_verbs") or {}
    verb_option = spec.get("verb_option")
    value_options = set(spec.get("value_options") or ())
    path_options = set(spec.get("path_options") or ())
    flags = set(spec.get("flags") or ())
    acts: list[tuple[str, Any]] = []
    verb = None
    operands: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        name, eq, attached = word.partition("=")
        if word.startswith("-") and word != "-":
            if name == verb_option:
                value_text = attached if eq else (args[i] if i < len(args) else "")
                i += 0 if eq else 1
                unknown = f"is not a `{chk.tool}` action this policy knows"
                acts.append((f"{name} {value_text}", table.get(value_text, unknown)))
            elif name in option_table:
                acts.append((name, option_table[name]))
                if spec.get("option_verbs_take_value") and name in spec["option_verbs_take_value"] and not eq:
                    i += 1
            elif name in path_options:
                # A configuration file or directory the tool loads (`-c FILE`): judged as a path,
                # so a secret cannot become the configuration a tool echoes back.
                text = attached if eq else (args[i] if i < len(args) else "")
                i += 0 if eq else 1
                if judge.path(chk, text, "config", what=f"`{chk.tool} {name}` loads its configuration from") is None:
                    return
            elif name in value_options:
                text = attached if eq else (args[i] if i < len(args) else "")
                i += 0 if eq else 1
                if not value(chk, "text", text, f"`{chk.tool} {name}`"):
                    return
                if "/" in text and judge.path(chk, text, "read", what=f"`{chk.tool} {name}` reads") is None:
                    # Whatever the option means, a value naming a file is judged as a read of it.
                    return
            elif name not in flags:
                chk.reject(f"{q(word)} is not a `{chk.tool}` option this policy knows")
                return
            continue
        if verb is None and table and verb_option is None:
            verb = word
            acts.append((verb, table.get(verb, f"is not a `{chk.tool}` verb this policy knows")))
            continue
        operands.append(word)
    if not acts:
        default = spec.get("default")
        if default is None:
            chk.reject(f"`{chk.tool}` needs one of its actions ({', '.join(sorted(table or option_table))})")
            return
        acts.append(("", default))
    if len(operands) > int(spec.get("max_operands", 4)):
        chk.reject(f"`{chk.tool}` takes at most {spec.get('max_operands', 4)} names here")
        return
    for item in operands:
        if not _VERB_WORD.match(item):
            chk.reject(f"{q(item)} is not a plain name `{chk.tool}` acts on")
            return
    chk.become = bool(spec.get("become", True))
    what_changes = spec.get("changes") or f"what `{chk.tool}` controls"
    for action, verdict in acts:
        shown = f"`{chk.tool} {action}`" if action else f"`{chk.tool}`"
        if verdict == "read":
            chk.effect(f"reads the state of {what_changes}" + (f" ({action})" if action else ""))
        elif verdict == "approval":
            chk.effect(f"runs {chk.tool} {action}".rstrip() + (f" on {' '.join(operands)}" if operands else ""))
            chk.approve(f"{shown} changes {what_changes}; a human should confirm")
        else:
            chk.reject(f"{shown} {verdict}")


RULES: dict[str, Rule] = {
    "generic": generic, "systemctl": systemctl, "service": service, "initscript": initscript,
    "invoke_rc_d": invoke_rc_d, "update_rc_d": update_rc_d, "journalctl": journalctl, "kill": kill,
    "pkill": pkill, "killall": killall, "fuser": fuser, "ps": ps, "grep": grep, "find": find, "rm": rm,
    "rmdir": rmdir, "mkdir": mkdir, "touch": touch, "chown": chown, "chmod": chmod, "mv": mv, "cp": cp, "ln": ln,
    "truncate": truncate, "install": install, "dd": dd, "tar": tar, "compress": compress, "apt": apt,
    "dpkg": dpkg, "apt_mark": apt_mark, "firewall": firewall, "ip": ip, "mount": mount, "swapon": swapon,
    "sysctl": sysctl, "getent": getent, "crontab": crontab, "timedatectl": timedatectl,
    "hostnamectl": hostnamectl_verbs, "loginctl": loginctl, "resolvectl": resolvectl, "networkctl": networkctl,
    "systemd_analyze": systemd_analyze, "dmesg": dmesg, "top": top, "stat_loop": stat_loop, "sleep": sleep,
    "systemd_tmpfiles": systemd_tmpfiles, "logrotate": logrotate, "lsof": lsof, "verbs": verbs,
}
