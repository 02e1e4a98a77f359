# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runbook knowledge base: loading and validating, matching a failure, placeholders.

A runbook (``runbooks/*.yml``, or an operator's directory) names the services it covers,
what evidence selects it (``match``), ordered ``steps`` (each a ``command`` and a
``why``), free ``notes`` and, for faults that need a human, ``escalate: true`` with no
steps. An operator's runbook with the id of a bundled one replaces it.

Matching is on the *specific evidence* of a fault. ``match`` holds facts read from the
evidence (``module_utils/failure_facts.py``: ``port_held_by_other``, ``stale_pid_file``,
``config_invalid``...) and/or regexes over the failure's text. A runbook is *exclusive*
by default: every ``cause`` fact the evidence shows must be one the runbook requires or
tolerates (or one of its regexes recognised), so a runbook for a stale PID file does not
fire on a port conflict that also left a PID file behind. A runbook that requires no
cause (a plain start) is also stopped by ``weak`` facts (an unexplained error in the
log, a failed unit): "not running" alone selects only the plain start.

Placeholders in step commands are filled ONLY from the evidence and validated; see
``resolve_placeholders``.  The policy engine still classifies the resolved command.
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import load_yaml
from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import (
    CAUSE,
    FACTS,
    WEAK,
    FailureFacts,
    describe,
    extract_facts,
    own_names,
    service_name,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fact_requirements import FactSpecError, instances, parse_requirement
from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import evidence_texts, listeners
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import key_facts

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "runbooks"
INIT_SYSTEMS = ("systemd", "sysv", "other")
TOP_KEYS = ("id", "title", "services", "init", "faults", "priority", "escalate", "match", "steps", "notes")
MATCH_KEYS = ("facts", "any_facts", "not_facts", "tolerate", "exclusive", "all", "any", "none")
STEP_KEYS = ("command", "why", "approval")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class RunbookError(ValueError):
    """Runbook files that cannot be used; ``problems`` names each file and key."""

    def __init__(self, problems: str | Sequence[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


# ---------------------------------------------------------------------- placeholders (declared here
# first: loading validates them)

@dataclass(frozen=True)
class Placeholder:
    arg: str            # "port", "path", "none", "optional-port", "optional-path"
    meaning: str


PLACEHOLDERS: dict[str, Placeholder] = {
    "port_owner_pid": Placeholder("optional-port", "PID of the process (not the service) listening on PORT "
                                  "(without PORT: the one port a port_held_by_other fact names)"),
    "port_owner_name": Placeholder("optional-port", "name of that process"),
    "config_error_file": Placeholder("optional-path", "the file a config error names, under PREFIX (default /etc/)"),
    "largest_file": Placeholder("path", "the largest removable file directly in DIR (never redis data files)"),
    "stale_pid_file": Placeholder("optional-path", "the PID file that names a dead process, under PREFIX"),
    "missing_dir": Placeholder("optional-path", "the top-most missing directory under PREFIX "
                               "(for a missing file: its directory)"),
    "denied_path": Placeholder("optional-path", "the path a permission-denied error names, under PREFIX"),
    "unit": Placeholder("none", "the service's systemd unit (from the evidence, the service definition, "
                        "or NAME.service)"),
    "service": Placeholder("none", "the service's name"),
    "user": Placeholder("none", "the account the service runs as (service definition or its processes)"),
}
_PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([^{}\s]+))?\}")
_LOOSE_PLACEHOLDER = re.compile(r"\{\s*[a-z_]+\s*(?::[^{}]*)?\}")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_.+@/-]+$")


def _placeholder_problems(command: str) -> list[str]:
    problems = []
    strict = {m.group(0) for m in _PLACEHOLDER.finditer(command)}
    for loose in _LOOSE_PLACEHOLDER.finditer(command):
        if loose.group(0) not in strict:
            problems.append(f"malformed placeholder {loose.group(0)!r} (write {{name}} or {{name:ARG}}, no spaces)")
    for match in _PLACEHOLDER.finditer(command):
        name, arg = match.group(1), match.group(2)
        spec = PLACEHOLDERS.get(name)
        if spec is None:
            problems.append(f"unknown placeholder {{{name}}} (known: {', '.join(sorted(PLACEHOLDERS))})")
            continue
        kind = spec.arg
        if kind == "none" and arg is not None:
            problems.append(f"placeholder {{{name}}} takes no argument")
        elif kind.endswith("port") and arg is not None and not (arg.isdigit() and 0 < int(arg) < 65536):
            problems.append(f"placeholder {{{name}:{arg}}} needs a port number")
        elif kind.endswith("path") and arg is not None and (not _SAFE_PATH.match(arg) or ".." in arg.split("/")):
            problems.append(f"placeholder {{{name}:{arg}}} needs an absolute path")
        elif kind in ("port", "path") and arg is None:
            problems.append(f"placeholder {{{name}}} needs an argument, e.g. {{{name}:{'80' if kind == 'port' else '/var/lib/x'}}}")
    return problems


def _literal_pid_problem(command: str) -> str | None:
    """A kill with a PID typed into the runbook: true on one host, at one moment."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or os.path.basename(words[0]) != "kill":
        return None
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if word in ("-s", "-n", "--signal"):
            skip = True
            continue
        if word.startswith("-"):
            continue
        if word.isdigit():
            return (f"`{command}` signals a PID written by hand; use a placeholder resolved from the evidence "
                    "such as {port_owner_pid:PORT}")
    return None


# ---------------------------------------------------------------------- loading

def _patterns(value, where: str, problems: list[str]) -> list[re.Pattern[str]]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        problems.append(f"{where}: a list of regular expressions")
        return []
    compiled = []
    for index, pattern in enumerate(value):
        if not isinstance(pattern, (str, int, float)) or isinstance(pattern, bool):
            problems.append(f"{where}[{index}]: a regular expression (string), got {type(pattern).__name__}")
            continue
        try:
            compiled.append(re.compile(str(pattern), re.IGNORECASE))
        except re.error as exc:
            problems.append(f"{where}[{index}]: bad pattern {pattern!r}: {exc}")
    return compiled


def _requirements(value, where: str, problems: list[str]) -> list[dict]:
    if value is None:
        return []
    if isinstance(value, (str, Mapping)):
        value = [value]
    if not isinstance(value, list):
        problems.append(f"{where}: a list of facts")
        return []
    out = []
    for index, spec in enumerate(value):
        try:
            out.append(parse_requirement(spec, f"{where}[{index}]"))
        except FactSpecError as exc:
            problems.append(str(exc))
    return out


def _strings(value, where: str, problems: list[str], lower: bool = False) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        problems.append(f"{where}: a list of names")
        return []
    return [str(v).strip().lower() if lower else str(v).strip() for v in value]


def parse_runbook(data, where: str) -> tuple[dict | None, list[str]]:
    """One runbook from its YAML data; ``(book, problems)``, book None when unusable.

    ``where`` names the file (and the item, for a file holding a list); every problem
    starts with it and names the key.
    """
    problems: list[str] = []
    if not isinstance(data, Mapping):
        return None, [f"{where}: a runbook is a mapping with id, match and steps, got {type(data).__name__}"]
    for key in data:
        if key not in TOP_KEYS:
            problems.append(f"{where}: {key}: unknown key (known: {', '.join(TOP_KEYS)})")
    book_id = data.get("id")
    if not isinstance(book_id, str) or not _ID.match(book_id):
        problems.append(f"{where}: id: required, letters, digits, '_', '.', '-' (got {book_id!r})")
        book_id = str(book_id)
    title = data.get("title", book_id)
    if not isinstance(title, str):
        problems.append(f"{where}: title: a string")
    priority = data.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 1000:
        problems.append(f"{where}: priority: an integer from 0 to 1000, got {priority!r}")
        priority = 0
    escalate = data.get("escalate", False)
    if not isinstance(escalate, bool):
        problems.append(f"{where}: escalate: true or false, got {escalate!r}")
        escalate = bool(escalate)
    notes = data.get("notes", "")
    if not isinstance(notes, str):
        problems.append(f"{where}: notes: a string")
        notes = str(notes)
    services = _strings(data.get("services"), f"{where}: services", problems, lower=True)
    init = _strings(data.get("init"), f"{where}: init", problems, lower=True)
    for name in init:
        if name not in INIT_SYSTEMS:
            problems.append(f"{where}: init: {name!r} is not one of {', '.join(INIT_SYSTEMS)}")
    faults = _strings(data.get("faults"), f"{where}: faults", problems)

    match = data.get("match")
    if match is None:
        match = {}
    if not isinstance(match, Mapping):
        problems.append(f"{where}: match: a mapping (facts, any_facts, not_facts, tolerate, exclusive, all, any, none)")
        match = {}
    for key in match:
        if key not in MATCH_KEYS:
            problems.append(f"{where}: match.{key}: unknown key (known: {', '.join(MATCH_KEYS)})")
    exclusive = match.get("exclusive", True)
    if not isinstance(exclusive, bool):
        problems.append(f"{where}: match.exclusive: true or false, got {exclusive!r}")
        exclusive = True
    book = {
        "id": book_id,
        "title": str(title).strip(),
        "services": services,
        "init": init,
        "faults": faults,
        "priority": priority,
        "escalate": escalate,
        "steps": [],
        "notes": notes.strip(),
        "path": where.split(" ")[0],
        "_facts": _requirements(match.get("facts"), f"{where}: match.facts", problems),
        "_any_facts": _requirements(match.get("any_facts"), f"{where}: match.any_facts", problems),
        "_not_facts": _requirements(match.get("not_facts"), f"{where}: match.not_facts", problems),
        "_tolerate": _requirements(match.get("tolerate"), f"{where}: match.tolerate", problems),
        "_exclusive": exclusive,
        "_all": _patterns(match.get("all"), f"{where}: match.all", problems),
        "_any": _patterns(match.get("any"), f"{where}: match.any", problems),
        "_none": _patterns(match.get("none"), f"{where}: match.none", problems),
    }
    book["match"] = _match_view(match)
    if not (book["_facts"] or book["_any_facts"] or book["_all"] or book["_any"]) and isinstance(match, Mapping) \
            and not any(p.startswith(f"{where}: match") for p in problems):
        problems.append(f"{where}: match: needs evidence to select it: facts, any_facts, all or any")

    steps = data.get("steps")
    if steps is None:
        steps = []
    if not isinstance(steps, list):
        problems.append(f"{where}: steps: a list of {{command, why}}")
        steps = []
    for index, step in enumerate(steps):
        key = f"{where}: steps[{index}]"
        if isinstance(step, str):
            step = {"command": step}
        if not isinstance(step, Mapping):
            problems.append(f"{key}: a mapping with command and why")
            continue
        for name in step:
            if name not in STEP_KEYS:
                problems.append(f"{key}.{name}: unknown key (known: {', '.join(STEP_KEYS)})")
        command = step.get("command")
        if not isinstance(command, str) or not command.strip():
            problems.append(f"{key}.command: a non-empty string")
            continue
        command = command.strip()
        if "\n" in command:
            problems.append(f"{key}.command: one command on one line")
        problems.extend(f"{key}.command: {p}" for p in _placeholder_problems(command))
        literal = _literal_pid_problem(command)
        if literal:
            problems.append(f"{key}.command: {literal}")
        approval = step.get("approval", False)
        if not isinstance(approval, bool):
            problems.append(f"{key}.approval: true or false")
            approval = False
        why = step.get("why", "")
        book["steps"].append({"command": command, "why": str(why or "").strip(), "approval": approval})
    if escalate and book["steps"]:
        problems.append(f"{where}: steps: an escalation runbook (escalate: true) has no steps")
    if not escalate and not book["steps"] and not any(p.startswith(f"{where}: steps") for p in problems):
        problems.append(f"{where}: steps: at least one step, or escalate: true")
    return (None if problems else book), problems


def _match_view(match: Mapping) -> dict:
    """The ``match`` block as written (for results, lookups and the checker)."""
    return {k: match[k] for k in MATCH_KEYS if k in match} if isinstance(match, Mapping) else {}


def runbook_files(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in (".yml", ".yaml")) \
        if directory.is_dir() else []


def read_runbook_file(path: str | Path) -> tuple[list[dict], list[str]]:
    """Every runbook in one file (a mapping, or a list of mappings); ``(books, problems)``."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return [], [f"{path}: cannot read: {exc.strerror or exc}"]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return [], [f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"]
    items = data if isinstance(data, list) else [data]
    books, problems = [], []
    for index, item in enumerate(items):
        where = f"{path}" if not isinstance(data, list) else f"{path} [{index}]"
        book, found = parse_runbook(item, where)
        problems.extend(found)
        if book is not None:
            book["path"] = str(path)
            books.append(book)
    return books, problems


def collect_runbooks(dirs: Iterable[str | Path] | None = None, *, bundled: bool = True
                     ) -> tuple[list[dict], list[str]]:
    """``(runbooks, problems)`` from the bundled directory and ``dirs``, later overriding earlier.

    A runbook whose id was already loaded from an earlier directory replaces it and
    records ``overrides`` (the replaced file). Two files of one directory with the same
    id are a problem.
    """
    ordered: list[Path] = [DEFAULT_DIR] if bundled else []
    for directory in dirs or []:
        path = Path(directory).expanduser()
        if path.resolve() not in [d.resolve() for d in ordered]:
            ordered.append(path)
    books: dict[str, dict] = {}
    problems: list[str] = []
    for directory in ordered:
        if not directory.is_dir():
            problems.append(f"runbook directory {directory} does not exist or is not a directory")
            continue
        seen_here: dict[str, str] = {}
        for path in runbook_files(directory):
            found, file_problems = read_runbook_file(path)
            problems.extend(file_problems)
            for book in found:
                if book["id"] in seen_here:
                    problems.append(f"{path}: id: {book['id']!r} is also the id of a runbook in {seen_here[book['id']]}")
                    continue
                seen_here[book["id"]] = str(path)
                if book["id"] in books:
                    book["overrides"] = books[book["id"]]["path"]
                books[book["id"]] = book
    return [books[key] for key in sorted(books)], problems


def load_runbooks(dirs: Iterable[str | Path] | None = None, *, bundled: bool = True) -> list[dict]:
    """Every runbook: the collection's own, then those of ``dirs`` (adding or overriding by id).

    Raises ``RunbookError`` naming each bad file and key.
    """
    books, problems = collect_runbooks(dirs, bundled=bundled)
    if problems:
        raise RunbookError(problems)
    return books


def public_view(book: Mapping) -> dict:
    """A runbook without its compiled matchers (for results and lookups)."""
    return {k: v for k, v in book.items() if not k.startswith("_")}


# ---------------------------------------------------------------------- matching

def _service_matches(book: Mapping, service: str) -> bool:
    return not book["services"] or service_name(service) in book["services"]


def failure_text(service: str, error: str | None, evidence, host_tools: Mapping | None = None,
                 found: FailureFacts | None = None) -> str:
    """The text runbook regexes are matched against: error, evidence, key facts, absent
    tools, and one ``fact NAME attr=value`` line per fact."""
    parts = [f"service {service}", error or ""]
    absent = (host_tools or {}).get("absent") or []
    if absent:
        parts.append("absent tools: " + " ".join(sorted(str(t) for t in absent)))
    parts.extend(f"{key}: {text}" for key, text in evidence_texts(evidence).items())
    parts.extend(key_facts(service, error, evidence))
    if found is not None:
        parts.extend(f"fact {line}" for line in found.lines())
    return "\n".join(parts)


def evaluate(book: Mapping, found: FailureFacts, text: str) -> dict:
    """Whether ``book`` fits this failure: ``{"ok", "score", "matched", "facts", "why"}``.

    ``why`` says, when it does not fit, what was missing or which fact it does not explain.
    """
    out = {"ok": False, "score": 0, "matched": [], "facts": [], "why": ""}
    if book.get("init") and found.init and found.init not in book["init"]:
        out["why"] = f"for init {', '.join(book['init'])}, the host runs {found.init}"
        return out
    blocked = next((p.pattern for p in book["_none"] if p.search(text)), None)
    if blocked:
        out["why"] = f"pattern {blocked!r} (match.none) matches"
        return out
    all_hits = [p for p in book["_all"] if p.search(text)]
    if len(all_hits) < len(book["_all"]):
        missing = next(p.pattern for p in book["_all"] if p not in all_hits)
        out["why"] = f"pattern {missing!r} (match.all) does not match"
        return out
    any_hits = [p for p in book["_any"] if p.search(text)]
    if book["_any"] and not any_hits:
        out["why"] = "no pattern of match.any matches"
        return out
    used: list[dict] = []
    matched = [p.pattern for p in all_hits + any_hits]
    for requirement in book["_facts"]:
        hits = instances(requirement, found)
        if not hits:
            out["why"] = f"no fact {_requirement_text(requirement)} (match.facts)"
            return out
        used.extend(hits)
        matched.append("fact " + _requirement_text(requirement))
    if book["_any_facts"]:
        hit_any = False
        for requirement in book["_any_facts"]:
            hits = instances(requirement, found)
            if hits:
                hit_any = True
                used.extend(hits)
                matched.append("fact " + _requirement_text(requirement))
        if not hit_any:
            out["why"] = "no fact of match.any_facts: " + ", ".join(_requirement_text(r) for r in book["_any_facts"])
            return out
    for requirement in book["_not_facts"]:
        if instances(requirement, found):
            out["why"] = f"fact {_requirement_text(requirement)} is present (match.not_facts)"
            return out
    if book["_exclusive"]:
        requires_cause = any(FACTS[r["fact"]].klass == CAUSE for r in book["_facts"] + book["_any_facts"])
        explainers = book["_facts"] + book["_any_facts"] + book["_tolerate"]
        regexes = all_hits + any_hits
        for fact in found.facts:
            if fact["class"] == CAUSE or (fact["class"] == WEAK and not requires_cause):
                if _explained(fact, explainers, regexes, found):
                    continue
                out["why"] = (f"the evidence also shows {describe(fact)} ({fact['class']}), which this runbook "
                              "neither requires nor tolerates")
                return out
    unique = []
    for fact in used:
        if fact not in unique:
            unique.append(fact)
    out.update(ok=True, matched=matched, facts=unique,
               score=book["priority"] * 100 + len(matched))
    return out


def _requirement_text(requirement: Mapping) -> str:
    filters = ", ".join(f"{k}~{v.pattern if hasattr(v, 'pattern') else v}" for k, v in requirement["filters"].items())
    if requirement.get("user"):
        filters = ", ".join(x for x in (filters, f"user={requirement['user']}") if x)
    return f"{requirement['fact']}({filters})" if filters else requirement["fact"]


def _explained(fact: Mapping, explainers: Sequence[Mapping], regexes: Sequence[re.Pattern[str]],
               found: FailureFacts) -> bool:
    for requirement in explainers:
        if any(hit == fact or (hit["fact"] == fact["fact"] and hit.get("path") == fact.get("path")
                               and hit.get("path") is not None)
               for hit in instances(requirement, found)):
            return True
    source = f"{fact.get('evidence', '')}\nfact {describe(fact)}"
    return any(p.search(source) for p in regexes)


def match_runbooks(books: Sequence[Mapping], service: str, error: str | None, evidence,
                   host_tools: Mapping | None = None, service_def: Mapping | None = None,
                   found: FailureFacts | None = None) -> list[dict]:
    """Runbooks that fit this failure, best first.

    Each result is ``{"runbook": <public view>, "score": int, "matched": [what matched],
    "facts": [the evidence facts it matched on]}``. Ranking: ``priority``, then how many
    of its matchers hit, then id.
    """
    found = found or extract_facts(service, error, evidence, host_tools, service_def)
    _known_users(books, service, found)
    text = failure_text(service, error, evidence, host_tools, found)
    results = []
    for book in books:
        if not _service_matches(book, service):
            continue
        verdict = evaluate(book, found, text)
        if verdict["ok"]:
            results.append({"runbook": public_view(book), "score": verdict["score"],
                            "matched": verdict["matched"], "facts": verdict["facts"]})
    results.sort(key=lambda item: (-item["score"], item["runbook"]["id"]))
    return results


def _known_users(books: Sequence[Mapping], service: str, found: FailureFacts) -> None:
    """Facts the runbooks of this service know to look for in the path states: which paths
    its user must write (``path_not_writable: {path: ..., user: redis}``). They become facts
    of the failure, so a plain start also sees that the data directory is not writable."""
    for book in books:
        if not _service_matches(book, service):
            continue
        for requirement in book["_facts"] + book["_any_facts"] + book["_tolerate"]:
            if requirement["fact"] == "path_not_writable":
                for fact in instances(requirement, found):
                    if fact not in found.facts and not any(
                            f["fact"] == fact["fact"] and f.get("path") == fact.get("path") for f in found.facts):
                        found.facts.append(dict(fact, source="probe"))


def why_not(books: Sequence[Mapping], service: str, error: str | None, evidence,
            host_tools: Mapping | None = None, service_def: Mapping | None = None) -> dict[str, str]:
    """For each runbook of this service that does not fit: why (for reports and debugging)."""
    found = extract_facts(service, error, evidence, host_tools, service_def)
    _known_users(books, service, found)
    text = failure_text(service, error, evidence, host_tools, found)
    return {book["id"]: evaluate(book, found, text)["why"] for book in books
            if _service_matches(book, service) and not evaluate(book, found, text)["ok"]}


def gate_steps(verdicts: Sequence[Mapping], steps: Sequence[Mapping], book_id: str) -> list[dict]:
    """Verdicts of a runbook's resolved steps, with ``approval: true`` steps raised from allow
    to approval (never lowered): the runbook's author wants a human to confirm them."""
    out = []
    for verdict, step in zip(verdicts, steps):
        item = dict(verdict)
        if step.get("approval") and item.get("verdict") == "allow":
            item["verdict"] = "approval"
            item["reasons"] = list(item.get("reasons") or []) + [f"runbook {book_id} asks a human to approve this step"]
        out.append(item)
    return out


# ---------------------------------------------------------------------- retrieval (runbooks only)

_STOP = frozenset("a an and are as at be by for from in is it not of on or the to this that with".split())
_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]")


_SEPARATOR = re.compile(r"[._/-]")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens; paths and dotted names also split into their parts."""
    tokens = []
    append, split, search = tokens.append, _SEPARATOR.split, _SEPARATOR.search
    for token in _TOKEN.findall(text.lower()):
        if token in _STOP:
            continue
        append(token)
        if search(token):
            tokens.extend(p for p in split(token) if p and p not in _STOP)
    return tokens


def passages(books: Sequence[Mapping]) -> list[dict]:
    """Split runbooks into retrievable passages: a summary, the steps, the notes."""
    items = []
    for book in books:
        path = Path(book.get("path") or f"{book['id']}.yml")
        where = {"runbook": book["id"], "file": f"{path.parent.name}/{path.name}", "heading": book["title"],
                 "services": list(book["services"]), "source": "runbook", "init": list(book.get("init") or [])}
        head = f"{book['title']} (services: {', '.join(book['services']) or 'any'})"
        if book["escalate"]:
            head += " ESCALATE: needs a human, no commands."
        items.append(dict(where, kind="summary", text=head))
        if book["steps"]:
            steps = "; ".join(f"{i}. `{s['command']}` ({s['why']})" for i, s in enumerate(book["steps"], 1))
            items.append(dict(where, kind="steps", text=f"{book['title']}: steps {steps}"))
        if book["notes"]:
            items.append(dict(where, kind="notes", text=f"{book['title']}: {' '.join(book['notes'].split())}"))
    return items


# ---------------------------------------------------------------------- placeholders

_DATA_FILES = re.compile(r"(?:^dump\.rdb$|\.rdb$|\.aof$|^appendonly|^appendonlydir$|^temp-\d+\.rdb$)")
_SIZE_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)([KMGTP]?)\s+(/\S+)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}
_UNIT_NAME = re.compile(r"^[A-Za-z0-9@_.:-]{1,200}$")


class PlaceholderError(ValueError):
    """A placeholder that the evidence cannot fill safely."""


@dataclass
class _Context:
    evidence: object
    service: str
    error: str | None
    service_def: Mapping | None
    host_tools: Mapping | None = None
    _found: FailureFacts | None = None

    @property
    def found(self) -> FailureFacts:
        if self._found is None:
            self._found = extract_facts(self.service, self.error, self.evidence, self.host_tools, self.service_def)
        return self._found


def _safe(path: str) -> str:
    if not _SAFE_PATH.match(path) or ".." in path.split("/"):
        raise PlaceholderError(f"unsafe path {path!r}")
    return path


def _under(path: str, prefix: str | None) -> bool:
    if not prefix:
        return True
    if prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


def _port_owner_pid(arg: str | None, ctx: _Context) -> str:
    if arg is None:
        ports = sorted({f["port"] for f in ctx.found.of("port_held_by_other")})
        if len(ports) != 1:
            raise PlaceholderError(f"port_owner_pid without a port needs exactly one port held by another "
                                   f"process; the evidence shows {ports or 'none'}")
        arg = str(ports[0])
    if not arg.isdigit():
        raise PlaceholderError("port_owner_pid needs a port, e.g. {port_owner_pid:80}")
    port = int(arg)
    own = own_names(ctx.service, ctx.service_def)
    owners = [item for item in listeners(ctx.evidence) if item["port"] == port and item["pid"] is not None]
    processes = ctx.evidence.get("processes") if isinstance(ctx.evidence, Mapping) else None
    for proc in processes if isinstance(processes, list) else []:
        if isinstance(proc, Mapping) and port in [int(p) for p in proc.get("ports") or [] if str(p).isdigit()]:
            owners.append({"port": port, "pid": proc.get("pid"), "likely": False,
                           "process": str(proc.get("comm") or proc.get("name") or "")})
    others = sorted({int(item["pid"]) for item in owners
                     if (item["process"] or "").lower() not in own and str(item["pid"]).isdigit()})
    guessed = [item for item in owners if item.get("likely")]
    if guessed and len(others) != 1:
        # The holder was only guessed from the socket's user: kill nothing unless unique.
        raise PlaceholderError(f"the holder of port {port} is not visible and not unique: {others}")
    if not others:
        raise PlaceholderError(f"the evidence shows no other process listening on port {port}")
    # Several holders: a forking server; its master has the lowest PID (as lab/faults.yml).
    pid = others[0]
    if pid <= 1:
        raise PlaceholderError(f"refusing PID {pid} for port {port}")
    return str(pid)


def _port_owner_name(arg: str | None, ctx: _Context) -> str:
    pid = _port_owner_pid(arg, ctx)
    names = {str(item["pid"]): item["process"] for item in listeners(ctx.evidence)}
    processes = ctx.evidence.get("processes") if isinstance(ctx.evidence, Mapping) else None
    for proc in processes if isinstance(processes, list) else []:
        if isinstance(proc, Mapping):
            names.setdefault(str(proc.get("pid")), str(proc.get("comm") or proc.get("name") or ""))
    name = names.get(pid)
    if name and re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", name):
        return name
    raise PlaceholderError(f"no safe process name for PID {pid}")


def _config_error_file(arg: str | None, ctx: _Context) -> str:
    prefix = arg or "/etc/"
    candidates = [f["file"] for f in ctx.found.of("config_invalid") if f.get("file")]
    if not candidates:
        texts = [ctx.error or ""] + list(evidence_texts(ctx.evidence).values())
        for text in texts:
            for line in text.splitlines():
                if re.search(r"\[(?:emerg|crit|alert|error)\]|syntax|error", line, re.IGNORECASE):
                    candidates.extend(m.group(1) for m in re.finditer(r"\bin (/[^\s:\"']+):\d+", line))
    paths = sorted({p for p in candidates if p.startswith(prefix)})
    if not paths:
        raise PlaceholderError(f"no configuration error names a file under {prefix}")
    if len(paths) > 1:
        raise PlaceholderError(f"several files are named: {paths}")
    return _safe(paths[0])


def _largest_file(arg: str | None, ctx: _Context) -> str:
    """The largest non-data file of DIR, read only from the host's own listing of that declared
    directory (``paths[DIR]``: "largest files:", written by the evidence module from scandir when
    its filesystem is nearly full). Size lines anywhere else (a log line, a unit's description, a
    command's output) are text a local user can write, and never choose what root deletes."""
    if not arg or not _SAFE_PATH.match(arg) or ".." in arg.split("/"):
        raise PlaceholderError("largest_file needs a directory, e.g. {largest_file:/var/lib/redis}")
    directory = arg.rstrip("/")
    described = ctx.evidence.get("paths") if isinstance(ctx.evidence, Mapping) else None
    listing = described.get(directory) if isinstance(described, Mapping) else None
    _head, found, block = str(listing or "").partition("\nlargest files:\n")
    sizes: dict[str, float] = {}
    for line in block.splitlines() if found else ():
        match = _SIZE_LINE.match(line.split(";")[0])
        if not match:
            continue
        size, path = float(match.group(1)) * _UNITS[match.group(2).upper()], match.group(3)
        parent, _sep, name = path.rstrip("/").rpartition("/")
        if parent != directory or not name or _DATA_FILES.search(name):
            continue
        sizes[path] = max(size, sizes.get(path, 0))
    if not sizes:
        raise PlaceholderError(f"the host's listing of {directory} shows no removable file")
    return _safe(max(sorted(sizes), key=lambda p: sizes[p]))


def _stale_pid_file(arg: str | None, ctx: _Context) -> str:
    paths = sorted({f["path"] for f in ctx.found.of("stale_pid_file") if f.get("path") and _under(f["path"], arg)})
    if not paths:
        raise PlaceholderError(f"the evidence shows no stale PID file{' under ' + arg if arg else ''}")
    if len(paths) > 1:
        raise PlaceholderError(f"several stale PID files: {paths}")
    return _safe(paths[0])


def _missing_dir(arg: str | None, ctx: _Context) -> str:
    dirs = set()
    for fact in ctx.found.of("path_missing"):
        path = str(fact.get("path") or "").rstrip("/")
        if not path.startswith("/"):
            continue
        # A name with an extension is a file (error.log, nginx.pid): its directory is wanted.
        if re.search(r"\.[A-Za-z0-9]{1,6}$", path.rsplit("/", 1)[-1]):
            path = path.rsplit("/", 1)[0]
        if path and _under(path, arg):
            dirs.add(path)
    if not dirs:
        raise PlaceholderError(f"the evidence shows no missing directory{' under ' + arg if arg else ''}")
    top = min(dirs, key=len)
    if any(not _under(d, top) for d in dirs):
        raise PlaceholderError(f"several unrelated directories are missing: {sorted(dirs)}")
    return _safe(top)


def _denied_path(arg: str | None, ctx: _Context) -> str:
    paths = sorted({f["path"] for f in ctx.found.of("permission_denied") if f.get("path") and _under(f["path"], arg)})
    if not paths:
        raise PlaceholderError(f"no permission-denied error names a path{' under ' + arg if arg else ''}")
    if len(paths) > 1:
        raise PlaceholderError(f"several paths are denied: {paths}")
    return _safe(paths[0])


def _unit(arg: str | None, ctx: _Context) -> str:
    name = ctx.found.unit or service_name(ctx.service)
    if name and "." not in name.split("@")[-1]:
        name += ".service"
    if not name or not _UNIT_NAME.match(name):
        raise PlaceholderError(f"no safe unit name for {ctx.service!r}")
    return name


def _service(arg: str | None, ctx: _Context) -> str:
    name = str(ctx.service).strip()
    if not re.fullmatch(r"[A-Za-z0-9@_.:-]{1,100}", name):
        raise PlaceholderError(f"unsafe service name {name!r}")
    return name


def _user(arg: str | None, ctx: _Context) -> str:
    user = ctx.found.user
    if not user or not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", user):
        raise PlaceholderError("the service's user is not known (set `user` in the service definition)")
    return user


RESOLVERS = {
    "port_owner_pid": _port_owner_pid,
    "port_owner_name": _port_owner_name,
    "config_error_file": _config_error_file,
    "largest_file": _largest_file,
    "stale_pid_file": _stale_pid_file,
    "missing_dir": _missing_dir,
    "denied_path": _denied_path,
    "unit": _unit,
    "service": _service,
    "user": _user,
}


def resolve_placeholders(command: str, evidence, service: str, error: str | None = None, *,
                         service_def: Mapping | None = None, host_tools: Mapping | None = None,
                         found: FailureFacts | None = None) -> str:
    """Fill ``{name:arg}`` placeholders of a runbook step from the evidence.

    Raises ``PlaceholderError`` when a placeholder is unknown, ambiguous or cannot be
    filled safely; the caller drops the runbook plan then.
    """
    ctx = _Context(evidence if evidence is not None else {}, service, error, service_def, host_tools, found)

    def fill(match: re.Match[str]) -> str:
        name, arg = match.group(1), match.group(2)
        resolver = RESOLVERS.get(name)
        if resolver is None:
            raise PlaceholderError(f"unknown placeholder {{{name}}}")
        return resolver(arg, ctx)

    return _PLACEHOLDER.sub(fill, command)


def _example(name: str, arg: str | None, service: str) -> str:
    directory = (arg or "").rstrip("/")
    if name == "port_owner_pid":
        return "4242"
    if name == "port_owner_name":
        return "python3"
    if name == "config_error_file":
        return f"{directory or '/etc/' + service}/example.conf"
    if name == "largest_file":
        return f"{directory}/example.bin"
    if name == "stale_pid_file":
        return arg if arg and re.search(r"\.pid$", arg) else f"{directory or '/run'}/{service}.pid"
    if name == "missing_dir":
        return directory or f"/var/lib/{service}"
    if name == "denied_path":
        return f"{directory or '/var/lib/' + service}/example"
    if name == "unit":
        return f"{service}.service"
    if name == "user":
        return service if re.fullmatch(r"[a-z_][a-z0-9_-]*", service) else "daemon"
    return service


def example_command(command: str, book: Mapping) -> str:
    """``command`` with every placeholder replaced by an example value (for the checker)."""
    service = (book.get("services") or ["example"])[0]
    return _PLACEHOLDER.sub(lambda m: _example(m.group(1), m.group(2), service)
                            if m.group(1) in PLACEHOLDERS else m.group(0), command)
