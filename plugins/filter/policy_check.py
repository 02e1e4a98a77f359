# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters sentinel.remediation.policy_check and sentinel.remediation.ensure_sudo.

Thin wrappers: validate the input, call the engine in plugin_utils/policy/,
turn its errors into AnsibleFilterError. Documentation: policy_check.yml and
ensure_sudo.yml next to this file.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import (
    PolicyError,
    ScopeError,
    classify_many,
    ensure_sudo as _engine_ensure_sudo,
    load_policy,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import compile_scope


def _policy(policy: Any, name: str) -> dict[str, Any]:
    if policy is not None and not isinstance(policy, Mapping):
        raise AnsibleFilterError(
            f"{name}: the policy argument must be a dictionary (e.g. remediation_policy), "
            f"not {type(policy).__name__}"
        )
    try:
        return load_policy(dict(policy) if policy else None)
    except PolicyError as exc:
        raise AnsibleFilterError(f"{name}: invalid policy: {exc}") from None


def _scope(scope: Any, policy: Mapping[str, Any], name: str) -> Any:
    """A scope dict or a service definition (plus `pids`); errors name the bad key."""
    if scope is None or scope == {}:
        return None
    if not isinstance(scope, Mapping):
        raise AnsibleFilterError(f"{name}: the scope argument must be a dictionary (a service definition "
                                 f"or the result of scope_from_service), not {type(scope).__name__}")
    try:
        return compile_scope(scope, policy["default_scope"], policy["scope"])
    except ScopeError as exc:
        raise AnsibleFilterError(f"{name}: invalid scope: {exc}") from None


def policy_check(commands: Any, policy: Any = None, scope: Any = None) -> list[dict[str, Any]]:
    """One verdict dict per proposed command, in order."""
    name = "sentinel.remediation.policy_check"
    if isinstance(commands, (str, bytes)):
        raise AnsibleFilterError(f"{name}: expects a list of command strings, got one string; wrap it in a list")
    if not isinstance(commands, Sequence):
        raise AnsibleFilterError(f"{name}: expects a list of command strings, not {type(commands).__name__}")
    loaded = _policy(policy, name)
    compiled = _scope(scope, loaded, name)
    try:
        return classify_many(list(commands), loaded, compiled)
    except PolicyError as exc:
        raise AnsibleFilterError(f"{name}: {exc}") from None


def ensure_sudo(command: Any, policy: Any = None, scope: Any = None) -> str:
    """The command as it will run, with a leading sudo when the engine runs it as root."""
    name = "sentinel.remediation.ensure_sudo"
    if not isinstance(command, str):
        raise AnsibleFilterError(f"{name}: expects a command string, not {type(command).__name__}")
    loaded = _policy(policy, name)
    compiled = _scope(scope, loaded, name)
    try:
        return _engine_ensure_sudo(command, loaded, compiled)
    except PolicyError as exc:
        raise AnsibleFilterError(f"{name}: {exc}") from None


class FilterModule:
    """sentinel.remediation safety policy filters."""

    def filters(self) -> dict[str, Any]:
        return {"policy_check": policy_check, "ensure_sudo": ensure_sudo}
