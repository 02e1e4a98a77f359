# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runbook knowledge base: loading, matching a failure, BM25 retrieval, placeholders.

A runbook (``runbooks/*.yml``) names the services it covers, regex ``match`` patterns
over the failure (service, error, evidence and the signature's key facts), ordered
``steps`` (each a ``command`` and a ``why``), free ``notes`` and, for faults that need
a human, ``escalate: true`` with no steps.

Placeholders in step commands are filled ONLY from the evidence and validated; see
``resolve_placeholders``.  The policy engine still classifies the resolved command.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils.signature import (
    _evidence_texts,
    key_facts,
    listeners,
)

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "runbooks"


class RunbookError(ValueError):
    """A runbook file that cannot be used (names the file and the problem)."""


# ---------------------------------------------------------------------- loading

def _compile(patterns, where: str) -> list[re.Pattern[str]]:
    if patterns is None:
        return []
    if isinstance(patterns, str):
        patterns = [patterns]
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(str(pattern), re.IGNORECASE))
        except re.error as exc:
            raise RunbookError(f"{where}: bad pattern {pattern!r}: {exc}") from exc
    return compiled


def load_runbooks(dirs: Iterable[str | Path] | None = None) -> list[dict]:
    """Every runbook from ``dirs`` (default: the collection's ``runbooks/``), sorted by id."""
    books: dict[str, dict] = {}
    for directory in [Path(d) for d in (dirs or [DEFAULT_DIR])]:
        if not directory.is_dir():
            raise RunbookError(f"runbook directory {directory} does not exist")
        for path in sorted(list(directory.glob("*.yml")) + list(directory.glob("*.yaml"))):
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise RunbookError(f"{path}: cannot read: {exc}") from exc
            if not isinstance(data, Mapping) or not data.get("id"):
                raise RunbookError(f"{path}: a runbook is a mapping with an 'id'")
            steps = data.get("steps") or []
            if not isinstance(steps, list) or not all(isinstance(s, Mapping) and s.get("command") for s in steps):
                raise RunbookError(f"{path}: 'steps' must be a list of {{command, why}}")
            match = data.get("match") or {}
            book = {
                "id": str(data["id"]),
                "title": str(data.get("title", data["id"])),
                "services": [str(s).lower() for s in (data.get("services") or [])],
                "faults": [str(f) for f in (data.get("faults") or [])],
                "priority": int(data.get("priority", 0)),
                "escalate": bool(data.get("escalate", False)),
                "steps": [{"command": str(s["command"]).strip(), "why": str(s.get("why", "")).strip()}
                          for s in steps],
                "notes": str(data.get("notes", "")).strip(),
                "path": str(path),
                "_all": _compile(match.get("all"), str(path)),
                "_any": _compile(match.get("any"), str(path)),
                "_none": _compile(match.get("none"), str(path)),
            }
            if book["escalate"] and book["steps"]:
                raise RunbookError(f"{path}: an escalation runbook has no steps")
            books[book["id"]] = book
    return [books[key] for key in sorted(books)]


def public_view(book: Mapping) -> dict:
    """A runbook without its compiled patterns (for results and lookups)."""
    return {k: v for k, v in book.items() if not k.startswith("_")}


# ---------------------------------------------------------------------- matching

def _service_matches(book: Mapping, service: str) -> bool:
    service = service.lower().removesuffix(".service")
    return not book["services"] or service in book["services"]


def failure_text(service: str, error: str | None, evidence, host_tools: Mapping | None = None) -> str:
    """The text runbook patterns are matched against: error, evidence, key facts, absent tools."""
    parts = [f"service {service}", error or ""]
    absent = (host_tools or {}).get("absent") or []
    if absent:
        parts.append("absent tools: " + " ".join(sorted(str(t) for t in absent)))
    parts.extend(f"{key}: {text}" for key, text in _evidence_texts(evidence).items())
    parts.extend(key_facts(service, error, evidence))
    return "\n".join(parts)


def match_runbooks(books: Sequence[Mapping], service: str, error: str | None, evidence,
                   host_tools: Mapping | None = None) -> list[dict]:
    """Runbooks whose patterns fit this failure, best first.

    A runbook fits when its service matches, every ``all`` pattern and at least one
    ``any`` pattern (when it has some) match, and no ``none`` pattern does.  Ranking:
    ``priority``, then the number of patterns that matched.  Each result is
    ``{"runbook": <public view>, "score": int, "matched": [patterns]}``.
    """
    text = failure_text(service, error, evidence, host_tools)
    found = []
    for book in books:
        if not _service_matches(book, service):
            continue
        if any(p.search(text) for p in book["_none"]):
            continue
        hits = [p.pattern for p in book["_all"] if p.search(text)]
        if len(hits) < len(book["_all"]):
            continue
        any_hits = [p.pattern for p in book["_any"] if p.search(text)]
        if book["_any"] and not any_hits:
            continue
        if not book["_all"] and not book["_any"]:
            continue
        found.append({"runbook": public_view(book), "score": book["priority"] * 100 + len(hits) + len(any_hits),
                      "matched": hits + any_hits})
    found.sort(key=lambda item: (-item["score"], item["runbook"]["id"]))
    return found


# ---------------------------------------------------------------------- retrieval

_STOP = frozenset("a an and are as at be by for from in is it not of on or the to this that with".split())
_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens; paths and dotted names also split into their parts."""
    tokens = []
    for token in _TOKEN.findall(text.lower()):
        if token in _STOP:
            continue
        tokens.append(token)
        parts = [p for p in re.split(r"[._/-]", token) if p and p != token and p not in _STOP]
        tokens.extend(parts)
    return tokens


def passages(books: Sequence[Mapping]) -> list[dict]:
    """Split runbooks into retrievable passages: a summary, each step, the notes."""
    items = []
    for book in books:
        head = f"{book['title']} (services: {', '.join(book['services']) or 'any'})"
        if book["escalate"]:
            head += " ESCALATE: needs a human, no commands."
        items.append({"runbook": book["id"], "kind": "summary", "text": head,
                      "services": book["services"]})
        if book["steps"]:
            steps = "; ".join(f"{i}. `{s['command']}` ({s['why']})" for i, s in enumerate(book["steps"], 1))
            items.append({"runbook": book["id"], "kind": "steps", "text": f"{book['title']}: steps {steps}",
                          "services": book["services"]})
        if book["notes"]:
            items.append({"runbook": book["id"], "kind": "notes",
                          "text": f"{book['title']}: {' '.join(book['notes'].split())}",
                          "services": book["services"]})
    return items


def retrieve(books: Sequence[Mapping], query: str, service: str | None = None, top: int = 3) -> list[dict]:
    """The ``top`` passages for ``query`` by BM25 (rank-bm25), each with its ``score``.

    With ``service``, passages of runbooks for other services are left out (runbooks
    that name no service stay).  Passages scoring 0 are never returned.
    """
    from rank_bm25 import BM25Okapi  # imported late: the lookup's doc must load without it

    pool = passages(books)
    if service:
        name = service.lower().removesuffix(".service")
        pool = [p for p in pool if not p["services"] or name in p["services"]] or pool
    if not pool or top <= 0:
        return []
    query_tokens = tokenize(query)
    if not query_tokens:
        return []
    index = BM25Okapi([tokenize(p["text"]) for p in pool])
    scores = index.get_scores(query_tokens)
    ranked = sorted(zip(scores, range(len(pool))), key=lambda pair: (-pair[0], pair[1]))
    result = []
    for score, position in ranked[:top]:
        if score <= 0:
            break
        item = {k: v for k, v in pool[position].items() if k != "services"}
        item["score"] = round(float(score), 3)
        result.append(item)
    return result


# ---------------------------------------------------------------------- placeholders

_PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([^{}\s]+))?\}")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_.+@/-]+$")
_DATA_FILES = re.compile(r"(?:^dump\.rdb$|\.rdb$|\.aof$|^appendonly|^appendonlydir$|^temp-\d+\.rdb$)")
_SIZE_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)([KMGTP]?)\s+(/\S+)\s*$", re.IGNORECASE)
_LS_LINE = re.compile(r"^[-l][rwxsStT-]{9}\S*\s+\d+\s+\S+\s+\S+\s+(\d+)\s+.*?\s(/\S+)$")
_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}


class PlaceholderError(ValueError):
    """A placeholder that the evidence cannot fill safely."""


def _port_owner_pid(arg: str | None, evidence, service: str) -> str:
    if not arg or not arg.isdigit():
        raise PlaceholderError("port_owner_pid needs a port, e.g. {port_owner_pid:80}")
    port = int(arg)
    own = {service.lower(), service.lower().removesuffix("-server")}
    owners = [item for item in listeners(evidence) if item["port"] == port and item["pid"] is not None]
    others = sorted({item["pid"] for item in owners if (item["process"] or "").lower() not in own})
    guessed = [item for item in owners if item.get("likely")]
    if guessed and len(others) != 1:
        # The holder was only guessed from the socket's user: kill nothing unless unique.
        raise PlaceholderError(f"the holder of port {port} is not visible and not unique: {others}")
    if not others:
        raise PlaceholderError(f"the evidence shows no other process listening on port {port}")
    # Several holders: a forking server; its master has the lowest PID (as lab/faults.yml).
    pid = str(others[0])
    if not pid.isdigit() or int(pid) <= 1:
        raise PlaceholderError(f"refusing PID {pid} for port {port}")
    return pid


def _port_owner_name(arg: str | None, evidence, service: str) -> str:
    pid = _port_owner_pid(arg, evidence, service)
    for item in listeners(evidence):
        if str(item["pid"]) == pid and re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", item["process"] or ""):
            return item["process"]
    raise PlaceholderError(f"no safe process name for PID {pid}")


def _config_error_file(arg: str | None, evidence, service: str, error: str | None = None) -> str:
    prefix = arg or "/etc/"
    texts = [error or ""] + list(_evidence_texts(evidence).values())
    candidates = []
    for text in texts:
        for line in text.splitlines():
            if not re.search(r"\[(?:emerg|crit|alert|error)\]|syntax|error", line, re.IGNORECASE):
                continue
            for match in re.finditer(r"\bin (/[^\s:\"']+):\d+", line):
                candidates.append(match.group(1))
    paths = sorted({p for p in candidates if p.startswith(prefix)})
    if not paths:
        raise PlaceholderError(f"no configuration error names a file under {prefix}")
    if len(paths) > 1:
        raise PlaceholderError(f"several files are named: {paths}")
    path = paths[0]
    if ".." in path.split("/") or not _SAFE_PATH.match(path):
        raise PlaceholderError(f"unsafe path {path!r}")
    return path


def _largest_file(arg: str | None, evidence, service: str) -> str:
    if not arg or not _SAFE_PATH.match(arg) or ".." in arg.split("/"):
        raise PlaceholderError("largest_file needs a directory, e.g. {largest_file:/var/lib/redis}")
    directory = arg.rstrip("/")
    sizes: dict[str, float] = {}
    for text in _evidence_texts(evidence).values():
        for line in text.splitlines():
            match = _SIZE_LINE.match(line)
            if match:
                size, path = float(match.group(1)) * _UNITS[match.group(2).upper()], match.group(3)
            else:
                match = _LS_LINE.match(line)
                if not match:
                    continue
                size, path = float(match.group(1)), match.group(2)
            parent, _sep, name = path.rstrip("/").rpartition("/")
            if parent != directory or not name or _DATA_FILES.search(name):
                continue
            sizes[path] = max(size, sizes.get(path, 0))
    if not sizes:
        raise PlaceholderError(f"the evidence lists no removable file in {directory}")
    path = max(sorted(sizes), key=lambda p: sizes[p])
    if not _SAFE_PATH.match(path) or ".." in path.split("/"):
        raise PlaceholderError(f"unsafe path {path!r}")
    return path


RESOLVERS = {
    "port_owner_pid": _port_owner_pid,
    "port_owner_name": _port_owner_name,
    "config_error_file": _config_error_file,
    "largest_file": _largest_file,
}


def resolve_placeholders(command: str, evidence, service: str, error: str | None = None) -> str:
    """Fill ``{name:arg}`` placeholders of a runbook step from the evidence.

    Raises ``PlaceholderError`` when a placeholder is unknown, ambiguous or cannot be
    filled safely; the caller drops the runbook plan then.
    """
    def fill(match: re.Match[str]) -> str:
        name, arg = match.group(1), match.group(2)
        resolver = RESOLVERS.get(name)
        if resolver is None:
            raise PlaceholderError(f"unknown placeholder {{{name}}}")
        if name == "config_error_file":
            return _config_error_file(arg, evidence, service, error)
        return resolver(arg, evidence, service)

    return _PLACEHOLDER.sub(fill, command)
