# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small OpenAI-compatible chat server for tests and benchmarks (standard library only).

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` well enough for the real
``openai`` client (and Azure OpenAI's ``/openai/deployments/<name>/chat/completions?api-version=``
routes), on 127.0.0.1 only, and answers each chat request from the first of these that has
an answer:

1. a queue of scripted replies (``server.queue(...)``, or ``replies`` in a script file);
2. rules: the first whose ``match`` regex finds the request's messages text
   (``rules``: ``[{"match": "nginx.*Address already in use", "reply": {...}}]``); a rule's
   ``capture`` regex takes its first group from the request into ``{capture}`` of the reply;
3. replay (``--replay DIR``): recorded transcripts, matched by a stable key (below);
4. relay (``--relay DIR``): a person or another program plays the model through files;
5. upstream (``--upstream URL``): the request is forwarded to a real OpenAI-compatible endpoint;
6. ``default`` (a reply), else HTTP 500 "no scripted reply" (with replay: the unmatched
   request is saved and the 500 names the file).

A reply is a dict: ``content`` (str or None), ``plan`` (a dict turned into JSON content),
``refusal``, ``finish_reason`` (``stop``), ``status`` (200), ``headers``, ``body`` (a raw
body to send instead), ``delay`` (seconds before answering), ``drip`` (seconds between
bytes of the body: a server that keeps the connection busy without finishing; with
``drip_headers`` true the status line and headers are dripped too), ``usage`` (false: send
none; a dict: send it), ``reject_formats`` (response_format types answered with HTTP 400
for this request only). A server-wide ``reject_formats`` list makes the server refuse those
types every time, like servers without structured outputs; a server-wide ``drip`` drips
every answer.

Relay mode (``--relay DIR``): request number N (from 0001, continuing after the files
already there) is written to ``DIR/NNNN.request.json`` (``messages``, ``response_format``,
``model``...) and, for people, ``DIR/NNNN.request.md``; the server then polls for
``DIR/NNNN.answer.json`` or ``DIR/NNNN.answer.txt`` for at most ``--relay-wait`` seconds. A
``.txt`` file is the model's raw answer text. A ``.json`` file is either a reply dict as
above (it has a ``content``, ``plan``, ``status``, ``refusal`` or ``body`` key) or the
model's JSON answer itself (e.g. ``{"diagnosis": ..., "commands": [...], "rationale": ...}``).
Write the file elsewhere and rename it into place (or the server may read half a file; it
keeps polling while the JSON does not parse). No answer in time: HTTP 504 naming the file.
A client that gives up first leaves ``NNNN.abandoned``; the planner's ``llm.timeout`` and
``llm.deadline`` must leave time for the person answering.

Record mode (``--record DIR``): every chat exchange answered with HTTP 200 by a source
other than replay is saved as ``DIR/NNN.json`` (``request``: model, messages,
response_format; ``answer``: content, refusal, finish_reason; ``service``, ``failure``,
``turn``, ``key``, ``fallback_key``, ``source``, ``recorded_at``). Record works with any
source: relay (a person or a capable model answers), upstream (a live endpoint) or scripts.

Replay mode (``--replay DIR``, repeatable; every ``*.json`` below DIR): a request is
matched to a transcript by ``key``, a hash of its non-system messages with volatile parts
normalised (timestamps, hex ids, numbers such as PIDs and sizes, the evidence fence tag,
and any ``--volatile REGEX``), else by ``fallback_key``: the ``Service:`` and ``Failure:``
lines of the first user message (normalised the same way) and the turn (the number of user
messages, so a re-ask gets the recorded re-ask's answer). Recordings under one fallback key are
weighed by the host's evidence, never the prompt's wording (``Transcripts.match``); one that
states another cause, or a re-ask that followed another answer, is never served. Several
transcripts with one key are served in recorded order (the last again when they run out). Keys
are computed when the transcripts are loaded, so the files stay valid when the normalisation
improves. ``--served-log FILE`` says which transcript answered each request, and why.

Every request is recorded (``server.requests``: method, path, query, headers, body) and
``GET /_requests`` returns them as JSON; ``POST /_queue`` appends replies and
``POST /_reset`` clears queue and records, for use from another process.

    python tests/llm_server.py --port 0 --script replies.yml   # prints the base URL
    python tests/llm_server.py --script replies.yml --url-file url --pid-file pid   # for background use
    python tests/llm_server.py --relay /tmp/relay --record tests/transcripts/mine   # play the model, keep it
    python tests/llm_server.py --replay tests/transcripts/mine                      # CI: serve the recording
    python tests/llm_server.py --upstream https://api.example/v1 --upstream-key-env KEY --record DIR
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import select
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

MODEL = "sentinel-test-model"
REPLY_KEYS = ("content", "plan", "status", "refusal", "body")
RELAY_WAIT = 1800.0
RELAY_POLL = 0.2

# Volatile parts of a prompt, replaced before a request is hashed (order matters: times
# before the digit rule, the evidence fence tag before the hex rule).
_VOLATILE = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)?,?\s*(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                r"\s+\d{1,2}(?:\s+\d{4})?\s+\d{2}:\d{2}(?::\d{2})?\b"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"EVIDENCE-[0-9a-f]{8}"), "EVIDENCE-<tag>"),
    (re.compile(r"\b(?=[0-9a-f-]*\d)(?=[0-9a-f-]*[a-f])[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b", re.IGNORECASE), "<hex>"),
    (re.compile(r"\d+"), "<n>"),
)
_SERVICE_LINE = re.compile(r"^\s*Service:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_FAILURE_LINE = re.compile(r"^\s*Failure:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _fill(value, captured: str):
    if isinstance(value, str):
        return value.replace("{capture}", captured)
    if isinstance(value, list):
        return [_fill(v, captured) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, captured) for k, v in value.items()}
    return value


def _captured(rule: Mapping, text: str) -> dict:
    """A rule's reply; with ``capture`` (a regex), its first group found in the request fills
    ``{capture}`` in the reply's strings (a PID the evidence shows, say). A capture that finds
    nothing leaves the reply as written."""
    reply = dict(rule["reply"])
    if not rule.get("capture"):
        return reply
    found = re.search(rule["capture"], text, re.DOTALL)
    return _fill(reply, found.group(1)) if found else reply


def plan_content(diagnosis: str, commands: list, rationale: str = "because") -> str:
    """JSON content of a plan answer."""
    return json.dumps({"diagnosis": diagnosis, "commands": list(commands), "rationale": rationale})


def _estimate(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _text(message) -> str:
    if not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


# ---------------------------------------------------------------- matching keys


def normalise(text: str, volatile: Iterable[re.Pattern] = ()) -> str:
    """``text`` with volatile parts (times, ids, numbers, user patterns) replaced, whitespace folded."""
    for pattern in volatile:
        text = pattern.sub("<v>", text)
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def exchange_keys(messages: list, volatile: Iterable[re.Pattern] = ()) -> dict:
    """The replay keys of a chat request: ``key``, ``fallback_key``, ``service``, ``failure``, ``turn``.

    The system message is left out of ``key`` (it holds the rules, which change with the
    code, not with the incident).
    """
    volatile = tuple(volatile)
    convo = [[str(m.get("role", "")), normalise(_text(m), volatile)]
             for m in messages if isinstance(m, Mapping) and m.get("role") != "system"]
    users = [_text(m) for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    first = users[0] if users else ""
    service = _SERVICE_LINE.search(first)
    failure = _FAILURE_LINE.search(first)
    service_text = normalise(service.group(1), volatile) if service else ""
    if failure:
        failure_text = normalise(failure.group(1), volatile)
    else:  # no "Failure:" line: the first non-empty line stands for it
        failure_text = normalise(next((line for line in first.splitlines() if line.strip()), ""), volatile)
    turn = len(users)
    return {
        "key": hashlib.sha256(json.dumps(convo).encode("utf-8")).hexdigest()[:16],
        "fallback_key": hashlib.sha256(f"{service_text}\n{failure_text}\n{turn}".encode("utf-8")).hexdigest()[:16],
        "service": service_text,
        "failure": failure_text,
        "turn": turn,
    }


# A line of the incident that says what went wrong (a log's FATAL, a config test's error, a
# status's "failed"): what tells two faults of one service apart, whatever the prompt's wording.
_ERROR_LINE = re.compile(
    r"\b(?:FATAL|PANIC|ERROR|emerg|crit|alert|error|failed|failure|could not|cannot|can't|unable|denied"
    r"|invalid|unknown|not found|No such|refused|missing|bad|wrong|mismatch|expired|exceeded|too many|out of)\b"
    r"|\bstatus=[1-9]\d*/[A-Z]",  # a process's non-zero exit as systemd states it (status=217/USER)
    re.IGNORECASE)
# What differs between two hosts or two days and says nothing of the fault: weekday names
# ("since Sat ..."), and container or cgroup ids (long hex runs, which digits would otherwise
# cut into random letter fragments).
_WEEKDAY = frozenset(("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"))
_LONG_HEX = re.compile(r"\b[0-9a-f]{16,}\b")


_EVIDENCE_FENCE = re.compile(r"<<<EVIDENCE-(\w+)\n(.*?)\nEVIDENCE-\1>>>", re.DOTALL)


def _signal_lines(messages: list) -> frozenset:
    """The error lines of the first user message's evidence (the host's data, not the prompt's
    wording; see ``_evidence_text``), each as its words without digits."""
    lines = set()
    for line in _evidence_text(messages).splitlines():
        if _ERROR_LINE.search(line):
            words = _line_words(line)
            if words:
                lines.add(words)
    return frozenset(lines)


def _evidence_text(messages: list) -> str:
    """The host's data in the first user message: its evidence fence, else the message without
    the history's bullets and the knowledge passages' ``[id/section]`` lines."""
    first = next((_text(m) for m in messages if isinstance(m, Mapping) and m.get("role") == "user"), "")
    fenced = _EVIDENCE_FENCE.search(first)
    if fenced:
        return fenced.group(2)
    return "\n".join(line for line in first.splitlines() if not line.lstrip().startswith(("- ", "Attempt ", "[")))


def _line_words(line: str) -> tuple:
    """A line as its words without digits (the same line at another time, PID or host is the same)."""
    return tuple(w for w in re.findall(r"[A-Za-z_./:=@\"'-]{3,}", _LONG_HEX.sub("", line))
                 if not re.search(r"\d", w) and w not in _WEEKDAY)


def _evidence_lines(messages: list) -> frozenset:
    """Every line of the evidence as its words (not only those with an error word: "no hostkeys
    available -- exiting" is a fault's own line), the commands' ``$`` lines left out."""
    lines = set()
    for line in _evidence_text(messages).splitlines():
        if line.lstrip().startswith("$ "):
            continue
        words = _line_words(line)
        if words:
            lines.add(words)
    return frozenset(lines)


# The evidence's sections that hold what the service and its tools said (its status, its config
# test, its logs, its dependencies' lines): where one fault differs from another of the same
# service. The other sections are the gatherer's own readings (paths, listeners, includes ...),
# which grow with the code and would make recordings of one evidence format look alike.
_VOICE_SECTIONS = frozenset(("status", "config_test", "logs", "journal", "dependencies", "dependency_evidence"))
_SECTION = re.compile(r"^### (\S+)")


def _voice_lines(messages: list) -> frozenset:
    """The lines of the service's own voice (``_VOICE_SECTIONS``), as words; evidence without
    sections counts whole."""
    text = _evidence_text(messages)
    if not _SECTION.search(text.lstrip()):
        return _evidence_lines(messages)
    lines, section = set(), None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            continue
        if section not in _VOICE_SECTIONS or line.lstrip().startswith("$ ") or re.fullmatch(r"\s*rc -?\d+\s*", line):
            continue
        words = _line_words(line)
        if words:
            lines.add(words)
    return frozenset(lines)


def _evidence_words(messages: list, volatile: Iterable[re.Pattern] = ()) -> frozenset:
    """The distinct words of the evidence alone (the prompt's own wording changes with the code)."""
    return frozenset(re.findall(r"[A-Za-z0-9_./:=@-]{3,}", normalise(_evidence_text(messages), volatile)))


# The severest of those lines (a log's FATAL or PANIC, a program's own "fatal:", a daemon's [emerg]):
# the cause as the service
# itself states it. Two faults of one service share most of their failure (the unit failed, the
# port is closed, the PID file is missing) and differ there.
# systemd's specific exit statuses count too (217/USER, 203/EXEC: the step that failed), not
# the generic 1/FAILURE; lines are matched as their words, digits left out ("status= /USER").
_SEVERE_LINE = re.compile(r"\b(?:FATAL|PANIC|ERROR|CRITICAL)\b|\b(?:[Ff]atal|[Pp]anic):|\[(?:emerg|crit|alert)\]"
                          r"|status= /(?!FAILURE\b|SUCCESS\b)[A-Z]{3,}")


def _severe(lines: frozenset) -> frozenset:
    return frozenset(line for line in lines if _SEVERE_LINE.search(" ".join(line)))


def _rare_first(mine: frozenset, theirs: Sequence[frozenset]) -> list[float]:
    """How much of ``mine`` each of ``theirs`` shares, a line counting more the fewer of
    ``theirs`` hold it (lines every recording has, "Failed to start", tell nothing apart)."""
    held: dict = {}
    for lines in theirs:
        for line in lines:
            held[line] = held.get(line, 0) + 1
    count = len(theirs)

    def weight(line) -> float:
        return math.log(1 + count / held[line]) if line in held else math.log(1 + count)
    scores = []
    for lines in theirs:
        union = sum(weight(line) for line in mine | lines)
        scores.append(sum(weight(line) for line in mine & lines) / union if union else 1.0)
    return scores


_ATTEMPT_LINE = re.compile(r"^Attempt \d+ ", re.MULTILINE)
# A recording whose error lines share at least this part of the best match's share may be of the
# same fault: the same failure read again after an attempt changes a few lines, not most.
_NEAR_SHARE = 0.4
# A recording whose share of the request's severest lines is at least this part of the best's is
# of the same fault (the read before the fix may show one FATAL line fewer).
_NEAR_CAUSE = 0.5


def _answered(messages: list, volatile: Iterable[re.Pattern] = ()) -> tuple:
    """The assistant's earlier answers in a conversation (a re-ask carries them), normalised."""
    return tuple(normalise(_text(m), volatile) for m in messages
                 if isinstance(m, Mapping) and m.get("role") == "assistant")


def _history_depth(messages: list) -> int:
    """How many earlier attempts the request's incident history shows (the planner starts a
    new conversation per attempt, so this, not the turn, says how far the incident got)."""
    first = next((_text(m) for m in messages if isinstance(m, Mapping) and m.get("role") == "user"), "")
    return len(_ATTEMPT_LINE.findall(first))


def _similarity(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


class Transcripts:
    """Recorded exchanges, indexed by key and by fallback key (see the module docstring)."""

    def __init__(self, dirs: Iterable[str | os.PathLike], volatile: Iterable[re.Pattern] = ()):
        self.volatile = tuple(volatile)
        self.by_key: dict[str, list[dict]] = {}
        self.by_fallback: dict[str, list[dict]] = {}
        self.served: dict[tuple[str, str], int] = {}
        self.files: list[Path] = []
        for directory in dirs:
            root = Path(directory)
            if not root.is_dir():
                raise ValueError(f"replay: {root} is not a directory of transcripts")
            for path in sorted(root.rglob("*.json")):
                if path.name.endswith(".request.json") or "unmatched" in path.parts[len(root.parts):]:
                    continue
                self._load(path)
        if not self.files:
            raise ValueError(f"replay: no transcript (*.json) under {', '.join(str(d) for d in dirs)}")

    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            messages = data["request"]["messages"]
            answer = data["answer"]
            if not isinstance(messages, list) or not isinstance(answer, Mapping):
                raise TypeError("request.messages must be a list and answer a mapping")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"replay: {path} is not a transcript: {exc}") from exc
        keys = exchange_keys(messages, self.volatile)
        entry = {"path": str(path), "answer": dict(answer), "request": {"messages": messages},
                 "words": _evidence_words(messages, self.volatile), "lines": _evidence_lines(messages),
                 "voice": _voice_lines(messages), "answered": _answered(messages, self.volatile),
                 "signal": _signal_lines(messages),
                 "depth": _history_depth(messages), **keys}
        self.by_key.setdefault(keys["key"], []).append(entry)
        self.by_fallback.setdefault(keys["fallback_key"], []).append(entry)
        self.files.append(path)

    def match(self, messages: list) -> tuple[dict | None, dict]:
        """``(entry or None, keys)``; ``entry["matched_by"]`` says which key matched.

        Transcripts under the request's fallback key (the same service, failure line and turn)
        may be of other faults of that service (two faults that both leave "port 5432 is not
        listening"). They are weighed by the host's data alone, never by the prompt's wording
        (which changes with the code and would favour whatever was recorded last):
        - a re-ask (turn 2 or later) is answered only from a recording that followed the same
          earlier answer;
        - a recording whose severest lines (the service's own FATAL, ERROR, [emerg], a specific
          exit status such as systemd's 217/USER) share none of the request's is of another
          fault and is never served; when no recording is left the request is unmatched;
        - then the recordings that share about as much of those lines as the best come first;
          among them the one as far into the incident (the attempts its history shows), unless
          every recording at that depth is far from the best on the evidence's error lines; then
          by how much of the severest lines, then of what the service said (its status, config
          test, logs, dependencies' lines), then of the error lines, then of all the evidence's
          lines (a line counting more
          the fewer recordings hold it), then of the evidence's words; equally close ones are
          served in recorded order."""
        keys = exchange_keys(messages, self.volatile)
        entries = self.by_key.get(keys["key"])
        kind = "key"
        if not entries:
            kind = "fallback_key"
            entries = self._closest(messages, self.by_fallback.get(keys["fallback_key"]) or [])
        if not entries:
            return None, keys
        slot = (kind, keys[kind], tuple(e["path"] for e in entries))
        count = self.served.get(slot, 0)
        self.served[slot] = count + 1
        return dict(entries[min(count, len(entries) - 1)], matched_by=kind), keys

    def _closest(self, messages: list, entries: list[dict]) -> list[dict]:
        """The recordings under one fallback key that are most likely of the request's fault (``match``)."""
        # A re-ask follows an earlier answer: only a recording that followed the same answer fits.
        answered = _answered(messages, self.volatile)
        entries = [e for e in entries if e["answered"] == answered]
        severe = _severe(_signal_lines(messages))
        if severe:  # a recording that states another cause is of another fault
            entries = [e for e in entries if not _severe(e["signal"]) or severe & _severe(e["signal"])]
        if len({e["path"] for e in entries}) <= 1:
            return entries
        depth = _history_depth(messages)
        voice = _rare_first(_voice_lines(messages), [e["voice"] for e in entries])
        shared = _rare_first(_evidence_lines(messages), [e["lines"] for e in entries])
        cause = _rare_first(severe, [_severe(e["signal"]) for e in entries]) if severe else [0.0] * len(entries)
        words = _evidence_words(messages, self.volatile)
        errors = _rare_first(_signal_lines(messages), [e["signal"] for e in entries])
        near = max(errors) * _NEAR_SHARE
        same_depth = [i for i, e in enumerate(entries) if e["depth"] == depth]
        trust_depth = any(errors[i] >= near for i in same_depth)
        near_cause = max(cause) * _NEAR_CAUSE
        scored = [((cause[i] >= near_cause, trust_depth and e["depth"] == depth, round(cause[i], 9),
                    round(voice[i], 9), round(errors[i], 9), round(shared[i], 9), _similarity(words, e["words"])), i) for i, e in enumerate(entries)]
        best = max(score for score, _i in scored)
        return [entries[i] for score, i in scored if score == best]


_PROCESS_ROW = re.compile(r"^(?P<pid>\d+) (?P<ppid>\d+) (?P<user>\S+) (?P<state>\S+) (?P<started>\S+) "
                          r"(?P<ports>\S+) (?P<cmd>.*)$")
_SIGNAL_TOOLS = ("kill",)


def _process_rows(messages: list) -> list[tuple[str, tuple]]:
    """``[(pid, identity)]`` of the evidence's process table in the first user message, in
    order; the identity is what stays the same on another host (user, ports, command line,
    and whether the parent is in the table)."""
    text = next((_text(m) for m in messages if m.get("role") == "user"), "")
    start = text.find("### processes")
    if start < 0:
        return []
    rows = []
    for line in text[start:].splitlines()[2:]:
        if line.startswith("###"):
            break
        found = _PROCESS_ROW.match(line.strip())
        if found:
            rows.append((found["pid"], found["ppid"], (found["user"], found["ports"], found["cmd"])))
    pids = {pid for pid, _ppid, _identity in rows}
    return [(pid, identity + (ppid in pids,)) for pid, ppid, identity in rows]


def adapt_pids(content, recorded: list, current: list):
    """A recorded answer that signals PIDs, made to fit this request: each PID of the
    recording's process table becomes the PID of the process with the same identity (the
    n-th of its kind) in this request's table. Only the PID arguments of signal commands
    change; an answer without them is served as recorded."""
    if not isinstance(content, str) or not any(tool in content for tool in _SIGNAL_TOOLS):
        return content
    try:
        plan = json.loads(content)
    except ValueError:
        return content
    if not isinstance(plan, dict) or not isinstance(plan.get("commands"), list):
        return content
    seen: dict = {}
    now: dict = {}
    for pid, identity in _process_rows(current):
        now.setdefault(identity, []).append(pid)
    mapping = {}
    for pid, identity in _process_rows(recorded):
        index = seen.get(identity, 0)
        seen[identity] = index + 1
        if index < len(now.get(identity, [])):
            mapping[pid] = now[identity][index]
    if not mapping:
        return content

    def adapt(command):
        if not isinstance(command, str) or command.split()[:1] not in ([t] for t in _SIGNAL_TOOLS):
            return command
        return " ".join(mapping.get(word, word) for word in command.split(" "))
    plan["commands"] = [adapt(c) for c in plan["commands"]]
    return json.dumps(plan)


def _next_number(directory: Path, pattern: str) -> int:
    numbers = [int(m.group(1)) for p in directory.iterdir() if (m := re.fullmatch(pattern, p.name))]
    return max(numbers, default=0) + 1


# ---------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "SentinelTestLLM/1.0"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, payload, headers: dict | None = None, drip: float = 0.0,
              drip_headers: bool = False) -> None:
        body = payload if isinstance(payload, bytes) else (
            payload.encode("utf-8") if isinstance(payload, str) else json.dumps(payload).encode("utf-8"))
        try:
            if drip:
                self._send_dripped(status, body, headers or {}, drip, drip_headers)
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, str(value))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _send_dripped(self, status: int, body: bytes, headers: dict, interval: float, drip_headers: bool) -> None:
        """One byte every ``interval`` seconds: never silent long enough for a read timeout."""
        self.close_connection = True
        head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", "Connection: close"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head_bytes = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        if drip_headers:
            body = head_bytes + body
        else:
            self.wfile.write(head_bytes)
            self.wfile.flush()
        for index in range(len(body)):
            if self.server.owner.stopping.is_set():
                return
            self.wfile.write(body[index:index + 1])
            self.wfile.flush()
            if index + 1 < len(body):
                time.sleep(interval)

    def _read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _record(self, body) -> None:
        owner = self.server.owner
        parts = urlsplit(self.path)
        with owner.lock:
            owner.requests.append({"method": self.command, "path": parts.path,
                                   "query": {k: v[-1] for k, v in parse_qs(parts.query).items()},
                                   "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})

    def client_gone(self) -> bool:
        """Whether the client closed its side of the connection (it gave up waiting)."""
        try:
            readable = select.select([self.connection], [], [], 0)[0]
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def do_GET(self):  # pylint: disable=invalid-name
        owner = self.server.owner
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/_requests":
            with owner.lock:
                return self._send(200, {"count": len(owner.requests), "requests": list(owner.requests)})
        if path == "/healthz":
            return self._send(200, {"status": "ok"})
        self._record(None)
        if path.endswith("/models"):
            return self._send(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": "sentinel-tests"}]})
        return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self):  # pylint: disable=invalid-name
        owner = self.server.owner
        body = self._read_body()
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/_queue":
            owner.queue(*(body if isinstance(body, list) else [body]))
            return self._send(200, {"queued": len(owner.pending)})
        if path == "/_reset":
            owner.reset()
            return self._send(200, {"reset": True})
        self._record(body)
        if not path.endswith("/chat/completions"):
            return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._send(400, {"error": {"message": "messages missing", "type": "invalid_request_error"}})
        fmt = (body.get("response_format") or {}).get("type") if isinstance(body.get("response_format"), dict) else None
        if fmt and fmt in owner.reject_formats:
            return self._send(400, {"error": {"message": f"response_format {fmt} is not supported",
                                              "type": "invalid_request_error", "param": "response_format"}})
        reply = owner.next_reply(body, handler=self)
        if reply is None:  # relay: the client left before an answer came
            self.close_connection = True
            return None
        if fmt and fmt in (reply.get("reject_formats") or ()):
            owner.pending.appendleft({k: v for k, v in reply.items() if k != "reject_formats"})
            return self._send(400, {"error": {"message": f"response_format {fmt} is not supported",
                                              "type": "invalid_request_error", "param": "response_format"}})
        delay = float(reply.get("delay", owner.latency) or 0)
        if delay:
            time.sleep(delay)
        drip = float(reply.get("drip", owner.drip) or 0)
        drip_headers = bool(reply.get("drip_headers", False))
        status = int(reply.get("status", 200))
        if "body" in reply:
            return self._send(status, reply["body"], reply.get("headers"), drip, drip_headers)
        if status != 200:
            message = reply.get("error", f"scripted HTTP {status}")
            return self._send(status, {"error": {"message": message, "type": "scripted"}}, reply.get("headers"),
                              drip, drip_headers)
        content = reply.get("content")
        if "plan" in reply:
            content = json.dumps(reply["plan"])
        prompt_text = "".join(_text(m) for m in body["messages"])
        payload = {
            "id": f"chatcmpl-test-{len(owner.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or owner.model,
            "choices": [{"index": 0, "finish_reason": reply.get("finish_reason", "stop"),
                         "message": {"role": "assistant", "content": content, "refusal": reply.get("refusal")}}],
        }
        usage = reply.get("usage", True)
        if isinstance(usage, dict):
            payload["usage"] = usage
        elif usage is not False:
            prompt_tokens = _estimate(prompt_text)
            completion_tokens = _estimate(content or "")
            payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens}
        owner.record_exchange(body, reply, content)
        return self._send(200, payload, reply.get("headers"), drip, drip_headers)


class LLMServer:
    """The test server; use as a context manager or call ``start()`` / ``stop()``.

    ``relay_dir``, ``record_dir``, ``replay_dirs`` and ``upstream`` switch on the modes of
    the module docstring; ``volatile`` adds regexes (str or compiled) to the replay
    normalisation; ``unmatched_dir`` is where replay misses are saved (default: a new
    temporary directory).
    """

    def __init__(self, port: int = 0, replies=(), rules=(), default=None, reject_formats=(), latency: float = 0.0,
                 model: str = MODEL, drip: float = 0.0, relay_dir: str | os.PathLike | None = None,
                 relay_wait: float = RELAY_WAIT, relay_poll: float = RELAY_POLL,
                 record_dir: str | os.PathLike | None = None, replay_dirs: Iterable[str | os.PathLike] = (),
                 unmatched_dir: str | os.PathLike | None = None, volatile: Iterable = (),
                 upstream: str | None = None, upstream_key: str | None = None, upstream_model: str | None = None,
                 upstream_timeout: float = 600.0, log=sys.stderr, served_log: str | os.PathLike | None = None):
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.pending: deque = deque()
        self.requests: list = []
        self.rules = [dict(rule) for rule in rules]
        self.default = default
        self.reject_formats = set(reject_formats)
        self.latency = latency
        self.drip = drip
        self.model = model
        self.log = log
        self.volatile = tuple(re.compile(v) if isinstance(v, str) else v for v in volatile)
        self.relay_dir = Path(relay_dir) if relay_dir else None
        self.relay_wait = float(relay_wait)
        self.relay_poll = float(relay_poll)
        self.record_dir = Path(record_dir) if record_dir else None
        self.replay = Transcripts(replay_dirs, self.volatile) if replay_dirs else None
        self.unmatched_dir = Path(unmatched_dir) if unmatched_dir else None
        self.unmatched: list[dict] = []
        self.served_log = Path(served_log) if served_log else None
        self.upstream = upstream.rstrip("/") if upstream else None
        self.upstream_key = upstream_key
        self.upstream_model = upstream_model
        self.upstream_timeout = float(upstream_timeout)
        self.recorded: list[Path] = []
        for directory in (self.relay_dir, self.record_dir):
            if directory is not None:
                directory.mkdir(parents=True, exist_ok=True)
        self._relay_next = _next_number(self.relay_dir, r"(\d+)\.request\.json") if self.relay_dir else 1
        self._record_next = _next_number(self.record_dir, r"(\d+)\.json") if self.record_dir else 1
        self._port = port
        self._httpd = None
        self._thread = None
        self.queue(*replies)

    # -- scripting -------------------------------------------------------------------
    def queue(self, *replies) -> "LLMServer":
        with self.lock:
            for reply in replies:
                self.pending.append(dict(reply) if isinstance(reply, dict) else {"content": str(reply)})
        return self

    def reset(self) -> None:
        with self.lock:
            self.pending.clear()
            self.requests.clear()

    def _say(self, text: str) -> None:
        if self.log is not None:
            print(f"llm_server: {text}", file=self.log, flush=True)

    def next_reply(self, body: dict, handler: _Handler | None = None) -> dict | None:
        """The reply to a chat request, from the first source that has one (module docstring)."""
        with self.lock:
            if self.pending:
                return dict(self.pending.popleft(), _source="script")
        text = "\n".join(_text(m) for m in body["messages"])
        for rule in self.rules:
            if re.search(rule["match"], text, re.IGNORECASE | re.DOTALL):
                return dict(_captured(rule, text), _source="script")
        keys = None
        if self.replay is not None:
            with self.lock:
                entry, keys = self.replay.match(body["messages"])
            if entry is not None:
                self._log_served(body, keys, entry)
                answer = entry["answer"]
                content = adapt_pids(answer.get("content"), (entry.get("request") or {}).get("messages") or [],
                                     body["messages"])
                return {"content": content, "refusal": answer.get("refusal"),
                        "finish_reason": answer.get("finish_reason") or "stop", "_source": "replay",
                        "_transcript": entry["path"], "_matched_by": entry["matched_by"]}
        if self.relay_dir is not None:
            return self._relay(body, handler)
        if self.upstream is not None:
            return self._forward(body)
        if self.default is not None:
            return dict(self.default, _source="script")
        if self.replay is not None:
            return self._unmatched(body, keys)
        return {"status": 500, "error": "no scripted reply left"}

    def _log_served(self, body: dict, keys: dict, entry: dict) -> None:
        """One JSON line per replayed request: which transcript answered it and by which key, with
        the request itself (to see, when a replay ends differently, what was served for what)."""
        if entry["matched_by"] != "key":
            self._say(f"replay: {entry['path']} served by fallback ({keys['service']!r}, turn {keys['turn']})")
        if self.served_log is None:
            return
        line = json.dumps({"transcript": entry["path"], "matched_by": entry["matched_by"], **keys,
                           "request": _request_view(body)}, ensure_ascii=False)
        with self.lock, open(self.served_log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def _unmatched(self, body: dict, keys: dict) -> dict:
        with self.lock:
            if self.unmatched_dir is None:
                self.unmatched_dir = Path(tempfile.mkdtemp(prefix="llm-replay-unmatched-"))
            self.unmatched_dir.mkdir(parents=True, exist_ok=True)
            path = self.unmatched_dir / f"{keys['key']}.request.json"
            _write_atomic(path, json.dumps({**keys, "request": _request_view(body)}, indent=2) + "\n")
            self.unmatched.append({**keys, "path": str(path)})
        message = (f"replay: no transcript matches this request (key {keys['key']}; fallback {keys['fallback_key']}: "
                   f"service {keys['service']!r}, failure {keys['failure'][:120]!r}, turn {keys['turn']}); "
                   f"saved to {path}")
        self._say(message)
        return {"status": 500, "error": message, "_source": "replay"}

    # -- relay -----------------------------------------------------------------------
    def _relay(self, body: dict, handler: _Handler | None) -> dict | None:
        with self.lock:
            number = self._relay_next
            self._relay_next += 1
        stem = f"{number:04d}"
        directory = self.relay_dir
        answer_json, answer_txt = directory / f"{stem}.answer.json", directory / f"{stem}.answer.txt"
        request = {"n": number, **_request_view(body), "answer_files": [str(answer_json), str(answer_txt)],
                   "how_to_answer": (f"write {answer_json.name} (the JSON answer the model would give, or a reply "
                                     f"dict with 'content') or {answer_txt.name} (raw answer text); write it under "
                                     "another name, then rename it into place")}
        # The readable copy first: whoever waits for the .json (a helper playing the model, a
        # test) then finds both.
        _write_atomic(directory / f"{stem}.request.md", _request_markdown(number, body, answer_json, answer_txt))
        _write_atomic(directory / f"{stem}.request.json", json.dumps(request, indent=2, ensure_ascii=False) + "\n")
        self._say(f"relay: request {stem} waiting for {answer_json} or {answer_txt} "
                  f"(at most {self.relay_wait:g} s)")
        deadline = time.monotonic() + self.relay_wait
        problem = ""
        while True:
            reply, problem = _read_answer(answer_json, answer_txt, problem)
            if reply is not None:
                self._say(f"relay: request {stem} answered")
                return dict(reply, _source="relay")
            if handler is not None and handler.client_gone():
                note = (f"the client stopped waiting for request {stem} before an answer came; an answer written "
                        "now is not used (give the planner a longer llm.timeout and llm.deadline)\n")
                _write_atomic(directory / f"{stem}.abandoned", note)
                self._say(f"relay: {note.strip()}")
                return None
            if time.monotonic() >= deadline or self.stopping.is_set():
                message = (f"relay: no answer to request {stem} within {self.relay_wait:g} s: write "
                           f"{answer_json} or {answer_txt}" + (f" ({problem})" if problem else ""))
                self._say(message)
                return {"status": 504, "error": message, "_source": "relay"}
            time.sleep(self.relay_poll)

    # -- upstream --------------------------------------------------------------------
    def _forward(self, body: dict) -> dict:
        data = dict(body)
        if self.upstream_model:
            data["model"] = self.upstream_model
        headers = {"Content-Type": "application/json"}
        if self.upstream_key:
            headers["Authorization"] = f"Bearer {self.upstream_key}"
        request = urllib.request.Request(f"{self.upstream}/chat/completions", data=json.dumps(data).encode("utf-8"),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.upstream_timeout) as response:  # nosec - operator's URL
                raw = response.read()
        except urllib.error.HTTPError as exc:
            return {"status": exc.code, "body": exc.read(), "_source": "upstream"}
        except (OSError, ValueError) as exc:
            return {"status": 502, "error": f"upstream {self.upstream}: {exc}", "_source": "upstream"}
        try:
            payload = json.loads(raw)
            choice = payload["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            return {"status": 502, "error": f"upstream {self.upstream} sent no chat completion", "_source": "upstream"}
        return {"content": message.get("content"), "refusal": message.get("refusal"),
                "finish_reason": choice.get("finish_reason") or "stop",
                "usage": payload.get("usage") if isinstance(payload.get("usage"), dict) else True,
                "_source": "upstream"}

    # -- record ----------------------------------------------------------------------
    def record_exchange(self, body: dict, reply: dict, content) -> None:
        if self.record_dir is None or reply.get("_source") == "replay":
            return
        keys = exchange_keys(body["messages"], self.volatile)
        transcript = {"format": 1, **keys, "source": reply.get("_source", "script"),
                      "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "request": _request_view(body),
                      "answer": {"content": content, "refusal": reply.get("refusal"),
                                 "finish_reason": reply.get("finish_reason", "stop")}}
        with self.lock:
            path = self.record_dir / f"{self._record_next:03d}.json"
            self._record_next += 1
            _write_atomic(path, json.dumps(transcript, indent=2, ensure_ascii=False) + "\n")
            self.recorded.append(path)

    # -- inspection ------------------------------------------------------------------
    @property
    def chat_requests(self) -> list:
        """Bodies of the chat completion requests, in order."""
        return [r["body"] for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def prompt_text(self, index: int = -1) -> str:
        """All message texts of one chat request, joined."""
        return "\n".join(_text(m) for m in self.chat_requests[index]["messages"])

    # -- life cycle ------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server without ``/v1`` (what Azure OpenAI calls the endpoint)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        return self._httpd.server_address[1] if self._httpd else self._port

    def start(self) -> "LLMServer":
        self.stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="llm-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _request_view(body: dict) -> dict:
    """What a person, a transcript or a replay needs of a chat request."""
    return {key: body.get(key) for key in ("model", "messages", "response_format", "temperature", "max_tokens")
            if key in body}


def _request_markdown(number: int, body: dict, answer_json: Path, answer_txt: Path) -> str:
    lines = [f"# Request {number:04d} (model {body.get('model', '?')})", ""]
    for message in body.get("messages") or []:
        lines += [f"## {str(message.get('role', '?')).upper()}", "", _text(message), ""]
    fmt = body.get("response_format")
    if fmt:
        lines += ["## Response format", "", "```json", json.dumps(fmt, indent=2), "```", ""]
    lines += ["## How to answer", "",
              f"Write `{answer_json.name}` (the JSON object the model would answer) or `{answer_txt.name}` (the raw "
              "answer text) next to this file: write it under another name, then rename it into place.", ""]
    return "\n".join(lines)


def _read_answer(answer_json: Path, answer_txt: Path, problem: str) -> tuple[dict | None, str]:
    """``(reply or None, problem)`` from a relay answer file, if one is complete."""
    if answer_txt.is_file():
        try:
            return {"content": answer_txt.read_text(encoding="utf-8").strip()}, ""
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"{answer_txt.name}: {exc}"
    if not answer_json.is_file():
        return None, problem
    try:
        data = json.loads(answer_json.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{answer_json.name} is not valid JSON yet: {exc}"
    if isinstance(data, dict) and any(key in data for key in REPLY_KEYS):
        return data, ""
    return {"content": json.dumps(data, ensure_ascii=False)}, ""


def load_script(path: str) -> dict:
    """A script file (YAML or JSON): replies, rules, default, reject_formats, latency, drip, model."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        import yaml

        data = yaml.safe_load(text)
    except ImportError:
        data = json.loads(text)
    return data or {}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0],
                                     epilog="Modes combine: e.g. --replay DIR --relay RELAY --record DIR serves what is "
                                            "recorded and asks a person for the rest, recording the new answers.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="YAML/JSON file: replies, rules, default, reject_formats, latency, drip")
    parser.add_argument("--drip", type=float, default=None, metavar="SECONDS",
                        help="send every answer one byte every SECONDS (a server that never finishes in time)")
    parser.add_argument("--relay", metavar="DIR", help="write each request to DIR/NNNN.request.json and answer "
                                                       "with DIR/NNNN.answer.json or .txt when it appears")
    parser.add_argument("--relay-wait", type=float, default=RELAY_WAIT, metavar="SECONDS",
                        help=f"how long a relayed request waits for its answer file (default {RELAY_WAIT:g})")
    parser.add_argument("--record", metavar="DIR", help="save each answered exchange as DIR/NNN.json")
    parser.add_argument("--replay", metavar="DIR", action="append", default=[],
                        help="serve the transcripts under DIR (repeatable)")
    parser.add_argument("--unmatched-dir", metavar="DIR", help="where replay saves requests no transcript matches "
                                                               "(default: a new temporary directory)")
    parser.add_argument("--served-log", metavar="FILE", help="append one JSON line per replayed request to FILE: the "
                                                             "transcript that answered it, the key that matched, the request")
    parser.add_argument("--volatile", metavar="REGEX", action="append", default=[],
                        help="one more pattern the replay key ignores (e.g. a lab's host name prefix; repeatable)")
    parser.add_argument("--upstream", metavar="URL", help="forward requests to this OpenAI-compatible base URL")
    parser.add_argument("--upstream-key-env", metavar="NAME", help="environment variable holding the upstream's key")
    parser.add_argument("--upstream-model", metavar="MODEL", help="model name to send upstream instead of the client's")
    parser.add_argument("--url-file", help="also write the base URL to this file once the server listens")
    parser.add_argument("--pid-file", help="write this process's PID to this file (to stop it later)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    script = load_script(args.script) if args.script else {}
    upstream_key = None
    if args.upstream_key_env:
        upstream_key = os.environ.get(args.upstream_key_env)
        if not upstream_key:
            parser.error(f"--upstream-key-env {args.upstream_key_env}: that variable is not set")
    try:
        server = LLMServer(port=args.port, replies=script.get("replies") or (), rules=script.get("rules") or (),
                           default=script.get("default"), reject_formats=script.get("reject_formats") or (),
                           latency=float(script.get("latency") or 0), model=script.get("model") or MODEL,
                           drip=float(args.drip if args.drip is not None else script.get("drip") or 0),
                           relay_dir=args.relay, relay_wait=args.relay_wait, record_dir=args.record,
                           replay_dirs=args.replay, unmatched_dir=args.unmatched_dir, volatile=args.volatile,
                           served_log=args.served_log, upstream=args.upstream, upstream_key=upstream_key, upstream_model=args.upstream_model)
    except (ValueError, OSError, re.error) as exc:
        parser.error(str(exc))
    server.start()
    if args.pid_file:
        with open(args.pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    if args.url_file:  # written whole, then renamed: a reader never sees half a URL
        with open(args.url_file + ".tmp", "w", encoding="utf-8") as handle:
            handle.write(server.url + "\n")
        os.replace(args.url_file + ".tmp", args.url_file)
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
