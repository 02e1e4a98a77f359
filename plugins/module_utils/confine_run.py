# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How the plan runner confines one command, per the operator's mode (execute_plan).

A command's ``confine`` is what the controller derived from the policy verdict's effects
(``plugin_utils/confinement.py``): ``write``, ``create``, ``remove`` (paths), ``exec``
(the programs of its argv it may execute), ``tcp`` (a network read), ``exception`` (why
it runs without a ruleset: service control that starts daemons, which must not inherit
one) and ``rules`` (the same in words). The mode decides what happens where the kernel
cannot confine: ``required`` refuses the command, ``preferred`` runs it only when a human
approved it, ``off`` runs everything unconfined. Every result says ``confined`` and
``confinement`` (the rules, or why not). Standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import re

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe, landlock
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link

MODES = ("required", "preferred", "off")
_KEYS = ("write", "create", "remove", "exec")
# What a tool prints when the kernel refused it (EACCES, EPERM): as root, ordinary file
# permissions never do, so in a confined command run as root these name the refused path or
# action (even when the tool then exits 0, as `find -exec` does).
_DENIED = re.compile(r"[^\n]*(?:Permission denied|Operation not permitted)[^\n]*")


def normalise(raw, where: str):
    """``raw`` checked: None (nothing declared) or a dict of lists of absolute paths, ``tcp``
    and ``exception``; raises ValueError naming the bad key."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("%s: a mapping is needed, got %r" % (where, raw))
    result = {"tcp": bool(raw.get("tcp")), "bind": bool(raw.get("bind")), "exception": str(raw.get("exception") or ""),
              "unconfinable": str(raw.get("unconfinable") or ""), "rules": str(raw.get("rules") or "")}
    for key in _KEYS:
        values = raw.get(key) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise ValueError("%s.%s: a list of non-empty strings is needed, got %r" % (where, key, values))
        if key != "exec" and not all(v.startswith("/") for v in values):
            raise ValueError("%s.%s: paths must be absolute, got %r" % (where, key, values))
        result[key] = list(values)
    unknown = sorted(set(raw) - set(_KEYS) - {"tcp", "bind", "exception", "unconfinable", "rules"})
    if unknown:
        raise ValueError("%s: unknown key(s) %s (known: %s, tcp, bind, exception, unconfinable, rules)"
                         % (where, ", ".join(unknown), ", ".join(_KEYS)))
    return result


def prepare(command: dict, mode: str):
    """``(ruleset or None, record, problem or None)`` for one command about to run: the
    ruleset to enter, what the result says of its confinement, or why it must not run."""
    confine = command.get("confine")
    for path in [] if confine is None else confine["write"] + confine["create"] + confine["remove"]:
        why = planted_link(path)
        if why:  # whatever the mode: where the write lands is not what was judged or approved
            return None, {"confined": False, "confinement": "refused: %s" % why}, (
                "refused: %s; a restore or an approval never writes through a link another account planted" % why)
    if mode == "off":
        return None, {"confined": False, "confinement": "not confined: confinement is off"}, None
    if confine is None:
        return None, {"confined": False, "confinement": "not confined: no confinement was declared (commands[].confine)"}, None
    if confine["exception"]:
        return None, {"confined": False, "confinement": "not confined: " + confine["exception"]}, None
    programs = []
    for name in confine["exec"] or command["argv"][:1]:
        found = host_probe.find_tool(name)
        if found:
            programs.append(found)
    try:
        if confine["unconfinable"]:
            raise landlock.ConfinementError(confine["unconfinable"])
        ruleset = landlock.Ruleset.build(confine, programs)
    except landlock.PlantedLink as exc:
        # not a missing kernel feature: what the human would approve is not where the write lands
        return None, {"confined": False, "confinement": "refused: %s" % exc}, (
            "refused: %s; a restore or an approval never writes through a link another account planted" % exc)
    except landlock.ConfinementError as exc:
        why = str(exc)
        if mode == "required":
            return None, {"confined": False, "confinement": "refused: " + why}, (
                "refused: confinement is required and this command cannot be confined here (%s)" % why)
        if command.get("approved"):
            return None, {"confined": False, "confinement": "not confined (%s); a human approved it" % why}, None
        return None, {"confined": False, "confinement": "needs approval: " + why}, (
            "needs a human's approval: it cannot be confined here (%s), and confinement is preferred" % why)
    return ruleset, {"confined": True, "confinement": ruleset.describe()}, None


def child_setup(drop, ruleset):
    """The preexec function: drop privileges (``drop``), then enter the ruleset."""
    if ruleset is None:
        return drop

    def setup():
        if drop is not None:
            drop()
        ruleset.enter()
    return setup


def denial(item: dict, ruleset, as_root: bool) -> dict:
    """For a confined command run as root whose error output carries the kernel's refusal:
    ``{"denied": line, "reason": ...}`` (a policy event, not an ordinary failure); else {}.
    Without root, file permissions refuse too, so a failure there stays an ordinary one."""
    if ruleset is None or not as_root or item.get("rc") is None:
        return {}
    found = _DENIED.search(item.get("stderr") or "")
    if not found:
        return {}
    line = found.group(0).strip()[:300]
    return {"denied": line,
            "reason": "confinement denied an action the policy did not declare: %s (rules: %s)" % (line, ruleset.describe())}
