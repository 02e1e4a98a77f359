# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's knowledge: runbooks plus the operator's documents, indexed for retrieval.

Documents (Markdown, reStructuredText, plain text) from ``docs_dirs`` are split into
sections at their headings; each section, and each runbook's summary, steps and notes,
is a *passage* ranked with BM25 (the ``rank-bm25`` library). A passage carries the file
and the heading it came from, so the prompt and the report can cite it.

Retrieval respects the service. A passage is *about* a service when its document
declares it (front matter ``services: [...]``) or when the service's name is in the
passage's file path or headings; it is *about another service* when those name another
service the knowledge base knows (runbook services, declared services). Passages about
other services are returned only when nothing about this service or general scores at
all, and then carry ``other_service: true``.

The index is built once per content: ``load_knowledge`` keys it by the paths, sizes and
modification times of every runbook and document, keeps it in memory for the process
and in a JSON file in a cache directory for the next process (an Ansible task runs in a
fresh worker process).
"""
from __future__ import annotations

import gc
import hashlib
import json
from collections import Counter
import os
import re
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils.requirements import missing_package
from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import own_names, service_name
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import (
    DEFAULT_DIR,
    collect_runbooks,
    passages as runbook_passages,
    RunbookError,
    tokenize,
)

FORMAT = 3                     # bump when passages, tokens or the cache layout change
DOC_SUFFIXES = (".md", ".markdown", ".txt", ".text", ".rst")
SECTION_CHARS = 1500           # longer sections are cut at paragraph boundaries
MAX_DOC_BYTES = 1024 * 1024    # a bigger document is read up to this size
CACHE_FILES_KEPT = 10
PER_FILE = 2                   # passages of one file in one answer, at most
ENV_CACHE = "SENTINEL_KNOWLEDGE_CACHE"


class KnowledgeError(ValueError):
    """Documents or directories that cannot be used (names the file or directory)."""


# ---------------------------------------------------------------------- documents

_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SETEXT = re.compile(r"^(=+|-+|~+|\^+|\*+|\++|#+|\"+)\s*$")
_CAPS = re.compile(r"^[A-Z][A-Z0-9 _/&()-]{2,60}$")


def _front_matter(text: str, where: str) -> tuple[dict, str]:
    if not text.startswith("---\n") and not text.startswith("---\r\n"):
        return {}, text
    lines = text.splitlines(keepends=True)
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            head = "".join(lines[1:index])
            try:
                meta = yaml.safe_load(head) or {}
            except yaml.YAMLError as exc:
                raise KnowledgeError(f"{where}: front matter is not valid YAML: {exc}") from exc
            if not isinstance(meta, Mapping):
                raise KnowledgeError(f"{where}: front matter must be a mapping (services, title)")
            return dict(meta), "".join(lines[index + 1:])
    return {}, text


def _declared_services(meta: Mapping, where: str) -> list[str]:
    value = meta.get("services", meta.get("service"))
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise KnowledgeError(f"{where}: front matter services: a list of service names")
    return [service_name(v) for v in value]


def _headings(lines: list[str], suffix: str) -> list[tuple[int, int, str]]:
    """``(line index, level, title)`` of each heading; underlines are consumed."""
    found = []
    fenced = False
    markdown = suffix in (".md", ".markdown") or any(_ATX.match(x) for x in lines)
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        atx = _ATX.match(line) if markdown else None
        if atx:
            found.append((index, len(atx.group(1)), atx.group(2).strip()))
            continue
        if index + 1 < len(lines) and line.strip() and not line.startswith((" ", "\t", "-", "*", "|", ">")):
            under = lines[index + 1].strip()
            if _SETEXT.match(under) and len(under) >= max(3, len(line.strip()) // 2):
                if under[0] == "-" and markdown and not line.strip():
                    continue
                level = 1 if under[0] in "=#*" else 2 if under[0] in "-" else 3
                found.append((index, level, line.strip()))
    if not found and suffix not in (".md", ".markdown"):
        # Man-page-like notes: NAME, DESCRIPTION, TROUBLESHOOTING at the left margin.
        found = [(i, 1, x.strip()) for i, x in enumerate(lines)
                 if _CAPS.match(x.rstrip()) and (i == 0 or not lines[i - 1].strip())]
    return found


def _chunks(text: str, limit: int = SECTION_CHARS) -> list[str]:
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    out, current = [], ""
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        while len(paragraph) > limit:
            cut = paragraph.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            if current:
                out.append(current)
                current = ""
            out.append(paragraph[:cut].strip())
            paragraph = paragraph[cut:].strip()
        if current and len(current) + len(paragraph) + 2 > limit:
            out.append(current)
            current = paragraph
        else:
            current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        out.append(current)
    return out


def split_document(text: str, name: str, where: str | None = None) -> tuple[dict, list[dict]]:
    """``(meta, sections)`` of one document; each section ``{"heading", "text"}``.

    ``heading`` is the chain of headings above the text ("Redis > Disk full"); text
    before the first heading is filed under the document's title.
    """
    where = where or name
    suffix = Path(name).suffix.lower()
    meta, body = _front_matter(text, where)
    lines = body.splitlines()
    heads = _headings(lines, suffix)
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    if title is None:
        first = next((h for h in heads if h[1] == 1), None)
        title = first[2] if first else Path(name).stem
    skip = set()
    for index, _level, _text in heads:
        skip.add(index)
        if index + 1 < len(lines) and _SETEXT.match(lines[index + 1].strip()) and not _ATX.match(lines[index]):
            skip.add(index + 1)
    sections = []
    stack: list[tuple[int, str]] = []
    bounds = [h[0] for h in heads] + [len(lines)]
    if not heads or heads[0][0] > 0:
        intro = "\n".join(x for i, x in enumerate(lines[: bounds[0]]) if i not in skip)
        for chunk in _chunks(intro):
            sections.append({"heading": title, "text": chunk})
    for position, (index, level, heading) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        content = "\n".join(x for i, x in enumerate(lines[index + 1: bounds[position + 1]], index + 1)
                            if i not in skip)
        chain = " > ".join(h for _l, h in stack)
        for chunk in _chunks(content):
            sections.append({"heading": chain, "text": chunk})
    return {"title": title, "services": _declared_services(meta, where)}, sections


def doc_files(dirs: Iterable[str | Path]) -> list[tuple[Path, Path]]:
    """``(root, file)`` for every document under ``dirs`` (recursively, hidden ones skipped)."""
    out = []
    for directory in dirs or []:
        root = Path(directory).expanduser()
        if not root.is_dir():
            raise KnowledgeError(f"docs directory {root} does not exist or is not a directory")
        for base, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and Path(name).suffix.lower() in DOC_SUFFIXES:
                    out.append((root, Path(base) / name))
    return out


def _read_doc(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_DOC_BYTES)
    except OSError as exc:
        raise KnowledgeError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return raw.decode("utf-8", "replace").replace("\r\n", "\n")


def doc_passages(dirs: Iterable[str | Path]) -> list[dict]:
    """Every section of every document under ``dirs`` as a passage."""
    items = []
    for root, path in doc_files(dirs):
        relative = path.relative_to(root)
        label = f"{root.name}/{relative.as_posix()}" if root.name else relative.as_posix()
        meta, sections = split_document(_read_doc(path), path.name, str(path))
        for section in sections:
            items.append({"source": "doc", "runbook": None, "kind": "section", "file": label, "path": str(path),
                          "heading": section["heading"], "text": section["text"],
                          "services": list(meta["services"])})
    return items


# ---------------------------------------------------------------------- the index

def _scope_tokens(item: Mapping, memo: dict) -> list[str]:
    """Words that say what a passage is about: its file's path and its headings."""
    file, heading = str(item.get("file") or ""), str(item.get("heading") or "")
    if file not in memo:
        parts = file.split("/")
        parts[-1] = parts[-1].rsplit(".", 1)[0]
        memo[file] = set(tokenize(" ".join(parts)))
    if heading not in memo:
        memo[heading] = set(tokenize(heading))
    return sorted(memo[file] | memo[heading])


