# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The paths a verdict says a command changes, for the host to keep before it runs.

``confinement.py`` turns a verdict's effects into what the kernel allows (directories in
which entries may be made or removed). Undo needs the exact paths instead: the file
written, the entry created, removed or replaced, the source and the destination of a
move, the file whose mode or owner changes. The host's plan runner keeps each of them
(``module_utils/snapshot.py``) before the command runs, so an attempt that did not heal
can be put back exactly.

``tree`` says whether a directory's contents are kept too: for what removes, moves,
replaces or recursively changes a path, its whole tree (bounded on the host); for a path
only written or whose own mode changes, the path itself. ``meta`` marks a path whose mode or
owner alone changes (not recursively, and nothing else of it): the host keeps its attributes,
never its bytes, so tightening a private key's mode puts no copy of the key in the store.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

_PATH_EFFECT = re.compile(r"^(?P<verb>.*?) (?P<path>/\S*)(?P<recursive> recursively)?$")

# Effect verbs (their first words) by how the path they name changes.
_CONTENT = ("writes its error log to", "writes", "truncates", "applies", "keeps the original at", "compresses",
            "decompresses", "rewrites")
_ENTRY = ("creates the link", "creates", "moves to", "copies to", "enables", "deletes", "moves away", "replaces",
          "disables")
_TREE_INTO = ("creates what tmpfiles.d declares under", "extracts into")
_INTO = ("moves into", "copies into")
_META = ("sets mode", "sets the mode of", "gives to", "changes owner/mode of")
# Sources whose copies land in the directory of a "... into DIR" effect.
_SOURCES = ("moves away", "copies")
# "creates what tmpfiles.d ..." must not be read as "creates": the longer verbs first.
_ORDERED = sorted(_CONTENT + _ENTRY + _TREE_INTO + _INTO + _META + _SOURCES, key=len, reverse=True)


def _verb(text: str) -> str:
    return next((w for w in _ORDERED if text == w or text.startswith(w + " ")), "")


def declared_changes(effects: Sequence[str]) -> list[dict[str, Any]]:
    """``[{"path", "tree"}]``: each path the effects say changes, once, in the order named."""
    found: dict[str, bool] = {}
    content: set[str] = set()  # paths some effect changes beyond their own mode and owner
    sources: list[str] = []
    into: list[str] = []

    def add(path: str, tree: bool, meta: bool = False) -> None:
        path = posixpath.normpath(path)
        if path == "/":
            return
        found[path] = found.get(path, False) or tree
        if not meta or tree:
            content.add(path)

    for effect in effects:
        match = _PATH_EFFECT.match(str(effect))
        if not match:
            continue
        verb, path, recursive = _verb(match.group("verb")), match.group("path"), bool(match.group("recursive"))
        if verb in _SOURCES:
            sources.append(path)
        if verb in _CONTENT:
            add(path, recursive)
        elif verb in _ENTRY:
            add(path, True)
        elif verb in _TREE_INTO:
            add(path, True)
        elif verb in _INTO:
            into.append(path)
        elif verb in _META:
            add(path, recursive, meta=True)
    for directory in into:
        for source in sources:
            add(posixpath.join(directory, posixpath.basename(posixpath.normpath(source))), True)
    return [dict({"path": path, "tree": tree}, **({} if path in content else {"meta": True}))
            for path, tree in found.items()]


def keep(verdict: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The paths to keep before one checked command runs (its verdict's effects)."""
    return declared_changes([str(e) for e in verdict.get("effects") or []])


def incident_id(service: str, started: str) -> str:
    """The name an incident's snapshots are kept under on its host, and that ``undo`` takes:
    the service and the time the incident was opened (``nginx-20261128T055900Z``)."""
    stamp = re.sub(r"[^0-9TZ]", "", str(started or "")) or "unknown"
    name = re.sub(r"[^A-Za-z0-9_.@-]", "_", str(service or "service"))[:100]
    return f"{name}-{stamp}"
