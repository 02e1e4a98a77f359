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

from . import _destinations as destinations
from . import _rules as judge
from ._options import spec_from_table
from ._rules import Check, q
from ._tools import parse

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
# A label (`:a`, `ba`, `t done`): GNU sed ends it at whitespace, `;`, a newline or `}`, and
# reads what follows as the next command. Only plain names are accepted, so the label this
# parser sees ends exactly where GNU sed's does; `: a` or `b x y` is refused.
_LABEL_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_MAX_SCRIPT = 1000


class SedScriptError(ValueError):
    """Why a sed script is refused (the message is the reason shown)."""


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _delimited(text: str, i: int, delim: str, what: str) -> int:
    """Index just past the part that starts at ``i`` and ends at an unescaped ``delim``
    (GNU sed's ``match_slash``: a backslash takes the next character, a bare newline is an error)."""
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "\n":
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
            if i + 1 >= len(text) or text[i + 1] in "\\\n":
                raise SedScriptError("a sed address `\\c...c` needs a delimiter other than `\\` or a newline")
            delim, i = text[i + 1], i + 2
        else:
            delim, i = "/", i + 1
        i = _delimited(text, i, delim, "address")
        while i < len(text) and text[i] in "IM":
            i += 1
    return i


def _text_end(text: str, i: int) -> int:
    """Where the text of `a`, `i` or `c` ends, read as GNU sed's ``read_text`` reads it: after
    optional blanks and one `\\` (with its newline), a backslash takes the next character
    (`\\` + newline continues the text, `\\\\` is one backslash) and a bare newline ends it."""
    i = _skip_blanks(text, i)
    if i < len(text) and text[i] == "\\":
        i += 1
        if i < len(text) and text[i] == "\n":
            i += 1
    while i < len(text) and text[i] != "\n":
        i += 2 if text[i] == "\\" else 1
    return min(i, len(text))


def _label_end(text: str, i: int, cmd: str) -> int:
    i = _skip_blanks(text, i)
    start = i
    while i < len(text) and text[i] in _LABEL_CHARS:
        i += 1
    if cmd == ":" and i == start:
        raise SedScriptError("`:` needs a label name")
    if i < len(text) and text[i] not in ";\n" and text[i] not in " \t":
        raise SedScriptError(f"a sed label may hold only letters, digits, `_`, `.` and `-` (found `{text[i]}`); "
                             "GNU sed would end the label there and read the rest as another command")
    return i


def parse_script(script: str) -> list[str]:
    """The commands of a sed script (one short description each); ``SedScriptError`` with
    the reason when any command can run programs, write or read other files, or is unknown.

    Several ``-e`` scripts are joined with newlines first, as GNU sed joins them. The accepted
    grammar is a strict subset of GNU sed's: where GNU sed would read a construct one way and
    a looser parser another (labels, text continuation, multibyte delimiters), it is refused."""
    if len(script) > _MAX_SCRIPT:
        raise SedScriptError(f"the sed script is longer than {_MAX_SCRIPT} characters")
    odd = next((ch for ch in script if not (" " <= ch <= "~" or ch in "\n\t")), None)
    if odd is not None:
        raise SedScriptError(f"the sed script holds {odd!r}, a character outside printable ASCII (GNU sed reads "
                             "such bytes by its locale)")
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
            while i < len(script) and script[i] not in ";\n" and script[i] not in " \t":
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
            if i >= len(script) or script[i] in "\\\n":
                raise SedScriptError("`y` needs a delimiter such as `/`")
            delim = script[i]
            i = _delimited(script, i + 1, delim, "source")
            i = _delimited(script, i, delim, "destination")
            done.append(script[start:i].strip())
        elif cmd in _TEXT:
            # `a text`, `a\` newline text: text up to the first newline no backslash escapes.
            end = _text_end(script, i)
            done.append(script[start:end].strip())
            i = end
        elif cmd in "qQ":
            i = _skip_blanks(script, i)
            while i < len(script) and script[i].isdigit():
                i += 1
            done.append(script[start:i].strip())
        elif cmd in _LABELS:
            i = _label_end(script, i, cmd)
            done.append(script[start:i].strip())
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


def _follows_links(parsed: Any) -> bool:
    return bool(parsed.has("-i") and parsed.has("--follow-symlinks"))


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
    if _follows_links(parsed):
        chk.reject("`sed -i --follow-symlinks` edits whatever file a link points at, not the file named; "
                   "edit the real path")
        return
    try:
        # GNU sed joins its `-e` scripts with newlines before reading them: so does the parser.
        commands = parse_script("\n".join(scripts))
    except SedScriptError as exc:
        chk.reject(f"{exc}; propose a sed script that only edits text (e.g. `sed -i 's/OLD/NEW/' FILE`)")
        return
    in_place = parsed.has("-i")
    shown = "; ".join(commands)
    shown = shown if len(shown) <= 160 else shown[:157] + "..."
    for item in operands:
        if in_place:
            found = judge.path(chk, item, "write", what=f"applies `{shown}` to")
            if found is not None and not destinations.pid_file_content(chk, found, f"applies `{shown}` to"):
                return
            suffix = parsed.last("-i")
            if found is not None and suffix:
                if "/" in suffix or "*" in suffix:
                    chk.reject(f"a backup suffix with `/` or `*` ({q(suffix)}) writes elsewhere; use a plain suffix")
                    return
                judge.path(chk, found + suffix, "create", what="keeps the original at")
        else:
            judge.path(chk, item, "read", what="prints (edited) lines of")


RULES = {"sed": sed}
