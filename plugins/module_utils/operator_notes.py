# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the people running a host left for whoever logs in next, about one service.

Teams leave word where every operator sees it on login: the message of the day
(``/etc/motd``, ``/etc/motd.d/*``, the dynamic one in ``/run``) and the pre-login banners
(``/etc/issue``, ``/etc/issue.net``). A note there that names a service ("cron is stopped ON
PURPOSE for the month-end close; do not start it") is the owner's word on that service, and
an SRE reads it before touching it. ``by_file`` returns the paragraphs (blocks between blank
lines) of those files that name the service, one of its units or one of its programs, as a
whole word. Small files only, bounded output; the evidence is redacted with the rest before
it leaves the host. Stdlib only: runs in the host's python.
"""
from __future__ import annotations

import glob
import os
import re

# Where operators leave word on a host: the login message and the pre-login banners.
NOTE_FILES = ("/etc/motd", "/run/motd.dynamic", "/etc/issue", "/etc/issue.net")
NOTE_DIRS = ("/etc/motd.d",)
_FILE_MAX = 16384  # a note file larger than this is not a note
_FILES_MAX = 16


def _files() -> list:
    found = list(NOTE_FILES)
    for directory in NOTE_DIRS:
        found.extend(sorted(glob.glob(os.path.join(directory, "*")))[:_FILES_MAX])
    return found


def read_small(path: str, limit: int = _FILE_MAX) -> str:
    """The text of the regular file ``path`` if it holds at most ``limit`` bytes, else ``""``
    (a note, or a job file, larger than that is not one)."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > limit:
            return ""
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def names_of(defn: dict) -> list:
    """The words a note would use for the service: its name, its units (without the unit
    type) and its programs; at least 3 characters each."""
    words = [defn.get("name") or ""]
    for unit in defn.get("units") or []:
        words.append(re.sub(r"\.(service|socket|timer|target|path|mount)$", "", str(unit)).split("@")[0])
    words.extend(str(p) for p in defn.get("processes") or [])
    out = []
    for word in words:
        word = word.strip()
        if len(word) >= 3 and word not in out:
            out.append(word)
    return out


def paragraphs_naming(text: str, names) -> list:
    """The blank-line separated blocks of ``text`` that name one of ``names`` as a whole word."""
    patterns = [re.compile(r"(?<![\w.-])%s(?![\w-])" % re.escape(n), re.I) for n in names]
    blocks = [b.strip("\n") for b in re.split(r"\n\s*\n", text.replace("\r", ""))]
    return [b for b in blocks if b.strip() and any(p.search(b) for p in patterns)]


def by_file(defn: dict) -> dict:
    """``{path: paragraphs}``: the paragraphs of the host's note files that name the service
    (joined by a blank line), in the order the files are read. The caller's budget bounds them."""
    names = names_of(defn)
    out = {}
    if not names:
        return out
    for path in _files():
        found = paragraphs_naming(read_small(path), names)
        if found:
            out[path] = "\n\n".join(found)
    return out


# Words with which a note tells the next operator to keep their hands off the service.
_HOLD = re.compile(r"\b(?:do\s+not|don'?t|never|must\s+not)\s+(?:start|restart|run|touch|enable|reload|kill|stop)\b|"
                   r"\bon\s+purpose\b|\bdeliberately\s+stopped\b|\bfrozen\b|\bfreeze\b|\bchange\s+freeze\b", re.I)


def hold_line(notes) -> tuple:
    """``(path, line)`` of the first line of ``notes`` (``{path: text}``, as ``by_file`` gives and
    the evidence carries) that tells operators to keep their hands off the service, or ``("", "")``."""
    if not isinstance(notes, dict):
        return "", ""
    for path, text in notes.items():
        for line in str(text or "").splitlines():
            if _HOLD.search(line):
                return str(path), " ".join(line.split())[:160]
    return "", ""
