# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan proven on this fleet (proven.py): which hosts' memories show it healed a signature."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import proven

SIG = "nginx:abc123"
PLAN = [{"command": "service nginx start", "verdict": "allow"}]


def episode(host, success=True, commands=None, finished="2026-11-28T10:00:00Z", signature=SIG):
    return {"signature": signature, "service": "nginx", "host": host, "success": success, "finished": finished,
            "commands": [dict(c, rc=0 if success else 1, source="memory") for c in (commands or PLAN)]}


def test_the_hosts_a_plan_healed_a_signature_on_are_counted_once_each():
    found = proven.index([[episode("web1"), episode("web1", finished="2026-11-28T11:00:00Z")], [episode("web2")]])
    assert proven.proven_hosts(found, SIG, PLAN) == ["web1", "web2"]


def test_a_plan_whose_latest_run_on_any_host_did_not_heal_is_not_proven():
    found = proven.index([[episode("web1"), episode("web1", success=False, finished="2026-11-28T11:00:00Z")],
                          [episode("web2")], [episode("web3")]])
    assert proven.proven_hosts(found, SIG, PLAN) == []


def test_a_plan_that_healed_again_after_a_failure_counts_again():
    found = proven.index([[episode("web1", success=False), episode("web1", finished="2026-11-28T11:00:00Z")]])
    assert proven.proven_hosts(found, SIG, PLAN) == ["web1"]


def test_a_verdict_the_policy_gives_otherwise_now_makes_the_plan_unproven():
    found = proven.index([[episode("web1")], [episode("web2")]])
    assert proven.proven_hosts(found, SIG, [{"command": "service nginx start", "verdict": "approve"}]) == []


def test_another_command_another_signature_or_an_empty_memory_prove_nothing():
    found = proven.index([[episode("web1")], [episode("web2", signature="nginx:other")], "not a memory"])
    assert proven.proven_hosts(found, SIG, [{"command": "service nginx restart", "verdict": "allow"}]) == []
    assert proven.proven_hosts(found, "nginx:other", PLAN) == ["web2"]
    assert proven.proven_hosts(proven.index([]), SIG, PLAN) == []
