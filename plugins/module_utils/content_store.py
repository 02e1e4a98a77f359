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
the same directory, then ``rename``): a reader sees a whole object or none.

It is bounded: ``prune`` removes objects older than an age, then the least recently
stored until the total fits a size. Putting bytes that are already stored refreshes
their time, so what is still in use is what stays.

Standard library only, Python 3.9 compatible (runs on the managed host).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import hashlib
import os
import re
import stat
import tempfile
import time

from ansible_collections.sentinel.remediation.plugins.module_utils.state_directory import exposure

DIGEST = re.compile(r"\A[0-9a-f]{64}\Z")
OBJECTS = "objects"


def write_private(path, data, prefix=".tmp-"):
    """Write ``data`` (bytes) to ``path`` readable by root only, whole or not at all: into a
    temporary file beside it, synced, then renamed over it; the temporary never stays."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=prefix)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.rename(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


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


def private_dir(path):
    """Create ``path`` (and parents) mode 0700, or hold an existing one to 0700 and to
    this user: a store another user could read or replace is refused, and so is one where
    another account owns, or may write to, it or a directory above it (``state_directory``)."""
    if not os.path.lexists(path):
        os.makedirs(path, 0o700)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ContentStoreError("content store %s is not a directory" % path)
    if info.st_uid != os.geteuid():
        raise ContentStoreError("content store %s belongs to uid %d, not to this user (uid %d)"
                                % (path, info.st_uid, os.geteuid()))
    # Another account that may write to it or to a directory above it could plant what root
    # restores from, or swap a directory of the path for its own: refused, not repaired.
    why = exposure(path)
    if why:
        raise ContentStoreError("content store %s cannot be trusted: %s" % (path, why))
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


class ContentStore:
    """Bytes by their SHA-256, in the directory ``root`` (created 0700 when missing)."""

    def __init__(self, root):
        if not root or not isinstance(root, str):
            raise ContentStoreError("content store needs a directory path, got %r" % (root,))
        self.root = os.path.abspath(root)
        private_dir(self.root)
        self._objects = os.path.join(self.root, OBJECTS)
        private_dir(self._objects)

    def _path(self, digest):
        return os.path.join(self._objects, digest[:2], digest[2:])

    def put(self, data):
        """Keep ``data`` (bytes); returns its SHA-256 hex digest."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("content store keeps bytes, got %s" % type(data).__name__)
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if os.path.isfile(path):
            os.utime(path, None)
            return digest
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.mkdir(directory, 0o700)
        write_private(path, data, prefix=".put-")
        return digest

    def get(self, digest):
        """The bytes stored under ``digest``; ``ContentMissing`` when there are none,
        ``ContentStoreError`` when the object no longer matches its digest."""
        path = self._path(_check_digest(digest))
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except (IOError, OSError):
            raise ContentMissing("no content %s in the store %s (never kept, or pruned)" % (digest, self.root))
        if hashlib.sha256(data).hexdigest() != digest:
            raise ContentStoreError("content %s in the store %s is damaged (its bytes no longer match the digest)"
                                    % (digest, self.root))
        return data

    def has(self, digest):
        """Whether bytes with this digest are stored."""
        return os.path.isfile(self._path(_check_digest(digest)))

    def refresh(self, digest):
        """Mark the object ``digest`` as still in use (its time is now), so pruning by age keeps it;
        whether it is stored."""
        try:
            os.utime(self._path(_check_digest(digest)), None)
        except OSError:
            return False
        return True

    def _objects_by_age(self):
        found = []
        for shard in sorted(os.listdir(self._objects)):
            directory = os.path.join(self._objects, shard)
            if not os.path.isdir(directory):
                continue
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    found.append((info.st_mtime, info.st_size, path))
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
        for mtime, size, path in self._objects_by_age():
            name = os.path.basename(path)
            interrupted = name.startswith(".put-") and now - mtime > 3600
            if interrupted or (not name.startswith(".") and now - mtime > max_age_s):
                removed += self._remove(path, counted=not interrupted)
            elif not name.startswith("."):
                kept.append((size, path))
        total = sum(size for size, _path in kept)
        for size, path in kept:
            if total <= max_bytes:
                break
            removed += self._remove(path)
            total -= size
        return removed

    @staticmethod
    def _remove(path, counted=True):
        try:
            os.unlink(path)
        except FileNotFoundError:
            return 0
        return 1 if counted else 0

    def size(self):
        """Total bytes of the stored objects."""
        return sum(size for _mtime, size, path in self._objects_by_age() if not os.path.basename(path).startswith("."))
