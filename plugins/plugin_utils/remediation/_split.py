# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The heal phase of a split pass (roles/remediate/tasks/run.yml, fleet_stop.py): which
services' remembered fixes go with one re-check of them, and the health to heal from after it.

In a split pass nothing runs in the health phase: every host's health is counted first. The
heal phase then knows which checks the count stopped; the services that failed and that the
count left to act on are checked once more in one round trip that carries their remembered
fixes, and the host runs one only where it finds the very failure that fix healed (as the
single-task pass does in its health check). A service the count stopped is never in that
round trip, so no fix of it reaches the host. The health phase reads no evidence for a failing
service memory holds fixes for (``evidence_deferred``): that re-check reads it, once, with or
without a fix to carry, and the heal goes on from it. Pure functions; ``service.Remediation``
calls them.
"""
from __future__ import annotations

from collections.abc import Mapping


def recheck_names(definitions: Mapping[str, Mapping], health: Mapping, stopped: Mapping) -> list[str]:
    """The watched services, in their given order, whose remembered fixes may go with a
    re-check: failing in ``health`` with evidence, neither slow (degraded) nor waiting for a
    failing dependency nor skipped, and not stopped by the fleet count (``stopped``)."""
    rows = {str(r.get("name")): r for r in health.get("services") or [] if isinstance(r, Mapping)}
    names = []
    for name in definitions:
        row = rows.get(name)
        if row is None or name in (stopped or {}):
            continue
        if row.get("healthy") or row.get("skipped") or row.get("degraded") or row.get("blocked_by") \
                or not (row.get("evidence") or row.get("evidence_deferred")):
            continue
        names.append(name)
    return names


def deferred(health: Mapping) -> set[str]:
    """The failing services whose evidence the health phase left to the heal phase (memory held
    fixes for them: service_health's ``defer_evidence``)."""
    return {str(r.get("name")) for r in health.get("services") or []
            if isinstance(r, Mapping) and not r.get("healthy") and r.get("evidence_deferred")}


def merged(health: Mapping, fresh: Mapping) -> dict:
    """``health`` with the rows of the re-check (``fresh``) in place of the rows it checked
    again; the tools each reported, the re-check's winning."""
    again = {str(r.get("name")): r for r in fresh.get("services") or [] if isinstance(r, Mapping)}
    out = dict(health)
    out["services"] = [again.get(str(r.get("name")), r) if isinstance(r, Mapping) else r
                       for r in health.get("services") or []]
    tools = fresh.get("tools")
    if isinstance(tools, Mapping) and tools:
        out["tools"] = dict(health.get("tools") or {}, **tools)
    out["healthy"] = all(bool(r.get("healthy")) for r in out["services"] if isinstance(r, Mapping))
    return out