def _bm25(frequencies: list[dict[str, int]], lengths: list[int]):
    """rank-bm25's BM25Okapi made from term frequencies instead of token lists.

    The frequencies are what BM25Okapi computes from tokens first; building it from the
    cached frequencies skips that pass over every token in a new process. Equality
    with ``BM25Okapi(tokens)`` is a unit test.
    """
    try:
        from rank_bm25 import BM25Okapi  # imported late: plugin docs must load without it
    except ImportError:
        raise KnowledgeError(missing_package("rank_bm25")) from None

    model = BM25Okapi.__new__(BM25Okapi)
    model.k1, model.b, model.epsilon, model.tokenizer = 1.5, 0.75, 0.25, None
    model.corpus_size = len(lengths)
    model.avgdl = sum(lengths) / len(lengths) if lengths else 0.0
    model.doc_freqs, model.doc_len, model.idf = frequencies, lengths, {}
    documents_with = Counter()
    for item in frequencies:
        documents_with.update(item.keys())
    model._calc_idf(documents_with)  # pylint: disable=protected-access
    return model


@dataclass
class KnowledgeIndex:
    """Passages and their BM25 index; ``build`` once, ``query`` per failure."""

    passages: list[dict]
    frequencies: list[dict[str, int]]
    lengths: list[int]
    vocabulary: frozenset[str] = frozenset()
    _bm25: object = field(default=None, repr=False)

    @classmethod
    def build(cls, runbooks: Sequence[Mapping] = (), docs_dirs: Iterable[str | Path] = (),
              services: Iterable[str] = ()) -> KnowledgeIndex:
        """An index of the runbooks' passages and the documents' sections.

        ``services`` are service names known beyond those the runbooks and documents
        declare (the role's services), so passages naming them are recognised as theirs.
        """
        items = runbook_passages(runbooks) + doc_passages(docs_dirs)
        vocabulary = set()
        for name in list(services) + [s for b in runbooks for s in b.get("services", [])] + \
                [s for p in items for s in p.get("services", [])]:
            vocabulary.add(service_name(name))
        memo: dict = {}
        frequencies, lengths = [], []
        for item in items:
            item["scope"] = _scope_tokens(item, memo)
            tokens = tokenize(f"{item['heading']}\n{item['text']}")
            frequencies.append(dict(Counter(tokens)))
            lengths.append(len(tokens))
        return cls(items, frequencies, lengths, frozenset(v for v in vocabulary if v))

    def __len__(self) -> int:
        return len(self.passages)

    @property
    def bm25(self):
        if self._bm25 is None and self.passages:
            with _no_gc():
                self._bm25 = _bm25(self.frequencies, self.lengths)
        return self._bm25

    def _relation(self, item: Mapping, aliases: frozenset[str]) -> str:
        declared = item.get("services")
        if declared:
            return "about" if aliases.intersection(declared) else "other"
        scope = item.get("_scope")
        if scope is None:
            scope = item["_scope"] = frozenset(item.get("scope") or ())
        if scope & aliases:
            return "about"
        return "other" if scope & (self.vocabulary - aliases) else "general"

    def query(self, text: str, service: str | None = None, top: int = 3, init: str | None = None) -> list[dict]:
        """The ``top`` passages for ``text``, best first; never one scoring zero.

        With ``service``, passages about other services are left out unless no other
        passage scores, and are then marked ``other_service: true``. With ``init``, runbook
        passages written for another init system (``init: [systemd]`` on a SysV host) are
        left out.
        """
        if top <= 0 or not self.passages:
            return []
        model = self.bm25
        # Words no passage holds change no score; leaving them out saves a pass each.
        query = [t for t in dict.fromkeys(tokenize(text)) if t in model.idf]
        if not query:
            return []
        scores = model.get_scores(query)
        # Best first, ties in passage order (a stable sort), zero scores left out.
        order = (-scores).argsort(kind="stable")
        ranked = [int(i) for i in order[: int((scores > 0).sum())]]
        if init:
            ranked = [i for i in ranked if not self.passages[i].get("init") or init in self.passages[i]["init"]]
        aliases = own_names(service) if service else frozenset()
        chosen, others = self._pick(ranked, aliases, top, bool(service))
        other_service = not chosen
        picked = chosen or others
        result = []
        for index in picked:
            item = {k: v for k, v in self.passages[index].items()
                    if k not in ("scope", "_scope", "services", "path", "init")}
            item["services"] = list(self.passages[index].get("services") or [])
            item["score"] = round(float(scores[index]), 3)
            item["other_service"] = bool(service) and other_service
            result.append(item)
        return result

    def _pick(self, ranked: list[int], aliases: frozenset[str], top: int, scoped: bool) -> tuple[list, list]:
        """The best ``top`` passages about this service or general, and the best ``top``
        about other services (used only when there is none of the first kind); at most
        PER_FILE from one file, so several parts of one document do not crowd out others."""
        chosen, others, per_file = [], [], {}
        for index in ranked:
            item = self.passages[index]
            relation = self._relation(item, aliases) if scoped else "general"
            bucket = others if relation == "other" else chosen
            if len(bucket) >= top or (relation == "other" and not scoped):
                continue
            key = (relation == "other", item.get("file"))
            if per_file.get(key, 0) >= PER_FILE:
                continue
            per_file[key] = per_file.get(key, 0) + 1
            bucket.append(index)
            if len(chosen) >= top:
                break
        return chosen, others

    def to_json(self) -> dict:
        passages = [{k: v for k, v in p.items() if k != "_scope"} for p in self.passages]
        return {"format": FORMAT, "passages": passages, "frequencies": self.frequencies,
                "lengths": self.lengths, "vocabulary": sorted(self.vocabulary)}

    @classmethod
    def from_json(cls, data: Mapping) -> KnowledgeIndex:
        if data.get("format") != FORMAT:
            raise ValueError("index format changed")
        passages, frequencies, lengths = list(data["passages"]), list(data["frequencies"]), list(data["lengths"])
        if not len(passages) == len(frequencies) == len(lengths):
            raise ValueError("inconsistent index")
        return cls(passages, frequencies, lengths, frozenset(data["vocabulary"]))


