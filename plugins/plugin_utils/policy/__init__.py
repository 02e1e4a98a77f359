# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safety policy engine: decide allow / approval / reject for proposed commands.

Every command a planner, a runbook or the memory proposes is hostile text until this
engine has classified it. The pipeline, each step failing closed:

1. characters (``_syntax.check_characters``): length bound, printable ASCII only;
2. structure (``_syntax.parse_command``): tree-sitter-bash must see exactly one
   simple command, and our own quoting grammar must read every word as plain text;
3. privilege: a leading ``sudo`` (or ``runuser``) written by the proposal is removed and
   ignored; the engine alone decides whether the command runs as root (``become``). A
   ``sudo -u ACCOUNT`` becomes ``runuser -u ACCOUNT --`` (a less privileged account);
4. tools (``_tools``, ``_apps``): wrappers (``timeout``, ``nice``...) are
   looked through; the tool must be allowed and present, and its arguments are read the
   way the tool reads them, giving its effects;
5. effects (``_rules``): each effect (path read or changed, unit started or stopped,
   process signalled) is judged against the incident scope (``_scope``) and the
   policy; the verdict is the strictest;
6. critical patterns from the policy can only make the verdict stricter.

Parser choice: tree-sitter-bash rather than bashlex. Both need our own word check, but
tree-sitter parses in microseconds where bashlex needs ~0.6 ms, which alone would cap the
engine near the 5,000 commands/s target; tree-sitter also covers all of bash's grammar.
Its error recovery is neutralised by rejecting any tree with ERROR/MISSING nodes.
"""
from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._argspec import load_yaml
from . import _accounts, _apps, _sed, _tools
from ._options import OptionSpec, parse_options, spec_from_table
from ._paths import ancestor_regex, canonical, name_regex, pattern_regex
from ._rules import ALLOW, APPROVAL, REJECT, VERDICTS, Check, q
from ._schema import SCHEMA_FILE, validate
from ._scope import Scope, ScopeError, compile_scope, describe_scope, scope_from_service
from ._syntax import check_characters, display, parse_command, shell_join

__all__ = ["PolicyError", "ScopeError", "load_policy", "classify", "classify_many", "ensure_sudo",
           "scope_from_service", "describe_scope", "compile_scope", "parse_command", "SCHEMA_FILE", "validate"]

_DEFAULTS_FILE = Path(__file__).with_name("defaults.yml")
_MAX_REASONS = 6
_REJECT_DISPLAY = 1000
RULES: dict[str, Any] = {**_tools.RULES, **_apps.RULES, **_sed.RULES, **_accounts.RULES}
_BIN_DIRS = ("/usr/local/sbin/", "/usr/local/bin/", "/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/")
_INIT_SCRIPT = re.compile(r"^/etc/init\.d/[a-z0-9][a-z0-9@._+-]{0,63}$")
_VERSIONED = re.compile(r"[-.]?[0-9][0-9.]*$")
_ACCOUNT = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_PATH_VALUE = re.compile(r"^\??path:(read|meta|cert|config|create|write|delete|attr)$")


class PolicyError(ValueError):
    """A policy document is invalid; the message names the bad key."""


class LoadedPolicy(dict):
    """A merged, validated policy; ``compiled`` holds its pre-built matchers."""

    compiled: dict[str, Any]


_DEFAULT_CACHE: LoadedPolicy | None = None


_DEFAULTS_JSON: str | None = None


def _read_defaults() -> dict[str, Any]:
    """A fresh copy of the shipped defaults: the YAML is parsed once per process and kept as
    JSON, which is several times faster to copy out again than YAML is to parse."""
    global _DEFAULTS_JSON
    if _DEFAULTS_JSON is None:
        data = load_yaml(_DEFAULTS_FILE.read_text(encoding="utf-8"))
        if not isinstance(data, dict):  # pragma: no cover - shipped file
            raise PolicyError(f"{_DEFAULTS_FILE.name} is not a mapping")
        _DEFAULTS_JSON = json.dumps(data)
    return json.loads(_DEFAULTS_JSON)


def _merge(base: dict[str, Any], overrides: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Deep-merge: mappings key by key, anything else replaces; None deletes a key the base has
    (a None for a new key is a value, such as a flag in `options`)."""
    result = dict(base)
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise PolicyError(f"policy key {key!r} under {where or 'the top level'} is not a string")
        if value is None and key in result:
            result.pop(key, None)
        elif value is None:
            result[key] = None
        elif isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value, f"{where}.{key}" if where else key)
        elif isinstance(value, Mapping):
            result[key] = _merge({}, value, f"{where}.{key}" if where else key)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _semantic_problems(policy: Mapping[str, Any]) -> list[str]:
    """What the schema cannot say: rule names, value type names, wrapper types."""
    found = []
    types = set(policy["value_types"])

    def check_type(vtype: Any, where: str) -> None:
        if vtype is None:
            return
        name = str(vtype).lstrip("?")
        if name not in types and not _PATH_VALUE.match(str(vtype)):
            found.append(f"policy key '{where}' uses the unknown value type '{name}' "
                         f"(known: {', '.join(sorted(types))}, path:ACCESS)")

    for name, spec in policy["tools"].items():
        rule = spec.get("rule", "generic")
        if rule not in RULES:
            found.append(f"policy key 'tools.{name}.rule' names an unknown rule '{rule}' "
                         f"(known: {', '.join(sorted(RULES))})")
        for option, vtype in (spec.get("options") or {}).items():
            check_type(vtype.get("type") if isinstance(vtype, Mapping) else vtype, f"tools.{name}.options.{option}")
        operands = spec.get("operands") or {}
        if "type" in operands:
            check_type(operands["type"], f"tools.{name}.operands.type")
        for index, vtype in enumerate(operands.get("positional") or ()):
            check_type(vtype, f"tools.{name}.operands.positional[{index}]")
        if rule == "generic" and "operands" in spec and "access" not in operands and "type" not in operands:
            found.append(f"policy key 'tools.{name}.operands' needs `access` (for paths) or `type`")
    for name, spec in policy["wrappers"].items():
        for option, vtype in ((spec or {}).get("options") or {}).items():
            check_type(vtype, f"wrappers.{name}.options.{option}")
        for index, vtype in enumerate((spec or {}).get("positional") or ()):
            check_type(vtype, f"wrappers.{name}.positional[{index}]")
    return found


