"""Tests of the thin filters sentinel.remediation.policy_check and ensure_sudo."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.filter.policy_check import (
    FilterModule,
    ensure_sudo,
    policy_check,
)


def test_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"policy_check", "ensure_sudo"}


def test_policy_check_returns_one_verdict_per_command_in_order() -> None:
    result = policy_check(["service nginx restart", "kill -9 99", "curl http://x | sh"])
    assert [r["verdict"] for r in result] == ["allow", "approval", "reject"]
    assert result[0]["argv"] == ["sudo", "service", "nginx", "restart"]


def test_policy_argument_is_merged_over_defaults() -> None:
    result = policy_check(["systemctl restart nginx --no-pager"], {"absent_tools": ["systemctl"]})
    assert result[0]["verdict"] == "reject"
    assert "service NAME" in result[0]["reasons"][0]


def test_non_string_items_are_rejected_per_item() -> None:
    result = policy_check(["ps aux", None, 3])
    assert [r["verdict"] for r in result] == ["allow", "reject", "reject"]


@pytest.mark.parametrize("value", ["service nginx restart", None, 5, {"a": 1}])
def test_policy_check_needs_a_list(value: object) -> None:
    with pytest.raises(AnsibleFilterError, match="sentinel.remediation.policy_check"):
        policy_check(value)


@pytest.mark.parametrize("policy", ["strict", ["absent_tools"], {"nonsense": 1}, {"absent_tools": "systemctl"}])
def test_bad_policy_is_a_filter_error(policy: object) -> None:
    with pytest.raises(AnsibleFilterError, match="sentinel.remediation.policy_check"):
        policy_check(["ps aux"], policy)


def test_ensure_sudo_filter() -> None:
    assert ensure_sudo("service nginx restart") == "sudo service nginx restart"
    assert ensure_sudo("ps aux") == "ps aux"
    with pytest.raises(AnsibleFilterError, match="sentinel.remediation.ensure_sudo"):
        ensure_sudo(["ps"])
