# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY hook: hold the heal action at a named phase so a test can kill the controller there.

Inert unless the controller process runs with ``SENTINEL_TEST_PAUSE_DIR`` in its
environment (tests/integration/test_fault_injection.py sets it). Playbook variables cannot
set it: they never reach the controller's own environment. With it set, the heal action
of inventory host H reaching phase P holds only when the file ``<dir>/P@H`` exists: it
writes ``<dir>/P@H.reached`` and sleeps (at most ten minutes) until the test kills the run.
Phases: ``before_commands`` (the intent is journaled, nothing sent to the host) and
``after_verify`` (the result is journaled, the memory not yet returned).
"""
from __future__ import annotations

import os
import time

_ENV = "SENTINEL_TEST_PAUSE_DIR"


def pause_at(phase: str, host: str) -> None:
    directory = os.environ.get(_ENV)
    if not directory:
        return
    wanted = os.path.join(directory, f"{phase}@{host}")
    if not os.path.exists(wanted):
        return
    with open(wanted + ".reached", "w", encoding="utf-8") as handle:
        handle.write(str(os.getpid()))
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and os.path.exists(wanted):
        time.sleep(0.2)
