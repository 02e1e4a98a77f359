# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a state directory, and every directory above it up to ``/``, is this process's alone.

What a run keeps between runs is trusted without a MAC: on the managed host the snapshots, the
known-good baselines and the undo manifests root restores from; on the controller the incident
journal memory learns from, and the leases. Another account that may add, remove or rename names in
the state directory or in any directory above it can plant such a record, or swap a directory of
the path for its own and have root write there. So each directory on the way must belong to root or
to this process's user, and no other account may write to it. Another account may write to a
directory when the mode lets every user write, or lets its group write and that group has a member
other than this process's user (by the group's list or as a primary group; a group the host cannot
name counts as having one). A directory above the state directory that every user may write but
that is sticky (``/tmp``) is accepted when the entry the path goes on through is root's or ours:
the sticky bit keeps others from renaming or removing it. A symbolic link on the way must be root's
or ours, and is followed. Standard library only, Python 3.9 compatible (used on both sides).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import grp
import os
import posixpath
import pwd
import stat

_MAX_LINKS = 40


def _ours(uid, euid):
    return uid in (0, euid)


def _group_has_others(gid, euid):
    """Whether an account other than ``euid`` and root belongs to the group ``gid`` (root may
    write anywhere already; a group's write bit adds nothing for it)."""
    try:
        me = pwd.getpwuid(euid).pw_name
    except KeyError:
        me = None
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        # A group the host cannot name: ours when this process holds it (a container's
        # volume group, such as Kubernetes' fsGroup, is in no group database), else unknown.
        return euid == 0 or gid not in _held_groups()
    if any(name not in (me, "root") for name in group.gr_mem):
        return True
    return any(entry.pw_gid == gid and entry.pw_uid not in (0, euid) for entry in pwd.getpwall())


def _held_groups():
    """The groups this process holds: its own and its supplementary ones."""
    return {os.getegid(), *os.getgroups()}


def _writers(info, euid):
    """Who other than the owner may write to the directory ``info`` describes, in words; ""
    when no other account may."""
    mode = info.st_mode
    if mode & stat.S_IWOTH:
        return "every user may write to it (mode %04o)" % stat.S_IMODE(mode)
    if mode & stat.S_IWGRP and _group_has_others(info.st_gid, euid):
        return "group %s may write to it (mode %04o) and has members other than this user" % (
            _group_name(info.st_gid), stat.S_IMODE(mode))
    return ""


def _group_name(gid):
    try:
        return "%s (gid %d)" % (grp.getgrgid(gid).gr_name, gid)
    except KeyError:
        return "gid %d" % gid


def _directory_problem(where, info, entry, euid):
    """Why the directory ``where`` (its lstat ``info``) is not ours alone; ``entry``: the lstat of
    the name the path goes on through in it, or None when ``where`` is the state directory."""
    if not _ours(info.st_uid, euid):
        return "%s belongs to uid %d, not to root or this user (uid %d)" % (where, info.st_uid, euid)
    writers = _writers(info, euid)
    if not writers:
        return ""
    if entry is not None and info.st_mode & stat.S_ISVTX:
        if _ours(entry.st_uid, euid):
            return ""  # sticky, as /tmp: no other account may rename or remove the entry we go through
        return "%s: %s, and the entry the path goes through in it belongs to uid %d (sticky protects only " \
               "root's and this user's)" % (where, writers, entry.st_uid)
    return "%s: %s" % (where, writers)


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
            if not _ours(entry.st_uid, euid):
                return "%s is a symbolic link owned by uid %d, not by root or this user" % (candidate, entry.st_uid)
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        if not stat.S_ISDIR(entry.st_mode):
            return "%s is not a directory" % candidate
        current = candidate
