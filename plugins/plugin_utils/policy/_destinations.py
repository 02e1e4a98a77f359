# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Links and copies judged by who reads the destination.

A file placed somewhere is only as harmless as the program that later acts on it:

- a **symlink (or hard link) where a daemon writes** (its PID file, logs, sockets, runtime
  files; a root master process opens them before dropping privileges) turns the daemon's
  next write into a write of whatever the link points at: refused unless the link points
  at the same service's own runtime, log or data files (or at /dev/null);
- a **link where a daemon reads its configuration** is loaded by root: refused when it
  points at a place other accounts can write (temporary directories, runtime, log or data
  areas, home directories);
- a **file copied, moved or linked into a directory a web server publishes** is served to
  anyone who can reach it (and run, for scripts): refused when it is configuration or a
  service's data, runtime or log file; anything else needs approval.

- a **PID file** names the process that init scripts, systemd (`PIDFile=`), logrotate's
  `postrotate`, `nginx -s` and `pkill -F` signal: content written, copied, moved or linked
  there (`sed -i 's/.*/1/'`, `cp /run/sshd.pid`) redirects their next signal to whatever process
  it names. A stale PID file may be deleted (or emptied); its content is the daemon's to write.

Directories other daemons read for privileges or jobs (cron, sudoers.d, unit directories,
profile.d, ld.so.conf.d, tmpfiles.d, update-motd.d, ...) are the policy's ``protected_paths``:
any write there is already refused by the path rule.
"""
from __future__ import annotations

import posixpath

from ._paths import canonical
from ._rules import Check, q

_WRITTEN_BY_DAEMONS = ("pidfile", "runtime", "log")
_WRITABLE_BY_OTHERS = ("pidfile", "runtime", "log", "data")


def _kind(chk: Check, canon: str) -> str | None:
    """The role of a path: the incident's scope first, the policy's default scope otherwise."""
    kind = chk.scope.locate(canon) if chk.scope.explicit else None
    return kind or chk.compiled["default_scope"].locate(canon)


def published(chk: Check, canon: str) -> bool:
    regex = chk.compiled["published_paths"]
    return regex is not None and regex.match(canon) is not None


def _in_tmp(chk: Check, canon: str) -> bool:
    return any(canon == d or canon.startswith(d + "/") for d in chk.compiled["tmp_dirs"])


def writable_by_others(chk: Check, canon: str) -> bool:
    """A place other accounts can write: temporary directories, runtime, log and data areas, homes but root's."""
    return _in_tmp(chk, canon) or _kind(chk, canon) in _WRITABLE_BY_OTHERS or canon.startswith("/home/")


def is_pid_file(chk: Check, canon: str) -> bool:
    """A PID file: named so by the incident's scope or the policy's default scope, or by its name."""
    kinds = {chk.scope.locate(canon) if chk.scope.explicit else None, chk.compiled["default_scope"].locate(canon)}
    return "pidfile" in kinds or posixpath.basename(canon).endswith(".pid")


def pid_file_content(chk: Check, dest: str, verb: str) -> bool:
    """Refuse putting content into a PID file (see the module's docstring); False when refused."""
    dest_c = canonical(posixpath.normpath(dest))
    if not is_pid_file(chk, dest_c):
        return True
    chk.reject(f"{verb} {q(dest)}, a PID file: init scripts, systemd (PIDFile=), log rotation and `pkill -F` signal "
               "the process it names, so new content there redirects their signals to another process; a stale PID "
               "file may be deleted, its content is the daemon's to write")
    return False


def link(chk: Check, where: str, target: str, symbolic: bool) -> bool:
    """Judge a link at ``where`` pointing at ``target`` by who acts on ``where``; False when refused."""
    where_c, target_c = canonical(where), canonical(target)
    kind = _kind(chk, where_c)
    if published(chk, where_c) and not published(chk, target_c):
        chk.reject(f"a link at {q(where)} in a directory the web server publishes would serve {q(target)} to anyone "
                   "who can reach it; copy the content the site needs instead")
        return False
    if kind in _WRITTEN_BY_DAEMONS and target_c not in chk.compiled["devices_ok"]:
        target_kind = chk.scope.locate(target_c) if chk.scope.explicit else _kind(chk, target_c)
        if target_kind not in _WRITABLE_BY_OTHERS or _in_tmp(chk, target_c) != _in_tmp(chk, where_c) \
                or chk.compiled["protected_paths"].match(target_c):
            chk.reject(f"{q(where)} is a {kind} path a daemon writes (often as root, before dropping privileges): "
                       f"a {'symbolic ' if symbolic else 'hard '}link there turns its next write into a write of "
                       f"{q(target)}; refused")
            return False
    if kind == "config":
        target_kind = _kind(chk, target_c)
        if _in_tmp(chk, target_c) or target_kind in _WRITABLE_BY_OTHERS or target_c.startswith("/home/"):
            chk.reject(f"{q(where)} is configuration a daemon loads as root; linking it to {q(target)}, a place "
                       "other accounts can write, lets them change what root loads; refused")
            return False
    return target_c in chk.compiled["devices_ok"] or pid_file_content(chk, where, "a link at")


def copy_into(chk: Check, source: str, dest: str, into_dir: bool, verb: str = "copies") -> bool:
    """Judge putting ``source`` at ``dest`` (or into the directory ``dest``); False when refused."""
    source_c = canonical(source)
    dest_c = canonical(posixpath.join(dest, posixpath.basename(source_c)) if into_dir else dest)
    if not published(chk, dest_c) or published(chk, source_c):
        return True
    kind = _kind(chk, source_c)
    if kind is not None or source_c.startswith(("/etc/", "/root/", "/home/", "/proc/", "/sys/", "/usr/")):
        what = {"config": "configuration", None: "a system file"}.get(kind, f"{kind} files of a service")
        chk.reject(f"{verb} {q(source)} ({what}) into {q(dest)}, a directory the web server publishes: anyone who "
                   "can reach the site could read it; refused")
        return False
    chk.approve(f"{verb} {q(source)} into {q(dest)}, where the web server serves it to anyone (and runs it, if it "
                "is a script); a human should confirm")
    return True
