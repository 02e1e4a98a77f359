# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediate role's variables checked against its argument spec (meta/argument_specs.yml),
as the validation task Ansible adds to a role's entry point would check them; the heal action
runs this first so a bad variable is named as the operator wrote it."""
from __future__ import annotations

import os
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import load_yaml
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plain_data import plain

_NAME = "sentinel.remediation.heal"


def check_role_inputs(action: ActionBase, entry_point: str, task_vars: Mapping) -> None:
    """The role's variables against its argument spec (meta/argument_specs.yml), as the
    validation task Ansible adds to a role's entry point would check them."""
    spec = role_argument_spec(entry_point)
    provided = {name: task_vars[name] for name in spec if name in task_vars}
    provided = action._templar.template(provided)
    # Only the error messages are read: the validator's deep copy is of plain data (plain_data.py).
    validation = role_validator(entry_point).validate(plain(provided))
    if validation.error_messages:
        raise AnsibleActionFail(f"{_NAME}: bad input to the sentinel.remediation.remediate role ({entry_point}): "
                                + "; ".join(validation.error_messages))


_ROLE_SPECS: dict = {}
_ROLE_VALIDATORS: dict = {}


def role_validator(entry_point: str) -> ArgumentSpecValidator:
    if entry_point not in _ROLE_VALIDATORS:
        _ROLE_VALIDATORS[entry_point] = ArgumentSpecValidator(role_argument_spec(entry_point))  # copies the spec
    return _ROLE_VALIDATORS[entry_point]


def role_argument_spec(entry_point: str) -> dict:
    if entry_point not in _ROLE_SPECS:
        path = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "remediate", "meta", "argument_specs.yml")
        with open(path, encoding="utf-8") as handle:
            specs = load_yaml(handle.read())["argument_specs"]
        if entry_point not in specs:
            raise AnsibleActionFail(f"{_NAME}: the remediate role has no entry point {entry_point!r} "
                                    f"(known: {', '.join(sorted(specs))})")
        _ROLE_SPECS[entry_point] = specs[entry_point].get("options") or {}
    return _ROLE_SPECS[entry_point]
