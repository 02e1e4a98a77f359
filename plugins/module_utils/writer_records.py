# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The last record a guard, marker or lock file's writer left: its own logs and journal lines.

A file that names its writer (``pgrestore-drill pid 41877 started ...``; a unit drop-in whose
comment says ``# pgrestore-drill: never start while ...``) says who meant it. Whether its
writer is gone (file_writers) does not say how the writer ended: finished and forgot to
clean up, or died half way. The writer's own last words do. This finds them by the writer's
name alone, the way an SRE would look:

* its log files: ``/var/log/NAME/*`` (one level), ``/var/log/NAME``, ``/var/log/NAME.log``,
  ``/var/log/NAME*.log``: the newest MAX_FILES regular files, the last TAIL_LINES lines each,
  redacted, never a file whose name suggests a secret, never outside /var/log (a name is a
  plain word: no ``/``, no ``..``, no shell characters; a link that leads out is left out);
* its journal lines: ``SYSLOG_IDENTIFIER=NAME``, ``_COMM=NAME`` (as the kernel cuts it),
  ``_SYSTEMD_UNIT=NAME.service``, the last TAIL_LINES;

each with absolute times, and how the writer's last line stands against the marker's time
(its own stated time and the file's). Nothing found is said too: it is evidence as well.
Standard library only, Python 3.9 (runs on the host).
"""
from __future__ import annotations

import calendar
import os
import re
import stat
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

LOG_ROOT = "/var/log"
MAX_FILES = 3              # log files shown per writer, newest first
MAX_SCAN = 64              # directory entries looked at per writer
TAIL_LINES = 10            # last lines shown of each log and of the journal
LINE_WIDTH = 200
TAIL_READ = 65536          # bytes read from the end of one log at most
MAX_NAMES = 2              # writers looked up per file
RECORD_MAX = 2400          # characters of one file's record
COMM_LEN = 15              # the kernel keeps the first 15 bytes of a process name

# A program name: a plain word of letters, digits and ``._+@-``, starting with a letter.
_NAME = r"[A-Za-z][A-Za-z0-9_.+@-]{1,62}"
_SAFE_NAME = re.compile(r"^" + _NAME + r"$")
# "pgrestore-drill pid 41877", "pgrestore-drill[41877]", "pgrestore-drill (pid 41877)"
_NAME_BEFORE_PID = re.compile(r"(?<![\w./-])(" + _NAME + r")(?:\s*\(\s*|\s+|\[)(?:pid\b|PID\b|\d{1,7}\])")
# "written by pgrestore-drill", "created by ...", "locked by ...", "held by ...", "owner: ..."
_NAME_AFTER_WORD = re.compile(r"\b(?:written|created|set|held|locked|owned|left)\s+by\s+(" + _NAME + r")\b"
                              r"|\b(?:writer|owner|program|tool)\s*[:=]\s*(" + _NAME + r")\b", re.IGNORECASE)
# A comment of a unit file (``# pgrestore-drill: never start while ...``): the word before the colon.
_COMMENT_NAME = re.compile(r"^\s*[#;]+\s*(" + _NAME + r")\s*:")
# A leading time (ISO 8601, or the journal's short-iso) and the first time anywhere in a text.
_TIME = r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(Z|[+-]\d{2}:?\d{2})?"
_LEADING_TIME = re.compile(r"^\s*\[?" + _TIME)
_ANY_TIME = re.compile(r"(?<!\d)" + _TIME)
# Words that look like a name before "pid" but are not a program's
_NOT_NAMES = frozenset(("the", "with", "and", "main", "process", "by", "of", "for", "from", "as", "old", "new",
                        "last", "its", "his", "her", "their", "our", "stale", "dead", "running", "writer", "owner"))


def safe_name(name):
    """Whether ``name`` is a plain program name that can be looked up under /var/log as is."""
    return bool(_SAFE_NAME.match(name or "")) and ".." not in name and name.lower() not in _NOT_NAMES


def writer_names(text, comments=(), comms=()):
    """The program names that wrote a file, in order, each once, at most MAX_NAMES: the name a
    file gives before a PID or after ``written by``/``owner:`` in its first lines, the name a
    unit comment about it starts with (``# NAME: ...``), the names of live processes it names
    (``comms``). Words that are not plain program names are left out."""
    found = []
    head = "\n".join((text or "").splitlines()[:5])[:1024]
    for match in _NAME_BEFORE_PID.finditer(head):
        found.append(match.group(1))
    for match in _NAME_AFTER_WORD.finditer(head):
        found.append(match.group(1) or match.group(2))
    for line in comments or ():
        match = _COMMENT_NAME.match(line or "")
        if match:
            found.append(match.group(1))
    found.extend(c for c in comms or () if c)
    out = []
    for name in found:
        name = name.rstrip(".-")
        if safe_name(name) and name not in out:
            out.append(name)
    return out[:MAX_NAMES]


def unit_comments(path, near=""):
    """The comment lines of a unit file (its drop-in), at most 5 from its top and the one just
    above the line naming ``near`` (the condition's path)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(16384)
    except (IOError, OSError):
        return []
    lines = raw.decode("utf-8", "replace").splitlines()
    out = [line for line in lines[:8] if line.strip().startswith(("#", ";"))][:5]
    for index, line in enumerate(lines):
        if near and near in line and index and lines[index - 1].strip().startswith(("#", ";")):
            if lines[index - 1] not in out:
                out.append(lines[index - 1])
    return out


def _inside(path, root):
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")


def _regular(path):
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def log_files(name, root=LOG_ROOT, secretish=None):
    """``[(path, mtime)]``: the newest MAX_FILES regular files that are ``name``'s logs under
    ``root``, none of them outside it (links included), none whose name suggests a secret,
    no compressed rotation. Empty for a name that is not a plain program name."""
    if not safe_name(name):
        return []
    secretish = secretish or (lambda base: False)
    candidates = []
    directory = os.path.join(root, name)
    if os.path.isdir(directory) and _inside(directory, root):
        try:
            entries = sorted(os.listdir(directory))[:MAX_SCAN]
        except OSError:
            entries = []
        candidates.extend(os.path.join(directory, entry) for entry in entries)
    candidates.append(directory)
    try:
        siblings = sorted(os.listdir(root))[:4096]
    except OSError:
        siblings = []
    prefix = [e for e in siblings if e.startswith(name) and e.endswith(".log")][:MAX_SCAN]
    candidates.extend(os.path.join(root, entry) for entry in prefix)
    out = []
    for path in dict.fromkeys(candidates):
        base = os.path.basename(path)
        if base.endswith((".gz", ".xz", ".bz2", ".zst", ".zip")) or secretish(base):
            continue
        if not _inside(path, root) or not _regular(path):
            continue
        try:
            out.append((path, os.stat(path).st_mtime))
        except OSError:
            continue
    out.sort(key=lambda item: item[1], reverse=True)
    return out[:MAX_FILES]


def _clean_line(line):
    line = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", line)
    return redact_text(line)[:LINE_WIDTH]


def tail_lines(path, lines=TAIL_LINES):
    """The last ``lines`` lines of a log, redacted and each cut at LINE_WIDTH; None when the
    file cannot be read or is not text."""
    try:
        text = host_probe.tail_file(path, lines, max_read=TAIL_READ)
    except (IOError, OSError):
        return None
    if "\0" in text:
        return None
    return [_clean_line(line) for line in text.splitlines() if line.strip()]


def journal_lines(name, lines=TAIL_LINES, timeout=10, run=None):
    """``(lines, note)``: the last journal lines of ``name`` (its syslog identifier, its process
    name, its unit), redacted; ``note`` says why there are none (no journal, no entries)."""
    if not safe_name(name):
        return [], "not a program name"
    run = run or host_probe.run_argv
    if run is host_probe.run_argv and not host_probe.find_tool("journalctl"):
        return [], "no journal on this host (journalctl absent)"
    argv = ["journalctl", "--no-pager", "--quiet", "-o", "short-iso", "-n", str(lines),
            "SYSLOG_IDENTIFIER=%s" % name, "+", "_COMM=%s" % name[:COMM_LEN], "+", "_SYSTEMD_UNIT=%s.service" % name]
    rc, out, err = run(argv, timeout=timeout)
    if rc != 0:
        said = ((err or out or "").strip().splitlines() or [""])[-1]
        return [], "journalctl failed (rc %d): %s" % (rc, _clean_line(said))
    found = [_clean_line(line) for line in (out or "").splitlines()
             if line.strip() and not line.startswith("-- ")]
    return found[-lines:], "" if found else "no entries"


def parse_time(text, leading=True):
    """Epoch seconds of the (leading) ISO-8601 time in ``text``, or None; a time without a
    zone is read as the host's local time, as a logger writes it."""
    match = (_LEADING_TIME if leading else _ANY_TIME).search(text or "")
    if not match:
        return None
    day, clock, zone = match.groups()
    try:
        parts = time.strptime("%s %s" % (day, clock), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    if not zone:
        return time.mktime(parts)
    moment = calendar.timegm(parts)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        moment -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return float(moment)


def iso(moment):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def span(seconds):
    """``1 h 4 min``, ``21 min 53 s``, ``3 s``."""
    seconds = int(round(abs(seconds)))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return "%d d %d h" % (days, hours)
    if hours:
        return "%d h %d min" % (hours, minutes)
    if minutes:
        return "%d min %d s" % (minutes, secs)
    return "%d s" % secs


def _against(moment, reference):
    """``21 min 53 s after`` / ``3 s before`` / ``the same second as``."""
    delta = moment - reference
    if abs(delta) < 1:
        return "the same second as"
    return "%s %s" % (span(delta), "after" if delta > 0 else "before")


def _marker_times(path, text):
    """``(stated, written)``: the first time the marker's text states, and its mtime."""
    try:
        written = os.stat(path).st_mtime
    except OSError:
        written = None
    return parse_time(text, leading=False), written


def record(path, text, names, secretish=None, run=None, timeout=10, root=LOG_ROOT):
    """One text: what ``names`` (the writers ``path`` names) last recorded, in their logs under
    ``root`` and in the journal, with absolute times and how the newest line stands against
    the marker's own stated time and its file time; that nothing was found, when so."""
    stated, written = _marker_times(path, text)
    marker = []
    if stated is not None:
        marker.append("states %s" % iso(stated))
    if written is not None:
        marker.append("file written %s" % iso(written))
    out = ["marker %s%s" % (path, " (%s)" % ", ".join(marker) if marker else "")]
    for name in names:
        newest = None   # (moment by the line's own time, where, line)
        found = False
        for log, mtime in log_files(name, root, secretish):
            lines = tail_lines(log)
            if lines is None:
                out.append("%s log %s: unreadable or not text" % (name, log))
                continue
            found = True
            relation = ""
            if written is not None:
                relation = ", %s the marker file" % _against(mtime, written)
            out.append("%s log %s (last written %s%s), last %d line(s):" % (name, log, iso(mtime), relation, len(lines)))
            out.extend("  " + line for line in lines)
            if lines:
                moment = parse_time(lines[-1])
                if moment is not None and (newest is None or moment > newest[0]):
                    newest = (moment, log, lines[-1])
        journal, note = journal_lines(name, timeout=timeout, run=run)
        if journal:
            out.append("%s in the journal, last %d line(s):" % (name, len(journal)))
            out.extend("  " + line for line in journal)
            moment = parse_time(journal[-1])
            if moment is not None and (newest is None or moment > newest[0]):
                newest = (moment, "the journal", journal[-1])
        elif found:
            out.append("%s in the journal: %s" % (name, note))
        found = found or bool(journal)
        if not found:
            out.append("no log of %s found under %s (%s/%s/, %s/%s.log, %s/%s*.log) or in the journal (%s)"
                       % (name, root, root, name, root, name, root, name, note or "no entries"))
            continue
        if newest is not None:
            said = "%s's newest line (%s) is of %s" % (name, newest[1], iso(newest[0]))
            if stated is not None:
                said += ", %s the time the marker states" % _against(newest[0], stated)
            out.append(said + ": nothing later from it in its logs or the journal")
        else:
            out.append("%s's last lines carry no time of their own" % name)
    text = "\n".join(out)
    return text if len(text) <= RECORD_MAX else text[:RECORD_MAX - 20].rsplit("\n", 1)[0] + "\n[... record cut]"


def records_for(files, secretish=None, run=None, timeout=10, limit=2):
    """``{path: record}`` for the files in ``files`` (``[(path, comments, comms)]``: a marker, the
    comment lines of the unit drop-in that names it, the names of live processes it names) that
    name a writer, at most ``limit``."""
    out = {}
    for path, comments, comms in files:
        if len(out) >= limit or path in out:
            continue
        text = _head(path, secretish)
        if text is None:
            continue
        names = writer_names(text, comments, comms)
        if names:
            out[path] = record(path, text, names, secretish, run, timeout)
    return out


def _head(path, secretish=None):
    if secretish and secretish(os.path.basename(path)):
        return None
    if not _regular(path):
        return None
    try:
        with open(path, "rb") as handle:
            raw = handle.read(4096)
    except (IOError, OSError):
        return None
    if b"\0" in raw:
        return None
    return raw.decode("utf-8", "replace")
