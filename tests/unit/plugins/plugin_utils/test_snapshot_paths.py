# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exact paths a verdict declares it changes, read from the policy's own effects."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as policy_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils.snapshot_paths import (
    declared_changes, incident_id, keep)


def _verdict(command):
    return policy_mod.classify_many([command], policy_mod.load_policy(None))[0]


@pytest.mark.parametrize(("command", "expected"), [
    ("sed -i s/8080/80/ /etc/nginx/sites-enabled/default", [("/etc/nginx/sites-enabled/default", False)]),
    ("mv /etc/nginx/conf.d/broken.conf /tmp/broken.conf",
     [("/etc/nginx/conf.d/broken.conf", True), ("/tmp/broken.conf", True)]),
    ("mkdir -p /var/log/nginx", [("/var/log/nginx", True)]),
    ("chmod 640 /etc/redis/redis.conf", [("/etc/redis/redis.conf", False)]),
    ("rm -f /run/nginx.pid", [("/run/nginx.pid", True)]),
])
def test_the_policy_s_effects_name_the_paths_to_keep(command, expected):
    verdict = _verdict(command)
    assert verdict["verdict"] != "reject", verdict
    found = {(c["path"], c["tree"]) for c in keep(verdict)}
    assert set(expected) <= found


def test_a_move_into_a_directory_keeps_the_entry_it_lands_on():
    found = declared_changes(["moves away /etc/app/a.conf", "moves into /var/backups"])
    assert {"path": "/var/backups/a.conf", "tree": True} in found


def test_reads_and_link_targets_are_not_changes():
    assert declared_changes(["reads /etc/nginx/nginx.conf", "links to /etc/nginx/sites-available/x",
                             "starts unit nginx.service"]) == []


def test_a_recursive_mode_change_keeps_the_tree():
    assert declared_changes(["sets mode 755 on /var/www recursively"]) == [{"path": "/var/www", "tree": True}]


def test_the_incident_id_is_the_service_and_its_start():
    assert incident_id("nginx", "2026-11-28T06:00:00Z") == "nginx-20261128T060000Z"
    assert incident_id("my svc/x", "") == "my_svc_x-unknown"
