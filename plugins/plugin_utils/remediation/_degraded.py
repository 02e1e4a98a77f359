# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A degraded service (slow, alive) whose dependencies show the cause is planned for.

``degraded_cause``: the evidence to plan with when the service's watched dependencies show
a cause it waits on (``dependency_cause``: a blocking session, every connection slot taken,
a lock or a pool their lines speak of), or when its own checks show that it serves while one
kind of request waits in it (``dependency_cause.waits_inside``: one asking check answered,
another timed out), else None: it stays ``degraded``, reported and escalated, nothing planned. The plan is then checked under ``do_no_harm`` (``PlanCheck``
reads the evidence's ``degraded`` entry): nothing that restarts, stops or kills the service or
a stateful dependency runs.
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_cause

from .context import HostPort, RunContext
from ._dependencies import with_dependencies


def degraded_cause(ctx: RunContext, port: HostPort, name: str, definition: Mapping, row: Mapping,
                   rows: Mapping[str, Mapping]) -> dict | None:
    """The degraded service's evidence with where it waits, when that names a cause in a
    dependency or inside the service; None otherwise (nothing is planned for it)."""
    error = str(row.get("error") or row.get("msg") or "health check failed")
    evidence = dict(row.get("evidence") or {})
    causes = []
    if definition.get("depends_on"):
        evidence = with_dependencies(ctx, port, name, definition, error, evidence, rows, waits=True)
        causes = dependency_cause.causes_in(evidence)
    if not causes:
        causes = dependency_cause.waits_inside(name, row.get("checks"))
        if not causes:
            return None
        evidence["degraded"] = dependency_cause.degraded_note(name, causes)
    ctx.log(f"sentinel.remediation.heal: {ctx.host}: {name} is degraded and the cause is shown; planned "
            f"under do no harm: {causes[0][:300]}")
    if not ctx.check_mode:
        ctx.stores.journal.append({"kind": "degraded_cause", "run": ctx.run, "host": ctx.host, "service": name,
                                   "causes": causes})
    return evidence
