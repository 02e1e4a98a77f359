# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safety policy engine: decide allow / approval / reject for proposed commands.

Every command a planner, a runbook or the memory proposes is hostile text until
this engine has classified it. The pipeline, each step failing closed:

1. characters (``policy_syntax.check_characters``): length bound, printable ASCII only;
2. structure (``policy_syntax.parse_command``): tree-sitter-bash must see exactly one
   simple command, and our own quoting grammar must read every word as plain text;
3. tools (``policy_rules``): a leading ``sudo`` and wrappers (``timeout``, ``nice``...)
   are resolved to the real tool, which must be allowed, present on the host, and
   pass its argument rule;
4. critical patterns from the policy can only make the verdict stricter.

Parser choice: tree-sitter-bash rather than bashlex. Both need our own word check
(neither flags brace expansion or globs as such), but tree-sitter parses in a few
microseconds where bashlex needs ~0.6 ms, which alone would cap the engine below
the 5,000 commands/s target; tree-sitter also covers all of bash's grammar (bashlex
raises ``NotImplementedError`` on arithmetic, ``case`` ...). Its error recovery is
neutralised by rejecting any tree with ERROR/MISSING nodes.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .policy_rules import (
    ALLOW,
    APPROVAL,
    REJECT,
    RULES,
    VERDICTS,
    Check,
    finish_generic,
    resolve_wrappers,
    tool_name,
)
from .policy_syntax import check_characters, display, parse_command, quote_token

__all__ = ["PolicyError", "load_policy", "classify", "classify_many", "ensure_sudo"]

_DEFAULTS_FILE = Path(__file__).with_name("policy_defaults.yml")
_MAX_REASONS = 4


class PolicyError(ValueError):
    """A policy document is invalid; the message names the bad key."""


class LoadedPolicy(dict):
    """A merged, validated policy; ``compiled`` holds its pre-built matchers."""

    compiled: dict[str, Any]


# What each top-level key must be: (type, element type for lists/dicts or None).
_SCHEMA: dict[str, tuple[type | tuple[type, ...], Any]] = {
    "max_length": (int, None),
    "absent_tools": (list, str),
    "absent_tool_hints": (dict, str),
    "protected_services": (list, str),
    "protected_packages": (list, str),
    "secret_paths": (list, str),
    "protected_paths": (list, str),
    "system_paths": (list, str),
    "recursive_min_depth": (int, None),
    "routine_removals": (list, str),
    "critical_patterns": (list, dict),
    "wrappers": (dict, (dict, type(None))),
    "forbidden_tools": (dict, str),
    "tools": (dict, dict),
    "value_types": (dict, str),
}
_TOOL_KEYS: dict[str, type | tuple[type, ...]] = {
    "rule": str, "root": (bool, str), "root_options": list, "verdict": str, "reason": str,
    "options": dict, "bundle": bool, "operands": dict, "requires": list, "requires_any": list,
    "deny_options": dict, "approval_options": dict, "writes": bool,
}

_DEFAULT_CACHE: LoadedPolicy | None = None


def _read_defaults() -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with _DEFAULTS_FILE.open(encoding="utf-8") as handle:
        data = yaml.load(handle, Loader=loader)  # noqa: S506 - a safe loader
    if not isinstance(data, dict):  # pragma: no cover - shipped file
        raise PolicyError(f"{_DEFAULTS_FILE.name} is not a mapping")
    return data


