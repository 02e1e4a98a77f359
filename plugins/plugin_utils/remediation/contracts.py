# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The data the remediation service passes around, as types (docs/contracts.md C1-C3).

One name per concept: a service definition is a ``definition`` everywhere in this package.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class Check(TypedDict, total=False):
    """One typed health check of a definition (``{type: service}``, ``{type: port, port}``...)."""
    type: str
    port: int
    process: str
    pattern: str
    url: str
    status: int
    argv: List[str]
    indicator: str
    rc: int


class Definition(TypedDict, total=False):
    """C1, a service definition: what a watched service is on the host."""
    name: str
    checks: List[Check]
    units: List[str]
    processes: List[str]
    user: str
    config_paths: List[str]
    data_paths: List[str]
    runtime_paths: List[str]
    log_paths: List[str]
    logs: List[str]
    ports: List[int]
    config_test: List[str]
    paths: List[str]
    pid_files: List[str]
    depends_on: List[str]


class Verdict(TypedDict, total=False):
    """C2, the policy's verdict on one command, plus where the command came from."""
    command: str
    verdict: str            # vocabulary.VERDICTS
    reasons: List[str]
    argv: Optional[List[str]]
    become: bool
    display: str
    pids: List[int]
    effects: List[str]
    source: str             # memory | runbook | llm | fallback | engine | approved


class Evidence(TypedDict, total=False):
    """C3, what the host found about a failing service (bounded, redacted on the host)."""
    init: str
    status: Dict[str, Any]
    unit: Dict[str, Any]
    other_units: List[Dict[str, Any]]
    config_test: Dict[str, Any]
    config_context: List[Dict[str, Any]]
    processes: List[Dict[str, Any]]
    service_pids: List[int]
    listeners: List[Dict[str, Any]]
    named_paths: List[Dict[str, Any]]
    pid_files: List[Dict[str, Any]]
    paths: List[Dict[str, Any]]
    dependencies: List[Dict[str, Any]]
    journal: List[str]
    oom: List[str]
    logs: Dict[str, List[str]]


class HealthRow(TypedDict, total=False):
    """One service in ``service_health``'s answer."""
    name: str
    healthy: bool
    error: str
    msg: str
    checks: List[Dict[str, Any]]
    evidence: Evidence
    tools: Dict[str, List[str]]
    skipped: Any
    blocked_by: List[str]
    degraded: bool
    remembered: Dict[str, Any]


class Plan(TypedDict, total=False):
    """What the planner (or a shared plan) gives one attempt."""
    source: str
    commands: List[Dict[str, Any]]
    dropped: List[Verdict]
    diagnosis: str
    msg: str
    runbook: Dict[str, Any]
    llm: Dict[str, Any]
    llm_used: Dict[str, Any]
    recall: str
    recalled: List[Dict[str, Any]]
    rollout_key: str
    host_values: Dict[str, Any]
    planned_by: str


class AheadFix(TypedDict, total=False):
    """A remembered fix sent with the health check (its commands already checked)."""
    commands: List[Verdict]
    diagnosis: str
    record: Dict[str, Any]  # the host's report of it, once it ran
    started: str            # when it was sent: the start of the incident it is attempt 1 of


class Outcome(TypedDict, total=False):
    """One service's outcome of a pass (incident.outcome / incident.service_outcome)."""
    service: str
    state: str              # vocabulary.STATES
    reason: str
    safeguards: List[str]
    repeat_notice: bool
    approval_id: str
    approved_by: str
