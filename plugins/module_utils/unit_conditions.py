# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The path conditions of a systemd unit (``ConditionPathExists=!X``...), each with X's state now.

A start systemd skips on an unmet condition exits 0 and starts nothing; the journal says
which condition, not what the path is, who wrote it or whether its writer still runs. This
reads the unit's own files (its fragment and drop-ins, in systemd's order), keeps the
``Condition*=``/``Assert*=`` lines that test a path, evaluates each now as systemd would, and
says what the path is (type, owner, mode, size, when written) and, when it names a process,
whether that writer still runs (file_writers). Standard library only (runs on the host).
"""
from __future__ import annotations

import os
import re
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import file_writers, host_probe

# The path tests of systemd.unit(5), as Condition* and Assert*, and how each is evaluated
# (None: reported, not evaluated here).
_TESTS = {
    "PathExists": lambda p: os.path.lexists(p) and os.path.exists(p),
    "PathIsDirectory": os.path.isdir,
    "PathIsSymbolicLink": os.path.islink,
    "PathIsMountPoint": os.path.ismount,
    "PathIsReadWrite": None,
    "PathIsEncrypted": None,
    "DirectoryNotEmpty": lambda p: os.path.isdir(p) and bool(os.listdir(p)),
    "FileNotEmpty": lambda p: os.path.isfile(p) and os.path.getsize(p) > 0,
    "FileIsExecutable": lambda p: os.path.isfile(p) and os.access(p, os.X_OK),
}
MAX_CONDITIONS = 8


def parse(text, source=""):
    """``[(directive, value, source)]`` of the path Condition*/Assert* lines of one unit file's
    text; ``("reset", "", source)`` where an empty assignment resets the list (systemd.unit(5))."""
    found = []
    section = ""
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Unit" or "=" not in line:
            continue
        key, _sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if key.startswith(("Condition", "Assert")) and not value:
            found.append(("reset", "", source))
        elif is_path_condition(key):
            found.append((key, value, source))
    return found


def unit_files(props):
    """The files systemd reads for a unit, from its ``systemctl show`` properties: the fragment,
    then the drop-ins (``DropInPaths``, already in the order systemd applies them)."""
    files = []
    fragment = str(props.get("FragmentPath") or "")
    if fragment.startswith("/"):
        files.append(fragment)
    files.extend(p for p in str(props.get("DropInPaths") or "").split() if p.startswith("/"))
    return files


def conditions_of(props, read=None):
    """``[(directive, value, source)]`` the unit's files declare now, resets applied."""
    read = read or _read_text
    found = []
    for path in unit_files(props):
        for item in parse(read(path), path):
            if item[0] == "reset":
                found = []
            else:
                found.append(item)
    return found


def _read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(65536).decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def _unescape(text):
    """systemd's unit name unescaping (systemd-escape --unescape --path): ``-`` is ``/``, ``\\xNN`` a byte."""
    text = text.replace("-", "/")
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


def expand_specifiers(text, unit):
    """``text`` with the unit-name specifiers of systemd.unit(5) (``%i %I %n %N %p %P %%``) of
    ``unit`` expanded; None when it holds another specifier (a host or user value not read here)."""
    name = unit or ""
    stem, _dot, _suffix = name.rpartition(".") if "." in name else (name, "", "")
    prefix, at, instance = stem.partition("@")
    values = {"i": instance if at else "", "I": _unescape(instance) if at else "", "n": name, "N": stem,
              "p": prefix, "P": _unescape(prefix), "%": "%"}
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "%":
            out.append(char)
            index += 1
            continue
        spec = text[index + 1:index + 2]
        if spec not in values:
            return None
        out.append(values[spec])
        index += 2
    return "".join(out)


def evaluate(directive, value, unit=""):
    """``(path, met)``: the path the condition tests (its unit-name specifiers expanded for
    ``unit``) and whether it holds now (None when this module does not evaluate that test).
    ``|`` (a triggering condition) and ``!`` (negation) are read as systemd reads them."""
    text = value.lstrip("|").strip()
    negate = text.startswith("!")
    path = text.lstrip("!").strip()
    expanded = expand_specifiers(path, unit)
    test = _TESTS.get(directive.replace("Condition", "", 1).replace("Assert", "", 1))
    if expanded is None:
        return path, None
    path = expanded
    if test is None or not path.startswith("/"):
        return path, None
    try:
        result = bool(test(path))
    except OSError:
        return path, None
    return path, (not result) if negate else result


def path_state(path, user=None):
    """One line: what ``path`` is now (type, owner, mode, size, when written) and, when it names
    a process, whether that writer runs (a guard its unit names takes a bare PID too)."""
    facts = host_probe.path_facts(path, 4, user)
    kind = facts.get("type")
    if kind == "missing":
        return "%s is absent" % path
    parts = [kind]
    if facts.get("owner"):
        parts.append(facts["owner"])
    if facts.get("mode"):
        parts.append(facts["mode"])
    if "size" in facts:
        parts.append("%d bytes" % facts["size"])
    try:
        parts.append("written %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(os.lstat(path).st_mtime)))
    except OSError:
        pass
    text = "%s exists (%s)" % (path, ", ".join(parts))
    if kind == "file":
        writer = file_writers.writer_state(path, bare=True)
        if writer is not None:
            text += "; " + writer["line"]
    return text


def describe(props, user=None, read=None, unit=""):
    """``{"DIRECTIVE=VALUE": "met now|NOT met now: <path state> (set in FILE)"}`` for the unit's
    path conditions, the unmet ones first, at most MAX_CONDITIONS."""
    rows = []
    for directive, value, source in conditions_of(props, read):
        path, met = evaluate(directive, value, unit or str(props.get("Id") or ""))
        verdict = "met now" if met else "NOT met now" if met is not None else "not evaluated"
        state = path_state(path, user) if path.startswith("/") and "%" not in path else path
        rows.append((0 if met is False else 1, "%s=%s" % (directive, value),
                     "%s: %s (set in %s)" % (verdict, state, source)))
    rows.sort(key=lambda row: row[0])
    return dict((key, text) for _rank, key, text in rows[:MAX_CONDITIONS])


def is_path_condition(directive):
    """Whether ``directive`` (``ConditionPathExists``) is a path test this module reads."""
    for prefix in ("Condition", "Assert"):
        if directive.startswith(prefix) and directive[len(prefix):] in _TESTS:
            return True
    return False
