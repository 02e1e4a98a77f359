# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The files a service's start reads its environment from, as the host says.

A systemd unit names them in ``EnvironmentFile=`` (``systemctl show`` prints each as
``EnvironmentFiles=PATH (ignore_errors=yes|no)``); a SysV init script sources them with the
shell's ``.`` or ``source``, often behind a test (``[ -r F ] && . F``) and through the script's
own variables (``. /etc/default/$NAME``). Which directory that is differs by distribution
(``/etc/default``, ``/etc/sysconfig``, ``/etc/conf.d``); the script says it, so it is read, not
guessed. Standard library only, Python 3.9 compatible.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import os
import re

INIT_SCRIPTS = "/etc/init.d"
SCRIPT_READ_MAX = 65536
MAX_FILES = 6
# An init script's environment lives among the host's configuration; what it sources from
# elsewhere (/lib/lsb/init-functions, /usr/share/...) is shell library code, not settings.
SOURCED_ROOT = "/etc/"

# NAME=value at the start of a line (the script's own constants: NAME=redis-server).
_ASSIGN = re.compile(r"""^\s*(?:export\s+|readonly\s+)?([A-Za-z_][A-Za-z0-9_]*)=("[^"`]*"|'[^']*'|[^\s;&|'"`]*)\s*(?:[;#]|$)""")
# The shell's "source" command where a command may start: the line's start, or after ; & | {
# ( or a keyword that opens a command list. Its argument, quoted or bare.
_SOURCE = re.compile(r"""(?:^|[;&|{(]|\bthen\b|\bdo\b|\belse\b)\s*(?:\.|source)\s+("[^"]+"|'[^']+'|[^\s;&|)]+)""")
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _expand(word, values):
    """``word`` with the script's variables put in, or None when one of them is not known."""
    missing = []

    def put(match):
        name = match.group(1) or match.group(2)
        if name not in values:
            missing.append(name)
            return ""
        return values[name]
    text = _REF.sub(put, word)
    # a parameter expansion the script's plain values cannot settle (${NAME:-x}, $1)
    return None if missing or "$" in text else text


def sourced_files(script):
    """The absolute paths a shell script sources (``. F``, ``source F``), its variables put in
    (those it assigns a plain value to before), in order; a path naming a variable the script
    does not set, a glob or a command substitution is left out."""
    values, found = {}, []
    for line in script.splitlines():
        code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        if not code.strip():
            continue
        assigned = _ASSIGN.match(code)
        if assigned:
            raw = assigned.group(2)
            if raw[:1] == "'":
                values[assigned.group(1)] = raw[1:-1]
            else:
                value = None if "$(" in raw else _expand(raw.strip('"'), values)
                if value is None:
                    values.pop(assigned.group(1), None)
                else:
                    values[assigned.group(1)] = value
            continue
        for match in _SOURCE.finditer(code):
            word = match.group(1)
            if word[:1] in "\"'":
                word = word[1:-1]
            if "`" in word or "$(" in word or any(c in word for c in "*?["):
                continue
            path = _expand(word, values)
            if path and path.startswith("/") and ".." not in path.split("/"):
                path = os.path.normpath(path)
                if path not in found:
                    found.append(path)
    return found


def init_script_names(defn):
    """The names the service's init script may have: its name and its units' (``.service`` off)."""
    names = [defn["name"]] + [u[:-len(".service")] if u.endswith(".service") else u for u in defn.get("units") or []]
    return list(dict.fromkeys(n for n in names if n and "/" not in n))


def sysv_environment_files(defn, scripts=None):
    """The files the service's init script sources from under SOURCED_ROOT (its environment:
    ``/etc/default/x``, ``/etc/sysconfig/x``), at most MAX_FILES; None when it has no
    readable init script (nothing on the host says what its start reads)."""
    scripts = scripts or INIT_SCRIPTS
    found, read = [], False
    for name in init_script_names(defn):
        try:
            with open(os.path.join(scripts, name), "rb") as handle:
                text = handle.read(SCRIPT_READ_MAX).decode("utf-8", "replace")
        except (IOError, OSError):
            continue
        read = True
        for path in sourced_files(text):
            if path.startswith(SOURCED_ROOT) and not path.startswith(scripts.rstrip("/") + "/") \
                    and path not in found:
                found.append(path)
    return found[:MAX_FILES] if read else None


def systemd_environment_file(value):
    """``(path, optional)`` of one ``EnvironmentFiles=`` value of ``systemctl show``
    (``/etc/default/ssh (ignore_errors=yes)``: the unit wrote ``EnvironmentFile=-/etc/default/ssh``)."""
    path, _sep, flags = value.partition(" (")
    path = path.strip()
    if path.startswith("-"):  # as the unit file spells it
        return path[1:], True
    return path, "ignore_errors=yes" in flags
