# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test support, not part of the collection: make the policy misread chosen commands, to show
the kernel holds the line.

Inert unless ``SENTINEL_TEST_POLICY_MISREAD`` is set in the test's environment: a JSON
object ``{"COMMAND AS PROPOSED": "COMMAND THE POLICY BELIEVES IT IS"}``. The collection
never reads it (it is not in the built tarball). A proposed command named there gets the verdict, effects and privilege of the believed
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

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify

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
