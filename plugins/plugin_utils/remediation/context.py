# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one run of the remediation service is given: one frozen context and one host port."""
from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

# A module run on the host: the module's result as Ansible returns it (``failed``,
# ``unreachable``, ``msg``, ``module_stderr`` and the module's own keys).
ModuleResult = Mapping[str, Any]


class HostPort(Protocol):
    """The one way the service reaches the host: run this collection module with these
    arguments there and return its result (an unreachable host is a result, not an error)."""

    def run_module(self, name: str, args: Mapping[str, Any]) -> ModuleResult:
        ...  # pragma: no cover


class RemediationError(ValueError):
    """A run that cannot go on (bad input found late, an approval that cannot be used): the
    message names what was wrong; the action turns it into a task failure."""


@dataclass(frozen=True)
class CacheSettings:
    """The fact cache Ansible is configured with (the Redis one shares leases and plans)."""
    plugin: str = ""
    connection: str = ""
    prefix: str = ""

    @property
    def redis(self) -> bool:
        return self.plugin.rsplit(".", 1)[-1] == "redis"

    @property
    def key_prefix(self) -> str:
        """Where this collection's keys live in the cache's Redis."""
        return f"{self.prefix or 'ansible_facts'}sentinel:"


def utc_stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RunContext:
    """One run of the heal action on one host, fixed before the host is touched.

    ``args``: the action's validated arguments (``artifacts_dir`` resolved); ``definitions``:
    the watched service definitions by name, in the given order; ``stores``: the run's
    memory, journal, lease, plan share and pending plans (``_stores.Stores``); ``warnings``:
    where the run collects the task's warnings; ``log``: a warning shown at once.
    """
    args: Mapping[str, Any]
    host: str
    hostnames: tuple
    target: str
    check_mode: bool
    definitions: Mapping[str, Mapping[str, Any]]
    run: str
    controller: str
    stores: Any
    settings: Any = None
    knowledge: Any = None
    task_vars: Mapping[str, Any] = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    log: Callable[[str], None] = print
    clock: Callable[[], float] = time.time

    def now(self) -> str:
        """The clock as the incident's timestamps write it."""
        return utc_stamp(self.clock())

    @property
    def planner_id(self) -> str:
        """This host in this run on this controller (inventory names repeat across controllers)."""
        return f"{self.host} ({self.run}@{self.controller})"

    def watched_dependencies(self, definition: Mapping[str, Any]) -> list:
        """The definitions of the watched services ``definition`` depends on, once each, in its
        order: what judges them by their own checks wherever the service is checked."""
        return [self.definitions[name] for name in dict.fromkeys(definition.get("depends_on") or [])
                if name in self.definitions and name != definition.get("name")]

    def warn(self, message: str) -> None:
        """A warning of the task's result, once."""
        if message not in self.warnings:
            self.warnings.append(message)
