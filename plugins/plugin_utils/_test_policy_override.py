# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY hook: make the policy misread chosen commands, to show the kernel holds the line.

Inert unless the controller process runs with ``SENTINEL_TEST_POLICY_MISREAD`` in its
environment: a JSON object ``{"COMMAND AS PROPOSED": "COMMAND THE POLICY BELIEVES IT IS"}``.
Playbook variables cannot set it (they never reach the controller's own environment). A
proposed command named there gets the verdict, effects and privilege of the believed
command, with its own argv: exactly what a parser bug does (a sed script read differently
from GNU sed, a path-valued option judged as data). tests/integration/test_confinement.py
uses it to show that Landlock stops what such a verdict lets through.
"""
from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

from .policy import classify

_ENV = "SENTINEL_TEST_POLICY_MISREAD"


def misread(verdict: Mapping[str, Any], policy: Any = None, scope: Any = None) -> dict[str, Any]:
    """``verdict`` itself, or, for a command the test named, the believed command's verdict
    carrying the real command's argv (the policy's misreading of it)."""
    raw = os.environ.get(_ENV)
    if not raw:
        return dict(verdict)
    try:
        table = json.loads(raw)
    except ValueError:
        return dict(verdict)
    believed = table.get(str(verdict.get("command"))) if isinstance(table, dict) else None
    if not isinstance(believed, str):
        return dict(verdict)
    taken = classify(believed, policy, scope)
    if taken.get("argv") is None:
        return dict(verdict)
    return dict(taken, command=verdict.get("command"), argv=shlex.split(str(verdict.get("command"))),
                display=str(verdict.get("command")))
