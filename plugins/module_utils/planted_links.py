# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Symbolic (and hard) links another account could have planted on a path root reads or writes.

The known-good baseline reads a service's configuration as root, and a restore writes it back
as root. A service's own account often may write in its configuration or data directories
(Debian's ``/etc/redis`` belongs to ``redis``); a link it plants there (``redis.conf ->
/etc/shadow``) would make root read a file only root may read into the evidence, or write the
known-good bytes over it. A link is trusted only when it is root's (or this process's user's) and
no other account may add or swap names in the directory holding it (``directory_writers``: the
directory's owner, its group's other members, every user; in a sticky directory our own link is
safe): only root (or this process's own user) could have put it there or could swap it. A hard link
has no owner of its own (it is the file it names), so a regular file with more than one name is
trusted only where no other account may add names at all, sticky or not: ``fs.protected_hardlinks``
is a sysctl, not a promise. Standard library only, Python 3.9.
"""
from __future__ import annotations

import os
import stat

from ansible_collections.sentinel.remediation.plugins.module_utils.directory_writers import other_writers, ours

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


def _trusted(uid: int) -> bool:
    return ours(uid)


def _untrusted_name(name: str, what: str, entry: os.stat_result | None = None) -> str:
    """Why the entry ``name`` (a ``what``) sits in a directory another account may add names to
    or swap them in; "" when only root (or this process's user) may."""
    parent = os.path.dirname(name) or "/"
    try:
        held = os.lstat(parent)
    except OSError:
        return "%s is %s in a directory that cannot be examined" % (name, what)
    return untrusted_directory(held, name, what, parent, entry)


def untrusted_directory(held: os.stat_result, name: str, what: str, parent: str,
                        entry: os.stat_result | None = None) -> str:
    """Why the directory ``parent`` (its stat ``held``) lets another account add or swap names,
    said of its entry ``name`` (a ``what``); "" when only root (or this process's user) may
    (``directory_writers``). ``entry``: the entry's lstat when its owner is who made it (a symbolic
    link); None for a file with several names, whose owner says nothing of who added the name."""
    why = other_writers(held, entry)
    if not why:
        return ""
    joined = ", which %s" if why.startswith("belongs to") else ": %s"
    return ("%s is %s in %s" + joined) % (name, what, parent, why)


def _untrusted_link(link: str, info: os.stat_result) -> str:
    """Why the link ``link`` (its ``lstat``) may be another account's doing; "" when it is not."""
    if not _trusted(info.st_uid):
        return "%s is a symbolic link owned by uid %d" % (link, info.st_uid)
    return _untrusted_name(link, "a symbolic link", info)


def _shared_inode(path: str) -> str:
    """Why the regular file ``path`` (links already resolved) may be a hard link another account
    made to a file it may not touch: it has more than one name and sits where another account may
    add names. Its owner says nothing (a hard link to ``/etc/shadow`` is root's file); "" when not."""
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
        return ""
    return _untrusted_name(path, "a file with %d hard links" % info.st_nlink)


def planted_link(path: str) -> str:
    """Why following ``path`` (absolute) goes through a symbolic link another account could have
    planted or swapped, naming the link, or ends at a file with several hard links in a directory
    another account may write (root would read or write what that link names); "" when every link
    on the way is root's own (or there is none). The part of the path that does not exist is not
    examined: nothing is followed there."""
    if not isinstance(path, str) or not path.startswith("/"):
        return ""
    pending = [p for p in path.split("/") if p]
    current = "/"
    followed = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current) or "/"
            continue
        candidate = os.path.join(current, name)
        try:
            info = os.lstat(candidate)
        except OSError:
            return ""
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        followed += 1
        if followed > _MAX_LINKS:
            return "%s: too many symbolic links" % path
        why = _untrusted_link(candidate, info)
        if why:
            return why
        try:
            target = os.readlink(candidate)
        except OSError:
            return "%s is a symbolic link that cannot be read" % candidate
        if target.startswith("/"):
            current = "/"
        pending = [p for p in target.split("/") if p] + pending
    return _shared_inode(current)
