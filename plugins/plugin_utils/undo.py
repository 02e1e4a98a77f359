# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of undo: what the host is asked to keep, and what it said it put back.

The host keeps each path a command's verdict declares before the command runs and puts
them back when the attempt did not heal (``module_utils/snapshot.py``, through
``execute_plan``'s ``snapshot`` option). This module adds that request to an attempt's
module arguments and reads the host's answer into the attempt: what changed (paths,
digests, redacted diffs), what was restored, what could not be. A path that could not be
put back is never silent: the incident escalates, naming it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .snapshot_paths import incident_id, keep


def with_snapshots(module_args: Mapping[str, Any], checked: Sequence[Mapping[str, Any]], service: str,
                   started: str, attempt: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """``execute_plan``'s arguments with each command's ``keep`` (from its verdict, in the order of
    ``checked``) and the attempt's ``snapshot`` request."""
    commands = [dict(command, keep=keep(verdict)) for command, verdict in zip(module_args["commands"], checked)]
    request = dict(store_options(options), incident=incident_id(service, started), attempt=int(attempt))
    return dict(module_args, commands=commands, snapshot=request)


def store_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The run's snapshot store settings as the host modules take them (``snapshot`` of
    execute_plan without the incident, and of service_health for remembered fixes)."""
    request = {"max_bytes": int(options["snapshot_max_bytes"]), "max_age": int(options["snapshot_max_age"]),
               "undo_unhealed": bool(options["undo_unhealed"])}
    if options.get("snapshot_dir"):
        request["dir"] = str(options["snapshot_dir"])
    return request


def absorb(result: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """``(record, problem)``: the attempt's undo record (incident id, changed paths with their
    summaries and diffs, whether it was put back, restored, failed, unkept) and why the incident
    must escalate ("" when nothing went wrong). An empty record when the host kept nothing."""
    found = result.get("snapshot")
    if not isinstance(found, Mapping):
        return {}, ""
    record = {key: found.get(key) for key in ("incident", "changed", "rolled_back", "restored", "failed", "unkept",
                                              "error") if found.get(key)}
    if set(record) <= {"incident"}:
        return {}, ""  # nothing declared changed: nothing to say
    failed = [f for f in found.get("failed") or [] if isinstance(f, Mapping)]
    if failed:
        named = "; ".join(f"{f.get('path')}: {f.get('error')}" for f in failed)
        return record, (f"the attempt did not heal and {len(failed)} path(s) it changed could not be put back "
                        f"({named}); the host is not as it was, a human must look")
    return record, ""


def journal_record(run: str, service: str, attempt: int, record: Mapping[str, Any]) -> dict[str, Any]:
    """The journal's line for what an attempt changed and what was put back (paths only)."""
    return {"kind": "undo", "run": run, "service": service, "attempt": attempt,
            "incident": record.get("incident", ""), "rolled_back": bool(record.get("rolled_back")),
            "changed": [c.get("path") for c in record.get("changed") or [] if isinstance(c, Mapping)],
            "restored": list(record.get("restored") or []),
            "failed": [dict(f) for f in record.get("failed") or [] if isinstance(f, Mapping)],
            "unkept": list(record.get("unkept") or [])}
