# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A service account's membership of the group its own files need (policy/_accounts.py)."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import scope_from_service

POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
            "user": "postgres", "config_paths": ["/etc/postgresql"], "data_paths": ["/var/lib/postgresql"]}
KEY = "/etc/ssl/private/server.key"


def _evidence(named_in: str = "log /var/log/postgresql/postgresql-15-main.log", mode: str = "0640") -> dict:
    return {"paths": {"/var/lib/postgresql": "directory, owner postgres:pgdata, mode 0750",
                      "/etc/postgresql": "missing (nearest existing parent /etc: directory, owner root:root, mode 0755)"},
            "named_paths": {KEY: {"type": "file", "owner": "root:ssl-cert", "mode": mode, "named_in": named_in}}}


def test_the_groups_come_from_the_hosts_paths_with_group_access() -> None:
    scope = scope_from_service(POSTGRES, (), _evidence())
    assert scope["path_groups"] == {"pgdata": "/var/lib/postgresql", "ssl-cert": KEY}
    # a missing path's parent, a group without access, a path another program named: none count
    assert "root" not in scope["path_groups"]
    assert "ssl-cert" not in scope_from_service(POSTGRES, (), _evidence(mode="0604"))["path_groups"]
    assert "ssl-cert" not in scope_from_service(POSTGRES, (), _evidence(named_in="recent_changes"))["path_groups"]


@pytest.mark.parametrize("command", ["usermod -aG ssl-cert postgres", "usermod -a -G ssl-cert postgres",
                                     "gpasswd -a postgres ssl-cert", "adduser postgres ssl-cert",
                                     "sudo /usr/sbin/usermod --append --groups=ssl-cert -- postgres"])
def test_adding_the_service_account_to_its_files_group_needs_approval(command: str) -> None:
    result = classify(command, scope=scope_from_service(POSTGRES, (), _evidence()))
    assert result["verdict"] == "approval", result["reasons"]
    assert f"adds postgres to group ssl-cert ({KEY} is owned by that group)" in result["effects"]
    assert "rewrites /etc/group" in result["effects"] and "rewrites /etc/gshadow" in result["effects"]
    assert result["become"] is True


@pytest.mark.parametrize(("command", "why"), [
    ("usermod -G ssl-cert postgres", "without `-a`"),
    ("usermod -aG shadow postgres", "privileged_groups"),
    ("usermod -aG www-data postgres", "no path of postgresql"),
    ("usermod -aG ssl-cert www-data", "not the incident's service account"),
    ("gpasswd -d postgres ssl-cert", "remove members"),
    ("adduser --system evil", "existing account"),
    ("usermod -aG ssl-cert -s /bin/bash postgres", "`usermod -s`"),
])
def test_every_other_account_change_stays_refused_and_says_why(command: str, why: str) -> None:
    result = classify(command, scope=scope_from_service(POSTGRES, (), _evidence()))
    assert result["verdict"] == "reject"
    assert any(why in r for r in result["reasons"]), result["reasons"]


def test_an_operator_adds_a_privileged_group_through_the_policy() -> None:
    policy = load_policy({"privileged_groups": ["ssl-cert"]})
    result = classify("usermod -aG ssl-cert postgres", policy=policy, scope=scope_from_service(POSTGRES, (), _evidence()))
    assert result["verdict"] == "reject" and any("privileged_groups" in r for r in result["reasons"])
