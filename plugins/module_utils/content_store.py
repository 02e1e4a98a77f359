# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A content-addressed store of bytes on the managed host, readable by its owner only.

What a remediation command is about to change (a config file, a key, a unit) is kept
here before it changes, so that it can be put back. The bytes may hold secrets, so
they never leave the host: the controller is given their SHA-256 digest and size,
never the content. The store is a directory (``0700``) of objects named by the
SHA-256 of their content, two hex digits a subdirectory, each object ``0600``;
putting the same bytes twice keeps one copy. Writes are atomic (a temporary file in
the same directory, then ``rename``): a reader sees a whole object or none. The store's
directories are held by descriptors from the moment they are checked, and every object is
written, read and removed by its name in them (``*at`` calls, no link followed): a directory
of the path swapped after the check does not move where root writes.

It is bounded: ``prune`` removes objects older than an age, then the least recently
stored until the total fits a size. Putting bytes that are already stored refreshes
their time, so what is still in use is what stays.

Standard library only, Python 3.9 compatible (runs on the managed host).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import binascii
import errno
import hashlib
import os
import re
import stat
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import held_path
from ansible_collections.sentinel.remediation.plugins.module_utils.state_directory import exposure

DIGEST = re.compile(r"\A[0-9a-f]{64}\Z")
OBJECTS = "objects"


class ContentStoreError(Exception):
    """The store cannot be used or an object cannot be read; the message says why."""


class ContentMissing(ContentStoreError, KeyError):
    """No object with this digest (never stored, or pruned)."""

    def __str__(self):
        return str(self.args[0]) if self.args else "content missing"


def _check_digest(digest):
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise ValueError("not a SHA-256 digest (64 lower-case hex digits): %r" % (digest,))
    return digest


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _between_hold_and_check(path):
    """Nothing; a seam the tests use to swap a store directory after it is held, before it is checked."""


