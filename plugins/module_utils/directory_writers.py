# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who other than root and this process's account may create, rename or remove names in a directory.

One rule for every place that trusts a directory because only root (or this process's user) may
change its entries: a link root follows there, a file with several names root reads there, a state
directory and every directory above it. Another account may change names in a directory when:

- it owns the directory (an owner may always chmod it writable);
- the directory is group-writable and the group has a member other than root and this process's
  user: by the group's member list or as the account's primary group (root may write anywhere
  already, so its membership adds nothing); a member name no account answers to counts as another,
  and so does a group the host cannot name unless this process holds it (a container volume's
  group, such as Kubernetes' fsGroup, is in no group database: the job it was given to holds it);
- the directory is world-writable.

A sticky directory (``/tmp``) lets those writers add names but rename or remove only their own: an
entry that already exists and is root's or ours stays ours, so it is safe to go through. The
sticky bit says nothing about a name that does not exist yet, nor about a regular file with several
names (a hard link's owner is the file's, not the account's that made the name): callers pass no
entry then, and the writers count.

Standard library only, Python 3.9 compatible (used on the managed host and the controller).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import grp
import os
import pwd
import stat


def ours(uid, euid=None):
    """Whether ``uid`` is root or this process's account (``euid`` when given)."""
    return uid in (0, os.geteuid() if euid is None else euid)


def _held_groups():
    """The groups this process holds: its own and its supplementary ones."""
    return {os.getegid(), *os.getgroups()}


def _member_is_other(name, euid):
    try:
        return not ours(pwd.getpwnam(name).pw_uid, euid)
    except KeyError:
        return True  # a member no account answers to: who it is cannot be told


def group_has_others(gid, euid=None):
    """Whether an account other than root and ``euid`` (this process's by default) may act with
    the group ``gid``'s rights; a group the host cannot name counts unless this process holds it."""
    euid = os.geteuid() if euid is None else euid
    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return gid not in _held_groups()
    if any(_member_is_other(name, euid) for name in group.gr_mem):
        return True
    return any(entry.pw_gid == gid and not ours(entry.pw_uid, euid) for entry in pwd.getpwall())


def _group_name(gid):
    try:
        return "%s (gid %d)" % (grp.getgrgid(gid).gr_name, gid)
    except KeyError:
        return "gid %d" % gid


def other_writers(info, entry=None, euid=None):
    """Why an account other than root and this process's (``euid``) may create, rename or remove
    names in the directory whose ``lstat``/``fstat`` is ``info``, in words of the directory ("it");
    "" when none may. ``entry``: the ``lstat`` of the existing entry the caller goes through or uses
    in it, when that entry's owner is who made it (not a file with several names, not a name yet to
    be created): in a sticky directory, an entry of root's or ours is then safe."""
    euid = os.geteuid() if euid is None else euid
    if not ours(info.st_uid, euid):
        return "belongs to uid %d, not to root or this user (uid %d)" % (info.st_uid, euid)
    mode = info.st_mode
    if mode & stat.S_IWOTH:
        writers = "every user may write to it (mode %04o)" % stat.S_IMODE(mode)
    elif mode & stat.S_IWGRP and group_has_others(info.st_gid, euid):
        writers = "group %s may write to it (mode %04o) and has members other than this user" % (
            _group_name(info.st_gid), stat.S_IMODE(mode))
    else:
        return ""
    if not mode & stat.S_ISVTX:
        return writers
    if entry is None:
        return "%s; sticky keeps others from removing names, not from adding them" % writers
    if ours(entry.st_uid, euid):
        return ""  # sticky: no other account may rename or remove the entry of ours we go through
    return "%s, and the entry the path goes through in it belongs to uid %d (sticky protects only root's and " \
           "this user's)" % (writers, entry.st_uid)
