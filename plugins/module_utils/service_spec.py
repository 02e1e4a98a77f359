# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The service definition (contract C1) and typed health checks as module arguments.

One argument spec, shared by the evidence, service_health and execute_plan modules, so
every key a user declares for a service reaches every module that runs on the host.
The documentation of the same keys is the ``sentinel.remediation.service_definition``
doc fragment. Runs on targets: standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import os
import re

from ansible_collections.sentinel.remediation.plugins.module_utils import server_sessions

CHECK_TYPES = ("command", "http", "port", "process", "service")

CHECK_OPTIONS = dict(
    type=dict(type="str", required=True, choices=list(CHECK_TYPES)),
    pattern=dict(type="str"),
    port=dict(type="int"),
    process=dict(type="str"),
    url=dict(type="str"),
    status=dict(type="int", default=200),
    argv=dict(type="list", elements="str"),
    indicator=dict(type="str"),
    rc=dict(type="int", default=0),
    timeout=dict(type="int"),
)
CHECK_REQUIRED_IF = [
    ("type", "port", ("port",)),
    ("type", "http", ("url",)),
    ("type", "command", ("argv",)),
]

# Every key of a service definition but its name; lists default to empty, except those
# whose default depends on the name (units, processes) or on other keys (log_paths).
DEFINITION_KEYS = dict(
    units=dict(type="list", elements="str"),
    processes=dict(type="list", elements="str"),
    user=dict(type="str"),
    config_paths=dict(type="list", elements="path", default=[]),
    data_paths=dict(type="list", elements="path", default=[]),
    runtime_paths=dict(type="list", elements="path", default=[]),
    log_paths=dict(type="list", elements="path"),
    logs=dict(type="list", elements="path", default=[]),
    ports=dict(type="list", elements="int", default=[]),
    config_test=dict(type="list", elements="str", default=[]),
    paths=dict(type="list", elements="path", default=[]),
    pid_files=dict(type="list", elements="path", default=[]),
    depends_on=dict(type="list", elements="str", default=[]),
)
# How sure a failure must be, and what a restart costs: not lists, so resolve() keeps them as given.
SAFEGUARD_KEYS = dict(
    stateful=dict(type="bool", default=False),
    confirm_attempts=dict(type="int"),
    confirm_interval=dict(type="int"),
    on_timeout=dict(type="str", choices=["escalate", "remediate"], default="escalate"),
)


def checks_spec() -> dict:
    return dict(type="list", elements="dict", options=dict(CHECK_OPTIONS), required_if=list(CHECK_REQUIRED_IF))


def definition_spec(name_required: bool = True) -> dict:
    """Options of one service definition: ``name``, ``checks`` and the keys of C1."""
    options = dict(name=dict(type="str", required=name_required), checks=checks_spec())
    options.update(DEFINITION_KEYS)
    options.update(SAFEGUARD_KEYS)
    return options


class DefinitionError(ValueError):
    """A service definition or check that cannot work, with a message naming what is wrong."""


def _list(value) -> list:
    return list(value) if value else []


def resolve(raw: dict) -> dict:
    """A service definition with every key present and defaults filled in.

    ``units`` defaults to ``[<name>.service]``; ``processes`` to ``[]`` (meaning: programs
    named like the service); ``log_paths`` to the directories of ``logs`` (without glob
    characters); ``checks`` to one ``service`` check.
    """
    name = raw.get("name") or raw.get("service")
    if not name or not isinstance(name, str):
        raise DefinitionError("a service definition needs a name")
    defn = {"name": name}
    for key in DEFINITION_KEYS:
        value = raw.get(key)
        defn[key] = value if key == "user" else _list(value)
    for key, spec in SAFEGUARD_KEYS.items():
        value = raw.get(key)
        defn[key] = spec.get("default") if value is None else value
    if not defn["units"]:
        defn["units"] = [name if name.endswith(_UNIT_SUFFIXES) else name + ".service"]
    if not raw.get("log_paths"):
        dirs = []
        for log in defn["logs"]:
            directory = os.path.dirname(log)
            while any(c in directory for c in "*?["):
                directory = os.path.dirname(directory)
            if directory and directory != "/" and directory not in dirs:
                dirs.append(directory)
        defn["log_paths"] = dirs
    checks = raw.get("checks") or [{"type": "service"}]
    defn["checks"] = [normalise_check(check, index, name) for index, check in enumerate(checks)]
    validate(defn)
    return defn


