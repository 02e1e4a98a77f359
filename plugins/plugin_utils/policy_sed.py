# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``sed`` rule of the policy engine: what a sed script does, read the way sed reads it.

A sed script is a small program: besides editing text, its ``e`` command and ``s///e`` flag
run shell commands, ``w``/``W`` and ``s///w`` write other files, and ``r``/``R`` read other
files into the output. This rule parses the script (GNU sed syntax: addresses, ``;`` and
newline separated commands, any ``s`` delimiter, escapes) and accepts only commands that
edit the text stream: ``s`` (flags ``g p i I m M`` and a number), ``y``, ``d``, ``D``,
``p``, ``P``, ``n``, ``N``, ``=``, ``q``/``Q`` with an exit code, ``a``/``i``/``c`` text,
``l``, ``z``, ``h``/``H``/``g``/``G``/``x`` and labels/branches. Anything else is refused
with the reason.

With ``-i`` the files are edited in place: each is judged as a write (an edit of the
service's own configuration needs approval; a file of the operating system is refused),
and the effect names the script so the approver sees the edit itself. Without ``-i``,
sed only prints: each file is judged as a read.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import policy_rules as judge
from .policy_options import spec_from_table
from .policy_rules import Check, q
from .policy_tools import parse

_SED = spec_from_table({
    "-i|--in-place": "?word", "-e|--expression": "text", "-n|--quiet|--silent": None,
    "-E|-r|--regexp-extended": None, "-s|--separate": None, "-z|--null-data": None, "-u|--unbuffered": None,
    "--posix": None, "--sandbox": None, "--debug": None, "--follow-symlinks": None, "-l|--line-length": "int",
    "-b|--binary": None,
    "-f|--file": {"type": "text", "deny": "`sed -f` runs a script from a file the policy cannot see; "
                                          "give the script with `-e`"},
})
_SIMPLE = set("dDpPnNg=GhHxlzF")
_TEXT = set("aic")
_LABELS = set(":btT")
_S_FLAGS = set("gpiImM0123456789")
_MAX_SCRIPT = 1000


class SedScriptError(ValueError):
    """Why a sed script is refused (the message is the reason shown)."""


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _delimited(text: str, i: int, delim: str, what: str) -> int:
    """Index just past the part that starts at ``i`` and ends at an unescaped ``delim``."""
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "\n" and delim != "\n":
            raise SedScriptError(f"a newline inside the {what} of a sed command")
        if ch == delim:
            return i + 1
        i += 1
    raise SedScriptError(f"the {what} of a sed command is not closed by `{delim}`")


def _address(text: str, i: int) -> int:
    """Skip one address (a line number, `$`, `first~step`, `/re/` or `\\cREc`, with `I`/`M`)."""
    if i < len(text) and text[i].isdigit():
        while i < len(text) and (text[i].isdigit() or text[i] == "~"):
            i += 1
        return i
    if i < len(text) and text[i] == "$":
        return i + 1
    if i < len(text) and text[i] in "/\\":
        if text[i] == "\\":
            if i + 1 >= len(text):
                raise SedScriptError("a sed address ends after `\\`")
            delim, i = text[i + 1], i + 2
        else:
            delim, i = "/", i + 1
        i = _delimited(text, i, delim, "address")
        while i < len(text) and text[i] in "IM":
            i += 1
    return i


def parse_script(script: str) -> list[str]:
    """The commands of a sed script (one short description each); ``SedScriptError`` with
    the reason when any command can run programs, write or read other files, or is unknown."""
    if len(script) > _MAX_SCRIPT:
        raise SedScriptError(f"the sed script is longer than {_MAX_SCRIPT} characters")
    done: list[str] = []
    i = 0
    while i < len(script):
        i = _skip_blanks(script, i)
        if i >= len(script):
            break
        if script[i] in ";\n":
            i += 1
            continue
        start = i
        i = _address(script, i)
        i = _skip_blanks(script, i)
        if i < len(script) and script[i] == ",":
            i = _skip_blanks(script, i + 1)
            if i < len(script) and script[i] in "+~":
                i += 1
            i = _address(script, i)
            i = _skip_blanks(script, i)
        if i < len(script) and script[i] == "!":
            i = _skip_blanks(script, i + 1)
        if i >= len(script):
            raise SedScriptError("a sed address has no command")
        cmd = script[i]
        i += 1
        if cmd in "s":
            if i >= len(script) or script[i] in "\\\n":
                raise SedScriptError("`s` needs a delimiter such as `/`")
            delim = script[i]
            i = _delimited(script, i + 1, delim, "pattern")
            i = _delimited(script, i, delim, "replacement")
            flags_start = i
            while i < len(script) and script[i] not in ";\n}" and script[i] not in " \t":
                if script[i] not in _S_FLAGS:
                    flag = script[i]
                    if flag == "e":
                        raise SedScriptError("the `e` flag of `s` runs the result as a shell command")
                    if flag in "wW":
                        raise SedScriptError("the `w` flag of `s` writes to another file")
                    raise SedScriptError(f"`s` has an unknown flag `{flag}`")
                i += 1
            done.append(script[start:i].strip() or script[start:flags_start])
        elif cmd == "y":
            if i >= len(script):
                raise SedScriptError("`y` needs a delimiter")
            delim = script[i]
            i = _delimited(script, i + 1, delim, "source")
            i = _delimited(script, i, delim, "destination")
            done.append(script[start:i].strip())
        elif cmd in _TEXT:
            # `a text`, `a\` newline text: the rest of the line is text, never a command.
            end = script.find("\n", i)
            end = len(script) if end < 0 else end
            while end < len(script) and script[end - 1] == "\\":
                nxt = script.find("\n", end + 1)
                end = len(script) if nxt < 0 else nxt
            done.append(script[start:end].strip())
            i = end
        elif cmd in "qQ":
            i = _skip_blanks(script, i)
            while i < len(script) and script[i].isdigit():
                i += 1
            done.append(script[start:i].strip())
        elif cmd in _LABELS:
            end = i
            while end < len(script) and script[end] not in ";\n":
                end += 1
            done.append(script[start:end].strip())
            i = end
        elif cmd in _SIMPLE:
            done.append(script[start:i].strip())
        elif cmd == "e":
            raise SedScriptError("the sed command `e` runs a shell command")
        elif cmd in "wW":
            raise SedScriptError(f"the sed command `{cmd}` writes to another file")
        elif cmd in "rR":
            raise SedScriptError(f"the sed command `{cmd}` reads another file into the output")
        elif cmd in "{}":
            raise SedScriptError("sed command blocks (`{ }`) are not accepted; write one command per address")
        elif cmd == "v":
            done.append("v")
        else:
            raise SedScriptError(f"`{cmd}` is not a sed command this policy knows")
        i = _skip_blanks(script, i)
        if i < len(script) and script[i] not in ";\n":
            raise SedScriptError(f"unexpected `{script[i]}` after a sed command")
    if not done:
        raise SedScriptError("the sed script is empty")
    return done


def sed(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _SED, args)
    if chk.rejected:
        return
    scripts = [text for name, text in parsed.options if name == "-e"]
    operands = list(parsed.operands)
    if not scripts:
        if not operands:
            chk.reject("`sed` needs a script")
            return
        scripts, operands = [operands[0]], operands[1:]
    if not operands:
        chk.reject("`sed` needs the file(s) to read or edit (commands run without input)")
        return
    if len(operands) > 8:
        chk.reject("`sed` on more than 8 files at once is a mass edit; name fewer files")
        return
    try:
        commands = [c for script in scripts for c in parse_script(script)]
    except SedScriptError as exc:
        chk.reject(f"{exc}; propose a sed script that only edits text (e.g. `sed -i 's/OLD/NEW/' FILE`)")
        return
    in_place = parsed.has("-i")
    shown = "; ".join(commands)
    shown = shown if len(shown) <= 160 else shown[:157] + "..."
    for item in operands:
        if in_place:
            found = judge.path(chk, item, "write", what=f"applies `{shown}` to")
            suffix = parsed.last("-i")
            if found is not None and suffix:
                if "/" in suffix or "*" in suffix:
                    chk.reject(f"a backup suffix with `/` or `*` ({q(suffix)}) writes elsewhere; use a plain suffix")
                    return
                judge.path(chk, found + suffix, "create", what="keeps the original at")
        else:
            judge.path(chk, item, "read", what="prints (edited) lines of")


RULES = {"sed": sed}