# ---------------------------------------------------------------------- loading, with a cache

def retrieve(books: Sequence[Mapping], query: str, service: str | None = None, top: int = 3) -> list[dict]:
    """The ``top`` runbook passages for ``query`` by BM25 over ``books`` alone."""
    return KnowledgeIndex.build(books).query(query, service, top)


@dataclass
class Knowledge:
    """Runbooks and the index over them and the documents, as one run uses them."""

    runbooks: list[dict]
    index: KnowledgeIndex
    key: str
    origin: str              # "built", "memory" or "cache"
    seconds: float

    def query(self, text: str, service: str | None = None, top: int = 3, init: str | None = None) -> list[dict]:
        return self.index.query(text, service, top, init)


_MEMORY: dict[str, Knowledge] = {}


def default_cache_dir() -> Path | None:
    configured = os.environ.get(ENV_CACHE)
    if configured is not None:
        return Path(configured).expanduser() if configured.strip() and configured != "off" else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sentinel-remediation" / "knowledge"


def _stats(directory: str, recursive: bool, suffixes: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """``(path, size, mtime_ns)`` of the files the index reads under ``directory``."""
    found = []
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        raise KnowledgeError(f"{directory}: cannot read: {exc.strerror or exc}") from exc
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):   # as os.walk: a link loop cannot recurse
            if recursive:
                found.extend(_stats(entry.path, True, suffixes))
        elif os.path.splitext(entry.name)[1].lower() in suffixes:
            try:
                stat = entry.stat()
            except OSError as exc:
                raise KnowledgeError(f"{entry.path}: cannot read: {exc.strerror or exc}") from exc
            found.append((entry.path, stat.st_size, stat.st_mtime_ns))
    return found


