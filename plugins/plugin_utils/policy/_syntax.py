# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Syntax layer of the policy engine: characters, shell structure, plain words.

A proposed command is accepted by this layer only when it is one simple command
made of plain words. Two independent checks have to agree:

1. tree-sitter-bash parses the text; the tree must be exactly ``program > command``
   with no error nodes, no operators, redirections, expansions or assignments.
2. every argument's source text must match a tiny quoting grammar of our own
   (unquoted safe characters, ``'...'`` and ``"..."`` without anything bash
   expands inside), and the text between the words must be plain spaces.

The second check alone already defines what can be executed; the parser is
there so that anything outside that grammar is rejected with a precise reason,
and as a second opinion on word boundaries. Everything fails closed.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Any

from ansible_collections.sentinel.remediation.plugins.plugin_utils.requirements import missing_package

try:  # the engine still loads without the parser; it then rejects everything
    import tree_sitter as _ts
    import tree_sitter_bash as _tsb

    _PARSER: Any = _ts.Parser(_ts.Language(_tsb.language()))
    _PARSER_ERROR = ""
except Exception as exc:  # pragma: no cover - depends on the installation
    _PARSER = None
    _PARSER_ERROR = f"{type(exc).__name__}: {exc}"
# Which package to install: the binding (tree-sitter) or the grammar (tree-sitter-bash).
_PARSER_MISSING = missing_package("tree_sitter_bash" if "tree_sitter_bash" in _PARSER_ERROR else "tree_sitter")

# Characters that bash never treats specially outside quotes (no globbing,
# expansion, quoting, comments or operators). `=` is handled separately.
_SAFE_UNQUOTED = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-"
)
# Inside double quotes bash still expands `$`, backticks, `\` and (interactively) `!`.
_UNSAFE_IN_DOUBLE = frozenset('$`\\!')

_ZERO_WIDTH = {"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"}
_NBSP = {"\u00a0", "\u2007", "\u202f"}

# Reasons keyed by tree-sitter-bash node types that mean "more than one plain command".
_NODE_REASONS: dict[str, str] = {
    "pipeline": "a pipe (`|`) feeds a second command; propose one command per item",
    "redirected_statement": "redirections (`>`, `<`, `2>&1`) need a shell; commands run without one",
    "file_redirect": "redirections (`>`, `<`, `2>&1`) need a shell; commands run without one",
    "heredoc_redirect": "here-documents (`<<`) need a shell; commands run without one",
    "heredoc_start": "here-documents (`<<`) need a shell; commands run without one",
    "herestring_redirect": "here-strings (`<<<`) need a shell; commands run without one",
    "command_substitution": "command substitution (`$(...)` or backticks) runs a hidden second command",
    "process_substitution": "process substitution (`<(...)`, `>(...)`) runs a hidden second command",
    "simple_expansion": "parameter expansion (`$NAME`) lets the environment change the command; write the value out",
    "expansion": "parameter expansion (`${...}`) lets the environment change the command; write the value out",
    "arithmetic_expansion": "arithmetic expansion (`$((...))`) is shell syntax; write the number out",
    "ansi_c_string": "ANSI-C quoting (`$'...'`) can hide characters; use plain quotes",
    "translated_string": "locale quoting (`$\"...\"`) is shell syntax; use plain quotes",
    "brace_expression": "brace expansion (`{a,b}`, `{1..3}`) turns one word into several; list the words",
    "subshell": "subshells (`( ... )`) need a shell; propose the command alone",
    "compound_statement": "command groups (`{ ...; }`) need a shell; propose one command",
    "function_definition": "defining a shell function is not a command (and `:(){ :|:& };:` is a fork bomb)",
    "variable_assignment": "assignments (`NAME=value`) before or instead of a command change its environment",
    "negated_command": "`!` negation is shell syntax; propose the plain command",
    "test_command": "`[[ ... ]]` and `[ ... ]` tests are shell syntax, not a remediation",
    "declaration_command": "`export`/`declare`/`local` are shell builtins; commands run without a shell",
    "unset_command": "`unset` is a shell builtin; commands run without a shell",
    "comment": "`#` starts a shell comment; leave comments out of commands",
    "if_statement": "`if` is shell control flow; propose one command per item",
    "for_statement": "loops are shell control flow; propose one command per item",
    "c_style_for_statement": "loops are shell control flow; propose one command per item",
    "while_statement": "loops are shell control flow; propose one command per item",
    "case_statement": "`case` is shell control flow; propose one command per item",
    "array": "array assignments are shell syntax",
}

