# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan shared by failure signature, checked against the receiving host's own evidence.

Hosts with one signature share one plan (plan_share.py). The signature is a fingerprint,
and a fingerprint can meet two faults that look alike; so before a plan made on another
host runs here, it must fit this host: the causes its maker saw (``causes``: the typed
causes of that host's evidence, host values normalised) are the causes this host's
evidence shows, and every path the plan acts on is one this host's evidence or its
service definition knows (or, for a path a plan makes, its directory). A plan that does not fit is not used: this host plans for
itself, and says why.

``host_diagnosis``: what this host's own evidence says the causes are, in words, for the
approver of a plan (whoever made it).
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import evidence_texts
from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import CAUSE, describe, extract_facts
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import cause_facts

_DECLARED = ("config_paths", "data_paths", "runtime_paths", "log_paths", "logs", "paths", "pid_files")
_PATH = re.compile(r"^/[\w.@+~=:-]+(?:/[\w.@+~=:-]*)*$")
DIAGNOSIS_MAX = 6


def causes(service: str, error: str, evidence: Mapping | None, hostnames: Iterable[str] = ()) -> list[str]:
    """The causes a plan is made for: the typed causes of the evidence, host values normalised
    (signature.cause_facts), so two hosts with one fault agree and two faults do not."""
    return cause_facts(service, error, evidence, hostnames)


def _words(command: Mapping | str) -> list[str]:
    text = str(command.get("command") if isinstance(command, Mapping) else command or "")
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def targets(commands: Sequence[Mapping | str]) -> list[str]:
    """The absolute paths a plan's commands act on or read (their arguments, not the programs)."""
    found: list[str] = []
    for command in commands or []:
        words = _words(command)
        for word in words[1:]:
            value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
            if _PATH.match(value) and value not in found and value != "/":
                found.append(value.rstrip("/") or "/")
    return found


def _known(path: str, text: str, declared: Sequence[str]) -> bool:
    """The host shows ``path``, or the directory a plan would make it in (a move's target)."""
    parent = path.rsplit("/", 1)[0]
    if path in text or (parent and re.search(re.escape(parent) + r"(?![\w.@+~=:-])", text)):
        return True
    for known in declared:
        known = known.rstrip("/")
        if known and (path == known or path.startswith(known + "/")):
            return True
    return False


def recheck(plan: Mapping, *, service: str, error: str, evidence: Mapping | None, definition: Mapping | None,
            hostnames: Iterable[str] = ()) -> list[str]:
    """Why a plan made on another host does not fit this host's own evidence ([] when it does)."""
    problems = []
    theirs = plan.get("causes")
    if isinstance(theirs, list):
        mine = causes(service, error, evidence, hostnames)
        if sorted(str(c) for c in theirs) != mine:
            there = "; ".join(str(c) for c in theirs[:3]) or "no specific cause"
            here = "; ".join(mine[:3]) or "no specific cause"
            problems.append(f"it was made for other causes (there: {there[:300]}; here: {here[:300]})")
    # the evidence's words, its keys too (paths are keys of its path sections)
    text = "\n".join(f"{k}\n{v}" for k, v in evidence_texts(evidence if isinstance(evidence, Mapping) else None).items())
    declared = [str(p) for key in _DECLARED for p in (definition or {}).get(key) or []]
    unknown = [p for p in targets(plan.get("commands") or []) if not _known(p, text, declared)]
    if unknown:
        problems.append("it acts on " + ", ".join(unknown[:3]) + ", which this host's evidence does not show")
    return problems


def host_diagnosis(service: str, error: str, evidence: Mapping | None) -> list[str]:
    """This host's causes in words (at most ``DIAGNOSIS_MAX``), as its own evidence shows them."""
    if not isinstance(evidence, Mapping):
        return []
    found = extract_facts(service, error, evidence)
    out = []
    for fact in found.facts:
        if fact["class"] == CAUSE:
            said = " ".join(describe(fact).split())[:300]
            if said not in out:
                out.append(said)
    return out[:DIAGNOSIS_MAX]
