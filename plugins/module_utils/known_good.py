# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Known-good baselines of a service's configuration, kept on the managed host.

On a healthy pass the files a service is configured by (its declared configuration paths,
its unit file, drop-ins and environment files under systemd, its init script and
``/etc/default`` file under SysV, the files its start command names) are hashed; the
manifest of the service (path -> SHA-256, mode, owner) is rewritten, and a file's bytes
stored (content-addressed, ``ContentStore``), only when something changed. A pass where
the service is unhealthy never touches the baseline.

At an incident the files are hashed again and compared: what drifted is said with a
redacted unified diff from the known-good version (the only content that leaves the host),
whether the file still is the package's default (dpkg's conffile MD5), and the bad version
is kept in the store (never deleted) while the known-good one is staged, with its mode and
owner, under ``restore/`` for a ``cp -p`` the policy judges like any other command.

Each drifted file also says when it changed: its modification and change times, the package
dpkg says owns it, and the last healthy pass that still saw the good version (every healthy pass
records its time in ``passes.json``); what the host's own records say of the time between
(package operations, privileged commands) comes with it (``change_records``).

The content lives in the host's one content store, the snapshots' (``<root>/content``, see
``snapshot.py``); the manifests, the aside log and the staged restores under ``<root>/known-good``.
A healthy pass refreshes the time of its baseline's objects, so the snapshots' pruning by age
never drops the content of a baseline still in use.

What the service RUNS AS and RUNS is part of the baseline too (``runs_as``): its accounts (the
definition's ``user``, its units' ``User=``, the owners of its processes; root left out) with
their group memberships, and the mode and owner of the programs its units execute (every
``Exec*=`` line, drop-ins included), of its processes' executables and of its runtime, state,
log and data directories. At an incident a lost membership or a changed mode or owner is
drift, with the values to put back. Standard library only, Python 3.9 compatible.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import difflib
import errno
import grp
import hashlib
import json
import os
import pwd
import re
import stat
import time

from ansible_collections.sentinel.remediation.plugins.module_utils.content_store import (
    ContentMissing,
    ContentStore,
    ContentStoreError,
    hold_private_dir,
)
from ansible_collections.sentinel.remediation.plugins.module_utils import change_records, held_path, start_files
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text
from ansible_collections.sentinel.remediation.plugins.module_utils.snapshot import default_root

SUBDIR = "known-good"
MAX_FILES = 200          # files per service in a baseline
MAX_FILE_BYTES = 262144  # a larger file is hashed, never stored or diffed
DIFF_MAX = 1500          # characters of one file's diff sent to the controller
DRIFT_FILES = 4          # drifted files reported (the others are counted)
ASIDE_KEPT = 200         # entries of the aside log
WALK_DEPTH = 2
DPKG_STATUS = "/var/lib/dpkg/status"
INIT_SCRIPTS = "/etc/init.d"
MAX_ACCOUNTS = 4         # accounts per service whose memberships are recorded
MAX_RUN_PATHS = 40       # programs and directories per service whose mode and owner are recorded
_SAFE_NAME = re.compile(r"[^A-Za-z0-9@._-]")
_ACCOUNT_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}\$?$")
_EXEC_KEYS = ("ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop",
              "ExecStopPost")
_EXEC_PATH = re.compile(r"(?:^|[{;]\s*)path=(/[^\s;]+)")
# systemd's own directories of a unit (RuntimeDirectory=nginx is /run/nginx).
_UNIT_DIRECTORIES = (("RuntimeDirectory", "/run/"), ("StateDirectory", "/var/lib/"), ("LogsDirectory", "/var/log/"),
                     ("CacheDirectory", "/var/cache/"))
_ETC_ARG = re.compile(r"^/etc/[^\s;]+$")


class KnownGoodError(Exception):
    """The baseline directory cannot be used; the message says why."""


# ---------------------------------------------------------------- which files

def _walk(root, limit):
    if os.path.isfile(root):
        yield root
        return
    if not os.path.isdir(root) or os.path.islink(root):
        return
    base = root.rstrip("/").count("/")
    for here, dirs, files in os.walk(root):
        dirs.sort()
        if here.rstrip("/").count("/") - base >= WALK_DEPTH:
            dirs[:] = []
        for name in sorted(files):
            yield os.path.join(here, name)