_UNIT_SUFFIXES = (".service", ".socket", ".target", ".timer", ".mount", ".path", ".scope")


def normalise_check(check: dict, index: int = 0, service: str = "") -> dict:
    """A check with every option present (defaults as in CHECK_OPTIONS); raises
    DefinitionError for a check that cannot run."""
    if not isinstance(check, dict):
        raise DefinitionError("%s: checks[%d] must be a dict, got %r" % (service, index, check))
    full = {}
    for key, spec in CHECK_OPTIONS.items():
        value = check.get(key)
        full[key] = spec.get("default") if value is None else value
    where = "%s: checks[%d]" % (service, index) if service else "checks[%d]" % index
    if full["type"] not in CHECK_TYPES:
        raise DefinitionError("%s: type must be one of %s, got %r" % (where, ", ".join(CHECK_TYPES), full["type"]))
    for kind, needed in (("port", "port"), ("http", "url"), ("command", "argv")):
        if full["type"] == kind and not full[needed]:
            raise DefinitionError("%s: a %s check needs a non-empty %s" % (where, kind, needed))
    if full["type"] == "port" and not 0 < int(full["port"]) < 65536:
        raise DefinitionError("%s: port must be between 1 and 65535, got %s" % (where, full["port"]))
    if full["type"] == "http" and not re.match(r"^https?://", full["url"], re.IGNORECASE):
        raise DefinitionError("%s: url must be an http:// or https:// URL, got %r" % (where, full["url"]))
    if full["pattern"]:
        try:
            re.compile(full["pattern"])
        except re.error as exc:
            raise DefinitionError("%s: bad process pattern %r: %s" % (where, full["pattern"], exc))
    if full["timeout"] is not None and full["timeout"] <= 0:
        raise DefinitionError("%s: timeout must be positive, got %s" % (where, full["timeout"]))
    return full


def validate(defn: dict) -> None:
    name = defn["name"]
    bad_ports = [p for p in defn["ports"] if not 0 < int(p) < 65536]
    if bad_ports:
        raise DefinitionError("%s: ports must be between 1 and 65535, got %s" % (name, bad_ports))
    for key in ("config_paths", "data_paths", "runtime_paths", "log_paths", "paths", "pid_files"):
        relative = [p for p in defn[key] if not p.startswith("/")]
        if relative:
            raise DefinitionError("%s: %s must be absolute paths, got %s" % (name, key, relative))
    for key in ("confirm_attempts", "confirm_interval"):
        if defn[key] is not None and int(defn[key]) < 0:
            raise DefinitionError("%s: %s must not be negative, got %s" % (name, key, defn[key]))
    if defn["on_timeout"] not in ("escalate", "remediate"):
        raise DefinitionError("%s: on_timeout must be escalate or remediate, got %r" % (name, defn["on_timeout"]))
    if defn["config_test"] and not defn["config_test"][0]:
        raise DefinitionError("%s: config_test must start with a program name" % name)


# What a planner may want to run, and so needs to know is there: coreutils and the usual
# process, network, init, package and file tools. The service's own programs are added.
DEFAULT_TOOLS = (
    "cat", "chgrp", "chmod", "chown", "cp", "df", "du", "find", "grep", "head", "install", "ln", "ls", "mkdir",
    "mv", "readlink", "rm", "rmdir", "stat", "tail", "touch", "truncate",
    "fuser", "kill", "killall", "lsof", "pgrep", "pkill", "ps",
    "ip", "netstat", "ss", "curl", "wget",
    "journalctl", "service", "systemctl", "invoke-rc.d", "update-rc.d",
    "apt-get", "dpkg", "logrotate", "setfacl", "sudo", "runuser", "tar", "gzip", "sed", "ssh-keygen", "openssl",
)


def tool_candidates(defn: dict) -> list:
    """DEFAULT_TOOLS, the service's own programs (its processes, config test, checks) and the
    clients of the session views its incidents may show (its own server's, its dependencies')."""
    names = list(DEFAULT_TOOLS) + [defn["name"]] + list(defn["processes"]) + server_sessions.view_tools(defn)
    if defn["config_test"]:
        names.append(os.path.basename(defn["config_test"][0]))
    for check in defn["checks"]:
        if check.get("argv"):
            names.append(os.path.basename(check["argv"][0]))
    return names
