# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that adapt a fleet-shared plan to each host (docs in the sidecar .yml files)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.plugin_utils import fleet as _fleet


def _ports(ports):
    try:
        return [int(p) for p in ports or []]
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sentinel.remediation: ports must be integers, got {ports!r}") from exc


def localize_commands(commands, from_evidence, to_evidence, service, ports=None):
    """A plan made from one host's evidence, rewritten for another host."""
    if not isinstance(commands, (list, tuple)):
        raise AnsibleFilterError("sentinel.remediation.localize_commands: expected a list of commands")
    return _fleet.localize(commands, from_evidence, to_evidence, str(service), _ports(ports))


def generalize_commands(commands, evidence, service, ports=None):
    """Commands with host-specific values (PIDs) replaced by placeholders, for memory."""
    if not isinstance(commands, (list, tuple)):
        raise AnsibleFilterError("sentinel.remediation.generalize_commands: expected a list of commands")
    return _fleet.generalize(commands, evidence, str(service), _ports(ports))


class FilterModule:
    """Fleet plan filters."""

    def filters(self):
        return {"localize_commands": localize_commands, "generalize_commands": generalize_commands}