def knowledge_key(runbook_dirs: Iterable[str | Path] | None, docs_dirs: Iterable[str | Path] | None,
                  services: Iterable[str] = ()) -> str:
    """A hash of what the index is made of: every file's path, size and mtime, the
    directories in order, the known services and the index format."""
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    sources = [("bundled", str(DEFAULT_DIR), False, (".yml", ".yaml"))]
    sources += [("runbooks", os.path.abspath(os.path.expanduser(str(d))), False, (".yml", ".yaml"))
                for d in runbook_dirs or []]
    sources += [("docs", os.path.abspath(os.path.expanduser(str(d))), True, DOC_SUFFIXES) for d in docs_dirs or []]
    for label, directory, recursive, suffixes in sources:
        digest.update(f"{label} {directory}\n".encode())
        for path, size, mtime in _stats(directory, recursive, suffixes):
            digest.update(f"{path}\0{size}\0{mtime}\n".encode())
    digest.update(("services " + " ".join(sorted(service_name(s) for s in services))).encode())
    return digest.hexdigest()


@contextmanager
def _no_gc():
    """Building or loading an index allocates a million small objects that are all kept:
    the cyclic garbage collector would scan them again and again for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read_cache(path: Path) -> KnowledgeIndex | None:
    try:
        with open(path, encoding="utf-8") as handle, _no_gc():
            return KnowledgeIndex.from_json(json.load(handle))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(directory: Path, path: Path, index: KnowledgeIndex) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".knowledge-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(index.to_json(), handle, separators=(",", ":"))
        os.replace(tmp, path)
        old = sorted(directory.glob("knowledge-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in old[CACHE_FILES_KEPT:]:
            stale.unlink(missing_ok=True)
    except OSError:
        # A cache that cannot be written costs time, never correctness.
        return


def load_knowledge(runbook_dirs: Iterable[str | Path] | None = None, docs_dirs: Iterable[str | Path] | None = None,
                   *, services: Iterable[str] = (), cache_dir: str | Path | None | bool = True) -> Knowledge:
    """The runbooks (bundled, then ``runbook_dirs`` adding or overriding) and the index.

    Raises ``RunbookError`` for bad runbooks and ``KnowledgeError`` for unusable
    documents or directories, each naming the file. ``cache_dir``: True for the default
    (``$SENTINEL_KNOWLEDGE_CACHE`` or ``~/.cache/sentinel-remediation/knowledge``), a
    path, or False/None for no file cache.
    """
    started = time.perf_counter()
    runbook_dirs = [str(d) for d in runbook_dirs or []]
    docs_dirs = [str(d) for d in docs_dirs or []]
    services = list(services)
    for directory in runbook_dirs:
        if not Path(directory).expanduser().is_dir():
            raise RunbookError(f"runbook directory {directory} does not exist or is not a directory")
    key = knowledge_key(runbook_dirs, docs_dirs, services)
    if key in _MEMORY:
        known = _MEMORY[key]
        return Knowledge(known.runbooks, known.index, key, "memory", time.perf_counter() - started)
    books, problems = collect_runbooks(runbook_dirs)
    if problems:
        raise RunbookError(problems)
    directory = default_cache_dir() if cache_dir is True else (Path(cache_dir) if cache_dir else None)
    path = directory / f"knowledge-{key[:32]}.json" if directory else None
    index = _read_cache(path) if path is not None and path.is_file() else None
    origin = "cache"
    if index is None:
        with _no_gc():
            index = KnowledgeIndex.build(books, docs_dirs, services)
        origin = "built"
        if path is not None:
            _write_cache(directory, path, index)
    knowledge = Knowledge(books, index, key, origin, time.perf_counter() - started)
    _MEMORY.clear()  # one content at a time: a long-lived process must not grow
    _MEMORY[key] = knowledge
    return knowledge


# ---------------------------------------------------------------------- for prompts and reports

def passage_label(item: Mapping) -> str:
    """``[nginx_port_conflict/steps]`` for a runbook, ``[ops/billing-api.md § Restart]`` for a document."""
    if item.get("source") == "doc" or not item.get("runbook"):
        return f"[{item.get('file', '?')} § {item.get('heading', '?')}]"
    return f"[{item.get('runbook')}/{item.get('kind', '?')}]"


def passages_header(items: Sequence[Mapping], service: str) -> str:
    """The line above the passages in the prompt; says so when none is about ``service``."""
    if items and all(p.get("other_service") for p in items):
        return (f"Knowledge passages: NOTHING in the runbooks or the operator's documents is about {service}; "
                "these are about OTHER services, hints at most:")
    return "Knowledge passages (runbooks and the operator's documents; reference, they may not fit this case):"


def public_passage(item: Mapping) -> dict:
    """What the planner's result (and so the report) keeps of a passage."""
    return {"source": item.get("source", "runbook"), "runbook": item.get("runbook"), "kind": item.get("kind"),
            "file": item.get("file"), "heading": item.get("heading"), "score": item.get("score"),
            "other_service": bool(item.get("other_service"))}
