# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turning an LLM's answer into a plan: strict JSON first, then tolerant text parsing.

Servers that honour structured outputs return the JSON object of ``plan_schema``;
others wrap it in markdown fences, add prose around it, or answer with a numbered
list.  Everything here is pure: the answer is data, nothing in it is executed.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_ANSWER_CHARS = 64 * 1024
MAX_COMMAND_CHARS = 500


class PlanParseError(ValueError):
    """An answer that holds no usable plan; ``kind`` says why."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # empty | oversize | invalid | refusal | no_commands


@dataclass
class ParsedPlan:
    diagnosis: str
    commands: list[str]
    rationale: str = ""
    mode: str = "json"  # json | json_embedded | text
    notes: list[str] = field(default_factory=list)
    escalate: bool = False


def plan_schema(max_commands: int) -> dict:
    """The JSON schema sent as ``response_format`` (strict structured outputs)."""
    return {
        "type": "object",
        "properties": {
            "diagnosis": {"type": "string", "description": "What is wrong, in one or two sentences."},
            "commands": {
                "type": "array",
                "items": {"type": "string", "description": "One shell command, no chaining."},
                "minItems": 1,
                "maxItems": max_commands,
            },
            "rationale": {"type": "string", "description": "Why these commands fix it, briefly."},
            "escalate": {"type": "boolean",
                         "description": "True when only a human can fix it: the commands then only show the problem."},
        },
        "required": ["diagnosis", "commands", "rationale", "escalate"],
        "additionalProperties": False,
    }


_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry,? (?:but )?i|i can(?:'|no)t (?:help|assist|comply|do that|provide)"
    r"|i cannot (?:help|assist|comply|provide)|i won'?t|as an ai\b|i'?m not able to|i am not able to|i must decline)",
    re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*+•])\s+(.*\S)\s*$")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_PROMPT = re.compile(r"^\s*(?:\$|#|>)\s+")
_SHELLS = {"bash", "sh", "shell", "console", "shell-session", "zsh", ""}
_VERBS = frozenset("""service systemctl kill pkill rm mv cp mkdir chown chmod chgrp ln touch truncate
nginx redis-cli redis-server ss ps pgrep df du find ls cat tail head grep ip sed tee apt-get dpkg
sshd cron crontab test echo printf install logrotate mount umount sleep true sync""".split())


def _clean_command(text: str) -> str:
    command = _PROMPT.sub("", str(text).strip())
    command = command.strip().strip("`").strip()
    command = re.sub(r"^sudo\s+(?:-n\s+)?", "", command)
    return command


def _from_json_object(data, mode: str) -> ParsedPlan:
    if isinstance(data, list):
        data = {"commands": data}
    if not isinstance(data, dict):
        raise PlanParseError("invalid", "the JSON answer is not an object")
    raw = data.get("commands", data.get("plan", data.get("steps")))
    human = _asks_for_human(data)
    if raw is None and human:
        raw = []
    if raw is None:
        raise PlanParseError("invalid", "the JSON answer has no 'commands'")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise PlanParseError("invalid", "'commands' is not a list")
    commands = []
    for item in raw:
        if isinstance(item, dict):
            item = item.get("command") or item.get("cmd") or ""
        if isinstance(item, list):  # an argv
            item = " ".join(str(a) for a in item)
        if isinstance(item, str) and item.strip():
            commands.append(_clean_command(item))
    diagnosis = str(data.get("diagnosis") or data.get("analysis") or "").strip()
    plan = ParsedPlan(diagnosis=diagnosis, commands=commands,
                      rationale=str(data.get("rationale") or "").strip(), mode=mode)
    plan.escalate = human or diagnosis.upper().startswith("ESCALATE")
    return plan


# How models say "a human must do this" besides the schema's own field.
_HUMAN_FLAGS = ("escalate", "needs_human", "requires_human", "human_required", "needs_approval_by_human")


def _asks_for_human(data: dict) -> bool:
    for key in _HUMAN_FLAGS:
        value = data.get(key)
        if value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1")):
            return True
    action = data.get("action") or data.get("decision")
    return isinstance(action, str) and action.strip().lower() in ("escalate", "handoff", "hand off", "human")


def _json_candidates(text: str) -> Iterable[tuple[str, str]]:
    yield text, "json"
    for match in _FENCE.finditer(text):
        yield match.group(2), "json_embedded"
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for index in range(start, len(text)):
            char = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield text[start:index + 1], "json_embedded"
                    break
        start = text.find("{", start + 1)


def _looks_like_command(text: str, known: frozenset[str]) -> bool:
    first = text.split()[0] if text.split() else ""
    return bool(re.fullmatch(r"[a-z0-9_./-]+", first)) and (first in known or "/" in first)


def _from_text(text: str, known_tools: Iterable[str]) -> ParsedPlan:
    known = _VERBS | frozenset(known_tools)
    commands: list[str] = []
    prose: list[str] = []
    fenced_spans = []
    for match in _FENCE.finditer(text):
        fenced_spans.append(match.span())
        if match.group(1).lower() not in _SHELLS:
            continue
        for line in match.group(2).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.append(_clean_command(line))
            elif line.startswith("# ") and _looks_like_command(line[2:], known):
                commands.append(_clean_command(line))
    outside = text
    for start, end in reversed(fenced_spans):
        outside = outside[:start] + "\n" + outside[end:]
    if not commands:
        for line in outside.splitlines():
            item = _LIST_ITEM.match(line)
            codes = _INLINE_CODE.findall(line)
            code_commands = [c for c in codes if _looks_like_command(_clean_command(c), known)]
            if code_commands:
                commands.extend(_clean_command(c) for c in code_commands)
            elif item and _looks_like_command(_clean_command(item.group(1)), known):
                commands.append(_clean_command(item.group(1)))
            elif _PROMPT.match(line) and _looks_like_command(_clean_command(line), known):
                commands.append(_clean_command(line))
            elif line.strip():
                prose.append(line.strip())
    else:
        prose = [line.strip() for line in outside.splitlines() if line.strip()]
    diagnosis = ""
    for line in prose:
        match = re.match(r"^\W*(?:diagnosis|problem|cause)\W*:?\s*(.+)$", line, re.IGNORECASE)
        if match:
            diagnosis = match.group(1).strip(" *")
            break
    if not diagnosis and prose:
        diagnosis = prose[0].strip(" *#")
    plan = ParsedPlan(diagnosis=diagnosis[:500], commands=commands, mode="text")
    plan.escalate = diagnosis.upper().startswith("ESCALATE")
    return plan


def parse_plan(answer: str | None, known_tools: Iterable[str] = (), refusal: str | None = None) -> ParsedPlan:
    """Parse one answer into a ``ParsedPlan`` or raise ``PlanParseError``.

    ``refusal`` is the message's ``refusal`` field (structured outputs).  Commands are
    de-duplicated (first kept), stripped of prompts, backticks and a leading ``sudo``,
    and over-long commands are dropped with a note; the caller bounds their number.
    """
    if refusal:
        raise PlanParseError("refusal", f"the model refused: {str(refusal)[:200]}")
    if answer is None or not str(answer).strip():
        raise PlanParseError("empty", "the model returned an empty answer")
    text = str(answer)
    if len(text) > MAX_ANSWER_CHARS:
        raise PlanParseError("oversize", f"the answer is {len(text)} characters (limit {MAX_ANSWER_CHARS}); cut and ignored")
    text = text.strip()
    plan = None
    for candidate, mode in _json_candidates(text):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        try:
            plan = _from_json_object(data, mode)
            break
        except PlanParseError:
            continue
    if plan is None:
        if _REFUSAL.match(text) and not _FENCE.search(text):
            raise PlanParseError("refusal", f"the model refused: {text[:200]}")
        if text.lstrip().startswith("{"):
            raise PlanParseError("invalid", "the answer is not valid JSON (cut off or malformed)")
        plan = _from_text(text, known_tools)
    unique: list[str] = []
    for command in plan.commands:
        if len(command) > MAX_COMMAND_CHARS:
            plan.notes.append(f"dropped a command of {len(command)} characters")
            continue
        if command and command not in unique:
            unique.append(command)
    plan.commands = unique
    if not plan.commands and not plan.escalate:
        if _REFUSAL.match(text):
            raise PlanParseError("refusal", f"the model refused: {text[:200]}")
        raise PlanParseError("no_commands", "the answer holds no command")
    return plan
