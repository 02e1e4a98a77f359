# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Look up a service CLI's subcommand in the subcommand table (``service_cli_table``)
merged with the user's ``service_subcommands`` policy key. Pure; the tool rules decide
what a class means for a command (``scope`` needs the service in the incident; a unit
class, ``start`` ``reload`` ``restart`` ``stop``, is judged as that action on the
service's own unit, so a stop of remote access is refused and a stateful service's
restart carries its cost)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

from .service_cli_table import TABLE

UNIT_CLASSES = ("start", "reload", "restart", "stop")
CLASSES = ("read", "scope", "approve", "refuse") + UNIT_CLASSES


_MAX_WORDS = 3


class Entry(NamedTuple):
    words: str
    cls: str
    does: str


class TableError(ValueError):
    """A user's ``service_subcommands`` entry is malformed."""


def _folded(words: list[str]) -> list[str]:
    """Subcommand words compare without case; flags keep theirs (`nginx -t` is not `nginx -T`)."""
    return [w if w.startswith("-") else w.lower() for w in words]


def merged(user: Optional[Mapping[str, Any]] = None) -> dict[str, dict[str, tuple[str, str]]]:
    """The built-in table with the user's entries on top (a user entry replaces the built-in one)."""
    out: dict[str, dict[str, tuple[str, str]]] = {
        tool: {k: (v[0], v[1]) for k, v in rows.items()} for tool, rows in TABLE.items()}
    for tool, rows in (user or {}).items():
        if not isinstance(rows, Mapping):
            raise TableError(f"service_subcommands.{tool} must map subcommands to [class, what it does]")
        for words, row in rows.items():
            if (not isinstance(row, (list, tuple)) or len(row) != 2 or row[0] not in CLASSES
                    or not isinstance(row[1], str) or not row[1].strip()):
                raise TableError(f"service_subcommands.{tool}.{words} must be [class, what it does] with class one "
                                 f"of {', '.join(CLASSES)}; got {row!r}")
            key = " ".join(_folded(str(words).split()))
            if not key:
                raise TableError(f"service_subcommands.{tool} has an empty subcommand")
            out.setdefault(tool, {})[key] = (row[0], row[1].strip())
    return out


def lookup(tool: str, words: list[str], user: Optional[Mapping[str, Any]] = None) -> Optional[Entry]:
    """The longest table entry that starts ``words`` (words other than flags case-insensitive), or None when the table
    says nothing about it (the tool's own rules then decide; unknown words are never allowed)."""
    rows = merged(user).get(tool, {})
    low = _folded(words)
    for n in range(min(len(low), _MAX_WORDS), 0, -1):
        key = " ".join(low[:n])
        if key in rows:
            cls, does = rows[key]
            return Entry(key, cls, does)
    return None
