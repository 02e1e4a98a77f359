# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smallest value of each integer option shared by the heal action, the remediate role and
the host modules (service_health, execute_plan): one table, so a value the role or the action
accepts is never refused later on the host. The role's meta/argument_specs.yml states the same
bounds (a unit test holds them equal).

Runs on hosts: standard library only, Python 3.9.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

MINIMUMS: dict[str, int] = {
    "max_attempts": 1,
    "max_commands": 1,
    "memory_max": 1,
    # Below this the end of a command's output cannot carry a whole error line (and the
    # redaction margin would be most of what is kept).
    "output_max": 100,
    "command_timeout": 1,
    "timeout": 1,
    "settle": 0,
    "plan_wait": 0,
    "approval_max_age": 0,
    "plan_share_ttl": 1,
    "evidence_log_lines": 0,
    # The evidence must hold at least the status and the config test's verdict.
    "evidence_max_bytes": 200,
    "evidence_max_services": 1,
    "confirm_attempts": 0,
    "confirm_interval": 0,
    "confirm_max_seconds": 0,
    "action_budget": 0,
    "action_budget_window": 1,
    "flap_count": 0,
    "flap_window": 1,
    "canary_size": 0,
    "notify_remind": 0,
}

# The remediate role's variable for each option it passes on (a bad value is named both ways).
ROLE_VARIABLES: dict[str, str] = {
    name: "remediate_" + name for name in (
        "max_commands", "memory_max", "output_max", "command_timeout", "settle", "confirm_attempts",
        "confirm_interval", "confirm_max_seconds", "action_budget", "action_budget_window", "flap_count",
        "flap_window", "canary_size", "notify_remind", "plan_wait", "plan_share_ttl", "evidence_log_lines", "approval_max_age",
        "evidence_max_bytes")
}
ROLE_VARIABLES["max_attempts"] = "remediate_max_retries"


def below_minimum(params: Mapping, names: Iterable[str] | None = None) -> list[str]:
    """Why each of ``names`` (default: every option of the table that ``params`` has) is below
    its minimum, in table order, e.g. ``"output_max must be at least 100, got 50"``."""
    wanted = set(MINIMUMS if names is None else names)
    problems = []
    for name, low in MINIMUMS.items():
        value = params.get(name)
        if name in wanted and isinstance(value, int) and value < low:
            problems.append("%s must be at least %d, got %d" % (name, low, value))
    return problems
