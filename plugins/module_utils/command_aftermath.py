# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a plan's command left behind, judged on the host rather than by its exit code.

- A start: ``systemctl start`` exits 0 when systemd skipped the start on a condition, and an
  init script exits 0 on a start that failed. After a start that exited 0, the unit's own
  state (``ActiveState``, ``ConditionResult``, ``AssertResult``) or the init script's
  ``status`` says what happened, in a note that goes into the incident history.
- A signal: a process told to end takes a moment to go (and to free its port). After a
  command that sends a terminating signal, the next command waits, bounded, until the
  processes it signalled are gone.

Runs on targets: standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import os
import re
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe

SIGNAL_WAIT = 10.0
_STARTS = ("start", "restart", "try-restart", "reload-or-restart", "try-reload-or-restart", "force-reload")
_SIGNAL_TOOLS = ("kill", "pkill", "killall")
# Signals whose default action ends a process (signal(7)); HUP is a daemon's "reload".
_ENDING = frozenset(("TERM", "KILL", "INT", "QUIT", "ABRT", "15", "9", "2", "3", "6"))
_UNIT_STATE = ("ActiveState", "SubState", "Result", "ConditionResult", "AssertResult")
_CONDITION_LINE = re.compile(r"\b(?:Condition|Assert)[A-Z]\w*=.*?(?:was not met|failed)|start (?:condition|assertion) failed.*",
                             re.IGNORECASE)


def _tool(argv: list) -> str:
    return os.path.basename(argv[0]) if argv else ""


def started_units(argv: list) -> tuple:
    """``(kind, names)``: ``("systemd", [units])`` for ``systemctl start|restart ... UNIT``,
    ``("sysv", [name])`` for ``service NAME start|restart``, else ``("", [])``."""
    tool = _tool(argv)
    words = [a for a in argv[1:] if not a.startswith("-")]
    if tool == "systemctl" and words and words[0] in _STARTS:
        return "systemd", [w if "." in w else w + ".service" for w in words[1:]]
    if tool == "service" and len(words) >= 2 and words[1] in _STARTS:
        return "sysv", [words[0]]
    return "", []


def start_note(argv: list, timeout: int = 10) -> str:
    """After a start that exited 0: what the service's own state says, when that is not
    "running" (``""`` when it runs, or when the command was no start)."""
    kind, names = started_units(argv)
    notes = []
    if kind == "systemd" and host_probe.init_system() == "systemd":
        for unit in names:
            rc, out, _err = host_probe.run_argv(["systemctl", "show", "--no-pager", "-p", ",".join(_UNIT_STATE), unit],
                                                timeout=timeout)
            props = dict(line.partition("=")[::2] for line in (out or "").splitlines() if "=" in line)
            if rc != 0 or not props:
                continue
            skipped = props.get("ConditionResult") == "no" or props.get("AssertResult") == "no"
            if not skipped and props.get("ActiveState") in ("active", "activating", "reloading"):
                continue
            said = "%s is %s/%s" % (unit, props.get("ActiveState", "?"), props.get("SubState", "?"))
            if skipped:
                _rc, status, _e = host_probe.run_argv(["systemctl", "status", "--no-pager", "--lines=0", unit],
                                                      timeout=timeout)
                # "Condition: start condition failed at ..." and, below it, which one: "ConditionPathExists=!/x was not met"
                found = [" ".join(m.group(0).split())[:200] for m in _CONDITION_LINE.finditer(status or "")]
                found.sort(key=lambda line: not line.lower().startswith(("condition", "assert")))
                said += ": systemd SKIPPED the start, a condition was not met (ConditionResult=%s, AssertResult=%s)%s" % (
                    props.get("ConditionResult", "?"), props.get("AssertResult", "?"),
                    ("; " + "; ".join(found[:3])) if found else "")
            elif props.get("Result") not in ("", "success"):
                said += " (result %s)" % props["Result"]
            notes.append(said)
    elif kind == "sysv":
        argv_status = host_probe.status_argv(names[0], host_probe.detect_init())
        if argv_status is not None:
            rc, out, err = host_probe.run_argv(argv_status, timeout=timeout)
            if rc != 0:
                notes.append("`%s` says it is not running (rc %d): %s" % (
                    " ".join(argv_status), rc, host_probe.last_line(out) or host_probe.last_line(err) or "no output"))
    if not notes:
        return ""
    return "the start exited 0, but " + "; ".join(notes)


def _signal_of(words: list) -> str:
    for index, word in enumerate(words):
        if word in ("-s", "--signal") and index + 1 < len(words):
            return words[index + 1].upper().replace("SIG", "", 1)
        if word.startswith("--signal="):
            return word.split("=", 1)[1].upper().replace("SIG", "", 1)
        if word.startswith("-") and len(word) > 1 and word[1:].replace("SIG", "", 1).isalnum() and not word[1:].islower():
            return word[1:].upper().replace("SIG", "", 1)
    return "TERM"


def _exact_flag(word: str) -> bool:
    """pkill's ``-x`` (``--exact``), alone or among other short flags (``-xf``)."""
    if word == "--exact":
        return True
    return word.startswith("-") and not word.startswith("--") and word[1:].isalpha() and "x" in word[1:]


def ending_targets(argv: list, pids: list) -> list:
    """The PIDs a command that sends a terminating signal is about to end: its ``pids`` for
    ``kill``, the processes of the exact name for ``pkill -x NAME`` and ``killall NAME``
    (taken before it runs). ``[]`` for any other command or signal."""
    tool = _tool(argv)
    if tool not in _SIGNAL_TOOLS:
        return []
    words = list(argv[1:])
    if _signal_of(words) not in _ENDING:
        return []
    if tool == "kill":
        return [int(p) for p in pids]
    exact = tool == "killall" or any(_exact_flag(w) for w in words)
    names = [w for w in words if not w.startswith("-")]
    # the value of -s / --signal is not a name
    for index, word in enumerate(words):
        if word in ("-s", "--signal") and index + 1 < len(words) and words[index + 1] in names:
            names.remove(words[index + 1])
    if not exact or not names:
        return []
    return host_probe.named_pids(names)


def snapshot(targets: list) -> dict:
    """``{pid: start}`` of ``targets`` that run now, taken before the signal."""
    seen = dict((pid, (host_probe.read_stat(pid) or {}).get("start")) for pid in targets)
    return dict((pid, start) for pid, start in seen.items() if start is not None)


def wait_gone(before: dict, limit: float = SIGNAL_WAIT, interval: float = 0.1) -> str:
    """Wait until each process of ``before`` (:func:`snapshot`) has exited (gone, a zombie,
    or its PID taken by another process), at most ``limit`` seconds: a note of what happened."""
    if not before:
        return ""
    started = time.monotonic()

    def alive():
        left = []
        for pid, start in before.items():
            seen = host_probe.read_stat(pid)
            if seen is not None and seen["start"] == start and seen["state"] not in ("Z", "X", "x"):
                left.append(pid)
        return left

    left = alive()
    while left and time.monotonic() - started < limit:
        time.sleep(interval)
        left = alive()
    seconds = time.monotonic() - started
    if left:
        return "waited %.1f s: PID %s still there after the signal" % (seconds, ", ".join(str(p) for p in left))
    return "waited %.1f s until PID %s exited" % (seconds, ", ".join(str(p) for p in sorted(before)))
