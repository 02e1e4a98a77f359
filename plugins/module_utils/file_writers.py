# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether the process a file names (its writer) still runs: PID, lock, guard and marker files.

A PID file, a lock, a guard a unit's ``ConditionPathExists=!`` waits on, a restore tool's
"in progress" marker: each holds the PID of the process that wrote it, and means "while that
process runs". Whether the file is still true is a question about that process now:

* no such process (or a zombie): the writer is gone, the file is stale;
* a process with that PID that started AFTER the file was last written cannot have written
  it: the kernel reused the PID, the writer is gone all the same;
* a process that started before: it may be the writer (the file says so; the host cannot
  prove more), so the file may still be meant.

A file that names no PID says nothing about a writer; a lock held through flock(2) or
fcntl(2) is held by the PIDs /proc/locks lists for its inode, which count as live writers.
Standard library only (runs on the host).
"""
from __future__ import annotations

import os
import re
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe

PID_MAX = 4194304          # the kernel's largest pid_max (2^22)
READ_LIMIT = 4096          # a file that names its writer is small; larger files are read this far
CLOCK_SLACK = 2.0          # seconds: a start time is computed from ticks since boot, an mtime is not

# "pid 41877", "PID=41877", "pid: 41877", '"pid": 41877', "owner_pid=41877", "MAINPID=41877",
# "(pid 41877)": the word pid (alone or ending a name), an optional separator, the number.
_NAMED_PID = re.compile(r"(?<![\w.-])(?:main|[a-z][a-z0-9]*[_-])?pid[\"']?[ \t]*(?:[:=#][ \t]*)?[\"']?(\d{1,7})(?![\w.])",
                        re.IGNORECASE)
# A file named for holding a PID or a lock: then a content that is only a number is that PID
# (the PID file convention: the first line; PostgreSQL's postmaster.pid adds lines after it).
_PID_FILE_NAME = re.compile(r"pid|lock|lck", re.IGNORECASE)

GONE, ALIVE = "gone", "alive"


def pids_named(text, bare=False):
    """The PIDs ``text`` (a small file's content) names, in order, each once.

    ``bare``: the file is one that holds a PID by its kind (a PID or lock file, a guard its
    unit names): then a first line that is only a number is a PID too.
    """
    found = []
    text = text or ""
    first = (text.strip().splitlines() or [""])[0].strip()
    if bare and first.isdigit() and len(first) <= 7:
        found.append(int(first))
    for match in _NAMED_PID.finditer(text):
        found.append(int(match.group(1)))
    return [pid for pid in dict.fromkeys(found) if 0 < pid <= PID_MAX]


def holds_pid_by_name(path):
    """Whether the name of ``path`` says it holds a PID or a lock (``*.pid``, ``LOCK``, ``LCK..x``)."""
    return bool(_PID_FILE_NAME.search(os.path.basename(path)))


def lock_holders(path):
    """PIDs holding a flock(2)/fcntl(2) lock on ``path`` now (/proc/locks), waiters left out."""
    try:
        st = os.stat(path)
        with open(os.path.join(host_probe.PROC, "locks")) as handle:
            text = handle.read()
    except (IOError, OSError):
        return []
    wanted = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or "->" in fields:
            continue
        try:
            major, minor, inode = fields[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid = int(fields[4])
        except ValueError:
            continue
        if key == wanted and pid > 0 and pid not in found:
            found.append(pid)
    return found


def judge_pid(pid, written_at, btime=None, hz=None):
    """What PID ``pid`` is now, against a file last written at ``written_at`` (epoch seconds):
    ``{"pid", "state": "gone"|"alive", "why"}``, and for a live process its ``comm``,
    ``cmdline``, ``user`` and ``started``; ``reused`` when it started after the file was written."""
    btime = host_probe.boot_time() if btime is None else btime
    record = host_probe.process_record(pid, btime)
    if record is None:
        return {"pid": pid, "state": GONE, "why": "pid %d is not running" % pid}
    if record["state"] in ("zombie", "dead"):
        return {"pid": pid, "state": GONE, "why": "pid %d has exited (a zombie)" % pid}
    started_at = None
    if btime is not None and record.get("start") is not None:
        started_at = btime + float(record["start"]) / (hz or host_probe.clock_ticks())
    shown = " ".join((record.get("cmdline") or record.get("comm") or "?").split())[:100]
    out = {"pid": pid, "comm": record.get("comm"), "cmdline": shown, "user": record.get("user"),
           "started": record.get("started")}
    if started_at is not None and written_at is not None and started_at > written_at + CLOCK_SLACK:
        why = ("pid %d now runs `%s` (user %s), which started %s, after the file was written (%s): "
               "the PID was reused, it is not the writer")
        out.update(state=GONE, reused=True,
                   why=why % (pid, shown, record.get("user"), record.get("started"), _iso(written_at)))
        return out
    out.update(state=ALIVE,
               why="pid %d runs `%s` (user %s, started %s, before the file was written): it may be the writer"
                   % (pid, shown, record.get("user"), record.get("started")))
    return out


def _iso(moment):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def read_head(path, limit=READ_LIMIT):
    """The first ``limit`` bytes of a regular file as text, or None (not a file, unreadable, binary)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit)
    except (IOError, OSError):
        return None
    if b"\0" in raw:
        return None
    return raw.decode("utf-8", "replace")


def writer_state(path, bare=None, text=None, btime=None, hz=None):
    """What the host says of the writer(s) ``path`` names, or None when it names none.

    ``{"state": "gone"|"alive", "line", "pids": [judge_pid...]}``: ``gone`` when every
    named PID is gone or reused and no process holds a lock on it; ``line`` says it in one
    sentence, the verdict first (``writer gone: ...``). ``bare`` (default: by the file's
    name) lets a content that is only a number count as a PID.
    """
    try:
        written_at = os.stat(path).st_mtime
    except OSError:
        return None
    if text is None:
        text = read_head(path)
    if text is None:
        return None
    if bare is None:
        bare = holds_pid_by_name(path)
    named = pids_named(text, bare=bare)
    holders = [p for p in lock_holders(path) if p not in named]
    if not named and not holders:
        return None
    judged = [judge_pid(pid, written_at, btime, hz) for pid in named]
    for pid in holders:
        held = judge_pid(pid, None, btime, hz)
        held["why"] = "pid %d holds a lock on it now (`%s`, user %s)" % (pid, held.get("cmdline"), held.get("user"))
        judged.append(held)
    live = [j for j in judged if j["state"] == ALIVE]
    state = ALIVE if live else GONE
    if state == GONE:
        line = "writer gone: %s; the file is stale (no process it names runs)" % "; ".join(j["why"] for j in judged)
    else:
        line = "writer alive: %s" % "; ".join(j["why"] for j in live)
    return {"state": state, "line": line, "pids": judged}
