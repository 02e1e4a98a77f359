# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PIDs the incident's own diagnostic reads showed, and how the host is to check them.

The first evidence lists the service's processes with their start times; a process that
appeared later (a new backend holding a lock, a worker forked after the evidence) is known
to the model only from the output of a read it ran in this incident (`ps`, `pgrep -a`,
`pg_stat_activity`). Such a PID may be signalled under the same policy checks as one from
the evidence (``seen_pids`` in the scope), but text is never trusted: the host reads the
process from /proc just before the command and signals it only if it is one of the
service's processes then (``execute_plan``'s ``expect_pids`` entry ``seen``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.module_utils.host_probe import pids_in

# Effects (as the policy words them) of a command that only reads.
_READ_EFFECT = re.compile(r"^(?:reads|inspects|lists|finds|checks|tests|prints|names)\b")
MAX_SEEN = 256


def is_read(command) -> bool:
    """Whether a command of an attempt (``incident.CommandRun``) ran and only read."""
    effects = [str(e) for e in getattr(command, "effects", None) or []]
    return bool(getattr(command, "ran", False)) and bool(effects) and all(_READ_EFFECT.match(e) for e in effects)


def seen_pids(incident, limit: int = MAX_SEEN) -> list[int]:
    """PIDs in the output of the reads this incident ran (newest attempts first), at most ``limit``."""
    found: list[int] = []
    for attempt in reversed(list(getattr(incident, "attempts", None) or [])):
        for command in attempt.commands:
            if not is_read(command):
                continue
            for pid in pids_in(command.stdout):
                if pid not in found:
                    found.append(pid)
                if len(found) >= limit:
                    return found
    return found


def seen_starts(incident) -> dict[int, int]:
    """When each PID its reads showed had started, as the host read it with the output (the
    newest read's), for the PIDs the host found alive then."""
    found: dict[int, int] = {}
    for attempt in reversed(list(getattr(incident, "attempts", None) or [])):
        for command in attempt.commands:
            if not is_read(command):
                continue
            for pid, start in (getattr(command, "pid_starts", None) or {}).items():
                found.setdefault(int(pid), int(start))
    return found


def with_seen(scope: Mapping, incident) -> dict:
    """The incident's scope with the PIDs its reads showed (``seen_pids``)."""
    seen = seen_pids(incident) if incident is not None else []
    return dict(scope, seen_pids=seen) if seen else dict(scope)


def expectations(commands: Sequence[Mapping], expect: Mapping[str, Mapping], seen: Iterable[int],
                 starts: Mapping[int, int] | None = None) -> dict:
    """``expect_pids`` entries for the PIDs the commands signal that the evidence does not
    describe but this incident's reads showed: ``{"seen": True, "start": ...}`` (the host checks
    each is one of the service's processes and, with the start the read found (``starts``:
    ``seen_starts``), that very process)."""
    seen = set(seen)
    starts = starts or {}
    out: dict = {}
    for command in commands:
        for pid in command.get("pids") or []:
            key = str(int(pid))
            if key not in expect and int(pid) in seen:
                out[key] = {"seen": True, "start": starts.get(int(pid))}
    return out