_OPERATOR_REASONS: dict[str, str] = {
    "&&": "`&&` chains a second command; propose one command per item",
    "||": "`||` chains a second command; propose one command per item",
    ";": "`;` separates a second command; propose one command per item",
    ";;": "`;;` is shell syntax; propose one command per item",
    "&": "`&` runs the command in the background (or chains another); propose one foreground command",
    "|": "a pipe (`|`) feeds a second command; propose one command per item",
    "|&": "a pipe (`|&`) feeds a second command; propose one command per item",
}

_ANSI_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07?|.)?")


class ParsedCommand:
    """Result of the syntax layer: the argv when accepted, else the reasons."""

    __slots__ = ("argv", "reasons")

    def __init__(self, argv: list[str] | None, reasons: list[str]) -> None:
        self.argv = argv
        self.reasons = reasons


def display(text: str, limit: int = 400) -> str:
    """Printable, unambiguous ASCII form of untrusted text for an approver."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text if len(text) <= limit else f"{text[:limit]}...[{len(text) - limit} more characters]"
    out: list[str] = []
    size = 0
    for index, ch in enumerate(text):
        if size >= limit:
            out.append(f"...[{len(text) - index} more characters]")
            break
        code = ord(ch)
        if ch == "\\":
            piece = "\\\\"
        elif 32 <= code < 127:
            piece = ch
        elif ch == "\n":
            piece = "\\n"
        elif ch == "\r":
            piece = "\\r"
        elif ch == "\t":
            piece = "\\t"
        elif code < 256:
            piece = f"\\x{code:02x}"
        elif code < 0x10000:
            piece = f"\\u{code:04x}"
        else:
            piece = f"\\U{code:08x}"
        out.append(piece)
        size += len(piece)
    return "".join(out)


def shell_join(argv: Iterable[str]) -> str:
    """The whole argv as one shell-escaped line for approvers: never truncated, nothing hidden.

    Words reaching here passed the character check (printable ASCII), so quoting is enough;
    anything else is escaped first rather than shown raw.
    """
    return " ".join(shlex.quote(word if word.isascii() and word.isprintable() else display(word, len(word) * 10 + 10))
                    for word in argv)


def quote_token(token: str, limit: int = 60) -> str:
    """An untrusted token as it may appear inside an operator-facing reason."""
    shown = display(token, limit)
    return f"`{shown}`"


def check_characters(text: str, max_length: int) -> list[str]:
    """Reasons for characters that have no place in a remediation command."""
    if len(text) > max_length:
        return [f"the command is {len(text)} characters long (limit {max_length}); propose a short command"]
    if not text.strip():
        return ["the command is empty"]
    reasons: list[str] = []
    if text.isascii() and text.isprintable():
        return reasons
    seen: set[str] = set()

    def add(reason: str) -> None:
        if reason not in seen:
            seen.add(reason)
            reasons.append(reason)

    if "\x1b" in text:
        add("it contains ANSI escape sequences (terminal control codes); they can hide what the command does")
    if "\\\n" in text:
        add("a backslash-newline continues the line; propose the command on one line")
    elif "\n" in text:
        add("a line break separates a second command; propose one command per item, on one line")
    if "\r" in text:
        add("a carriage return can hide part of the command on screen; it is not allowed")
    for ch in text:
        code = ord(ch)
        if ch in "\n\r\x1b":
            continue
        if code < 32 or code == 127:
            add(f"it contains a control character ({display(ch)}); only printable ASCII is allowed")
        elif ch in _ZERO_WIDTH:
            add(f"it contains an invisible zero-width character ({display(ch)}); retype the command in plain ASCII")
        elif ch in _NBSP:
            add(f"it contains a no-break space ({display(ch)}) that looks like a space; use plain spaces")
        elif code > 127:
            add(
                f"it contains the non-ASCII character {display(ch)}, which may imitate an ASCII letter; "
                "only printable ASCII is allowed"
            )
        if len(reasons) >= 4:
            break
    return reasons


def _walk(root: Any, limit: int = 20000) -> list[Any]:
    """All nodes under root, iteratively (hostile input may nest deeply)."""
    nodes: list[Any] = []
    stack = [root]
    while stack and len(nodes) < limit:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed(node.children))
    return nodes


def _structure_reasons(root: Any, text: str) -> list[str]:
    """Reasons why the tree is not exactly one simple command."""
    reasons: list[str] = []
    seen: set[str] = set()

    def add(reason: str) -> None:
        if reason not in seen:
            seen.add(reason)
            reasons.append(reason)

    for node in _walk(root):
        kind = node.type
        if kind == "command_substitution" and node.text[:1] == b"`":
            add("backticks (`...`) run a hidden second command")
        elif kind in _NODE_REASONS:
            add(_NODE_REASONS[kind])
        elif not node.is_named and kind in _OPERATOR_REASONS:
            add(_OPERATOR_REASONS[kind])
        elif kind in ("<", ">", ">>", "&>", "&>>", "<&", ">&", ">|", "<>"):
            add(_NODE_REASONS["file_redirect"])
        elif kind == "$":
            add("a `$` starts an expansion or special quoting; write the value out")
        elif node.is_missing or kind == "ERROR":
            add("it is not complete shell syntax (an unmatched quote, bracket or operator)")
    return reasons


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")


def _dequote(word: str) -> tuple[str | None, str | None]:
    """Our own strict reading of one word: (value, None) or (None, reason)."""
    if _PLAIN_WORD.fullmatch(word):
        return word, None
    out: list[str] = []
    i = 0
    n = len(word)
    while i < n:
        ch = word[i]
        if ch == "'":
            end = word.find("'", i + 1)
            if end < 0:
                return None, "it has an unmatched single quote"
            out.append(word[i + 1:end])
            i = end + 1
        elif ch == '"':
            end = word.find('"', i + 1)
            if end < 0:
                return None, "it has an unmatched double quote"
            inner = word[i + 1:end]
            bad = next((c for c in inner if c in _UNSAFE_IN_DOUBLE), None)
            if bad is not None:
                return None, _unsafe_char_reason(bad, quoted=True)
            out.append(inner)
            i = end + 1
        elif ch in _SAFE_UNQUOTED:
            out.append(ch)
            i += 1
        else:
            return None, _unsafe_char_reason(ch, quoted=False)
    return "".join(out), None


def _unsafe_char_reason(ch: str, quoted: bool) -> str:
    where = "inside double quotes" if quoted else "outside quotes"
    if ch in "*?[]":
        return f"`{ch}` {where} is a glob that the shell expands to file names; name the path exactly"
    if ch in "{}":
        return f"`{ch}` {where} is brace expansion or grouping; list the words explicitly"
    if ch == "~":
        return "`~` is expanded by the shell to a home directory; write the absolute path"
    if ch == "\\":
        return f"a backslash {where} is a quoting trick; write the word plainly (quote it if needed)"
    if ch == "$":
        return f"`$` {where} expands variables or commands; write the value out"
    if ch == "`":
        return f"backticks {where} run a hidden second command"
    if ch == "!":
        return "`!` inside double quotes can trigger history expansion; use single quotes"
    if ch == "#":
        return "`#` starts a shell comment; leave comments out of commands"
    if ch in "()<>|&;":
        return f"`{ch}` is a shell operator; propose one plain command"
    return f"the character `{ch}` {where} has a special meaning to the shell"


def parse_command(text: str) -> ParsedCommand:
    """Split text into argv if, and only if, it is one simple command of plain words."""
    if _PARSER is None:
        return ParsedCommand(None, [f"{_PARSER_MISSING} ({_PARSER_ERROR})"])
    try:
        tree = _PARSER.parse(text.encode("ascii"))
        root = tree.root_node
        reasons = _structure_reasons(root, text)
        named = [c for c in root.children if c.type != "comment"]
        if not reasons and (len(named) != 1 or named[0].type != "command" or root.has_error):
            reasons.append("it is not a single simple command")
        if reasons:
            return ParsedCommand(None, reasons)
        command = named[0]
        spans: list[tuple[int, int]] = []
        for child in command.children:
            if child.type == "command_name":
                spans.append((child.start_byte, child.end_byte))
            elif child.type in ("word", "number", "string", "raw_string", "concatenation"):
                spans.append((child.start_byte, child.end_byte))
            else:
                return ParsedCommand(None, [f"`{display(child.type)}` is not a plain word"])
        return _words_from_spans(text, spans)
    except Exception as exc:  # fail closed on any parser surprise
        return ParsedCommand(None, [f"the command could not be parsed safely ({type(exc).__name__})"])


def _words_from_spans(text: str, spans: list[tuple[int, int]]) -> ParsedCommand:
    argv: list[str] = []
    reasons: list[str] = []
    pos = 0
    for start, end in spans:
        # Whatever the parser skipped between words must be plain spaces.
        if start < pos or text[pos:start].strip(" "):
            return ParsedCommand(None, ["the words of the command could not be delimited safely"])
        if argv and start == pos:
            return ParsedCommand(None, ["the words of the command could not be delimited safely"])
        value, reason = _dequote(text[start:end])
        if reason:
            if reason not in reasons:
                reasons.append(reason)
        else:
            argv.append(value or "")
        pos = end
    if text[pos:].strip(" "):
        return ParsedCommand(None, ["text after the command is not part of it"])
    if reasons:
        return ParsedCommand(None, reasons)
    if not argv:
        return ParsedCommand(None, ["the command is empty"])
    if "=" in argv[0] and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", text.lstrip(" ")):
        return ParsedCommand(None, [_NODE_REASONS["variable_assignment"]])
    return ParsedCommand(argv, [])
