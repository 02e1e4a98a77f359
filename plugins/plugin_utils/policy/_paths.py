# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paths for the policy engine: their normal form and what they are.

A pattern names a path and everything beneath it; ``*`` and ``?`` stay within one
segment. Name patterns (``secret_names``) match any one segment of a path, so
``.ssh`` covers ``/root/.ssh/id_rsa`` and ``/var/lib/git/.ssh/config`` alike. Every list
is compiled into one regular expression, so a path is classified in a few matches.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

_PATH_CHARS = re.compile(r"^/[A-Za-z0-9._/@+:,=%~-]*$")
_GLOB = frozenset("*?[")

# The merged-/usr aliases and /var/run: matched in their canonical form.
_CANONICAL = (("/var/run/", "/run/"), ("/bin/", "/usr/bin/"), ("/sbin/", "/usr/sbin/"),
              ("/lib/", "/usr/lib/"), ("/lib64/", "/usr/lib64/"), ("/lib32/", "/usr/lib32/"))
# /proc/PID/task/TID/x is /proc/PID/x for every purpose here.
_TASK = re.compile(r"^/proc/([^/]+)/task/[^/]+(?=/|$)")
# Entries under /proc/PID that open another process's view of the file system.
_ALIAS = re.compile(r"^/proc/(?:[0-9]+|self|thread-self)/(root|cwd|fd|fdinfo|map_files)(/.*)?$")
_DEV_FD = re.compile(r"^/dev/(?:fd|stdin|stdout|stderr)(?:/.*)?$")


def _segment_regex(glob: str) -> str:
    out = []
    for ch in glob:
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(ch))
    return "".join(out)


def pattern_regex(patterns: Iterable[str], *, beneath: bool = True) -> re.Pattern[str] | None:
    """One regex matching a path equal to (or, with beneath, under) any pattern."""
    parts = []
    for pattern in patterns:
        if pattern == "/":
            parts.append("/.*" if beneath else "/")
            continue
        segments = pattern.strip("/").split("/")
        body = "/" + "/".join(_segment_regex(s) for s in segments)
        parts.append(body + ("(?:/.*)?" if beneath else ""))
    if not parts:
        return None
    return re.compile("^(?:" + "|".join(parts) + ")$")


def ancestor_regex(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """A regex matching every proper ancestor of a pattern (`/`, `/etc` for /etc/shadow)."""
    parts = ["/"]
    for pattern in patterns:
        segments = pattern.strip("/").split("/")
        if len(segments) < 2:
            continue
        body = ""
        for segment in reversed(segments[:-1]):
            body = "/" + _segment_regex(segment) + (f"(?:{body})?" if body else "")
        parts.append(body)
    return re.compile("^(?:" + "|".join(parts) + ")/?$")


def name_regex(names: Iterable[str]) -> re.Pattern[str] | None:
    """A regex finding any path segment that matches one of the name globs."""
    parts = [_segment_regex(n) for n in names]
    if not parts:
        return None
    return re.compile("(?:^|/)(?:" + "|".join(parts) + ")(?=/|$)")


def normalise(value: str) -> tuple[str | None, str | None]:
    """(normal form, None) or (None, reason). Paths must be absolute and plain."""
    if not value.startswith("/"):
        return None, (f"`{_short(value)}` is not an absolute path; write the full path "
                      "(the working directory is unknown)")
    bad = next((c for c in value if c in _GLOB), None)
    if bad:
        return None, f"`{_short(value)}` contains the glob character `{bad}`; name the path exactly"
    if not _PATH_CHARS.match(value):
        return None, f"`{_short(value)}` contains characters unusual in a path (spaces, quotes); name it plainly"
    if ".." in value.split("/"):
        return None, f"`{_short(value)}` contains `..`; write the path without it"
    path = posixpath.normpath(value)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path, None


def canonical(path: str) -> str:
    """The form used for matching: /var/run -> /run, merged /usr, task dirs folded."""
    probe = path + "/"
    for alias, real in _CANONICAL:
        if probe.startswith(alias):
            path = real + path[len(alias):]
            break
    if path.startswith("/proc/"):
        path = _TASK.sub(r"/proc/\1", path)
    return path


def alias_kind(path: str) -> tuple[str | None, bool]:
    """(`root`/`cwd`/`fd`/... or None, whether the path goes beneath the alias)."""
    match = _ALIAS.match(path)
    if match:
        return match.group(1), bool(match.group(2))
    if _DEV_FD.match(path):
        return "fd", path.count("/") > 2
    return None, False


def depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


def _short(value: str, limit: int = 80) -> str:
    shown = "".join(c if 32 <= ord(c) < 127 else "?" for c in value)
    return shown if len(shown) <= limit else shown[:limit] + "..."


# ---------------------------------------------------------------- file modes

_SYMBOLIC = re.compile(r"^[ugoa]*([-+=]([rwxXst]*|[ugo]))+$")


class Mode:
    """What a chmod-style mode does: setuid/setgid, world-writable, sticky, or unknown."""

    __slots__ = ("setid", "setuid", "world_writable", "sticky", "unsure", "valid", "text", "private")

    def __init__(self, text: str) -> None:
        self.text = text
        self.setid = self.setuid = self.world_writable = self.sticky = self.unsure = False
        self.valid = True
        # Only takes access away from others: an explicit mode that leaves other users nothing
        # and the group at most read (0600, 0640, 0400), or symbolic clauses that only remove.
        self.private = False
        if re.fullmatch(r"[0-7]{1,5}", text):
            value = int(text, 8)
            if value > 0o7777:
                self.valid = False
                return
            self.private = not value & 0o7037
            self.setid = bool(value & 0o6000)
            self.setuid = bool(value & 0o4000)
            self.sticky = bool(value & 0o1000)
            self.world_writable = bool(value & 0o002)
            return
        self.private = all(re.fullmatch(r"[ugoa]*-[rwxXst]+", clause) for clause in text.split(","))
        for clause in text.split(","):
            if not _SYMBOLIC.match(clause):
                self.valid = False
                self.private = False
                return
            who = re.match(r"^[ugoa]*", clause).group(0)  # type: ignore[union-attr]
            for op, perms in re.findall(r"([-+=])([rwxXstugo]*)", clause[len(who):]):
                if op == "-":
                    continue
                if "s" in perms and (not who or set(who) & set("uga")):
                    self.setid = True
                    self.setuid = self.setuid or not who or bool(set(who) & set("ua"))
                if "t" in perms:
                    self.sticky = True
                if "w" in perms or perms in ("u", "g"):
                    if perms in ("u", "g"):
                        # o=u copies the owner's bits: unknown, may include w.
                        if "o" in who or "a" in who:
                            self.unsure = True
                    elif "o" in who or "a" in who:
                        self.world_writable = True
                    elif not who:
                        self.unsure = True  # `+w` depends on the umask
