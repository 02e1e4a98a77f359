# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY hook: hold the heal action at a named phase so a test can kill the controller there.

Not part of the collection: a test puts this directory on ``PYTHONPATH`` of the
ansible-playbook it starts (tests/integration/test_fault_injection.py), so Python imports
it at start-up as ``sitecustomize``. It does nothing unless ``SENTINEL_TEST_PAUSE_DIR``
is set too. It wraps the incident journal's ``Journal.append`` once that module is
imported (an audit hook on imports: the collection's modules are loaded by Ansible's own
finder, later): the heal action journals the intent of a plan right before sending its
commands and the result right after the verification, which are the two phases a test
holds. The heal action of inventory host H reaching phase P holds only when the file
``<dir>/P@H`` exists: it writes ``<dir>/P@H.reached`` and sleeps (at most ten minutes)
until the test kills the run. Phases: ``before_commands`` (the intent is journaled,
nothing sent to the host) and ``after_verify`` (the result is journaled, the memory not
yet returned).
"""
from __future__ import annotations

import os
import sys
import time

_ENV = "SENTINEL_TEST_PAUSE_DIR"
_JOURNAL = "ansible_collections.sentinel.remediation.plugins.plugin_utils.journal"
_PHASES = {"intent": "before_commands", "result": "after_verify"}


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


def _wrap(journal_module) -> None:
    original = journal_module.Journal.append
    if getattr(original, "_sentinel_pause", False):
        return

    def append(self, record):
        original(self, record)
        phase = _PHASES.get(str(record.get("kind")))
        if phase:
            pause_at(phase, str(record.get("host") or ""))

    append._sentinel_pause = True
    journal_module.Journal.append = append


def _on_event(event: str, _args) -> None:
    if event == "import" and _JOURNAL in sys.modules:
        module = sys.modules[_JOURNAL]
        if hasattr(module, "Journal"):
            _wrap(module)


if os.environ.get(_ENV):
    sys.addaudithook(_on_event)
