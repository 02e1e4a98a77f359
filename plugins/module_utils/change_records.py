# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the host's own records say happened between two times: when a file drifted from its
known-good version, and who or what may have changed it.

A drifted file's modification and change times, and the last healthy pass that still saw the
good version, bound a window. The host's records of that window are read: package operations
(dpkg's log, apt's history: which package, installed, upgraded, configured, removed) and
privileged commands (``sudo`` and ``su`` lines of the authentication log, else the journal).
Lines that name a drifted path or the package a drifted path belongs to come first. Every line
is redacted (``redact``: a secret on a sudo command line is not sent) and cut; a few lines per
source, a few sources, so the section stays small. The logs are read through held directories
(``held_path``: no link another account planted is followed) and never past their last
READ_MAX bytes. Standard library only, Python 3.9 compatible.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import calendar
import os
import re
import stat
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import held_path
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

DPKG_LOGS = ("/var/log/dpkg.log.1", "/var/log/dpkg.log")
APT_HISTORY = ("/var/log/apt/history.log.1", "/var/log/apt/history.log")
AUTH_LOGS = ("/var/log/auth.log.1", "/var/log/auth.log", "/var/log/secure")
READ_MAX = 1048576       # bytes read from the end of one log
LINES = 5                # lines kept of each kind of record
TOTAL_BYTES = 1500       # of all the lines together
LINE_WIDTH = 220
SLACK = 2                # seconds either side of the window (log times are whole seconds)

_DPKG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (install|upgrade|remove|purge|configure|conffile|"
                        r"trigproc) (.*)$")
_APT_START = re.compile(r"^Start-Date: (\d{4}-\d\d-\d\d)\s+(\d\d:\d\d:\d\d)\s*$")
_APT_FIELD = re.compile(r"^(Commandline|Requested-By|Install|Reinstall|Upgrade|Downgrade|Remove|Purge): (.*)$")
# sudo and su as syslog writes them: "sudo:", "sudo[123]:", "su:", "su[4]:", "(su)" lines of su's PAM.
_PRIVILEGED = re.compile(r"\s(sudo|su)(?:\[\d+\])?:\s")
# Lines that say nothing of who ran what: PAM's session open/close around each command (the
# command's own line says it), and the collection's own become (Ansible's wrapper marks its
# command with BECOME-SUCCESS-): every health pass would fill the window with them.
_NOISE = re.compile(r"pam_\w+\((?:sudo|su)[\w-]*:session\)|BECOME-SUCCESS-")
_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?\s")
_SYSLOG_TIME = re.compile(r"^([A-Z][a-z]{2})\s+(\d{1,2}) (\d\d:\d\d:\d\d)\s")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def iso(moment):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def file_times(path):
    """``{"mtime", "ctime"}`` of ``path`` itself (a link is not followed), UTC; ``{}`` when it is gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return {}
    return dict(mtime=iso(info.st_mtime), ctime=iso(info.st_ctime))


def _local(text, form):
    """Seconds since the epoch of a time the host's logs wrote in its local time zone."""
    try:
        return time.mktime(time.strptime(text, form))
    except (ValueError, OverflowError):
        return None


def _tail(path):
    """The last READ_MAX bytes of a log as text, or ``""`` when it cannot be read safely."""
    if planted_link(path):
        return ""
    try:
        handle = os.fdopen(held_path.open_file(path, os.O_RDONLY | os.O_NONBLOCK), "rb")
    except (held_path.UnsafePath, IOError, OSError):
        return ""
    with handle:
        try:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return ""
            if info.st_size > READ_MAX:
                handle.seek(info.st_size - READ_MAX)
            raw = handle.read(READ_MAX)
        except (IOError, OSError):
            return ""
    text = raw.decode("utf-8", "replace")
    return text if info.st_size <= READ_MAX else text.partition("\n")[2]


def _cut(text):
    text = " ".join(redact_text(text).split())
    return text if len(text) <= LINE_WIDTH else text[:LINE_WIDTH - 3] + "..."


def _ranked(found, words):
    """At most LINES of ``[(moment, line)]``: those naming one of ``words`` first, then the
    newest others; shown in time order, with a count of the lines left out."""
    def named(line):
        return any(w and w in line for w in words)
    first = [f for f in found if named(f[1])]
    rest = sorted((f for f in found if not named(f[1])), key=lambda f: f[0], reverse=True)
    kept = sorted((first + rest)[:LINES], key=lambda f: f[0])
    lines = [line for _moment, line in kept]
    if len(found) > len(kept):
        lines.append("(%d more in the window)" % (len(found) - len(kept)))
    return lines


def dpkg_operations(since, until, words, logs=DPKG_LOGS):
    """dpkg's own log lines of the window (installs, upgrades, configures, removals, conffile
    decisions), those naming a drifted path or its package first."""
    found = []
    for path in logs:
        for line in _tail(path).splitlines():
            match = _DPKG_LINE.match(line)
            if not match:
                continue
            moment = _local(match.group(1), "%Y-%m-%d %H:%M:%S")
            if moment is not None and since - SLACK <= moment <= until + SLACK:
                found.append((moment, _cut("%s dpkg %s %s" % (iso(moment), match.group(2), match.group(3)))))
    return _ranked(found, words)