def _systemd_files(units, run):
    """Unit files, drop-ins, environment files and the /etc files the start commands name."""
    out = []
    for unit in units:
        rc, text = run(["systemctl", "show", "--no-pager", "-p", "FragmentPath,DropInPaths,EnvironmentFiles,ExecStart",
                        unit])
        if rc != 0:
            continue
        for line in text.splitlines():
            key, _sep, value = line.partition("=")
            if key in ("FragmentPath", "DropInPaths"):
                out.extend(p for p in value.split() if p.startswith("/"))
            elif key == "EnvironmentFiles":
                out.append(value.partition(" (")[0].strip())
            elif key == "ExecStart":
                argv = re.search(r"argv\[\]=([^;]*)", value)
                words = argv.group(1).split() if argv else []
                out.extend(w.split("=", 1)[-1] for w in words[1:] if _ETC_ARG.match(w.split("=", 1)[-1]))
    return out


def _sysv_files(defn):
    """The init script and the environment files it sources (``start_files``); Debian's
    ``/etc/default/NAME`` only where there is no init script to read."""
    out = []
    for name in start_files.init_script_names(defn):
        script = os.path.join(INIT_SCRIPTS, name)
        out.append(script)
        if not os.path.isfile(script):
            out.append(os.path.join("/etc/default", name))
    out.extend(start_files.sysv_environment_files(defn, INIT_SCRIPTS) or [])
    return list(dict.fromkeys(out))


def watched_files(defn, init, run):
    """The regular files (absolute, at most MAX_FILES) a service is configured by. ``run(argv)``
    returns ``(rc, stdout)``."""
    roots = list(defn.get("config_paths") or [])
    roots.extend(a for a in (defn.get("config_test") or [])[1:] if _ETC_ARG.match(a))
    roots.extend(_systemd_files(defn.get("units") or [], run) if init == "systemd" else _sysv_files(defn))
    found = []
    for root in dict.fromkeys(r for r in roots if r.startswith("/")):
        for path in _walk(root, MAX_FILES):
            if path not in found:
                found.append(path)
            if len(found) >= MAX_FILES:
                return found
    return found


def fingerprint(paths, links=None):
    """``{path: {"sha256", "mode", "uid", "gid", "size"}}`` of the regular files among ``paths``
    (symbolic links followed, root's own only); a file too large to keep has no content kept,
    only its hash. A path through a link another account could have planted (``planted_links``)
    is never read: root would read what the link points at into the baseline and the evidence.
    ``links``: a dict given here gets those paths, each with why."""
    out = {}
    for path in paths:
        why = planted_link(path)
        if why:
            if links is not None:
                links[path] = why
            continue
        try:
            # opened as root's copy opens it (held_path): a link planted after the check above is
            # refused, not followed; O_NONBLOCK, so a FIFO swapped in does not hang the pass
            handle = os.fdopen(held_path.open_file(path, os.O_RDONLY | os.O_NONBLOCK), "rb")
        except held_path.UnsafePath as exc:
            if links is not None:
                links[path] = str(exc)
            continue
        except (IOError, OSError):
            continue
        with handle:
            try:
                info = os.fstat(handle.fileno())
                if not stat.S_ISREG(info.st_mode):
                    continue
                digest = hashlib.sha256()
                for block in iter(lambda: handle.read(65536), b""):
                    digest.update(block)
            except (IOError, OSError):
                continue
        out[path] = dict(sha256=digest.hexdigest(), mode="%04o" % stat.S_IMODE(info.st_mode), uid=info.st_uid,
                         gid=info.st_gid, size=info.st_size)
    return out


# ---------------------------------------------------------------- what it runs as and runs

