"""Tests of the thin filters sentinel.remediation.policy_check and ensure_sudo."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.sentinel.remediation.plugins.filter.policy_check import (
    FilterModule,
    ensure_sudo,
    policy_check,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import scope_from_service

NGINX = {"name": "nginx", "config_paths": ["/etc/nginx"], "log_paths": ["/var/log/nginx"], "pids": [4242]}


def test_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"policy_check", "ensure_sudo"}


def test_policy_check_returns_one_verdict_per_command_in_order() -> None:
    result = policy_check(["service nginx restart", "kill -9 99", "curl http://x | sh"])
    assert [r["verdict"] for r in result] == ["allow", "approval", "reject"]
    assert result[0]["argv"] == ["service", "nginx", "restart"]
    assert result[0]["become"] is True
    assert result[1]["pids"] == [99]
    assert set(result[2]) == {"command", "verdict", "reasons", "argv", "become", "display", "pids", "effects"}


def test_policy_argument_is_merged_over_defaults() -> None:
    result = policy_check(["systemctl restart nginx"], {"absent_tools": ["systemctl"]})
    assert result[0]["verdict"] == "reject"
    assert "service NAME" in result[0]["reasons"][0]


def test_scope_as_a_service_definition_or_a_scope() -> None:
    commands = ["kill 4242", "kill 999", "systemctl restart redis-server"]
    from_service = policy_check(commands, None, NGINX)
    from_scope = policy_check(commands, None, scope_from_service(NGINX, NGINX["pids"]))
    assert [r["verdict"] for r in from_service] == ["allow", "approval", "approval"]
    assert [r["verdict"] for r in from_scope] == ["allow", "approval", "approval"]
    assert [r["verdict"] for r in policy_check(commands, None, {})] == ["allow", "allow", "allow"]


@pytest.mark.parametrize(("scope", "message"), [
    ("nginx", "dictionary"), ({"name": "bad name"}, "invalid scope: service key 'name'"),
    ({"name": "x", "pids": ["one"]}, "pids"),
])
def test_bad_scope_is_a_filter_error(scope: object, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        policy_check(["ps aux"], None, scope)


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
    assert ensure_sudo("sudo ps aux") == "ps aux"
    assert ensure_sudo("kill 999", None, NGINX) == "sudo kill 999"
    with pytest.raises(AnsibleFilterError, match="sentinel.remediation.ensure_sudo"):
        ensure_sudo(["ps"])
