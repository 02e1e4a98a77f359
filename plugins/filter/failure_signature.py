# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The failure_signature filter: the planner's signature, usable in Jinja."""
from __future__ import annotations

DOCUMENTATION = r"""
name: failure_signature
version_added: 0.1.0
author: Sentinel Remediation maintainers (@sentinel-remediation)
short_description: A stable fingerprint of a service failure, the same on every host with the same fault
description:
  - Returns C(<service>:<16 hex digits>) made from the service, its normalised error (no
    timestamps, PIDs, host names or ids) and a few key facts drawn from the evidence
    (config test errors, who holds the service's port, missing paths, disk full).
  - Hosts with the same signature share one plan and one memory record.
positional: error, evidence
options:
  _input:
    description: The service name.
    type: str
    required: true
  error:
    description: The health check's error text.
    type: str
    default: ""
  evidence:
    description: The evidence collected by M(sentinel.remediation.evidence) (its C(evidence) key).
    type: raw
  hostnames:
    description: Names of the host that may appear in the texts; removed before hashing.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Signature of a failing nginx
  ansible.builtin.set_fact:
    _signature: >-
      {{ 'nginx' | sentinel.remediation.failure_signature(health.error, collected.evidence,
                                                          hostnames=[inventory_hostname]) }}
"""

RETURN = r"""
_value:
  description: The signature, C(<service>:<16 hex>).
  type: str
  sample: nginx:3f2a9c01d4e5b6a7
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import (
    failure_signature as _failure_signature,
)


def failure_signature(service, error="", evidence=None, hostnames=None):
    """The failure signature of ``service`` given its error and evidence."""
    if not service or not isinstance(service, str):
        raise AnsibleFilterError(f"sentinel.remediation.failure_signature: expected a service name, got {service!r}")
    try:
        return _failure_signature(service, error or "", evidence, hostnames or ())
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sentinel.remediation.failure_signature: {exc}") from exc


class FilterModule:
    """Failure signature filter."""

    def filters(self):
        return {"failure_signature": failure_signature}
