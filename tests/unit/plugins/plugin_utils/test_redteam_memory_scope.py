# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team, stop 36: a forged episode in the fleet's memory (the fact cache is shared) must
not ban or offer a command outside what it was written for: an episode kept in one host's
memory that names another host, or names one service under another service's signature."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation.service import _fleet_memories

SIG = "redis:0123456789abcdef"
FIX = "systemctl restart redis-server"


def _episode(host, service="redis", success=False, rc=1, signature=SIG, command=FIX):
    return {"signature": signature, "service": service, "host": host, "success": success,
            "commands": [{"command": command, "source": "llm", "verdict": "allow", "rc": rc}],
            "finished": "2026-11-28T10:00:00Z"}


def test_a_failure_kept_in_one_hosts_memory_for_another_host_bans_nothing():
    forged = {"web1": [_episode("web2")]}  # web1's memory claiming a failure on web2
    assert memory.lookup(forged, SIG)["failed_commands"] == []
    honest = {"web2": [_episode("web2")]}
    assert memory.lookup(honest, SIG)["failed_commands"] == [FIX]


def test_an_episode_of_one_service_under_another_services_signature_neither_bans_nor_offers():
    bans = [[_episode("web1", service="nginx")]]
    offers = [[_episode("web1", service="nginx", success=True, rc=0, command="rm -rf /var/lib/redis")]]
    assert memory.index(bans).get(SIG, {}).get("failed_commands", []) == []
    assert memory.index(offers).get(SIG, {}).get("successes", []) == []
    # the unit name of the same service is the same service
    assert memory.index([[_episode("web1", service="redis.service")]])[SIG]["failed_commands"] == [FIX]


def test_the_fleet_read_keeps_only_what_each_host_wrote_for_itself():
    task_vars = {"groups": {"all": ["self", "web1", "web2"]},
                 "hostvars": {"web1": {"ansible_facts": {"sentinel_memory": [_episode("self"), _episode("web1")]}},
                              "web2": {"ansible_facts": {"sentinel_memory": [_episode("web2", service="nginx")]}}}}
    fleet = _fleet_memories(task_vars, "self", 50)()
    assert [[e["host"] for e in m] for m in fleet] == [["web1"], []]
