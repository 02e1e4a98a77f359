# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Snapshots before a change, and putting a path back as it was (the host's undo).

Before a remediation command changes a path its verdict declares, the plan runner keeps
what that path is: a file's bytes (in the ``content_store``), mode, owner and group; a
symbolic link's target and owner; a directory's mode, owner and, when it is small enough,
its whole tree; or the fact that nothing was there. ``restore`` makes the path that again:
it removes what a command created, writes back what it changed or removed, puts back what
it moved away. An attempt that did not heal is undone this way before the next one; an
operator can undo a healed incident later from the manifest kept per incident. Paths are read and
put back through descriptors on directories held from ``/`` (``held_path``), never by name: a
directory another account swaps for a link meanwhile does not move where root reads or writes.

Bytes stay on the host (``ContentStore``, 0700). What leaves it is a summary per path: its
kind, size, SHA-256, and a redacted, bounded diff of text.

Not kept: extended attributes, ACLs, SELinux labels, hard-link identity, and the contents
of device files, sockets and FIFOs (their existence and mode are). A directory tree larger
than the bounds keeps its own mode and owner only, and the summary says its contents
could not be kept. A file with several names in a directory another account may add names to is
not read at all (it may be a hard link to a file only root may read); its summary says so, and a
command declared to change it needs a human, as any change that could not be undone.

Standard library only, Python 3.9 compatible (runs on the managed host).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import difflib
import errno
import json
import os
import posixpath
import re
import stat
import tempfile
import time

from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import (
    ContentStore, ContentStoreError, hold_private_dir)
from ansible_collections.sentinel.remediation.plugins.module_utils import held_path
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

ROOT = "/var/lib/sentinel-remediation"
# A directory's tree is kept whole up to this many entries and bytes (else its own metadata only).
TREE_MAX_ENTRIES = 2000
TREE_MAX_BYTES = 32 * 1024 * 1024
# A single file larger than this is not kept (its summary says so).
FILE_MAX_BYTES = 64 * 1024 * 1024
DIFF_MAX = 1500
INCIDENT = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.@-]{0,159}\Z")


class SnapshotError(Exception):
    """A snapshot cannot be taken or used; the message says which path and why."""


def default_root():
    """The store's root: /var/lib (root), else a private per-user directory (tests, no become)."""
    if os.geteuid() == 0:
        return ROOT
    return os.path.join(tempfile.gettempdir(), "sentinel-remediation-state-%d" % os.geteuid())


# ---------------------------------------------------------------------------- reading a path

def _meta(info):
    return {"mode": stat.S_IMODE(info.st_mode), "uid": info.st_uid, "gid": info.st_gid}


