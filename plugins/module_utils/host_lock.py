# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's own lock on remediation commands: one plan acts on a host at a time.

The controller's lease says which run may act on a host; it lapses when that controller
dies. The commands it sent do not die with it: the module on the host runs them to their
end. So the module running a plan holds an exclusive ``flock`` on
``/run/sentinel-remediation/host.lock`` (without root: a per-user directory under the
temporary directory) for its whole life, and writes who holds it beside the lock. A
plan arriving while it is held waits up to ``wait`` seconds, then is told who holds it
(``HostBusy``) and runs nothing. The kernel drops the lock when the holding process ends,
however it ends: nothing to clean up, no stale lock.

Standard library only, Python 3.9 compatible (runs on the managed host).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import fcntl
import json
import os
import tempfile
import time

RUN_DIR = "/run/sentinel-remediation"


class HostBusy(Exception):
    """Another plan's commands are running on this host; the message says whose."""


def lock_dir():
    """Where the lock lives: /run (root) or a private per-user temporary directory."""
    if os.geteuid() == 0:
        return RUN_DIR
    return os.path.join(tempfile.gettempdir(), "sentinel-remediation-%d" % os.geteuid())


def hold(holder, wait=0.0, directory=None):
    """Take the host lock for ``holder`` (a short text: run, controller, service); returns
    the open file that holds it (keep it open as long as commands may run).
    ``HostBusy`` when another process still holds it after ``wait`` seconds."""
    directory = directory or lock_dir()
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    path = os.path.join(directory, "host.lock")
    handle = open(path, "a+")
    deadline = time.monotonic() + max(0.0, float(wait))
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except (IOError, OSError):
            if time.monotonic() >= deadline:
                current = _holder(path)
                handle.close()
                raise HostBusy("another plan's commands are still running on this host (%s); nothing ran"
                               % (current or "holder unknown"))
            time.sleep(0.2)
    with open(path + ".holder.tmp", "w") as out:
        json.dump({"holder": holder, "pid": os.getpid(), "since": time.time()}, out)
    os.rename(path + ".holder.tmp", path + ".holder")
    return handle


def _holder(path):
    try:
        with open(path + ".holder") as handle:
            info = json.load(handle)
        return "%s, pid %s, since %s" % (info.get("holder"), info.get("pid"),
                                         time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(info.get("since") or 0))))
    except (IOError, OSError, ValueError, TypeError):
        return ""
