# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet-wide stop's decision over every host's health phase result (docs in fleet_stop.yml)."""
from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.plugin_utils import fleet_stop as _fleet_stop


def fleet_stop(results, share=0.5, min_hosts=5):
    """Which services' checks fail on too much of the fleet at once to act on."""
    if not isinstance(results, Mapping):
        raise AnsibleFilterError(
            f"sentinel.remediation.fleet_stop: expected a mapping of host to health result, got {type(results).__name__}")
    try:
        return _fleet_stop.decide(results, share, min_hosts)
    except _fleet_stop.FleetStopError as exc:
        raise AnsibleFilterError(f"sentinel.remediation.fleet_stop: {exc}") from exc


class FilterModule:
    """Fleet filters."""

    def filters(self):
        return {"fleet_stop": fleet_stop}
