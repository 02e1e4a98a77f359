# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option parsing for the policy engine, the way the tools themselves parse.

Most tools use GNU ``getopt_long``: short flags combine (``-ltnp``), a short option
that takes a value takes the rest of its word or the next word (``-n5``, ``-n 5``),
long options take ``--name=value`` or ``--name value``, an optional value only with
``=``, ``--`` ends the options, and options may follow operands (permutation) unless
the tool stops at its first operand. A word the tool would read differently from us
is refused: unknown options, and long options abbreviated (``--ins`` for
``--insert``), which getopt would silently expand.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

FLAG, REQUIRED, OPTIONAL = 0, 1, 2
_NUMERIC = re.compile(r"^-[0-9]+$")


class Option:
    """One option of a tool: its canonical name, how it takes a value, its value type."""

    __slots__ = ("name", "arg", "vtype", "deny", "approval")

    def __init__(self, name: str, arg: int = FLAG, vtype: str | None = None,
                 deny: str | None = None, approval: str | None = None) -> None:
        self.name = name
        self.arg = arg
        self.vtype = vtype
        self.deny = deny
        self.approval = approval


class OptionSpec:
    """The options a tool accepts, compiled for fast lookup."""

    __slots__ = ("short", "long", "permute", "numeric", "bundle", "alias")

    def __init__(self, options: Iterable[Option], *, permute: bool = True, numeric: str | None = None,
                 bundle: bool = True, alias: Mapping[str, str] | None = None) -> None:
        self.short: dict[str, Option] = {}
        self.long: dict[str, Option] = {}
        for option in options:
            (self.long if option.name.startswith("--") else self.short)[option.name] = option
        self.permute = permute
        self.numeric = numeric        # e.g. "-n": `head -20` means `head -n 20`
        self.bundle = bundle          # short flags may combine (-ltn)
        self.alias = dict(alias or {})  # other names -> canonical (e.g. --lines -> -n)


def spec_from_table(table: Mapping[str, Any], *, permute: bool = True, numeric: str | None = None,
                    bundle: bool = True, alias: Mapping[str, str] | None = None) -> OptionSpec:
    """Build a spec from ``{name: None | vtype | "?vtype" | {deny: ...} | {approval: ..., type: ...}}``.

    ``None`` is a flag, a string a required value of that type, ``"?type"`` an optional
    value (attached only), a mapping a flag or value with a deny or approval reason.
    Several names separated by ``|`` share one entry (``"-n|--lines": int``); the first
    is canonical.
    """
    options: list[Option] = []
    aliases: dict[str, str] = dict(alias or {})
    for key, value in table.items():
        names = key.split("|")
        deny = approval = None
        if isinstance(value, Mapping):
            deny = value.get("deny")
            approval = value.get("approval")
            value = value.get("type")
        if value is None:
            arg, vtype = FLAG, None
        elif value.startswith("?"):
            arg, vtype = OPTIONAL, value[1:]
        else:
            arg, vtype = REQUIRED, value
        for name in names:
            options.append(Option(name, arg, vtype, deny, approval))
            if name != names[0]:
                aliases[name] = names[0]
    return OptionSpec(options, permute=permute, numeric=numeric, bundle=bundle, alias=aliases)


class Parsed:
    """Options in order as (canonical name, value or None), operands, and problems."""

    __slots__ = ("options", "operands", "problems", "approvals", "end_seen")

    def __init__(self) -> None:
        self.options: list[tuple[str, str | None]] = []
        self.operands: list[str] = []
        self.problems: list[str] = []
        self.approvals: list[str] = []
        self.end_seen = False

    def has(self, *names: str) -> bool:
        for name, _value in self.options:
            if name in names:
                return True
        return False

    def last(self, *names: str) -> str | None:
        """The value of the last occurrence (tools keep the last `-c FILE`)."""
        found = None
        for name, value in self.options:
            if name in names:
                found = value
        return found

    def values(self, *names: str) -> list[str]:
        return [value for name, value in self.options if name in names and value is not None]

    def count(self, *names: str) -> int:
        return sum(1 for name, _value in self.options if name in names)


def _unknown(tool: str, word: str, spec: OptionSpec) -> str:
    if word.startswith("--"):
        name = word.partition("=")[0]
        full = sorted(n for n in spec.long if n.startswith(name))
        if full:
            return (f"`{tool} {name}` abbreviates `{full[0]}`; write options in full so the policy "
                    "reads them exactly as the tool does")
        return f"`{name}` is not an option of `{tool}` this policy knows"
    return f"`{word}` is not an option of `{tool}` this policy knows"


def _record(parsed: Parsed, spec: OptionSpec, option: Option, value: str | None, tool: str) -> None:
    if option.deny:
        parsed.problems.append(option.deny.replace("{tool}", tool))
        return
    if option.approval:
        parsed.approvals.append(option.approval.replace("{tool}", tool))
    parsed.options.append((spec.alias.get(option.name, option.name), value))


def parse_options(spec: OptionSpec, args: list[str], tool: str) -> Parsed:
    """Split ``args`` into options and operands as the tool would."""
    parsed = Parsed()
    i = 0
    n = len(args)
    while i < n:
        word = args[i]
        i += 1
        if parsed.end_seen or word == "-" or not word.startswith("-"):
            parsed.operands.append(word)
            if not spec.permute and not parsed.end_seen:
                parsed.end_seen = True
            continue
        if word == "--":
            parsed.end_seen = True
            continue
        if word.startswith("--"):
            name, eq, inline = word.partition("=")
            option = spec.long.get(name)
            if option is None:
                parsed.problems.append(_unknown(tool, word, spec))
                continue
            if option.arg == FLAG:
                if eq:
                    parsed.problems.append(f"`{tool} {name}` takes no value")
                    continue
                _record(parsed, spec, option, None, tool)
            elif option.arg == OPTIONAL:
                _record(parsed, spec, option, inline if eq else None, tool)
            else:
                if not eq:
                    if i >= n:
                        parsed.problems.append(f"`{tool} {name}` needs a value")
                        continue
                    inline = args[i]
                    i += 1
                _record(parsed, spec, option, inline, tool)
            continue
        if spec.numeric and _NUMERIC.match(word) and word not in spec.short:
            _record(parsed, spec, spec.short[spec.numeric], word[1:], tool)
            continue
        whole = spec.short.get(word)
        if whole is not None and (not spec.bundle or len(word) > 2):
            # A multi-letter short option (`-br`, `-nvL` is NOT one) or a tool without bundling.
            if whole.arg == FLAG:
                _record(parsed, spec, whole, None, tool)
            elif whole.arg == OPTIONAL:
                _record(parsed, spec, whole, None, tool)
            else:
                if i >= n:
                    parsed.problems.append(f"`{tool} {word}` needs a value")
                    continue
                _record(parsed, spec, whole, args[i], tool)
                i += 1
            continue
        if not spec.bundle:
            parsed.problems.append(_unknown(tool, word, spec))
            continue
        pos = 1
        while pos < len(word):
            name = "-" + word[pos]
            option = spec.short.get(name)
            pos += 1
            if option is None:
                parsed.problems.append(_unknown(tool, name if len(word) > 2 else word, spec))
                break
            if option.arg == FLAG:
                _record(parsed, spec, option, None, tool)
                continue
            rest = word[pos:]
            if option.arg == OPTIONAL:
                _record(parsed, spec, option, rest or None, tool)
                break
            if not rest:
                if i >= n:
                    parsed.problems.append(f"`{tool} {name}` needs a value")
                    break
                rest = args[i]
                i += 1
            _record(parsed, spec, option, rest, tool)
            break
    return parsed
