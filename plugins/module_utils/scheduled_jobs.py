# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host runs on a schedule that acts on one service.

A service that breaks again after every fix often has something on a timer working against it:
a clean-up job that deletes old files under ``/run`` (a server's socket among them), a session
reaper that kills a daemon's processes, a rotation script that restarts it, a backup that takes
its data directory. An SRE greps the crontabs for the service before calling an incident fixed.

``by_file`` returns, per job file, the lines that act on the service: the system crontab and
``/etc/cron.d``, the users' crontabs, the ``/etc/cron.{hourly,daily,weekly,monthly}`` scripts and
the local systemd timers' services (``/etc/systemd/system``). A line is shown when it names one
of the service's paths (or a path under one), or when it acts (deletes, moves, changes modes or
owners, signals, stops or restarts) and names one of the service's units or programs as a
whole word, or a directory that holds its runtime, data or log paths (``find /run -mtime +7
-delete``). Each file says when it last changed (a job added yesterday is a suspect); the most
recently changed files come first. Small files only, bounded output; the evidence is redacted
with the rest before it leaves the host (a crontab line may carry a password). Stdlib only:
runs in the host's python.
"""
from __future__ import annotations

import os
import re
import time

from ansible_collections.sentinel.remediation.plugins.module_utils.operator_notes import names_of, read_small

CRONTABS = ("/etc/crontab",)
CRONTAB_DIRS = ("/etc/cron.d", "/var/spool/cron/crontabs", "/var/spool/cron")
SCRIPT_DIRS = ("/etc/cron.hourly", "/etc/cron.daily", "/etc/cron.weekly", "/etc/cron.monthly")
TIMER_DIRS = ("/etc/systemd/system",)
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
_FILE_MAX = 65536   # a job file larger than this is not read
_DIR_FILES = 64     # files read per directory
_FILES_SHOWN = 8    # job files in the evidence
_LINES_SHOWN = 6    # lines shown per file
_LINE_MAX = 300
# Directories too general to say anything about one service when a job names them.
_TOO_GENERAL = frozenset(("/", "/var", "/usr", "/etc", "/opt", "/home", "/srv", "/lib", "/usr/lib", "/usr/local"))
# Directories every service shares: a definition naming one as its own (nginx's pid file directory
# /run) makes it a directory holding the service's paths, not the service's own.
_SHARED = frozenset(("/run", "/var/run", "/tmp", "/var/tmp", "/var/lib", "/var/log", "/var/cache", "/var/spool",
                     "/run/lock", "/var/lock", "/run/user", "/dev/shm"))
# A line that acts on files or processes: deletes, moves, modes and owners, signals, service control.
_ACTS = re.compile(r"(?<![\w.-])(?:rm|mv|chmod|chown|chgrp|truncate|shred|unlink|kill|pkill|killall|tmpreaper|"
                   r"tmpwatch|systemctl|service|invoke-rc\.d|rsync)(?![\w.-])|(?<![\w-])(?:-delete|--delete\S*|-exec)\b")
_PATH_KEYS = ("config_paths", "data_paths", "runtime_paths", "log_paths", "pid_files", "paths")
_HOLDER_KEYS = ("data_paths", "runtime_paths", "log_paths", "pid_files", "paths")


def _read(path: str) -> str:
    return read_small(path, _FILE_MAX)


def _listed(directory: str) -> list:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    # cron skips names with dots (run-parts) and editor leftovers; a dot-file is nobody's job
    return [os.path.join(directory, n) for n in names if not n.startswith(".") and not n.endswith("~")][:_DIR_FILES]


def _job_files() -> list:
    found = [p for p in CRONTABS if os.path.isfile(p)]
    for directory in CRONTAB_DIRS + SCRIPT_DIRS:
        found.extend(p for p in _listed(directory) if os.path.isfile(p))
    return found


def _timer_services() -> dict:
    """``{timer path: (service path, its Exec*= lines)}`` of the local systemd timers."""
    out = {}
    for directory in TIMER_DIRS:
        for timer in _listed(directory):
            if not timer.endswith(".timer") or not os.path.isfile(timer):
                continue
            named = re.search(r"(?m)^\s*Unit\s*=\s*(\S+)", _read(timer))
            unit = named.group(1) if named else os.path.basename(timer)[:-len(".timer")] + ".service"
            for root in UNIT_DIRS:
                service = os.path.join(root, unit)
                text = _read(service)
                if text:
                    # the command of each Exec*= line, without the key and systemd's prefixes (-@:+!)
                    lines = "\n".join(re.sub(r"^\s*Exec\w*\s*=\s*[-@:+!|]*", "", l) for l in text.splitlines()
                                      if re.match(r"\s*Exec\w*\s*=", l))
                    out[timer] = (service, lines)
                    break
    return out


def _spellings(defn: dict, keys) -> list:
    """The absolute paths of ``defn``'s ``keys``, each also as the host resolves it
    (``/var/run/postgresql`` is ``/run/postgresql`` on a Debian host)."""
    out = []
    for key in keys:
        for path in defn.get(key) or []:
            path = os.path.normpath(str(path))
            if not path.startswith("/"):
                continue
            for spelling in (path, os.path.realpath(path)):
                if spelling not in out:
                    out.append(spelling)
    return out


def _own_paths(defn: dict) -> list:
    return [p for p in _spellings(defn, _PATH_KEYS) if p not in _TOO_GENERAL and p not in _SHARED]


def _holders(defn: dict) -> list:
    """The directories above the service's runtime, data and log paths (``/run`` above
    ``/run/postgresql``), the too general ones left out."""
    out = [p for p in _spellings(defn, _PATH_KEYS) if p in _SHARED]
    for path in _spellings(defn, _HOLDER_KEYS):
        parent = os.path.dirname(path)
        while parent.startswith("/") and parent not in _TOO_GENERAL:
            if parent not in out:
                out.append(parent)
            parent = os.path.dirname(parent)
    return out


class Matcher:
    """What in a job's text points at the service: its own paths (or paths under them), its
    units and programs as whole words, the directories that hold its runtime, data and log
    paths; and whether the text acts (see the module's doc)."""

    def __init__(self, defn: dict):
        self.own = [re.compile(r"(?<![\w.-])%s(?=$|[\s/'\";|&)*:])" % re.escape(p)) for p in _own_paths(defn)]
        self.others = [re.compile(r"(?<![\w./-])%s(?![\w./-])" % re.escape(n)) for n in names_of(defn)] + [
            re.compile(r"(?<![\w.-])%s(?=$|[\s'\";|&)]|/\*|/(?=\s|$))" % re.escape(p)) for p in _holders(defn)]

    def names_own(self, text: str) -> bool:
        return any(p.search(text) for p in self.own)

    def names(self, text: str) -> bool:
        return self.names_own(text) or any(p.search(text) for p in self.others)

    def acts_on(self, text: str) -> bool:
        """A line (or a whole script) that names one of the service's own paths, or acts and
        names the service or a directory holding its paths."""
        return self.names_own(text) or (bool(_ACTS.search(text)) and self.names(text))


def _commands(text: str) -> list:
    """``(number, line)`` of the lines of a job file that are commands (no comment, no
    ``NAME=value`` setting, no blank)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = " ".join(line.split())
        if stripped and not stripped.startswith("#") and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", stripped):
            out.append((number, stripped))
    return out


def _readable_by(path: str, uid: int) -> bool:
    """Whether the account ``uid`` could read ``path`` itself (root reads all): a user's crontab
    names a script, and this module, running as root, must not read for it what it cannot."""
    if uid == 0:
        return True
    try:
        info = os.stat(path)
    except OSError:
        return False
    return (info.st_uid == uid and bool(info.st_mode & 0o400)) or bool(info.st_mode & 0o004)


def _script_lines(path: str, match: Matcher, uid: int = 0) -> list:
    """The lines of the script at ``path`` to show when, taken whole, it acts on the service (a
    loop that finds the service's processes on one line and kills them on the next): those that
    name the service or act. ``[]`` when it does not, is not a small text script, or is not
    readable by ``uid``, the account whose job names it."""
    if not _readable_by(path, uid):
        return []
    text = _read(path)
    if not text.startswith("#!"):
        return []
    commands = _commands(text)
    if not match.acts_on("\n".join(line for _n, line in commands)):
        return []
    return ["%s:%d: %s" % (path, n, line[:_LINE_MAX]) for n, line in commands
            if match.names(line) or _ACTS.search(line)][:_LINES_SHOWN]


def _lines(text: str, match: Matcher, uid: int = 0) -> list:
    """The lines of a crontab (or Exec= lines) that act on the service, each followed by the
    lines of a script it runs when that script does (and ``uid``, the crontab's owner, may read)."""
    shown = []
    for number, line in _commands(text):
        called = []
        for path in re.findall(r"(?<![\w.-])(/[\w./+-]+)", line)[:4]:
            called.extend(_script_lines(path, match, uid))
        if match.acts_on(line) or called:
            shown.append("%d: %s" % (number, line[:_LINE_MAX]))
            shown.extend("  " + c for c in called)
        if len(shown) >= _LINES_SHOWN:
            break
    return shown[:_LINES_SHOWN * 2]


def _owner(path: str) -> int:
    try:
        return os.stat(path).st_uid
    except OSError:
        return -1  # nobody: no script is followed


def _changed(path: str) -> tuple:
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return 0.0, "unknown"
    return mtime, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))


def by_file(defn: dict) -> dict:
    """``{job file: "changed TIME\\nN: line..."}``: the scheduled jobs' lines that act on the
    service, most recently changed files first. The caller's budget bounds them."""
    match = Matcher(defn)
    found = []
    for path in _job_files():
        # the cron.{hourly,daily,...} entries are scripts themselves: judged whole; a crontab's
        # lines are followed into the scripts its owner could read
        lines = _script_lines(path, match) if os.path.dirname(path) in SCRIPT_DIRS \
            else _lines(_read(path), match, _owner(path))
        if lines:
            found.append((path, path, lines))
    for timer, (service, execs) in _timer_services().items():
        lines = _lines(execs, match)
        if lines:
            found.append((timer, service, ["runs %s" % service] + lines))
    dated = []
    for key, source, lines in found:
        mtime, when = _changed(source)
        dated.append((mtime, key, "changed %s\n%s" % (when, "\n".join(lines))))
    dated.sort(key=lambda item: -item[0])
    return dict((key, text) for _mtime, key, text in dated[:_FILES_SHOWN])
