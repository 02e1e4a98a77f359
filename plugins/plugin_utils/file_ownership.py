# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whose files a plan touches, from what the host said (``path_ownership`` on the host).

The evidence carries ``ownership`` (``{path: notes}``) and, for each named path,
``managed_by``. An approver is shown, for each path a plan's command names (or a path
beneath it), what the host says about who manages it: the configuration-management header,
the package's conffile, the deploy tree, the team or ticket in a comment.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence


def owners_in(evidence: Mapping | None) -> dict[str, str]:
    """``{path: notes}`` the evidence holds, from its ``ownership`` and its named paths."""
    out: dict[str, str] = {}
    if not isinstance(evidence, Mapping):
        return out
    owned = evidence.get("ownership")
    if isinstance(owned, Mapping):
        out.update((str(k), str(v)) for k, v in owned.items() if v)
    named = evidence.get("named_paths")
    if isinstance(named, Mapping):
        for path, facts in named.items():
            notes = facts.get("managed_by") if isinstance(facts, Mapping) else None
            if notes and str(path) not in out:
                out[str(path)] = "; ".join(str(n) for n in notes) if isinstance(notes, (list, tuple)) else str(notes)
    return out


def _words(command: Mapping) -> list[str]:
    argv = command.get("argv")
    if isinstance(argv, (list, tuple)) and argv:
        return [str(a) for a in argv]
    return str(command.get("command") or "").split()


def _touched(known: Mapping[str, str], commands: Sequence[Mapping]) -> dict[str, str]:
    """The entries of ``known`` (``{path: text}``) whose path the commands name: an argument
    that is the path, or that lies beneath it, or a sed-style argument holding it."""
    out: dict[str, str] = {}
    for command in commands:
        if not isinstance(command, Mapping):
            continue
        for word in _words(command):
            for path, notes in known.items():
                if word == path or word.startswith(path.rstrip("/") + "/") or (path in word and len(path) > 4):
                    out[path] = notes
    return out


def plan_ownership(evidence: Mapping | None, commands: Sequence[Mapping]) -> dict[str, str]:
    """``{path: notes}`` of the owned paths the commands name: an argument that is the path,
    or that lies beneath it (a file in an owned directory), or a sed-style argument holding it."""
    return _touched(owners_in(evidence), commands)


def plan_writer_records(evidence: Mapping | None, commands: Sequence[Mapping]) -> dict[str, str]:
    """``{path: record}``: for each guard or marker file the commands name, what its writer last
    recorded (the evidence's ``writer_records``: its own log and journal lines, or that none
    was found), so that the approver sees how the writer ended before removing its file."""
    records = evidence.get("writer_records") if isinstance(evidence, Mapping) else None
    if not isinstance(records, Mapping):
        return {}
    return _touched({str(k): str(v) for k, v in records.items() if v}, commands)
