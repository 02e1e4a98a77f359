# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Opening a path for root one component at a time, so what was checked is what is used.

Root reads and writes paths that a service's own account may change (its configuration and data
directories). Checking such a path by name and then using it by name leaves a gap: the account
swaps a component for a symbolic link, or the file for a hard link to a file only root may touch,
and root's write lands there. Here the path is walked from ``/`` with ``openat``: every directory is
held by a file descriptor opened with ``O_NOFOLLOW``, and the next component is looked up in that
descriptor, never by name from the top again. A symbolic link on the way is followed only when no
other account could have planted or swapped it (``planted_links``: its owner and its directory's are
root's or this process's user's, and no other account may add or swap names in its directory:
``directory_writers``); any other is refused. The last component is opened with
``O_NOFOLLOW`` in its held directory, and a regular file there with more than one name is refused
when another account may add names to that directory (a hard link has no owner of its own).
Whatever is swapped afterwards, the descriptor still names what was checked.

The plan runner's root ``cp`` of one file, the Landlock rules of a command and the snapshots all
open their paths here. Standard library only, Python 3.9 compatible (Linux: ``O_PATH``).
"""
from __future__ import annotations

import errno
import os
import stat

from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import _trusted, untrusted_directory

_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup
_PATH = getattr(os, "O_PATH", 0o10000000)
_HELD = _PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """Root must not use this path: a link another account could plant or swap is on the way, the
    file has hard links where another account may add names, or a component changed while the path
    was being opened. An OSError (EPERM), so callers that already handle one refuse it as well."""

    def __init__(self, message: str):
        super().__init__(errno.EPERM, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _between_check_and_use(path):
    """Nothing; a seam the tests use to swap a path after its directory is held, before its last
    component is opened."""


def _shown(parts: list) -> str:
    return "/" + "/".join(parts)


class Held:
    """The directory holding a path's last component (``fd``, an ``O_PATH`` descriptor), that
    component's ``name`` in it and the path it was reached by (``where``, links resolved). Close it."""

    def __init__(self, fd: int, name: str, where: str):
        self.fd, self.name, self.where = fd, name, where

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "Held":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def directory_problem(self, what: str) -> str:
        """Why another account may add or swap names in the held directory, said of the last
        component as ``what``; "" when only root (or this process's user) may."""
        return untrusted_directory(os.fstat(self.fd), self.where, what, os.path.dirname(self.where) or "/")

    def hard_link_problem(self, info: os.stat_result) -> str:
        """Why the regular file ``info`` (an fstat of the last component) may be a hard link another
        account made to a file it may not touch; "" when it has one name or sits where only root
        may add names."""
        if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
            return ""
        return self.directory_problem("a file with %d hard links" % info.st_nlink)


def hold(path: str, follow_last: bool = True) -> Held:
    """The directory that holds ``path``'s last component, reached from ``/`` one component at a
    time; with ``follow_last``, a trusted link as the last component is followed too (the name
    returned is then never a link when it is checked). Raises UnsafePath (a link another account
    could have planted, a component swapped while walking), FileNotFoundError or NotADirectoryError
    (a directory on the way is missing or is not one)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise UnsafePath("%r is not an absolute path" % (path,))
    pending = [p for p in path.split("/") if p not in ("", ".")]
    stack = [os.open("/", _HELD)]
    names = []  # the components of the held directories, for messages
    followed = 0
    try:
        while True:
            while pending and pending[0] == "..":
                pending.pop(0)
                if len(stack) > 1:
                    os.close(stack.pop())
                    names.pop()
            if not pending:
                # the path names a directory (or /): hold its parent, or / itself as its own
                if len(stack) == 1:
                    return Held(stack.pop(), ".", "/")
                os.close(stack.pop())
                last = names.pop()
                return Held(stack.pop(), last, _shown(names + [last]))
            name = pending.pop(0)
            here = stack[-1]
            is_last = not pending
            try:
                info = os.stat(name, dir_fd=here, follow_symlinks=False)
            except FileNotFoundError:
                if is_last:
                    return Held(stack.pop(), name, _shown(names + [name]))
                raise FileNotFoundError(errno.ENOENT, "%s does not exist" % _shown(names + [name]))
            if stat.S_ISLNK(info.st_mode) and (follow_last or not is_last):
                followed += 1
                if followed > _MAX_LINKS:
                    raise UnsafePath("%s: too many symbolic links" % path)
                where = _shown(names + [name])
                why = ("%s is a symbolic link owned by uid %d" % (where, info.st_uid) if not _trusted(info.st_uid)
                       else untrusted_directory(os.fstat(here), where, "a symbolic link", _shown(names), info))
                if why:
                    raise UnsafePath(why)
                target = os.readlink(name, dir_fd=here)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names = []
                pending = [p for p in target.split("/") if p not in ("", ".")] + pending
                continue
            if is_last:
                return Held(stack.pop(), name, _shown(names + [name]))
            if not stat.S_ISDIR(info.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "%s is not a directory" % _shown(names + [name]))
            try:
                stack.append(os.open(name, _HELD, dir_fd=here))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                    raise UnsafePath("%s changed while it was opened" % _shown(names + [name]))
                raise
            names.append(name)
    finally:
        for fd in stack:
            os.close(fd)


def open_file(path: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor on ``path`` opened for root as ``flags`` say: no link another account could
    plant followed at any component, the last one opened with ``O_NOFOLLOW`` in its held
    directory, and a regular file with several names where another account may add names refused.
    The caller closes it. Raises UnsafePath or the OSError of the open itself."""
    with hold(path) as held:
        _between_check_and_use(path)
        try:
            fd = os.open(held.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=held.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath("%s became a symbolic link while it was opened" % held.where)
            raise
        try:
            info = os.fstat(fd)
            why = "%s is a symbolic link" % held.where if stat.S_ISLNK(info.st_mode) else held.hard_link_problem(info)
            if why:
                raise UnsafePath(why)
        except BaseException:
            os.close(fd)
            raise
        return fd


def open_path(path: str) -> int:
    """An ``O_PATH`` descriptor on what ``path`` names, opened as :func:`open_file` opens (what a
    Landlock rule attaches to: the inode checked, not whatever the name points at later)."""
    return open_file(path, _PATH)
