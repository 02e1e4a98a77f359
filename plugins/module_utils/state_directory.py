# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a state directory, and every directory above it up to ``/``, is this process's alone.

What a run keeps between runs is trusted without a MAC: on the managed host the snapshots, the
known-good baselines and the undo manifests root restores from; on the controller the incident
journal memory learns from, and the leases. Another account that may add, remove or rename names in
the state directory or in any directory above it can plant such a record, or swap a directory of
the path for its own and have root write there. So no directory on the way may let an account other
than root and this process's change its names, by the one rule ``directory_writers`` states: it owns
the directory, or may write to it through its group or as every user. A directory above the state
directory that is sticky (``/tmp``) is accepted when the entry the path goes on through is root's
or ours: the sticky bit keeps others from renaming or removing it. A symbolic link on the way must be root's
or ours, and is followed. Standard library only, Python 3.9 compatible (used on both sides).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import os
import posixpath
import stat

from ansible_collections.sentinel.remediation.plugins.module_utils.directory_writers import other_writers, ours

_MAX_LINKS = 40


def _directory_problem(where, info, entry, euid):
    """Why the directory ``where`` (its lstat ``info``) is not ours alone (``directory_writers``);
    ``entry``: the lstat of the name the path goes on through in it, or None when ``where`` is the
    state directory (sticky does not keep others from adding names there)."""
    why = other_writers(info, entry, euid)
    if not why:
        return ""
    return "%s %s" % (where, why) if why.startswith("belongs to") else "%s: %s" % (where, why)


def exposure(path, euid=None):
    """Why another account could change what is kept in the directory ``path`` (absolute, existing):
    a directory on the way from ``/`` (``path`` itself included) or a link followed there is another
    account's, or another account may write to it. "" when none could."""
    euid = os.geteuid() if euid is None else euid
    pending = [p for p in path.split("/") if p not in ("", ".")]
    current = "/"
    followed = 0
    while True:
        info = os.lstat(current)
        entry = None
        while pending and pending[0] in ("..", "."):
            name = pending.pop(0)
            if name == "..":
                current = posixpath.dirname(current) or "/"
                info = os.lstat(current)
        if pending:
            entry = os.lstat(posixpath.join(current, pending[0]))
        why = _directory_problem(current, info, entry, euid)
        if why:
            return why
        if not pending:
            return ""
        name = pending.pop(0)
        candidate = posixpath.join(current, name)
        if stat.S_ISLNK(entry.st_mode):
            followed += 1
            if followed > _MAX_LINKS:
                return "%s: too many symbolic links" % path
            if not ours(entry.st_uid, euid):
                return "%s is a symbolic link owned by uid %d, not by root or this user" % (candidate, entry.st_uid)
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        if not stat.S_ISDIR(entry.st_mode):
            return "%s is not a directory" % candidate
        current = candidate
