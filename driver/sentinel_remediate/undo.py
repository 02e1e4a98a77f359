"""``sentinel-remediate undo HOST INCIDENT``: put back what a healed incident changed on a host.

The host kept every path a remediation command changed before it ran (the collection's
``execute_plan``); ``playbooks/undo.yml`` puts the incident's paths back with the
``sentinel.remediation.undo`` module. Without ``--yes`` it is a dry run (check mode) that
shows each path and its diff; with ``--yes`` it acts. The host is locked as a pass locks it,
so an undo never runs beside a remediation of the same host.
"""
from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .locking import HostLocks, describe_holder
from .runner import DriverError, State, child_env, new_ident, secret_values, scrub_artifacts

PLAYBOOK = "playbooks/undo.yml"
INCIDENT = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.@-]{0,159}\Z")


def check_incident(incident: str) -> str:
    if not INCIDENT.match(incident or ""):
        raise DriverError(f"incident id {incident!r}: use the report's undo_id (letters, digits and _ . @ -), "
                          "for example nginx-20261128T055900Z")
    return incident


def module_result(events: Sequence[Mapping[str, Any]]) -> dict | None:
    """The ``sentinel.remediation.undo`` task's result among a run's events, or None."""
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and \
                str(data.get("task_action") or data.get("resolved_action") or "").endswith("undo"):
            return dict(data.get("res") or {}, failed=event.get("event") == "runner_on_failed")
    return None


def run_undo(state: State, project_dir: Path, host: str, incident: str, confirm: bool, force: bool = False,
             inventory: Sequence[str] = (), snapshot_dir: str = "") -> dict:
    """Run the undo playbook on ``host``: ``{"host", "incident", "confirm", "status", "rc", "result"}``."""
    import ansible_runner  # pylint: disable=import-outside-toplevel

    check_incident(incident)
    state.ensure()
    ident = new_ident("undo")
    locks = HostLocks(state.locks, ident)
    locks.acquire([host])
    if host in locks.busy:
        locks.release()
        raise DriverError(f"{host} is held by another pass ({describe_holder(locks.busy[host])}); try again after it")
    private = state.private / ident
    private.mkdir(parents=True, exist_ok=True, mode=0o700)
    envvars = child_env(project_dir, None)
    extravars: dict[str, Any] = {"undo_host": host, "undo_incident": incident, "undo_confirm": bool(confirm),
                                 "undo_force": bool(force)}
    if snapshot_dir:
        extravars["remediate_snapshot_dir"] = snapshot_dir
    kwargs: dict[str, Any] = dict(private_data_dir=str(private), project_dir=str(project_dir),
                                  artifact_dir=str(state.artifacts), ident=ident, playbook=PLAYBOOK, limit=host,
                                  extravars=extravars, envvars=envvars, suppress_env_files=True, quiet=True,
                                  fact_cache_type="configured", rotate_artifacts=50)
    if inventory:
        kwargs["inventory"] = [str(Path(i).expanduser().resolve()) if Path(i).expanduser().exists() else i
                               for i in inventory]
    try:
        runner = ansible_runner.run(**kwargs)
        events = list(runner.events)
        status, rc = runner.status, runner.rc
    finally:
        if (state.artifacts / ident).is_dir():
            scrub_artifacts(state.artifacts / ident, secret_values({**envvars}))
        shutil.rmtree(private, ignore_errors=True)
        locks.release()
    return {"host": host, "incident": incident, "confirm": bool(confirm), "status": status, "rc": rc,
            "result": module_result(events)}


def render(outcome: Mapping[str, Any]) -> str:
    """What an SRE reads: each path, what happens to it, the diff; then what to do next."""
    result = outcome.get("result")
    head = f"{outcome['host']} incident {outcome['incident']}"
    if result is None:
        return f"{head}: the undo did not reach the host (ansible-runner {outcome.get('status')}, rc {outcome.get('rc')})\n"
    lines = []
    if result.get("failed") and not result.get("paths"):
        return f"{head}: {result.get('msg', 'failed')}\n"
    for item in result.get("paths") or []:
        lines.append(f"{item.get('path')}: {item.get('outcome')}")
        lines.extend("    " + line for line in str(item.get("diff") or "").splitlines())
    if not lines:
        lines.append("nothing to put back")
    if result.get("failed"):
        lines.append(f"FAILED: {result.get('msg')}")
    elif not outcome.get("confirm"):
        lines.append("dry run: nothing changed; run again with --yes to put these paths back")
    else:
        lines.append(f"put back: {len(result.get('restored') or [])} path(s)")
    return f"{head}\n" + "\n".join(lines) + "\n"


def exit_code(outcome: Mapping[str, Any]) -> int:
    result = outcome.get("result")
    return 1 if result is None or result.get("failed") or outcome.get("rc") not in (0, None) else 0


def emit(outcome: Mapping[str, Any], out: TextIO) -> int:
    out.write(render(outcome))
    out.flush()
    return exit_code(outcome)