def memberships(user):
    """The sorted names of the groups ``user`` gets at login (its primary group and every group
    that lists it, as ``initgroups`` gives them), or None when there is no such account."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    try:
        gids = os.getgrouplist(user, entry.pw_gid)
    except (OSError, AttributeError):
        gids = [entry.pw_gid] + [g.gr_gid for g in grp.getgrall() if user in g.gr_mem]
    names = set()
    for gid in gids:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.add(str(gid))
    return sorted(names)


def _owner_text(uid, gid):
    """``user:group`` of numeric ids, by name where the host knows them."""
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return "%s:%s" % (user, group)


def attributes(path, role):
    """``{"role", "mode", "uid", "gid", "owner"}`` of a program (a regular file) or a directory
    (root's own symbolic links followed, through held directories: ``held_path``), or None when
    it is not one now or cannot be reached safely."""
    try:
        fd = held_path.open_path(path)
    except (IOError, OSError):
        return None
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    wanted = stat.S_ISDIR if role == "directory" else stat.S_ISREG
    if not wanted(info.st_mode):
        return None
    return dict(role=role, mode="%04o" % stat.S_IMODE(info.st_mode), uid=info.st_uid, gid=info.st_gid,
                owner=_owner_text(info.st_uid, info.st_gid))


def _unit_facts(units, run):
    """``(users, programs, directories, made_at_start)`` of the service's systemd units: ``User=``,
    the programs of every ``Exec*=`` line (drop-ins included: systemd merged them), the
    directories systemd makes for it (``RuntimeDirectory=``...) and, of those, the ones it makes
    at each start and removes at each stop (``RuntimeDirectory=``)."""
    users, programs, directories, made_at_start = [], [], [], set()
    keys = ("User",) + _EXEC_KEYS + tuple(k for k, _root in _UNIT_DIRECTORIES)
    for unit in units:
        rc, text = run(["systemctl", "show", "--no-pager", "-p", ",".join(keys), unit])
        if rc != 0:
            continue
        for line in text.splitlines():
            key, _sep, value = line.partition("=")
            if key == "User" and value:
                users.append(value.strip())
            elif key in _EXEC_KEYS:
                programs.extend(_EXEC_PATH.findall(value))
            else:
                root = dict(_UNIT_DIRECTORIES).get(key)
                if root:
                    directories.extend(root + name for name in value.split() if ".." not in name.split("/"))
                    if key == "RuntimeDirectory":
                        made_at_start.update(os.path.normpath(root + name) for name in value.split())
    return users, programs, directories, made_at_start


def _processes(names, proc="/proc", limit=64):
    """``(owners, executables)`` of the running processes named ``names`` (their ``comm``)."""
    owners, exes = [], []
    if not names:
        return owners, exes
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return owners, exes
    found = 0
    for pid in pids:
        base = os.path.join(proc, pid)
        try:
            with open(os.path.join(base, "comm"), "r") as handle:
                comm = handle.read().strip()
            if comm not in names:
                continue
            uid = os.stat(base).st_uid
            exe = os.readlink(os.path.join(base, "exe"))
        except (IOError, OSError):
            continue
        found += 1
        try:
            owners.append(pwd.getpwuid(uid).pw_name)
        except KeyError:
            pass
        if exe.startswith("/") and not exe.endswith(" (deleted)"):
            exes.append(exe)
        if found >= limit:
            break
    return owners, exes


def runs_as(defn, init, run, proc="/proc"):
    """What the service runs as and runs, for its baseline: ``{"accounts": {user: [groups]},
    "paths": {path: attributes}}``. Accounts: the definition's ``user``, its units' ``User=``,
    the owners of its processes (root never: its memberships are not the service's). Paths: the
    programs its units execute and its processes' executables, and its runtime, state, log and
    data directories (``made_at_start`` on the ones systemd makes at each start and removes at
    each stop: their absence while the service is stopped is no drift to act on)."""
    users = [defn["user"]] if defn.get("user") else []
    programs, directories, made_at_start = [], [], set()
    if init == "systemd":
        unit_users, programs, directories, made_at_start = _unit_facts(defn.get("units") or [], run)
        users.extend(unit_users)
    owners, exes = _processes(set(defn.get("processes") or []), proc)
    users.extend(owners)
    programs.extend(exes)
    for key in ("runtime_paths", "data_paths", "log_paths"):
        directories.extend(defn.get(key) or [])
    accounts = {}
    for user in dict.fromkeys(users):
        if len(accounts) >= MAX_ACCOUNTS:
            break
        if user in ("root", "0") or not _ACCOUNT_NAME.match(user):
            continue
        groups = memberships(user)
        if groups is not None:
            accounts[user] = groups
    paths = {}
    for role, items in (("program", programs), ("directory", directories)):
        for path in dict.fromkeys(os.path.normpath(p) for p in items if str(p).startswith("/")):
            if len(paths) >= MAX_RUN_PATHS:
                break
            entry = attributes(path, role)
            if entry and path not in paths:
                if path in made_at_start:
                    entry["made_at_start"] = True
                paths[path] = entry
    return dict(accounts=accounts, paths=paths)


def _restorable_owner(was):
    """The recorded owner as ``chown`` should be given it: by name while the names still stand
    for the recorded ids, by number otherwise."""
    user, _sep, group = str(was.get("owner") or "").partition(":")
    try:
        user = user if pwd.getpwnam(user).pw_uid == int(was["uid"]) else str(was["uid"])
    except (KeyError, ValueError):
        user = str(was["uid"])
    try:
        group = group if grp.getgrnam(group).gr_gid == int(was["gid"]) else str(was["gid"])
    except (KeyError, ValueError):
        group = str(was["gid"])
    return "%s:%s" % (user, group)


def runs_as_drift(recorded):
    """What differs from the recorded ``runs_as``: ``[{account, change: groups|missing, lost,
    added, known_good, now}]`` and ``[{path, role, change: attributes|missing, known_good, now,
    mode?, owner?}]`` (``mode``/``owner``: the values to put back)."""
    items = []
    for user, groups in sorted((recorded.get("accounts") or {}).items()):
        now = memberships(user)
        if now is None:
            items.append(dict(account=user, change="missing", known_good=list(groups)))
            continue
        lost, added = sorted(set(groups) - set(now)), sorted(set(now) - set(groups))
        if lost or added:
            items.append(dict(account=user, change="groups", lost=lost, added=added, known_good=list(groups), now=now))
    for path, was in sorted((recorded.get("paths") or {}).items()):
        now = attributes(path, was.get("role"))
        said = "mode %s owner %s" % (was.get("mode"), was.get("owner"))
        if now is None:
            item = dict(path=path, role=was.get("role"), change="missing", known_good=said)
            if was.get("made_at_start"):
                # systemd's RuntimeDirectory=: gone whenever the unit is stopped, made again at its start
                item["note"] = ("systemd makes this directory at the unit's start and removes it at its stop: "
                                "missing while the service is stopped is expected, not a cause")
            items.append(item)
            continue
        if (now["mode"], now["uid"], now["gid"]) == (was.get("mode"), was.get("uid"), was.get("gid")):
            continue
        item = dict(path=path, role=was.get("role"), change="attributes", known_good=said,
                    now="mode %s owner %s" % (now["mode"], now["owner"]))
        if now["mode"] != was.get("mode"):
            item["mode"] = was.get("mode")
        if (now["uid"], now["gid"]) != (was.get("uid"), was.get("gid")):
            item["owner"] = _restorable_owner(was)
        items.append(item)
    return items


# ---------------------------------------------------------------- the package's default

def dpkg_conffiles(status_path=DPKG_STATUS):
    """``{path: (package, md5)}`` of every conffile dpkg knows (obsolete ones left out)."""
    out = {}
    try:
        with open(status_path, "r") as handle:
            text = handle.read()
    except (IOError, OSError):
        return out
    for stanza in text.split("\n\n"):
        package = re.search(r"^Package: (\S+)", stanza, re.M)
        conffiles = re.search(r"^Conffiles:\n((?: .*\n?)+)", stanza, re.M)
        if not package or not conffiles:
            continue
        for line in conffiles.group(1).splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("/") and "obsolete" not in parts[2:]:
                out[parts[0]] = (package.group(1), parts[1])
    return out


def package_default_line(path, conffiles):
    """One line saying whether ``path`` is still its package's default, or ``""`` when dpkg does
    not know it."""
    known = conffiles.get(path)
    if not known:
        return ""
    package, md5 = known
    try:
        now = hashlib.md5(_read_bytes(path, -1)).hexdigest()  # nosec - dpkg records MD5; a comparison, not security
    except (IOError, OSError):
        return "%s: a conffile of %s; missing now (dpkg's default has md5 %s)" % (path, package, md5)
    if now == md5:
        return "%s: the package's default (%s, as installed)" % (path, package)
    return "%s: differs from the package's default (%s)" % (path, package)


# ---------------------------------------------------------------- the store

def _name(service):
    return _SAFE_NAME.sub("_", service)[:100] or "_"


def _write_json(directory, name, value):
    """Write ``value`` as JSON to ``name`` in the held store directory ``directory``."""
    directory.write(name, json.dumps(value, sort_keys=True).encode("utf-8"), prefix=".kg-")


def _read_json(directory, name, empty):
    """The JSON value of ``name`` in the held store directory ``directory``, or ``empty`` when it
    is missing, unreadable or not of ``empty``'s type."""
    try:
        value = json.loads(directory.read(name).decode("utf-8"))
    except (IOError, OSError, ValueError):
        return empty
    return value if isinstance(value, type(empty)) else empty


def _read_bytes(path, limit=MAX_FILE_BYTES + 1):
    """At most ``limit`` bytes (-1: all) of the regular file ``path``, opened through held directories
    (``held_path``: no link another account could plant followed, no hard link where it may add
    names); raises OSError otherwise."""
    with os.fdopen(held_path.open_file(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise IOError(errno.EINVAL, "%s is not a regular file" % path)
        return handle.read(limit)


def same_files_once(items, realpath=os.path.realpath):
    """``items`` (drift entries) with the entries of paths that are one file (a symbolic link and
    what it names, two links to one file) that drifted alike (same change, same versions) given
    once: the entry of the file itself (else the first), naming the others in ``same_file``."""
    groups = {}
    for item in items:
        if item.get("change") == "planted_link":
            continue
        key = (realpath(item["path"]), item.get("change"), item.get("known_good"), item.get("now"))
        groups.setdefault(key, []).append(item)
    out = []
    for item in items:
        if item.get("change") == "planted_link":
            out.append(item)
            continue
        key = (realpath(item["path"]), item.get("change"), item.get("known_good"), item.get("now"))
        group = groups[key]
        if len(group) == 1:
            out.append(item)
            continue
        keep = next((i for i in group if i["path"] == key[0]), group[0])
        if item is keep:
            item["same_file"] = [i["path"] for i in group if i is not keep]
            out.append(item)
    return out


def unified_diff(path, before, after, new=False):
    """The redacted unified diff from the known-good bytes to the current ones, bounded. ``new``:
    the file had no known-good version (its whole content is the diff, against nothing)."""
    if b"\0" in before or b"\0" in after:
        return "binary file changed"
    old = before.decode("utf-8", "replace").splitlines()
    lines_now = after.decode("utf-8", "replace").splitlines()
    since = "known-good (none: new since the healthy pass) " if new else "known-good "
    lines = list(difflib.unified_diff(old, lines_now, since + path, "now " + path, n=1, lineterm=""))
    text = redact_text("\n".join(lines))
    if len(text) > DIFF_MAX:
        # Too long (a rewrite that dropped every comment): the lines that set something are what
        # explains a failure; removed comments and blank lines go first. Added comments stay (an
        # owner's "do not start" is one), and the note makes the diff read as not whole.
        quiet = [line for line in lines[2:] if _QUIET_CHANGE.match(line)]
        if quiet:
            kept = lines[:2] + [line for line in lines[2:] if not _QUIET_CHANGE.match(line)]
            text = redact_text("\n".join(kept)) + "\n(%d removed comment or blank lines left out)" % len(quiet)
    if len(text) > DIFF_MAX:
        text = text[:DIFF_MAX].rsplit("\n", 1)[0] + "\n... (diff cut at %d characters)" % DIFF_MAX
    return text


# A diff line that sets nothing: a removed comment (in the usual syntaxes) or a blank line.
_QUIET_CHANGE = re.compile(r"^(?:-\s*(?:$|[#;]|//)|\+\s*$)")


class Baselines:
    """The known-good manifests under ``<root>/known-good`` and their content in the host's
    content store ``<root>/content`` (both 0700, root-only); ``root``: the snapshots' root."""

    def __init__(self, root=None):
        root = root or default_root()
        if not os.path.isabs(root):
            raise KnownGoodError("known-good directory must be an absolute path, got %r" % (root,))
        self.root = os.path.join(root, SUBDIR)
        held = []
        try:
            self.store = ContentStore(os.path.join(root, "content"))
            held.append(self.store)
            # As the content store's, and held from this check on: a link, or a directory of another
            # user, is refused (its manifests say what is good, and a restore copies what it stages
            # there as root), and every manifest and staged copy is written by name in them.
            self._held = hold_private_dir(self.root)
            held.append(self._held)
            self._baselines = self._held.sub("baselines")
            held.append(self._baselines)
            self._restore = self._held.sub("restore")
        except (OSError, ContentStoreError) as exc:
            for each in held:
                each.close()
            raise KnownGoodError("known-good directory %s is unusable: %s" % (self.root, exc))

    def close(self):
        """Let the held directories go."""
        for each in (self._restore, self._baselines, self._held, self.store):
            each.close()

    def manifest(self, service):
        return _read_json(self._baselines, _name(service) + ".json", {})

    def record(self, service, current, now=None, running=None):
        """Make ``current`` (``fingerprint``) and ``running`` (``runs_as``) the service's known-good
        baseline; content is stored only for files whose hash is not stored yet. Returns
        ``{"files", "changed"}`` (changed: paths added, changed or gone since the last baseline;
        ``runs_as: True`` when what it runs as or runs changed)."""
        manifest = self.manifest(service)
        self._note_pass(service, now)
        old = manifest.get("files") or {}
        changed = sorted(p for p in set(old) | set(current) if (old.get(p) or {}) != (current.get(p) or {}))
        running = running if running is not None else manifest.get("runs_as") or {}
        runs_as_changed = running != (manifest.get("runs_as") or {})
        for path, entry in current.items():
            if path not in changed:
                self.store.refresh(entry["sha256"])  # still in use: the store's pruning by age keeps it
        if not changed and not runs_as_changed:
            return dict(files=len(current), changed=[])
        for path in changed:
            entry = current.get(path)
            if entry is None or entry["size"] > MAX_FILE_BYTES or self.store.has(entry["sha256"]):
                continue
            try:
                data = _read_bytes(path)
            except (IOError, OSError):
                continue
            if hashlib.sha256(data).hexdigest() == entry["sha256"]:
                self.store.put(data)
        _write_json(self._baselines, _name(service) + ".json",
                    dict(service=service, recorded=int(now if now is not None else time.time()), files=current,
                         runs_as=running))
        out = dict(files=len(current), changed=changed)
        if runs_as_changed:
            out["runs_as"] = True
        return out

    def _note_pass(self, service, now=None):
        """Remember when the service's last healthy pass was (each one saw its known-good files)."""
        passes = _read_json(self._held, "passes.json", {})
        passes[_name(service)] = int(now if now is not None else time.time())
        _write_json(self._held, "passes.json", passes)

    def last_pass(self, service):
        """The time of the service's last healthy pass, or None (a baseline older than this record)."""
        value = _read_json(self._held, "passes.json", {}).get(_name(service))
        return value if isinstance(value, int) else None

    def keep_aside(self, service, path, data, now=None):
        """Keep the bad version of ``path`` in the store and log where it went; its digest."""
        digest = self.store.put(data)
        log = _read_json(self._held, "aside.json", [])
        entry = dict(service=service, path=path, sha256=digest, time=int(now if now is not None else time.time()))
        if not log or {k: v for k, v in log[-1].items() if k != "time"} != {k: v for k, v in entry.items()
                                                                            if k != "time"}:
            log.append(entry)
            _write_json(self._held, "aside.json", log[-ASIDE_KEPT:])
        return digest

    def stage(self, entry):
        """The known-good bytes of a manifest ``entry`` in ``restore/<sha256>`` with its mode and
        owner (for ``cp -p``); the staged path, or ``""`` when the content was never kept."""
        try:
            data = self.store.get(entry["sha256"])
        except (ContentMissing, ContentStoreError, ValueError):
            return ""
        return self._restore.write(entry["sha256"], data, prefix=".stage-", mode=int(entry["mode"], 8),
                                   owner=(int(entry["uid"]), int(entry["gid"])))

    def drift(self, service, current, conffiles=None, links=None, run=None, at=None, record_sources=None):
        """What differs from the known-good baseline, for the evidence: ``{"recorded", "files",
        "drift": [{path, change, known_good, now, mode, diff, restore, aside, package, mtime, ctime,
        package_of}], "more", "last_seen_good", "window_records"}``, or ``{}`` without a baseline.
        The bad versions are kept aside, the good ones staged. ``run(argv) -> (rc, stdout)`` asks
        dpkg whose a path is and reads the journal (``change_records``)."""
        manifest = self.manifest(service)
        good = manifest.get("files") or {}
        running = manifest.get("runs_as") or {}
        if not good and not running.get("accounts") and not running.get("paths"):
            return {}
        conffiles = dpkg_conffiles() if conffiles is None else conffiles
        drifted = []
        links = links or {}
        for path in sorted(set(good) | set(current) | set(links)):
            was, now = good.get(path), current.get(path)
            if path in links:
                # never read, never restored through: the human sees the link and who could plant it
                drifted.append(dict(path=path, change="planted_link", known_good=(was or {}).get("sha256", ""), now="",
                                    link=links[path]))
                continue
            if was == now:
                continue
            change = ("new" if was is None else "missing" if now is None
                      else "modified" if was["sha256"] != now["sha256"] else "attributes")
            item = dict(path=path, change=change, known_good=(was or {}).get("sha256", ""),
                        now=(now or {}).get("sha256", ""))
            if change == "new":
                # A copy of a file the healthy service had, still as it was (`cp default default.bak`
                # in an included directory): it adds no text the known-good configuration lacks.
                same = sorted(p for p, kept in good.items() if p != path and kept.get("sha256") == now["sha256"]
                              and current.get(p) == kept)
                if same:
                    item["copy_of"] = same[0]
            if was and now and (was["mode"], was["uid"], was["gid"]) != (now["mode"], now["uid"], now["gid"]):
                item["attributes"] = "mode %s owner %s:%s, known-good mode %s owner %s:%s" % (
                    now["mode"], now["uid"], now["gid"], was["mode"], was["uid"], was["gid"])
            drifted.append(item)
        drifted = same_files_once(drifted)
        out = dict(recorded=manifest.get("recorded"), files=len(good), drift=[])
        for item in drifted[:DRIFT_FILES]:
            if item["change"] != "planted_link":
                self._explain(service, item, good.get(item["path"]), conffiles)
            out["drift"].append(item)
        if len(drifted) > DRIFT_FILES:
            out["more"] = len(drifted) - DRIFT_FILES
        self._when(service, manifest, out, conffiles, run, at, record_sources)
        moved = runs_as_drift(running)
        if moved:
            # Before the model and the human: what the service runs as and runs, put back exactly.
            out["runs_as"] = moved[:DRIFT_FILES * 2]
        return out

    def _when(self, service, manifest, out, conffiles, run, at, sources):
        """When each drifted file changed (its times), the last healthy pass that still saw the
        known-good versions, and what the host's records say of the time between (``change_records``)."""
        files = [i for i in out["drift"] if i["change"] != "planted_link"]
        if not files:
            return
        until = time.time() if at is None else at
        since = max(self.last_pass(service) or 0, int(manifest.get("recorded") or 0))
        for item in files:
            item.update(change_records.file_times(item["path"]))
        packages = change_records.owning_packages([i["path"] for i in files], conffiles, run)
        for item in files:
            if item["path"] in packages:
                item["package_of"] = packages[item["path"]]
        if not since:
            return
        out["last_seen_good"] = change_records.iso(since)
        records = change_records.window_records(since, until, [i["path"] for i in files],
                                                sorted(set(packages.values())), run=run, now=until, sources=sources)
        if records:
            out["window_records"] = records

    def _explain(self, service, item, was, conffiles):
        path = item["path"]
        before = b""
        if was:
            try:
                before = self.store.get(was["sha256"])
            except (ContentMissing, ContentStoreError, ValueError):
                before = None
        after = b""
        if item["change"] != "missing":
            try:
                after = _read_bytes(path)
            except (IOError, OSError) as exc:
                after = None
                item["diff"] = "unreadable now: %s" % (exc.strerror or exc)
            if after is not None and len(after) <= MAX_FILE_BYTES:
                item["aside"] = self.keep_aside(service, path, after)
        if item["change"] in ("modified", "missing", "new") and before is not None and after is not None:
            item["diff"] = unified_diff(path, before, after, new=item["change"] == "new")
        elif before is None:
            item["diff"] = "known-good content not kept (larger than %d bytes, or pruned)" % MAX_FILE_BYTES
        if was and before is not None:
            item["restore"] = self.stage(was)
        line = package_default_line(path, conffiles)
        if line:
            item["package"] = line


def record_or_compare(defn, healthy, root, init, run, now=None):
    """The healthy pass's baseline record (``{"files", "changed"}``) or the unhealthy one's drift
    (``Baselines.drift``); errors become ``{"error": text}``, never an exception."""
    try:
        baselines = Baselines(root)
        links = {}
        current = fingerprint(watched_files(defn, init, run), links)
        if healthy:
            return baselines.record(defn["name"], current, now=now, running=runs_as(defn, init, run))
        return baselines.drift(defn["name"], current, links=links, run=run)
    except (KnownGoodError, ContentStoreError, OSError) as exc:
        return dict(error="known-good baseline unusable: %s" % exc)
