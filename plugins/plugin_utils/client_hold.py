# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A waived restart the host did not run because clients appeared: the plan waits for a human.

A stateful service's restart runs without a human only while the service serves no client
(``safeguards.weigh_restart_cost``, the autonomy table's ``restart_without_clients``); the host
counts again just before the command and, finding one (or unable to count), does not run it
and stops the plan there (``plan_runner.run_plan``: the command's result carries ``clients``).
That is not a plan that failed: it is a command that needs approval. The attempt loop holds
the same plan (the same commands, sealed under one approval id) as any gated plan, and the
approver is told what the restart would drop.
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine


def held(attempt: engine.Attempt) -> dict:
    """The host's count of clients that kept one of ``attempt``'s commands from running (the
    first such), or {} when none did or the attempt healed anyway (the skipped restart is
    then not needed: nothing waits)."""
    if attempt.healthy:
        return {}
    for command in attempt.commands:
        if command.skipped and isinstance(command.clients, Mapping) and command.clients:
            return dict(command.clients, command=command.command)
    return {}


def reason(found: Mapping, waiting: str) -> str:
    """The incident's reason while the plan waits: what the restart would drop, then
    ``waiting`` (the approval's own line: its id and how to approve it)."""
    command = found.get("command") or "the restart"
    if "unknown" in found:
        cost = f"{command} could drop client connections that cannot be counted now ({found['unknown']})"
    else:
        count = int(found.get("count") or 0)
        endpoints = ", ".join(f"{k} {v}" for k, v in sorted((found.get("by_endpoint") or {}).items()))
        queued = int(found.get("queued") or 0)
        cost = (f"{command} would drop {count} client connection(s)"
                + (f" ({endpoints}{f'; {queued} not accepted yet' if queued else ''})" if endpoints else "")
                + ", opened after the evidence showed none")
    return f"{cost}: a human should confirm; it was not run, nor anything after it; {waiting}"