def capture_meta(path):
    """What ``path`` is now by its kind, mode and owner alone (``meta``): its bytes are never
    read, so a secret whose mode a command tightens is not copied anywhere."""
    try:
        with held_path.hold(path, follow_last=False) as held:
            info = os.stat(held.name, dir_fd=held.fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return {"kind": "absent"}
    kind = ("link" if stat.S_ISLNK(info.st_mode) else "file" if stat.S_ISREG(info.st_mode)
            else "dir" if stat.S_ISDIR(info.st_mode) else "other")
    return dict(_meta(info), kind=kind, meta=True)


def _put_meta(path, state):
    """Give ``path`` the kept mode and owner through a descriptor held as ``held_path`` opens one
    (no link another account could plant followed, no hard link where it may add names): the
    file or directory checked is the one changed."""
    fd = held_path.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if ("dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other") != state["kind"]:
            raise SnapshotError("%s changed kind while its mode and owner were put back" % path)
        os.fchown(fd, state["uid"], state["gid"])
        os.fchmod(fd, state["mode"])
    finally:
        os.close(fd)


def capture_as(path, kept, store):
    """What ``path`` is now, read as ``kept`` (a state) was: by its attributes alone when only
    they were kept (``meta``), else whole, its bytes going to ``store``."""
    return capture_meta(path) if kept.get("meta") else capture(path, store)


def capture(path, store, tree=True, budget=None):
    """What ``path`` is now, as a state: ``{"kind": "absent"}``, or a file (``digest``,
    ``size``), link (``target``), dir (``entries`` when its tree was kept) or other, each
    with ``mode``, ``uid``, ``gid``. File bytes go to ``store`` (None: digests only).

    The path is looked up one component at a time from ``/`` (``held_path``) and its last one
    is never followed: a link another account could have planted above it raises UnsafePath (an
    OSError), and a file with several names where another account may add them is not read (it
    may be a hard link to a file only root may read, whose bytes would be kept, diffed and, on an
    undo, written back): its state says so in ``unkept``."""
    budget = budget if budget is not None else {"entries": TREE_MAX_ENTRIES, "bytes": TREE_MAX_BYTES}
    try:
        with held_path.hold(path, follow_last=False) as held:
            return _capture_held(held, store, tree, budget)
    except (FileNotFoundError, NotADirectoryError):
        return {"kind": "absent"}


def _capture_held(held, store, tree, budget):
    """The state of ``held.name`` in the held directory ``held.fd`` (its last component not followed)."""
    try:
        info = os.stat(held.name, dir_fd=held.fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return {"kind": "absent"}
    if stat.S_ISLNK(info.st_mode):
        return dict(_meta(info), kind="link", target=os.readlink(held.name, dir_fd=held.fd))
    if stat.S_ISREG(info.st_mode):
        return _capture_file(held, info, store, budget)
    if stat.S_ISDIR(info.st_mode):
        state = dict(_meta(info), kind="dir")
        if tree:
            entries, why = _tree(held, store, budget)
            if entries is None:
                state["unkept"] = why
            else:
                state["entries"] = entries
        return state
    return dict(_meta(info), kind="other")


def _capture_file(held, info, store, budget):
    """A regular file's state, its bytes read through a descriptor opened in its held directory
    without following a link, and only when it is the file ``info`` described."""
    state = dict(_meta(info), kind="file", size=info.st_size)
    why = held.hard_link_problem(info)
    if why:
        state["unkept"] = "%s: not read, its bytes may be another file's" % why
        return state
    if info.st_size > FILE_MAX_BYTES:
        state["unkept"] = "larger than %d bytes" % FILE_MAX_BYTES
        return state
    fd = os.open(held.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=held.fd)
    with os.fdopen(fd, "rb") as handle:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or held.hard_link_problem(now):
            raise held_path.UnsafePath("%s changed while it was kept" % held.where)
        data = handle.read()
    budget["bytes"] -= len(data)
    state["digest"] = store.put(data) if store is not None else _sha256(data)
    state["size"] = len(data)
    return state


def _tree(held, store, budget):
    """``(entries, None)``, or ``(None, why)`` when the tree cannot be kept whole. The directory is
    opened in its held parent without following a link, and each entry is read in it, never by a
    name looked up from ``/`` again."""
    entries = {}
    too_large = "its tree is larger than %d entries or %d bytes" % (TREE_MAX_ENTRIES, TREE_MAX_BYTES)
    try:
        fd = os.open(held.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=held.fd)
    except OSError as exc:
        return None, "its entries cannot be listed: %s" % (exc.strerror or exc)
    try:
        for name in sorted(os.listdir(fd)):
            budget["entries"] -= 1
            if budget["entries"] < 0:
                return None, too_large
            state = _capture_held(held_path.Held(fd, name, posixpath.join(held.where, name)), store, True, budget)
            if budget["bytes"] < 0:
                return None, too_large
            if state.get("unkept"):
                return None, "%s: %s" % (name, state["unkept"])
            entries[name] = state
    finally:
        os.close(fd)
    return entries, None


def _sha256(data):
    import hashlib  # pylint: disable=import-outside-toplevel
    return hashlib.sha256(data).hexdigest()


def fingerprint(state):
    """A state without what restoring cannot change or does not matter (sizes follow digests)."""
    if state.get("kind") == "absent":
        return {"kind": "absent"}
    found = {k: state.get(k) for k in ("kind", "mode", "uid", "gid", "digest", "target") if k in state}
    if found.get("kind") == "link":
        found.pop("mode", None)  # a link's own mode means nothing on Linux
    if "entries" in state:
        found["entries"] = dict((name, fingerprint(sub)) for name, sub in state["entries"].items())
    return found


def same(one, other):
    """Whether two states are the same path state; a directory whose tree one of them did not
    keep is compared by its own kind, mode and owner."""
    first, second = fingerprint(one), fingerprint(other)
    if "entries" not in first or "entries" not in second:
        first.pop("entries", None)
        second.pop("entries", None)
    return first == second


# ---------------------------------------------------------------------------- putting it back

# Every entry is put back through a descriptor on the directory holding it, reached from ``/`` one
# component at a time (``held_path``): a link another account could have planted on the way is
# refused, and once the directory is held, a swap of its name (for a link to /etc, say) no longer
# moves where root creates, removes or renames. Each change is one *at call on one name in a held
# directory (mkdirat, symlinkat, unlinkat, renameat, fchownat without following), and a directory's
# mode and owner go on through its own descriptor.

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _between_check_and_use(path):
    """Nothing; a seam the tests use to swap a path after its directory is held, before it is changed."""


def _temporary_name():
    return ".sentinel-restore-%d-%d" % (os.getpid(), time.time() * 1000000)


def _hold_parent(path, create):
    """The held directory of ``path``'s last component (``held_path.Held``, never following that
    component); with ``create``, missing directories above it are made (0755) each in its own held
    parent. Raises UnsafePath, FileNotFoundError, NotADirectoryError."""
    try:
        return held_path.hold(path, follow_last=False)
    except FileNotFoundError:
        parent = posixpath.dirname(path)
        if not create or parent == path:
            raise
    with _hold_parent(parent, True) as above:
        try:
            os.mkdir(above.name, 0o755, dir_fd=above.fd)
        except FileExistsError:
            pass
    return held_path.hold(path, follow_last=False)


def _open_directory(dir_fd, name, where, info=None):
    """A descriptor on the directory ``name`` in ``dir_fd``, never through a link, and the one
    ``info`` (an lstat) described when given."""
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise held_path.UnsafePath("%s stopped being a directory while it was put back" % where)
        raise
    now = os.fstat(fd)
    if info is not None and (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise held_path.UnsafePath("%s changed while it was put back" % where)
    return fd


def _remove_at(dir_fd, name, where):
    """Remove the entry ``name`` of the directory ``dir_fd`` (a directory with all it holds, each
    entry in its own directory's descriptor); nothing when it is not there."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = _open_directory(dir_fd, name, where, info)
    try:
        for entry in os.listdir(fd):
            _remove_at(fd, entry, posixpath.join(where, entry))
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _remove_directory_at(held):
    """Remove ``held.name`` when it is a directory (not a link to one), so a rename can replace it."""
    try:
        info = os.stat(held.name, dir_fd=held.fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        _remove_at(held.fd, held.name, held.where)


def _put_file_at(held, state, data):
    """Write ``data`` beside the entry in its held directory, give it the kept metadata through its
    own descriptor, then rename it over the entry within that directory: no name is followed."""
    temporary = _temporary_name()
    try:
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                      dir_fd=held.fd)
        try:
            with os.fdopen(out, "wb", closefd=False) as stream:
                stream.write(data)
            os.fchown(out, state["uid"], state["gid"])
            os.fchmod(out, state["mode"])
        finally:
            os.close(out)
        _remove_directory_at(held)
        os.rename(temporary, held.name, src_dir_fd=held.fd, dst_dir_fd=held.fd)
    except BaseException:
        _discard(held.fd, temporary)
        raise


def _put_link_at(held, state):
    """Make the link beside the entry in its held directory (symlinkat), give it the kept owner
    without following it, then rename it over the entry within that directory."""
    temporary = _temporary_name()
    os.symlink(state["target"], temporary, dir_fd=held.fd)
    try:
        os.chown(temporary, state["uid"], state["gid"], dir_fd=held.fd, follow_symlinks=False)
        _remove_directory_at(held)
        os.rename(temporary, held.name, src_dir_fd=held.fd, dst_dir_fd=held.fd)
    except BaseException:
        _discard(held.fd, temporary)
        raise


def _discard(dir_fd, name):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _put_directory_at(held, state, store):
    """Make the entry the kept directory: what is not a directory there removed, a missing one made
    (mkdirat), then its tree put back entry by entry in its own descriptor, and its mode and owner
    set through that descriptor."""
    try:
        info = os.stat(held.name, dir_fd=held.fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        os.unlink(held.name, dir_fd=held.fd)
        info = None
    if info is None:
        if state.get("unkept"):
            raise SnapshotError("%s was a directory whose contents were not kept (%s); it is gone"
                                % (held.where, state["unkept"]))
        os.mkdir(held.name, 0o700, dir_fd=held.fd)
    fd = _open_directory(held.fd, held.name, held.where, info)
    try:
        if "entries" in state:
            wanted = state["entries"]
            for name in sorted(os.listdir(fd)):
                if name not in wanted:
                    _remove_at(fd, name, posixpath.join(held.where, name))
            for name in sorted(wanted):
                inside = held_path.Held(fd, name, posixpath.join(held.where, name))  # not closed: fd is ours
                now = _capture_held(inside, None, True, {"entries": TREE_MAX_ENTRIES, "bytes": TREE_MAX_BYTES})
                if not same(now, wanted[name]):
                    _place_at(inside, wanted[name], store)
        os.fchown(fd, state["uid"], state["gid"])
        os.fchmod(fd, state["mode"])
    finally:
        os.close(fd)


def _place_at(held, state, store):
    """Make the entry ``held.name`` of the held directory ``held.fd`` be ``state``."""
    kind = state.get("kind")
    if kind == "absent":
        _remove_at(held.fd, held.name, held.where)
    elif state.get("unkept") and kind != "dir":
        raise SnapshotError("%s was not kept (%s)" % (held.where, state["unkept"]))
    elif kind == "file":
        _put_file_at(held, state, store.get(state["digest"]))
    elif kind == "link":
        _put_link_at(held, state)
    elif kind == "dir":
        _put_directory_at(held, state, store)
    else:
        raise SnapshotError("%s was a %s (not a file, link or directory): it cannot be recreated"
                            % (held.where, kind))


def _place(path, state, store):
    """Make ``path`` be ``state`` (raises OSError / SnapshotError on what cannot be done)."""
    # Its directory reached through a link another account planted since the snapshot: root would
    # write (or remove) the kept entry wherever that link points.
    why = planted_link(posixpath.dirname(path) or "/")
    if why:
        raise SnapshotError("%s not put back: %s" % (path, why))
    kind = state.get("kind")
    if state.get("meta"):
        # Only its attributes were kept: they go back on the same kind of entry, through no link.
        now = capture_meta(path)
        if now.get("kind") != kind or kind not in ("file", "dir"):
            raise SnapshotError("%s was a %s whose mode and owner alone were kept; it is now %s"
                                % (path, kind, now.get("kind")))
        _put_meta(path, state)
        return
    if state.get("unkept") and kind != "dir":
        raise SnapshotError("%s was not kept (%s)" % (path, state["unkept"]))
    try:
        held = _hold_parent(path, create=kind != "absent")
    except (FileNotFoundError, NotADirectoryError) as exc:
        if kind == "absent":
            return  # a directory above it is gone: so is the entry
        raise SnapshotError("%s not put back: %s" % (path, exc.strerror or exc))
    except held_path.UnsafePath as exc:
        raise SnapshotError("%s not put back: %s" % (path, exc))
    with held:
        _between_check_and_use(path)
        try:
            _place_at(held, state, store)
        except held_path.UnsafePath as exc:
            raise SnapshotError("%s not put back: %s" % (path, exc))
        except OSError as exc:
            raise SnapshotError("%s not put back: %s" % (path, exc.strerror or exc))


def restore(path, state, store):
    """Put ``path`` back to ``state``; ``(ok, note)``. Checked afterwards: ``ok`` is true
    only when the path reads back as the state it was kept as."""
    try:
        if same(capture_as(path, state, None), state):
            return True, "unchanged"
        _place(path, state, store)
    except (OSError, SnapshotError, ContentStoreError) as exc:
        return False, str(exc)
    try:
        after = capture_as(path, state, None)
    except OSError as exc:
        return False, "%s cannot be read back after restoring: %s" % (path, exc)
    if not same(after, state):
        return False, "%s still differs from its snapshot after restoring" % path
    return True, "restored"


# ---------------------------------------------------------------------------- what the controller sees

def _text(data):
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def diff(path, before, after, store):
    """A redacted, bounded unified diff of a file's text from ``before`` to ``after`` (states);
    for anything else a line saying what changed. Bytes are read here, on the host."""
    def content(state):
        if state.get("kind") != "file" or "digest" not in state:
            return None
        try:
            return _text(store.get(state["digest"]))
        except ContentStoreError:
            return None

    old, new = content(before), content(after)
    if old is not None or new is not None:
        if (old is None and before.get("kind") == "file") or (new is None and after.get("kind") == "file"):
            return "binary content or not kept: sha256 %s -> %s" % (before.get("digest", "-"), after.get("digest", "-"))
        lines = difflib.unified_diff((old or "").splitlines(True), (new or "").splitlines(True),
                                     fromfile=path if old is not None else "/dev/null",
                                     tofile=path if new is not None else "/dev/null", n=2)
        text = redact_text("".join(lines))
        if len(text) > DIFF_MAX:
            text = text[:DIFF_MAX] + "\n[... diff cut at %d characters ...]\n" % DIFF_MAX
        if text:
            return text
    return "%s: %s -> %s" % (path, describe(before), describe(after))


def describe(state):
    """A state in a few words (no content)."""
    kind = state.get("kind")
    if kind == "absent":
        return "absent"
    owner = "%s:%s %04o" % (state.get("uid"), state.get("gid"), state.get("mode", 0))
    if kind == "link":
        return "link to %s (%s:%s)" % (state.get("target"), state.get("uid"), state.get("gid"))
    if kind == "file":
        return "file of %s bytes, %s" % (state.get("size"), owner)
    if kind == "dir":
        return "directory%s, %s" % (" of %d entries" % len(state["entries"]) if "entries" in state else "", owner)
    return "%s, %s" % (kind, owner)


def summary(state):
    """What the controller may know of a state: kind, size, digest, mode, owner, target."""
    shown = {k: state[k] for k in ("kind", "size", "digest", "mode", "uid", "gid", "target", "unkept") if k in state}
    if "mode" in shown:
        shown["mode"] = "%04o" % shown["mode"]
    if "entries" in state:
        shown["entries"] = len(state["entries"])
    return shown


# ---------------------------------------------------------------------------- one attempt, one incident

class Session:
    """The snapshots of one attempt: ``keep`` each declared path once, before the first
    command that may change it; ``rollback`` puts every kept path back, the last kept first;
    ``save`` records the attempt in its incident's manifest (for a later undo)."""

    def __init__(self, root, incident, attempt, max_bytes, max_age_s):
        _check_incident(incident)
        self.root = root or default_root()
        self.store = ContentStore(os.path.join(self.root, "content"))
        # The undo manifests go in <root>/undo, by name in the root held since this check.
        try:
            self._held = hold_private_dir(self.root, create=False, private=False)
        except BaseException:
            self.store.close()
            raise
        self.incident = str(incident)
        self.attempt = int(attempt)
        self.max_bytes, self.max_age_s = int(max_bytes), int(max_age_s)
        self.entries = []  # [{"path", "before"}] in the order kept
        self.problems = []

    def keep(self, changes):
        """Keep each of ``changes`` (``[{"path", "tree"}]``) not kept yet in this attempt;
        returns the problems (paths that could not be kept), empty when all were."""
        problems = []
        for change in changes or []:
            path = posixpath.normpath(change["path"])
            if any(e["path"] == path for e in self.entries):
                continue
            try:
                if change.get("meta"):
                    before = capture_meta(path)
                else:
                    before = capture(path, self.store, bool(change.get("tree", True)))
            except (OSError, ContentStoreError) as exc:
                problems.append("%s could not be kept: %s" % (path, exc))
                continue
            if before.get("unkept"):
                problems.append("%s: %s not kept (%s)" % (path, before["kind"], before["unkept"]))
            self.entries.append({"path": path, "before": before})
        self.problems.extend(problems)
        return problems

    def changed(self):
        """``[{"path", "before", "after", "diff"}]`` for the kept paths that differ now."""
        found = []
        for entry in self.entries:
            after = capture_as(entry["path"], entry["before"], self.store)
            if not same(after, entry["before"]):
                found.append({"path": entry["path"], "before": entry["before"], "after": after,
                              "diff": diff(entry["path"], entry["before"], after, self.store)})
        return found

    def rollback(self):
        """Restore every kept path, the last kept first: ``{"restored", "failed", "unchanged"}``
        (``failed``: ``[{"path", "error"}]``)."""
        restored, failed, unchanged = [], [], []
        for entry in reversed(self.entries):
            ok, note = restore(entry["path"], entry["before"], self.store)
            if not ok:
                failed.append({"path": entry["path"], "error": redact_text(note)})
            elif note == "unchanged":
                unchanged.append(entry["path"])
            else:
                restored.append(entry["path"])
        return {"restored": restored, "failed": failed, "unchanged": unchanged}

    def report(self, changed):
        """What the controller gets: per changed path its summaries before and after and the diff."""
        return [{"path": c["path"], "before": summary(c["before"]), "after": summary(c["after"]), "diff": c["diff"]}
                for c in changed]

    def save(self, changed, rolled_back):
        """Add this attempt to the incident's manifest (0600, in ``undo`` beside the store) and prune
        the store and old manifests to their bounds. The manifest is read and written by name in the
        root directory held since the session was opened, never by a path looked up again."""
        with self._held.sub(UNDO) as undo:
            manifest = _read_manifest(undo, self.incident) or {"incident": self.incident, "attempts": []}
            manifest["attempts"] = [a for a in manifest["attempts"] if a.get("attempt") != self.attempt]
            manifest["attempts"].append({
                "attempt": self.attempt, "at": time.time(), "rolled_back": bool(rolled_back),
                "entries": [{"path": c["path"], "before": c["before"], "after": fingerprint(c["after"])}
                            for c in changed]})
            _write_manifest(undo, self.incident, manifest)
        self.prune()

    def prune(self):
        now = time.time()
        try:
            undo = self._held.sub(UNDO, create=False)
        except FileNotFoundError:
            undo = None
        if undo is not None:
            with undo:
                for name in undo.names():
                    try:
                        if now - undo.lstat(name).st_mtime > self.max_age_s:
                            undo.remove(name)
                    except OSError:
                        continue
        return self.store.prune(self.max_bytes, self.max_age_s)

    def close(self):
        """Let the held store and root go."""
        self.store.close()
        self._held.close()


class Unavailable:
    """A session whose store cannot be used: nothing is kept, every declared path is a problem."""

    def __init__(self, reason, incident=""):
        self.reason, self.incident = reason, incident
        self.entries, self.problems = [], []

    def keep(self, changes):
        problems = ["%s could not be kept: %s" % (c["path"], self.reason) for c in changes or []]
        self.problems.extend(problems)
        return problems


def open_session(request):
    """The snapshot session an attempt's ``request`` asks for (``dir``, ``incident``, ``attempt``,
    ``max_bytes``, ``max_age``), and why the store cannot be used ("" when it can). A store
    that cannot be used still answers: every path declared to it is a problem."""
    try:
        return Session(request.get("dir"), request["incident"], request.get("attempt") or 1,
                       request["max_bytes"], request["max_age"]), ""
    except (SnapshotError, ContentStoreError, OSError, ValueError) as exc:
        return Unavailable(str(exc), request["incident"]), "the snapshot store cannot be used: %s" % exc


def settle(session, error, healthy, undo):
    """What the attempt changed; put back when it did not heal (``undo`` and ``healthy`` is
    False); recorded for a later undo. The result's shape is execute_plan's RV(snapshot)."""
    found = {"incident": session.incident, "changed": [], "rolled_back": False, "restored": [], "failed": [],
             "unkept": list(session.problems), "error": error}
    if error:
        return found
    try:
        changed = session.changed()
        found["changed"] = session.report(changed)
    except (OSError, SnapshotError, ContentStoreError) as exc:
        changed, found["error"] = [], "what changed could not be read: %s" % exc
    if undo and healthy is False and session.entries:
        # restore() catches per path; anything else still names the attempt as not put back
        try:
            found.update(session.rollback(), rolled_back=True)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            found["failed"] = [{"path": e["path"], "error": "rollback stopped: %s" % exc} for e in session.entries]
        found.pop("unchanged", None)
    try:
        session.save(changed, found["rolled_back"])
    except (OSError, SnapshotError, ContentStoreError) as exc:
        found["error"] = "the undo record could not be written (a later undo is not possible): %s" % exc
    return found


UNDO = "undo"


def _check_incident(incident):
    if not INCIDENT.match(str(incident or "")):
        raise SnapshotError("incident id %r: letters, digits and _ . @ - only (at most 160)" % (incident,))
    return str(incident)


def _read_manifest(undo, incident):
    """The manifest of ``incident`` in the held ``undo`` directory, or None when there is none."""
    try:
        data = undo.read(incident + ".json")
    except FileNotFoundError:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise SnapshotError("the undo manifest %s is damaged: %s" % (posixpath.join(undo.path, incident + ".json"), exc))


def _write_manifest(undo, incident, manifest):
    undo.write(incident + ".json", json.dumps(manifest, sort_keys=True).encode("utf-8"), prefix=".manifest-")


def load_manifest(root, incident):
    """The incident's manifest, or None when none was kept (or it was pruned). It is read by name
    in the store's root and ``undo`` directories, held once checked as the store's are."""
    incident = _check_incident(incident)
    try:
        with hold_private_dir(root or default_root(), create=False, private=False) as held:
            with held.sub(UNDO, create=False) as undo:
                return _read_manifest(undo, incident)
    except FileNotFoundError:
        return None


def save_manifest(root, incident, manifest):
    """Replace the incident's manifest with ``manifest``, written as :meth:`Session.save` writes it."""
    incident = _check_incident(incident)
    with hold_private_dir(root or default_root(), create=False, private=False) as held:
        with held.sub(UNDO) as undo:
            _write_manifest(undo, incident, manifest)


def undo_plan(manifest):
    """For a later undo: each path the incident's kept attempts changed, with the state it had
    before the first of them changed it and the state the last of them left it in:
    ``[{"path", "before", "after", "attempt"}]``. Attempts already rolled back are skipped."""
    paths = {}
    for attempt in sorted(manifest.get("attempts") or [], key=lambda a: a.get("attempt", 0)):
        if attempt.get("rolled_back"):
            continue
        for entry in attempt.get("entries") or []:
            if entry["path"] in paths:
                paths[entry["path"]]["after"] = entry["after"]
            else:
                paths[entry["path"]] = dict(entry, attempt=attempt.get("attempt"))
    return list(paths.values())
