# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a PID is one of a service's processes now, by what the host says of it.

A PID the model read in a command's output (``ps``, ``pgrep``, ``pg_stat_activity``) is
text: it may be stale, planted in a log, or another program's. Before a signal reaches
it, the host reads the process from /proc and checks it belongs to the service the plan
heals: its name, its program or its executable is one of the service's ``processes``
(programs named like the service when none are declared), or, on systemd, it sits in one
of the service's units' cgroups. Standard library only (runs on the host).
"""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe


def names_match(names, wanted, service):
    """Whether a process answering to ``names`` is one of ``wanted`` (or, with none declared,
    a program named like ``service``: nginx, sshd for ssh, redis-server)."""
    if wanted:
        return bool(set(names) & set(wanted))
    for name in names:
        if len(name) >= 2 and (name == service or name.startswith(service)
                               or (len(name) >= 4 and service.startswith(name))):
            return True
    return False


def problem(pid, definition, init=None):
    """Why ``pid`` must not be signalled as one of ``definition``'s processes now (a resolved
    service definition: ``name``, ``processes``, ``units``), or None when it is one."""
    service = definition.get("name") or "the service"
    info = host_probe.process_info(pid)
    if info is None:
        return "PID %d is gone (or a zombie): nothing to signal" % pid
    if names_match(host_probe.process_names(info), definition.get("processes") or [], service):
        return None
    if (init or host_probe.init_system()) == "systemd":
        cgroups = host_probe.cgroup_paths(pid)
        for unit in definition.get("units") or []:
            if host_probe.in_unit(cgroups, unit):
                return None
    shown = (info.get("cmdline") or info.get("name") or "?")[:80]
    return ("PID %d runs %s, which is not one of %s's processes now; it was read in a command's output, so it is "
            "signalled only when the host says it belongs to the service" % (pid, shown, service))