def _merge(base: dict[str, Any], overrides: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Deep-merge: mappings key by key, anything else replaces; None deletes a key."""
    result = dict(base)
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise PolicyError(f"policy key {key!r} under {where or 'the top level'} is not a string")
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value, f"{where}.{key}" if where else key)
        elif isinstance(value, Mapping):
            result[key] = _merge({}, value, f"{where}.{key}" if where else key)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _validate(policy: dict[str, Any]) -> None:
    for key, value in policy.items():
        if key not in _SCHEMA:
            raise PolicyError(f"unknown policy key '{key}' (known: {', '.join(sorted(_SCHEMA))})")
        kind, item = _SCHEMA[key]
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise PolicyError(f"policy key '{key}' must be a {getattr(kind, '__name__', kind)}")
        if item is not None:
            values = value.values() if isinstance(value, dict) else value
            if not all(isinstance(v, item) for v in values):
                raise PolicyError(f"every entry of policy key '{key}' must be a {getattr(item, '__name__', item)}")
    missing = set(_SCHEMA) - set(policy)
    if missing:
        raise PolicyError(f"policy key '{sorted(missing)[0]}' is missing (do not delete it, override it)")
    for name, spec in policy["tools"].items():
        for key, value in spec.items():
            if key not in _TOOL_KEYS:
                raise PolicyError(f"unknown key 'tools.{name}.{key}' (known: {', '.join(sorted(_TOOL_KEYS))})")
            if not isinstance(value, _TOOL_KEYS[key]) and value is not None:
                raise PolicyError(f"policy key 'tools.{name}.{key}' has the wrong type")
        if spec.get("rule") and spec["rule"] not in RULES:
            raise PolicyError(f"policy key 'tools.{name}.rule' names an unknown rule '{spec['rule']}' "
                              f"(known: {', '.join(sorted(RULES))})")
        if spec.get("verdict", "allow") not in VERDICTS:
            raise PolicyError(f"policy key 'tools.{name}.verdict' must be one of {', '.join(VERDICTS)}")
        if spec.get("root", False) not in (True, False, "paths"):
            raise PolicyError(f"policy key 'tools.{name}.root' must be true, false or 'paths'")
        types = list((spec.get("options") or {}).values()) + [(spec.get("operands") or {}).get("type")]
        for vtype in types:
            if vtype is not None and vtype != "path" and vtype not in policy["value_types"]:
                raise PolicyError(f"policy key 'tools.{name}' uses the unknown value type '{vtype}'")
    for index, entry in enumerate(policy["critical_patterns"]):
        if set(entry) != {"pattern", "verdict", "reason"} or entry.get("verdict") not in ("reject", "approval"):
            raise PolicyError(f"policy key 'critical_patterns[{index}]' needs exactly pattern, reason and "
                              "verdict (reject or approval)")
    for key in ("secret_paths", "protected_paths", "system_paths", "routine_removals"):
        for path in policy[key]:
            if not path.startswith("/"):
                raise PolicyError(f"policy key '{key}' holds '{path}', which is not an absolute path")


def _compile(policy: dict[str, Any]) -> dict[str, Any]:
    def segments(paths: list[str]) -> list[tuple[str, ...]]:
        return [tuple(p.strip("/").split("/")) if p != "/" else () for p in paths]

    compiled: dict[str, Any] = {
        key: segments(policy[key])
        for key in ("secret_paths", "protected_paths", "system_paths", "routine_removals")
    }
    try:
        compiled["value_types"] = {name: re.compile(rx) for name, rx in policy["value_types"].items()}
    except re.error as exc:
        raise PolicyError(f"policy key 'value_types' holds an invalid regular expression: {exc}") from None
    patterns = []
    for index, entry in enumerate(policy["critical_patterns"]):
        try:
            patterns.append((re.compile(entry["pattern"]), REJECT if entry["verdict"] == "reject" else APPROVAL,
                             str(entry["reason"])))
        except (re.error, TypeError) as exc:
            raise PolicyError(f"policy key 'critical_patterns[{index}].pattern' is invalid: {exc}") from None
    compiled["critical_patterns"] = patterns
    compiled["absent"] = frozenset(policy["absent_tools"])
    return compiled


def load_policy(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The default policy deep-merged with overrides, validated and compiled."""
    global _DEFAULT_CACHE
    if overrides is None and _DEFAULT_CACHE is not None:
        return _DEFAULT_CACHE
    if overrides is not None and not isinstance(overrides, Mapping):
        raise PolicyError(f"the policy must be a mapping, not {type(overrides).__name__}")
    merged = _merge(_read_defaults(), overrides or {}, "")
    _validate(merged)
    policy = LoadedPolicy(merged)
    policy.compiled = _compile(merged)
    if overrides is None:
        _DEFAULT_CACHE = policy
    return policy


def _as_policy(policy: Mapping[str, Any] | None) -> LoadedPolicy:
    """Accept a loaded policy as is; treat any other mapping as overrides."""
    if isinstance(policy, LoadedPolicy):
        return policy
    return load_policy(policy)  # type: ignore[return-value]


def _verdict(command: Any, level: int, reasons: list[str], argv: list[str] | None, shown: str) -> dict[str, Any]:
    unique: list[str] = []
    for reason in reasons:
        if reason not in unique:
            unique.append(reason)
    return {
        "command": command,
        "verdict": VERDICTS[level],
        "reasons": unique[:_MAX_REASONS],
        "argv": argv if level != REJECT else None,
        "display": shown,
    }


def classify(command: str, policy: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Classify one proposed command. Never raises on any command value."""
    loaded = _as_policy(policy)
    if not isinstance(command, str):
        shown = display(repr(command), 200)
        return _verdict(command, REJECT, [f"a command must be a string, not {type(command).__name__}"], None, shown)
    try:
        return _classify(command, loaded)
    except Exception as exc:  # fail closed: a bug here must never let a command through
        return _verdict(command, REJECT, [f"the policy engine failed on this command ({type(exc).__name__})"],
                        None, display(command))


def _classify(command: str, policy: LoadedPolicy) -> dict[str, Any]:
    text = str(command)
    shown = display(text)
    reasons = check_characters(text, int(policy["max_length"]))
    if reasons:
        return _verdict(command, REJECT, reasons, None, shown)
    findings: list[tuple[int, str]] = []
    critical = policy.compiled["critical_patterns"]
    for pattern, level, reason in critical:
        if pattern.search(text):
            findings.append((level, reason))
    parsed = parse_command(text)
    if parsed.argv is None:
        return _verdict(command, REJECT, [r for lvl, r in findings if lvl == REJECT] + parsed.reasons, None, shown)
    argv = parsed.argv
    joined = " ".join(argv)
    for pattern, level, reason in critical:
        if (level, reason) not in findings and pattern.search(joined):
            findings.append((level, reason))

    had_sudo, index = resolve_wrappers(argv, policy, findings)
    check: Check | None = None
    if index >= 0:
        check = _check_tool(argv, index, policy, findings)
    level = max((finding[0] for finding in findings), default=ALLOW)
    if level == REJECT or check is None:
        rejects = [r for lvl, r in findings if lvl == REJECT] or ["the command could not be resolved to a tool"]
        return _verdict(command, REJECT, rejects, None, shown)
    start = 1 if had_sudo else 0
    if had_sudo and argv[1:2] == ["-n"]:
        start = 2
    needs_sudo = check.root or had_sudo
    final = (["sudo"] if needs_sudo else []) + argv[start:]
    if level == APPROVAL:
        return _verdict(command, APPROVAL, [r for lvl, r in findings if lvl == APPROVAL], final, shown)
    note = f"`{check.tool}` with these arguments is allowed"
    if needs_sudo:
        note += "; runs as root (sudo)" if check.root else "; runs with the sudo it asked for"
    return _verdict(command, ALLOW, [note], final, shown)


def _check_tool(argv: list[str], index: int, policy: LoadedPolicy,
                findings: list[tuple[int, str]]) -> Check | None:
    tool = tool_name(argv[index], findings)
    if tool is None:
        return None
    shown = quote_token(tool)
    if tool in policy["forbidden_tools"]:
        findings.append((REJECT, policy["forbidden_tools"][tool].replace("`{tool}`", shown)))
        return None
    if tool.startswith("mkfs.") or tool.startswith("mkfs"):
        findings.append((REJECT, f"{shown} formats a disk; never proposed automatically"))
        return None
    if tool in policy.compiled["absent"]:
        hint = policy["absent_tool_hints"].get(tool, "propose a tool the host has")
        findings.append((REJECT, f"{shown} is not installed on this host; {hint}"))
        return None
    spec = policy["tools"].get(tool)
    if spec is None:
        findings.append((REJECT, f"{shown} is not in the policy's allowed tools; propose a tool from the "
                                 "allowlist (service, kill, ss, ps, tail, mkdir, ...)"))
        return None
    check = Check(tool, argv[index + 1:], spec, policy)
    RULES[spec.get("rule") or "generic"](check)
    finish_generic(check)
    findings.extend(check.findings)
    return check


def classify_many(commands: Sequence[Any], policy: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Classify each command in order (one verdict per input)."""
    if isinstance(commands, (str, bytes)) or not isinstance(commands, Sequence):
        raise PolicyError("commands must be a list of command strings")
    loaded = _as_policy(policy)
    return [classify(command, loaded) for command in commands]


def ensure_sudo(command: str, policy: Mapping[str, Any] | None = None) -> str:
    """Prefix ``sudo`` when the policy says the command's tool needs root.

    Only a formatting helper: a rejected command comes back unchanged (and stays
    rejected by ``classify``); nothing is made acceptable by this function.
    """
    if not isinstance(command, str):
        raise PolicyError(f"ensure_sudo expects a command string, not {type(command).__name__}")
    result = classify(command, policy)
    argv = result["argv"]
    stripped = command.strip(" ")
    if argv and argv[0] == "sudo" and not stripped.startswith("sudo "):
        return f"sudo {stripped}"
    return command