class StoreDirectory:
    """A directory of the store held by a descriptor (``fd``) once it was checked, and the path it
    was checked as (``path``, for messages). Every write, read and removal in it is one ``*at``
    call on a name in that descriptor, never following a link: a directory swapped for another
    (or for a link) after the check does not move where root writes. Close it."""

    def __init__(self, fd, path):
        self.fd, self.path = fd, path

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def sub(self, name, create=True):
        """The subdirectory ``name`` held the same way (made 0700 when missing and ``create``), this
        user's and 0700: one that is a link, not a directory or another account's is refused.
        FileNotFoundError when it is missing and not to be made."""
        where = os.path.join(self.path, name)
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=self.fd)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, _DIRECTORY, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ContentStoreError("content store %s is not a directory" % where)
            raise
        try:
            _own_private(fd, where)
        except BaseException:
            os.close(fd)
            raise
        return StoreDirectory(fd, where)

    def names(self):
        return os.listdir(self.fd)

    def lstat(self, name):
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def is_file(self, name):
        try:
            return stat.S_ISREG(self.lstat(name).st_mode)
        except OSError:
            return False

    def touch(self, name):
        """Make the regular file ``name``'s time now (its own, never a link's target); whether it is one."""
        if not self.is_file(name):
            return False
        try:
            os.utime(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def read(self, name):
        """The bytes of the regular file ``name`` (a link there is not followed: OSError)."""
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.fd)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IOError(errno.EINVAL, "%s is not a regular file" % os.path.join(self.path, name))
            return handle.read()

    def write(self, name, data, prefix=".tmp-", mode=0o600, owner=None):
        """Make ``name`` hold ``data`` (bytes), whole or not at all: a new file beside it (created
        exclusively, never through a link), synced, given ``mode`` (and ``owner``: ``(uid, gid)``)
        through its own descriptor, then renamed over ``name`` within this directory."""
        temporary = "%s%d-%s" % (prefix, os.getpid(), binascii.hexlify(os.urandom(6)).decode("ascii"))
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                      dir_fd=self.fd)
        try:
            with os.fdopen(out, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(out)
                if owner is not None:
                    os.fchown(out, owner[0], owner[1])
                os.fchmod(out, mode)
            os.rename(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.remove(temporary)
            raise
        return os.path.join(self.path, name)

    def remove(self, name):
        """Remove the entry ``name`` (not a directory); whether it was there."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True


def _own_private(fd, where):
    """Refuse the held directory ``fd`` unless it is this user's; make it 0700."""
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode):
        raise ContentStoreError("content store %s is not a directory" % where)
    if info.st_uid != os.geteuid():
        raise ContentStoreError("content store %s belongs to uid %d, not to this user (uid %d)"
                                % (where, info.st_uid, os.geteuid()))
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.fchmod(fd, 0o700)


def hold_private_dir(path, create=True, private=True):
    """The directory ``path`` held by a descriptor (``StoreDirectory``), made (0700, parents too)
    when missing and ``create``, this user's (or, without ``private``, root's too) and (with
    ``private``) made 0700; refused when it is a link or not a directory, or when another account
    owns, or may write to, it or a directory above it (``state_directory``). The descriptor is taken first, reached from ``/`` one component at a
    time (``held_path``), and the path checked afterwards must still name it: whatever is swapped
    later, the store's writes go where the check looked. FileNotFoundError when it is missing and
    not to be made."""
    path = os.path.abspath(path)
    if create and not os.path.lexists(path):
        os.makedirs(path, 0o700)
    try:
        with held_path.hold(path, follow_last=False) as held:
            fd = os.open(held.name, _DIRECTORY, dir_fd=held.fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ContentStoreError("content store %s is not a directory" % path)
        if isinstance(exc, held_path.UnsafePath):
            raise ContentStoreError("content store %s cannot be trusted: %s" % (path, exc))
        raise
    try:
        _between_hold_and_check(path)
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() and (private or info.st_uid != 0):
            raise ContentStoreError("content store %s belongs to uid %d, not to this user (uid %d)"
                                    % (path, info.st_uid, os.geteuid()))
        # Another account that may write to it or to a directory above it could plant what root
        # restores from, or swap a directory of the path for its own: refused, not repaired.
        why = exposure(path)
        if why:
            raise ContentStoreError("content store %s cannot be trusted: %s" % (path, why))
        now = os.stat(path)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            raise ContentStoreError("content store %s changed while it was checked" % path)
        if private:
            _own_private(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return StoreDirectory(fd, path)


class ContentStore:
    """Bytes by their SHA-256, in the directory ``root`` (created 0700 when missing). The store and
    its objects directory are held from the check on (``hold_private_dir``): every object is
    written, read and removed through them. ``close`` lets them go."""

    def __init__(self, root):
        if not root or not isinstance(root, str):
            raise ContentStoreError("content store needs a directory path, got %r" % (root,))
        self.root = os.path.abspath(root)
        self._held = hold_private_dir(self.root)
        try:
            self._objects = self._held.sub(OBJECTS)
        except BaseException:
            self._held.close()
            raise

    def close(self):
        self._objects.close()
        self._held.close()

    def _shard(self, digest, create=False):
        """The held subdirectory of ``digest``'s objects (two hex digits)."""
        return self._objects.sub(digest[:2], create=create)

    def put(self, data):
        """Keep ``data`` (bytes); returns its SHA-256 hex digest."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("content store keeps bytes, got %s" % type(data).__name__)
        digest = hashlib.sha256(data).hexdigest()
        with self._shard(digest, create=True) as shard:
            if not shard.touch(digest[2:]):
                shard.write(digest[2:], bytes(data), prefix=".put-")
        return digest

    def get(self, digest):
        """The bytes stored under ``digest``; ``ContentMissing`` when there are none,
        ``ContentStoreError`` when the object no longer matches its digest."""
        _check_digest(digest)
        try:
            with self._shard(digest) as shard:
                data = shard.read(digest[2:])
        except (IOError, OSError):
            raise ContentMissing("no content %s in the store %s (never kept, or pruned)" % (digest, self.root))
        if hashlib.sha256(data).hexdigest() != digest:
            raise ContentStoreError("content %s in the store %s is damaged (its bytes no longer match the digest)"
                                    % (digest, self.root))
        return data

    def has(self, digest):
        """Whether bytes with this digest are stored."""
        _check_digest(digest)
        try:
            with self._shard(digest) as shard:
                return shard.is_file(digest[2:])
        except (OSError, ContentStoreError):
            return False

    def refresh(self, digest):
        """Mark the object ``digest`` as still in use (its time is now), so pruning by age keeps it;
        whether it is stored."""
        _check_digest(digest)
        try:
            with self._shard(digest) as shard:
                return shard.touch(digest[2:])
        except (OSError, ContentStoreError):
            return False

    def _objects_by_age(self):
        """``[(mtime, size, shard, name)]`` of the regular files in the shards, oldest first; a
        shard that is not a directory of this user's is passed over."""
        found = []
        for shard_name in sorted(self._objects.names()):
            try:
                shard = self._objects.sub(shard_name, create=False)
            except (OSError, ContentStoreError):
                continue
            with shard:
                for name in shard.names():
                    try:
                        info = shard.lstat(name)
                    except OSError:
                        continue
                    if stat.S_ISREG(info.st_mode):
                        found.append((info.st_mtime, info.st_size, shard_name, name))
        found.sort()
        return found

    def prune(self, max_bytes, max_age_s):
        """Remove objects stored longer than ``max_age_s`` seconds ago, then the oldest
        until the rest take at most ``max_bytes``; also leftovers of interrupted puts.
        Returns how many objects were removed."""
        for name, value in (("max_bytes", max_bytes), ("max_age_s", max_age_s)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError("%s must be a whole number >= 0, got %r" % (name, value))
        now = time.time()
        removed = 0
        kept = []
        for mtime, size, shard, name in self._objects_by_age():
            interrupted = name.startswith(".put-") and now - mtime > 3600
            if interrupted or (not name.startswith(".") and now - mtime > max_age_s):
                removed += self._remove(shard, name, counted=not interrupted)
            elif not name.startswith("."):
                kept.append((size, shard, name))
        total = sum(size for size, _shard, _name in kept)
        for size, shard, name in kept:
            if total <= max_bytes:
                break
            removed += self._remove(shard, name)
            total -= size
        return removed

    def _remove(self, shard, name, counted=True):
        try:
            with self._objects.sub(shard, create=False) as held:
                gone = held.remove(name)
        except (OSError, ContentStoreError):
            return 0
        return 1 if gone and counted else 0

    def size(self):
        """Total bytes of the stored objects."""
        return sum(size for _mtime, size, _shard, name in self._objects_by_age() if not name.startswith("."))