def _glob_regex(globs: Iterable[str]) -> re.Pattern[str]:
    parts = [re.escape(g).replace(r"\*", ".*").replace(r"\?", ".") for g in globs]
    return re.compile("^(?:" + "|".join(parts or ["(?!)"]) + ")$")


def _word_regex(words: Iterable[str]) -> re.Pattern[str]:
    """Unit names holding one of ``words`` as a whole word (`-`, `@`, `.` delimit; `*` is more letters)."""
    parts = [re.escape(w).replace(r"\*", "[A-Za-z0-9_:]*") for w in words]
    return re.compile(r"(?:^|[-@])(?:" + "|".join(parts or ["(?!)"]) + r")(?:[-.@]|$)")


def _compile(policy: dict[str, Any]) -> dict[str, Any]:
    compiled: dict[str, Any] = {
        "value_types": {name: re.compile(rx) for name, rx in policy["value_types"].items()},
        "secret_paths": pattern_regex(canonical(p) for p in policy["secret_paths"]),
        "secret_names": name_regex(policy["secret_names"]),
        "public_names": _glob_regex(policy["public_names"]) if policy["public_names"] else None,
        "keyish_names": name_regex(policy["keyish_names"]),
        "data_file_names": name_regex(policy["data_file_names"]),
        "secret_ancestors": ancestor_regex(canonical(p) for p in policy["secret_paths"]),
        "protected_paths": pattern_regex(canonical(p) for p in policy["protected_paths"]) or re.compile("(?!)"),
        "access_paths": pattern_regex(canonical(p) for p in policy["access_paths"]) or re.compile("(?!)"),
        "system_paths": pattern_regex(canonical(p) for p in policy["system_paths"]),
        "routine_removals": pattern_regex((canonical(p) for p in policy["routine_removals"]), beneath=False),
        "tmp_dirs": {canonical(p) for p in policy["tmp_dirs"]},
        "published_paths": pattern_regex(canonical(p) for p in policy.get("published_paths") or []),
        "search_paths": pattern_regex((canonical(p) for p in policy.get("search_paths") or []), beneath=False),
        "local_search_paths": pattern_regex((canonical(p) for p in policy.get("local_search_paths") or []),
                                            beneath=False),
        "search_ancestors": ancestor_regex(canonical(p) for p in policy.get("search_paths") or []),
        "credential_configs": pattern_regex(canonical(p) for p in policy.get("credential_configs") or []),
        "app_config_names": _glob_regex(policy.get("app_config_names") or []),
        "app_areas": pattern_regex(canonical(p) for p in policy.get("app_areas") or []),
        "log_areas": pattern_regex(canonical(p) for p in policy["log_areas"]) or re.compile("(?!)"),
        "devices_ok": set(policy["devices_ok"]),
        "secret_hunt": re.compile("|".join(f"(?:{p})" for p in policy["secret_hunt"]) or "(?!)"),
        "protected_units": _glob_regex(policy["protected_units"] + policy.get("protected_services", [])),
        "infrastructure_units": _glob_regex(policy["infrastructure_units"]),
        "firewall_units": _glob_regex(policy["firewall_units"]),
        "power_units": _word_regex(policy["power_units"]),
        "protected_processes": _glob_regex(policy["protected_processes"]),
        "interpreter_processes": _glob_regex(policy["interpreter_processes"]),
        "protected_names": sorted({g.replace("*", filler) for g in policy["protected_processes"]
                                   + policy["interpreter_processes"]
                                   for filler in ("", "3", "journald")}),
        "protected_cmdlines": list(policy["protected_cmdlines"]),
        "process_samples": list(policy.get("process_samples") or []) + list(policy["protected_cmdlines"]),
        "critical_patterns": [(re.compile(e["pattern"]), REJECT if e["verdict"] == "reject" else APPROVAL,
                               str(e["reason"])) for e in policy["critical_patterns"]],
        "absent": frozenset(policy["absent_tools"]),
    }
    default = dict(policy["default_scope"])
    compiled["default_scope"] = Scope(default, explicit=False)
    tools: dict[str, dict[str, Any]] = {}
    for name, spec in policy["tools"].items():
        entry = dict(spec)
        entry["_rule"] = RULES[spec.get("rule", "generic")]
        if "options" in spec or spec.get("rule", "generic") == "generic":
            entry["_options"] = spec_from_table(spec.get("options") or {}, numeric=spec.get("numeric"),
                                                bundle=spec.get("bundle", True), permute=spec.get("permute", True))
        tools[name] = entry
    compiled["tools"] = tools
    # A wrapper stops at its first operand (getopt's "+"); `nice -5` is its first option's value.
    compiled["wrappers"] = {
        name: (spec_from_table((spec or {}).get("options") or {}, permute=False,
                               numeric=(next(iter((spec or {}).get("options") or {}), "").split("|")[0] or None)
                               if (spec or {}).get("numeric_flag") else None), spec or {})
        for name, spec in policy["wrappers"].items()}
    return compiled


