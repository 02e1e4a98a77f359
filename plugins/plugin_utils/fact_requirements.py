# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fact requirements of runbooks: ``path_missing: {path: ...}`` parsed once, then matched
against the facts a failure shows (module_utils/failure_facts).

Controller-only: hosts extract facts (for the signature of a remembered fix) but never match
runbooks, so this part does not ship in their module payloads.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import (
    CAUSE,
    FACTS,
    FailureFacts,
    writable_by,
)


class FactSpecError(ValueError):
    """A fact requirement in a runbook that cannot be used."""


def parse_requirement(spec, where: str) -> dict:
    """``"stale_pid_file"`` or ``{"path_missing": {"path": "^/var/log/nginx"}}`` -> a requirement.

    A requirement is ``{"fact": name, "filters": {attr: compiled regex | exact value},
    "user": str | None}``; ``user`` is given to ``path_not_writable`` only.
    """
    if isinstance(spec, str):
        name, filters = spec, {}
    elif isinstance(spec, Mapping) and len(spec) == 1:
        name, filters = next(iter(spec.items()))
        filters = filters if filters is not None else {}
        if not isinstance(filters, Mapping):
            raise FactSpecError(f"{where}: the filters of fact {name!r} must be a mapping of attribute: pattern")
    else:
        raise FactSpecError(f"{where}: a fact is a name or a one-key mapping {{name: {{attribute: pattern}}}}")
    name = str(name)
    if name not in FACTS:
        raise FactSpecError(f"{where}: unknown fact {name!r} (known: {', '.join(sorted(FACTS))})")
    allowed = set(FACTS[name].attrs)
    compiled: dict = {}
    user = None
    for attr, pattern in filters.items():
        attr = str(attr)
        if attr not in allowed:
            raise FactSpecError(f"{where}.{name}.{attr}: fact {name!r} has no attribute {attr!r} "
                                f"(it has: {', '.join(sorted(allowed)) or 'none'})")
        if name == "path_not_writable" and attr == "user":
            if not isinstance(pattern, str) or not re.fullmatch(r"[a-z_][\w.-]*", pattern):
                raise FactSpecError(f"{where}.{name}.user: a user name, got {pattern!r}")
            user = pattern
            continue
        if isinstance(pattern, bool) or not isinstance(pattern, (str, int)):
            raise FactSpecError(f"{where}.{name}.{attr}: a pattern (string) or a number, got {pattern!r}")
        if isinstance(pattern, int):
            compiled[attr] = pattern
            continue
        try:
            compiled[attr] = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise FactSpecError(f"{where}.{name}.{attr}: bad pattern {pattern!r}: {exc}") from exc
    return {"fact": name, "filters": compiled, "user": user}


def fits(requirement: Mapping, fact: Mapping) -> bool:
    """Whether ``fact`` is what ``requirement`` asks for."""
    if fact.get("fact") != requirement["fact"]:
        return False
    if requirement.get("user") and fact.get("user") not in (None, requirement["user"]):
        return False
    for attr, pattern in requirement["filters"].items():
        value = fact.get(attr)
        if value is None:
            return False
        if isinstance(pattern, int):
            if str(value) != str(pattern):
                return False
        elif not pattern.search(str(value)):
            return False
    return True


def instances(requirement: Mapping, found: FailureFacts) -> list[dict]:
    """The facts of ``found`` that satisfy ``requirement``.

    ``path_not_writable`` is judged here, against the path states the evidence shows, for
    the paths the requirement names: which paths a service must write is knowledge of the
    service (its runbook), not of the evidence. The user is the service's own when the
    evidence or the service definition says it, else the one the requirement names.
    """
    hits = [fact for fact in found.facts if fits(requirement, fact)]
    if requirement["fact"] == "path_not_writable" and (requirement.get("user") or found.user):
        user = found.user or requirement["user"]
        for path, state in sorted(found.paths.items()):
            if writable_by(state, user) is False:
                fact = {"fact": "path_not_writable", "class": CAUSE, "path": path, "user": user,
                        "owner": f"{state.owner}:{state.group}" if state.owner else None,
                        "mode": f"{state.mode:04o}" if state.mode is not None else None,
                        "source": "probe", "evidence": f"{path}: {state.text.split(';')[0]}"}
                fact = {k: v for k, v in fact.items() if v is not None}
                if fits(dict(requirement, user=None), fact) and not any(h.get("path") == path for h in hits):
                    hits.append(fact)
    return hits
