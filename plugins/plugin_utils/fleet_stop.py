# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-wide stop: when one check fails on too much of the fleet at once, suspect the
check or something every host shares (a monitoring change, DNS, a common backend), not every
host at once: act on nothing, and tell a human once, with the list.

The play checks every host's health first (the heal action's ``phase: health``), then one
controller-side task reads every host's result (:func:`decide`) and the heal of each host is
told which services it must leave alone (:func:`stop_outcome`). Pure functions; the play
and the heal action call them.

The rule: a service's check is stopped when at least ``min_hosts`` reachable hosts of the play
ran it and more than ``share`` of them failed it (a degraded, slow row fails too). Below
``min_hosts`` a shared failure is plausible for real (a bad deploy on three web servers) and
the canary guards the plan instead; ``share`` 1 turns the stop off.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

# What an outcome stopped by the fleet rule carries in its ``safeguards`` list.
GUARD = "fleet_stop"


class FleetStopError(ValueError):
    """Bad settings, named as the operator wrote them."""


def check_settings(share, min_hosts) -> tuple[float, int]:
    """``share`` in (0, 1], ``min_hosts`` at least 2 (one host of two is never "the fleet")."""
    try:
        share_f = float(share)
    except (TypeError, ValueError):
        raise FleetStopError(f"remediate_fleet_stop_share must be a number in (0, 1], got {share!r}") from None
    if not 0 < share_f <= 1:
        raise FleetStopError(f"remediate_fleet_stop_share must be in (0, 1] (1 turns the stop off), got {share!r}")
    try:
        hosts = int(min_hosts)
    except (TypeError, ValueError):
        raise FleetStopError(f"remediate_fleet_stop_min_hosts must be a whole number, at least 2, got {min_hosts!r}") from None
    if hosts < 2 or str(hosts) != str(min_hosts).strip():
        raise FleetStopError(f"remediate_fleet_stop_min_hosts must be a whole number, at least 2, got {min_hosts!r}")
    return share_f, hosts


def _rows(result) -> list[Mapping]:
    """The service rows of one host's health phase result (``{"health": {"services": [...]}}``
    or the health check's own result); none for a host that was not checked."""
    if not isinstance(result, Mapping) or result.get("unreachable") or result.get("failed") or result.get("skipped"):
        return []
    health = result.get("health") if isinstance(result.get("health"), Mapping) else result
    return [r for r in health.get("services") or [] if isinstance(r, Mapping) and r.get("name")]


def decide(results: Mapping[str, object], share, min_hosts) -> dict:
    """Which services' checks stop across the fleet, from every host's health phase result.

    Returns ``{"checked": n, "stopped": {service: reason}, "services": {service: {"checked": [..],
    "failing": [..], "stopped": bool}}}``; hosts in sorted order, so every controller and every
    host reads the same list (its first host sends the one notice)."""
    share_f, hosts_min = check_settings(share, min_hosts)
    checked: dict[str, list[str]] = {}
    failing: dict[str, list[str]] = {}
    errors: dict[str, dict[str, int]] = {}
    reached = 0
    for host in sorted(str(h) for h in results):
        rows = _rows(results[host])
        reached += 1 if rows else 0
        for row in rows:
            name = str(row["name"])
            checked.setdefault(name, []).append(host)
            if not row.get("healthy"):
                failing.setdefault(name, []).append(host)
                error = str(row.get("error") or row.get("msg") or "health check failed")[:120]
                errors.setdefault(name, {})[error] = errors.get(name, {}).get(error, 0) + 1
    services, stopped = {}, {}
    for name in sorted(checked):
        bad = failing.get(name, [])
        stop = len(checked[name]) >= hosts_min and len(bad) > share_f * len(checked[name])
        services[name] = {"checked": checked[name], "failing": bad, "stopped": stop}
        if stop:
            common = max(errors[name].items(), key=lambda item: item[1])
            stopped[name] = {
                "hosts": bad, "checked": len(checked[name]),
                "reason": (f"fleet-wide stop: the {name} check fails on {len(bad)} of {len(checked[name])} checked hosts "
                           f"at once ({', '.join(bad)}), more than {share_f:.0%} of them (remediate_fleet_stop_share); "
                           f"most say {common[0]!r} ({common[1]} of {len(bad)}). The check or something the hosts share "
                           "is suspect: nothing was planned or run on any host; a human decides")}
    return {"checked": reached, "stopped": stopped, "services": services}


def stop_outcome(service: str, host: str, stop: Mapping, base: Mapping) -> dict:
    """One host's outcome for a stopped check: escalated, nothing planned; only the first
    failing host of the list sends the notice (the others are marked ``repeat_notice``)."""
    outcome = dict(base)
    outcome.update(service=service, state="escalated", reason=str(stop.get("reason") or "fleet-wide stop"),
                   safeguards=[GUARD])
    hosts: Sequence = stop.get("hosts") or []
    if hosts and str(hosts[0]) != host:
        outcome["repeat_notice"] = True
    return outcome


def journal_record(run: str, host: str, service: str, stop: Mapping) -> dict:
    return {"kind": "fleet_stop", "run": run, "host": host, "service": service,
            "hosts": [str(h) for h in stop.get("hosts") or []], "checked": int(stop.get("checked") or 0),
            "reason": str(stop.get("reason") or "")}