def load_policy(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default policy deep-merged with overrides, validated against the schema and compiled.

    The same overrides give the same policy: results are kept (a few dozen at most) by the
    overrides' JSON form, so a filter called once per host does not rebuild it each time.
    """
    if overrides is None and _DEFAULT_CACHE is not None:
        return _DEFAULT_CACHE
    if isinstance(overrides, LoadedPolicy):
        return overrides
    if overrides is not None and not isinstance(overrides, Mapping):
        raise PolicyError(f"the policy must be a mapping, not {type(overrides).__name__}")
    try:
        key = json.dumps(overrides, sort_keys=True) if overrides else None
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    policy = _with_absent_tools(overrides) if key is not None else None
    if policy is None:
        policy = _build_policy(overrides)
    if key is not None:
        if len(_CACHE) >= 32:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = policy
    return policy


_CACHE: dict[str, LoadedPolicy] = {}


def _with_absent_tools(overrides: Mapping[str, Any]) -> LoadedPolicy | None:
    """The policy of ``overrides`` when they differ from an already built one only by the
    host's ``absent_tools`` (each host reports the tools it lacks; the heal action adds them to
    the operator's policy): that policy with its absent tools replaced, instead of a merge,
    validation and compile per host. None when there is nothing to derive from, or the list
    is not a list of non-empty strings (the full build then names the problem)."""
    absent = overrides.get("absent_tools")
    if not isinstance(absent, list) or not all(isinstance(tool, str) and tool for tool in absent):
        return None
    rest = {k: v for k, v in overrides.items() if k != "absent_tools"}
    base = load_policy(rest or None)
    derived = LoadedPolicy(base)
    derived["absent_tools"] = list(absent)
    derived.compiled = dict(base.compiled, absent=frozenset(absent))
    return derived


def _build_policy(overrides: Mapping[str, Any] | None) -> LoadedPolicy:
    global _DEFAULT_CACHE
    merged = _merge(_read_defaults(), overrides or {}, "")
    found = validate(merged)
    if not found:
        found = _semantic_problems(merged)
    if found:
        more = f" (and {len(found) - 1} more problem(s))" if len(found) > 1 else ""
        raise PolicyError(found[0] + more)
    policy = LoadedPolicy(merged)
    try:
        policy.compiled = _compile(merged)
    except re.error as exc:  # pragma: no cover - the schema checks every regex first
        raise PolicyError(f"the policy holds an invalid regular expression: {exc}") from None
    if overrides is None:
        _DEFAULT_CACHE = policy
    return policy


def _as_policy(policy: Mapping[str, Any] | None) -> LoadedPolicy:
    return load_policy(policy)  # type: ignore[return-value]


def _scope(policy: LoadedPolicy, scope: Any) -> Scope:
    if isinstance(scope, Scope):
        return scope
    if scope is None and not policy["scope"]:
        return policy.compiled["default_scope"]
    return compile_scope(scope, policy["default_scope"], policy["scope"])


# ---------------------------------------------------------------- verdicts

def _verdict(command: Any, level: int, reasons: list[str], argv: list[str] | None, become: bool,
             shown: str, pids: list[int], effects: list[str]) -> dict[str, Any]:
    unique: list[str] = []
    for reason in reasons:
        if reason not in unique:
            unique.append(reason)
    rejected = level == REJECT
    return {
        "command": command,
        "verdict": VERDICTS[level],
        "reasons": unique[:_MAX_REASONS],
        "argv": None if rejected else argv,
        "become": False if rejected else bool(become),
        "display": shown,
        "pids": [] if rejected else sorted(set(pids)),
        "effects": list(effects),
    }


def _refused(command: Any, reasons: list[str], text: str, effects: list[str] | None = None) -> dict[str, Any]:
    return _verdict(command, REJECT, reasons or ["the command was refused"], None, False,
                    display(text, _REJECT_DISPLAY), [], effects or [])


def classify(command: str, policy: Mapping[str, Any] | None = None, scope: Any = None) -> dict[str, Any]:
    """Classify one proposed command (contract C2). Never raises on any command value."""
    loaded = _as_policy(policy)
    if not isinstance(command, str):
        return _refused(command, [f"a command must be a string, not {type(command).__name__}"], repr(command)[:200])
    try:
        compiled_scope = _scope(loaded, scope)
    except ScopeError as exc:
        return _refused(command, [f"the incident scope is unusable: {exc}"], command)
    try:
        return _classify(command, loaded, compiled_scope)
    except Exception as exc:  # fail closed: a bug here must never let a command through
        return _refused(command, [f"the policy engine failed on this command ({type(exc).__name__})"], command)


def classify_many(commands: Sequence[Any], policy: Mapping[str, Any] | None = None,
                  scope: Any = None) -> list[dict[str, Any]]:
    """Classify each command in order (one verdict per input)."""
    if isinstance(commands, (str, bytes)) or not isinstance(commands, Sequence):
        raise PolicyError("commands must be a list of command strings")
    loaded = _as_policy(policy)
    compiled_scope: Any = scope
    try:
        compiled_scope = _scope(loaded, scope)
    except ScopeError:
        pass  # each verdict then says why
    return [classify(command, loaded, compiled_scope) for command in commands]


def _critical(policy: LoadedPolicy, text: str, findings: list[tuple[int, str]]) -> None:
    for pattern, level, reason in policy.compiled["critical_patterns"]:
        if (level, reason) not in findings and pattern.search(text):
            findings.append((level, reason))


def _classify(command: str, policy: LoadedPolicy, scope: Scope) -> dict[str, Any]:
    reasons = check_characters(command, int(policy["max_length"]))
    if reasons:
        return _refused(command, reasons, command)
    findings: list[tuple[int, str]] = []
    _critical(policy, command, findings)
    parsed = parse_command(command)
    if parsed.argv is None:
        return _refused(command, [r for lvl, r in findings if lvl == REJECT] + parsed.reasons, command)
    argv = parsed.argv
    _critical(policy, " ".join(argv), findings)
    notes: list[str] = []
    user, start = _privilege(argv, findings, notes)
    if start < 0:
        return _refused(command, [r for lvl, r in findings if lvl == REJECT], command)
    index = _skip_wrappers(argv, start, policy, findings)
    if index < 0:
        return _refused(command, [r for lvl, r in findings if lvl == REJECT], command)
    chk = _check_tool(argv, index, policy, scope, findings)
    if chk is None or any(lvl == REJECT for lvl, _r in findings):
        effects = chk.effects if chk is not None else []
        rejects = [r for lvl, r in findings if lvl == REJECT] or ["the command could not be resolved to a tool"]
        return _refused(command, rejects, command, effects)
    final = argv[start:index + 1] + chk.insert + argv[index + 1:]
    become = chk.become
    if user is not None:
        final = ["runuser", "-u", user, "--"] + final
        become = True
        notes.append(f"runs as {user} (runuser), started by root")
    level = max((lvl for lvl, _r in findings), default=ALLOW)
    shown = shell_join(final)
    if level == APPROVAL:
        gated = [r for lvl, r in findings if lvl == APPROVAL]
        return _verdict(command, APPROVAL, gated + notes, final, become, shown, chk.pids, chk.effects)
    summary = f"`{chk.tool}` with these arguments is allowed; " + ("runs as root (the engine's decision)"
                                                                   if become else "runs without root")
    return _verdict(command, ALLOW, [summary] + notes, final, become, shown, chk.pids, chk.effects)


def _privilege(argv: list[str], findings: list[tuple[int, str]], notes: list[str]) -> tuple[str | None, int]:
    """Remove a leading sudo/runuser: (account to switch to or None, index after it), -1 on refusal."""
    if argv[0] not in ("sudo", "runuser"):
        return None, 0
    tool = argv[0]
    spec = _SUDO if tool == "sudo" else _RUNUSER
    # Options end at the first operand (the command), as sudo and runuser read them; a value is
    # attached or the next word (`-uwww-data`, `-nu www-data`).
    parsed = parse_options(spec, argv[1:], tool)
    for problem in parsed.problems:
        findings.append((REJECT, problem))
    if parsed.problems:
        return None, -1
    i = len(argv) - len(parsed.operands)
    if i >= len(argv):
        findings.append((REJECT, f"`{tool}` without a command opens a shell or does nothing; propose the command "
                                 "itself"))
        return None, -1
    if argv[i] in ("sudo", "runuser", "su", "doas"):
        findings.append((REJECT, f"`{tool} {argv[i]}`: privilege tools may not be stacked"))
        return None, -1
    user = parsed.last("-u")
    if user in (None, "root", "0", "#0"):
        notes.append(f"the proposed `{tool}` was ignored: the engine decides root")
        return None, i
    if not _ACCOUNT.match(user) and not re.fullmatch(r"#?[1-9][0-9]{0,8}", user):
        findings.append((REJECT, f"{q(user)} is not an account name"))
        return None, -1
    return user.lstrip("#"), i


_SUDO = spec_from_table({
    "-n|--non-interactive": None, "-E": None, "--preserve-env": "?text", "-H|--set-home": None, "-S|--stdin": None,
    "-k|--reset-timestamp": None, "-P|--preserve-groups": None, "-u|--user": "word", "-T|--command-timeout": "word",
    "-p|--prompt": "text", "-B|--bell": None,
    **{name: {"deny": f"`sudo {name.split('|', maxsplit=1)[0]}` " + why} for name, why in (
        ("-s|--shell", "opens a root shell; write the command alone (the engine decides root)"),
        ("-i|--login", "opens a root login shell; write the command alone (the engine decides root)"),
        ("-e|--edit", "opens an editor"), ("-l|--list", "lists sudo rules; not a remediation"),
        ("-v|--validate", "only refreshes credentials"), ("-K|--remove-timestamp", "is not a remediation"),
        ("-b|--background", "runs the command in the background"), ("-A|--askpass", "runs a password helper"),
        ("-U|--other-user", "lists other users' rules"), ("-V|--version", "is not a remediation"))},
    **{name: {"type": "text", "deny": f"`sudo {name.split('|', maxsplit=1)[0]}` " + why} for name, why in (
        ("-g|--group", "runs with another group; the engine decides privilege"),
        ("-C|--close-from", "changes inherited descriptors"), ("-D|--chdir", "changes the working directory"),
        ("-R|--chroot", "runs in another root"), ("-h|--host", "acts for another host"),
        ("-r|--role", "sets an SELinux role"), ("-t|--type", "sets an SELinux type"))},
}, permute=False)
_RUNUSER = spec_from_table({
    "-u|--user": "word",
    **{name: {"type": "?text", "deny": "`runuser` with a shell, login, group or command option opens a shell; use "
                                       "`runuser -u ACCOUNT -- COMMAND`"}
       for name in ("-l|--login", "-c|--command", "-s|--shell", "-g|--group", "-G|--supp-group", "-m|-p|--preserve-environment",
                    "-f|--fast", "-w|--whitelist-environment", "-P|--pty", "--session-command")},
}, permute=False)


def _skip_wrappers(argv: list[str], i: int, policy: LoadedPolicy, findings: list[tuple[int, str]]) -> int:
    """Index of the real tool after wrapper programs (`timeout 30 ...`), or -1."""
    wrappers: Mapping[str, tuple[OptionSpec, Mapping[str, Any]]] = policy.compiled["wrappers"]
    depth = 0
    while i < len(argv):
        name = argv[i]
        if name in ("sudo", "runuser"):
            findings.append((REJECT, f"`{name}` may only come first; the engine decides privilege"))
            return -1
        if name not in wrappers:
            return i
        depth += 1
        if depth > 4:
            findings.append((REJECT, "too many wrapper programs in a row; propose the command directly"))
            return -1
        spec, raw = wrappers[name]
        i += 1
        # The wrapper reads its options as getopt does and stops at its first operand (the
        # command, or the duration of `timeout`): `-oL`, `-c3`, `-s KILL`, `-n -5` and `--` alike.
        parsed = parse_options(spec, argv[i:], name)
        for problem in parsed.problems:
            findings.append((REJECT, problem))
        j = len(argv) - len(parsed.operands)
        probe = Check(name, policy, policy.compiled["default_scope"])
        for opt_name, text in parsed.options:
            option = spec.short.get(opt_name) or spec.long.get(opt_name)
            if option is not None and text is not None:
                _tools.value(probe, option.vtype, text, f"`{name} {opt_name}`")
        i = j
        for vtype in raw.get("positional") or ():
            if i >= len(argv):
                findings.append((REJECT, f"`{name}` needs a {vtype} before the command"))
                return -1
            _tools.value(probe, vtype, argv[i], f"`{name}`")
            i += 1
        findings.extend(probe.findings)
        if probe.rejected or parsed.problems:
            return -1
        if name == "env" and i < len(argv) and "=" in argv[i]:
            findings.append((REJECT, "`env NAME=value` changes the program's environment (`LD_PRELOAD` and "
                                     "similar load code); not allowed"))
            return -1
    findings.append((REJECT, "no program to run after the wrapper(s); propose the command itself"))
    return -1


def _tool_name(word: str, findings: list[tuple[int, str]]) -> tuple[str | None, str | None]:
    """(tool name, rule override) for the program word; paths only from standard places."""
    if not word:
        findings.append((REJECT, "the program name is empty"))
        return None, None
    if "/" not in word:
        return word, None
    if _INIT_SCRIPT.match(word):
        return word, "initscript"
    for prefix in _BIN_DIRS:
        if word.startswith(prefix) and "/" not in word[len(prefix):] and word[len(prefix):]:
            return word[len(prefix):], None
    findings.append((REJECT, f"{q(word)} runs a program from an arbitrary path; name an allowed tool (the host's "
                             "PATH decides which binary runs)"))
    return None, None


def _check_tool(argv: list[str], index: int, policy: LoadedPolicy, scope: Scope,
                findings: list[tuple[int, str]]) -> Check | None:
    tool, rule_name = _tool_name(argv[index], findings)
    if tool is None:
        return None
    shown = q(tool)
    forbidden = policy["forbidden_tools"]
    # Versioned and alternative names are the same program (python3.11, php8.2, vim.basic, php-fpm8.1).
    base = _VERSIONED.sub("", tool)
    stem = tool.split(".", 1)[0]
    for name in (tool, base, stem):
        if name in forbidden:
            findings.append((REJECT, forbidden[name].replace("`{tool}`", shown).replace("{tool}", tool)))
            return None
    if tool.startswith(("mkfs.", "mkfs")) or tool.startswith("fsck"):
        findings.append((REJECT, f"{shown} formats or repairs a disk; never run by a command here"))
        return None
    if tool in policy.compiled["absent"]:
        hint = policy["absent_tool_hints"].get(tool, "propose a tool the host has")
        findings.append((REJECT, f"{shown} is not installed on this host; {hint}"))
        return None
    tools = policy.compiled["tools"]
    if rule_name is not None:
        spec: Mapping[str, Any] = {"_rule": RULES[rule_name]}
    else:
        spec = tools.get(tool) or tools.get(base)  # type: ignore[assignment]
        if spec is None:
            findings.append((REJECT, f"{shown} is not a tool this policy knows; propose a known tool (service, "
                                     "systemctl, kill, ss, ps, tail, mkdir, ...)"))
            return None
    chk = Check(tool if rule_name is None else argv[index], policy, scope)
    spec["_rule"](chk, argv[index + 1:], spec)
    if spec.get("verdict") == "approval":
        chk.approve((spec.get("reason") or "`{tool}` needs a human's approval here").replace("{tool}", tool))
    elif spec.get("verdict") == "reject":
        chk.reject((spec.get("reason") or "`{tool}` is not allowed here").replace("{tool}", tool))
    if "become" in spec and spec.get("rule", "generic") != "generic" and isinstance(spec["become"], bool):
        chk.become = spec["become"]
    findings.extend(chk.findings)
    return chk


def ensure_sudo(command: str, policy: Mapping[str, Any] | None = None, scope: Any = None) -> str:
    """The command as the engine will run it, with `sudo ` in front when it runs as root.

    A display helper: a rejected command comes back unchanged (and stays rejected by
    ``classify``); a `sudo` the proposal wrote is dropped when the engine runs it without root.
    """
    if not isinstance(command, str):
        raise PolicyError(f"ensure_sudo expects a command string, not {type(command).__name__}")
    result = classify(command, policy, scope)
    if result["argv"] is None:
        return command
    return ("sudo " if result["become"] else "") + result["display"]
