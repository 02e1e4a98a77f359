# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service CLI subcommands judged by what they do (service_cli_table + the user's policy key)."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import service_cli
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import PolicyError, classify, load_policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.service_cli_table import TABLE

REDIS = {"name": "redis-server", "user": "redis", "data_paths": ["/var/lib/redis"], "pids": [3100]}
NGINX = {"name": "nginx", "user": "www-data", "processes": ["nginx"], "config_paths": ["/etc/nginx"], "pids": [4242]}


def test_every_table_row_has_a_known_class_and_says_what_it_does() -> None:
    for tool, rows in TABLE.items():
        for words, (cls, does) in rows.items():
            assert cls in service_cli.CLASSES, (tool, words)
            assert does.strip() and words == words.lower(), (tool, words)


@pytest.mark.parametrize(("command", "verdict"), [
    ("redis-cli script kill", "allow"),
    ("redis-cli SCRIPT KILL", "allow"),
    ("redis-cli function kill", "allow"),
    ("redis-cli client kill id 7", "allow"),
    ("redis-cli client kill type normal", "approval"),
    ("redis-cli client pause 1000", "approval"),
    ("redis-cli shutdown", "approval"),
    ("redis-cli shutdown nosave", "reject"),
    ("redis-cli script flush", "reject"),
    ("redis-cli script load x", "reject"),
    ("redis-cli flushall", "reject"),
    ("redis-cli debug sleep 0", "reject"),
    ("redis-cli config set dir /tmp", "reject"),
    ("redis-cli frobnicate now", "reject"),
    ("redis-cli script frobnicate", "reject"),
])
def test_a_redis_subcommand_is_judged_by_what_it_does_in_a_redis_incident(command: str, verdict: str) -> None:
    result = classify(command, scope=REDIS)
    assert result["verdict"] == verdict, result["reasons"]


def test_an_in_scope_repair_needs_approval_when_redis_is_not_in_the_incident() -> None:
    result = classify("redis-cli script kill", scope=NGINX)
    assert result["verdict"] == "approval"
    assert any("not part of this incident" in r for r in result["reasons"]), result["reasons"]


def test_a_user_extends_the_table_through_the_policy() -> None:
    policy = load_policy({"service_subcommands": {"redis-cli": {"script kill": ["refuse", "site rule: never"],
                                                                "memory purge": ["approve", "frees allocator pages"]}}})
    refused = classify("redis-cli script kill", policy=policy, scope=REDIS)
    assert refused["verdict"] == "reject" and any("site rule" in r for r in refused["reasons"])
    assert classify("redis-cli memory purge", policy=policy, scope=REDIS)["verdict"] == "approval"


def test_a_malformed_user_row_is_named_not_raised() -> None:
    with pytest.raises(service_cli.TableError, match=r"service_subcommands\.redis-cli\.script kill"):
        service_cli.merged({"redis-cli": {"script kill": ["allow-everything", "x"]}})
    try:
        policy = load_policy({"service_subcommands": {"redis-cli": {"script kill": ["yes", "x"]}}})
    except PolicyError as exc:
        assert "service_subcommands" in str(exc)
        return
    result = classify("redis-cli script kill", policy=policy, scope=REDIS)
    assert result["verdict"] == "reject" and any("class one of" in r for r in result["reasons"]), result


def test_the_longest_entry_wins_and_unknown_words_are_not_in_the_table() -> None:
    assert service_cli.lookup("redis-cli", ["SHUTDOWN", "NOSAVE"]).cls == "refuse"
    assert service_cli.lookup("redis-cli", ["shutdown"]).cls == "approve"
    assert service_cli.lookup("redis-cli", ["frobnicate"]) is None
    assert service_cli.lookup("no-such-cli", ["script", "kill"]) is None