def apt_runs(since, until, words, logs=APT_HISTORY):
    """apt's history of the window: each run's command line, who asked, and what it did."""
    found = []
    for path in logs:
        moment, fields = None, []
        for line in _tail(path).splitlines() + ["Start-Date: 0000-00-00  00:00:00"]:
            start = _APT_START.match(line)
            if start:
                if moment is not None and since - SLACK <= moment <= until + SLACK and fields:
                    found.append((moment, _cut("%s apt %s" % (iso(moment), "; ".join(fields)))))
                moment = _local("%s %s" % start.groups(), "%Y-%m-%d %H:%M:%S")
                fields = []
                continue
            field = _APT_FIELD.match(line)
            if field and moment is not None:
                fields.append("%s: %s" % (field.group(1).lower(), field.group(2)))
    return _ranked(found, words)


def _syslog_moment(line, now):
    """The time a syslog or journal line starts with: RFC 3339 (with or without its zone: the
    host's local time), or the traditional ``Nov 29 10:00:01`` (local, this year unless that is
    more than a day ahead of ``now``)."""
    match = _RFC3339.match(line)
    if match:
        stamp, zone = match.groups()
        if zone is None:
            return _local(stamp, "%Y-%m-%dT%H:%M:%S")
        try:
            utc = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None
        if zone == "Z":
            return utc
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 3600 + int(digits[2:]) * 60
        return utc - offset if zone[0] == "+" else utc + offset
    match = _SYSLOG_TIME.match(line)
    if not match or match.group(1) not in _MONTHS:
        return None
    year = time.localtime(now).tm_year
    for candidate in (year, year - 1):
        moment = _local("%d %s %s %s" % ((candidate,) + match.groups()), "%Y %b %d %H:%M:%S")
        if moment is not None and moment <= now + 86400:
            return moment
    return None


def _message(line):
    """A syslog line without its time and host: from the program's name on."""
    match = _PRIVILEGED.search(line)
    return line[match.start(1):] if match else line


def privileged_commands(since, until, words, logs=AUTH_LOGS, run=None, now=None):
    """``sudo``/``su`` lines of the window from the authentication log; where no such log can be
    read, from the journal (``run(argv) -> (rc, stdout)``). Those naming a drifted path first."""
    now = time.time() if now is None else now
    found, read_any = [], False
    for path in logs:
        text = _tail(path)
        read_any = read_any or bool(text)
        for line in text.splitlines():
            if not _PRIVILEGED.search(line) or _NOISE.search(line):
                continue
            moment = _syslog_moment(line, now)
            if moment is not None and since - SLACK <= moment <= until + SLACK:
                found.append((moment, "%s %s [%s]" % (iso(moment), _cut(_message(line)), os.path.basename(path))))
    if not read_any and run is not None:
        rc, out = run(["journalctl", "--no-pager", "-q", "-o", "short-iso", "--since", "@%d" % int(since - SLACK),
                       "--until", "@%d" % int(until + SLACK), "SYSLOG_IDENTIFIER=sudo", "SYSLOG_IDENTIFIER=su"])
        for line in (out or "").splitlines() if rc == 0 else ():
            moment = _syslog_moment(line, now)
            if moment is not None and _PRIVILEGED.search(line) and not _NOISE.search(line):
                found.append((moment, "%s %s [journal]" % (iso(moment), _cut(_message(line)))))
    return _ranked(found, words)


def owning_packages(paths, conffiles, run=None):
    """``{path: package}`` of the drifted paths dpkg knows: a conffile's package, else what
    ``dpkg-query -S`` says (``run(argv) -> (rc, stdout)``)."""
    out = {}
    for path in paths:
        known = conffiles.get(path)
        if known:
            out[path] = known[0]
            continue
        if run is None:
            continue
        rc, said = run(["dpkg-query", "-S", path])
        if rc == 0:
            for line in said.splitlines():
                package, sep, where = line.partition(": ")
                if sep and where.strip() == path:
                    out[path] = package.split(":", 1)[0].split(",")[0].strip()
                    break
    return out


def window_records(since, until, paths, packages, run=None, now=None, sources=None):
    """``[line]``: what the host's records say of the window ``since``..``until`` (package
    operations, apt runs, privileged commands), each kind bounded; ``sources`` overrides the
    log paths (``{"dpkg", "apt", "auth"}``), for tests."""
    sources = sources or {}
    words = list(paths) + [os.path.basename(p) for p in paths if len(os.path.basename(p)) > 3] + \
        ["%s:" % p for p in packages] + [" %s " % p for p in packages]
    lines = dpkg_operations(since, until, words, sources.get("dpkg", DPKG_LOGS))
    lines += apt_runs(since, until, words, sources.get("apt", APT_HISTORY))
    lines += privileged_commands(since, until, words, sources.get("auth", AUTH_LOGS), run=run, now=now)
    kept, size = [], 0
    for line in lines:
        size += len(line.encode("utf-8")) + 1
        if size > TOTAL_BYTES:
            kept.append("(%d more lines left out for size)" % (len(lines) - len(kept)))
            break
        kept.append(line)
    return kept
