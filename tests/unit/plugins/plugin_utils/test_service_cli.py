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
            assert does.strip() and all(w.startswith("-") or w == w.lower() for w in words.split()), (tool, words)


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


POSTGRES = {"name": "postgresql", "units": ["postgresql.service", "postgresql@15-main.service"],
            "processes": ["postgres"], "user": "postgres", "data_paths": ["/var/lib/postgresql"], "pids": [2001]}


@pytest.mark.parametrize(("command", "verdict"), [
    ("sudo -u postgres psql -c 'SELECT pg_cancel_backend(4242)'", "allow"),
    ("sudo -u postgres psql -c 'SELECT pg_terminate_backend(4242)'", "approval"),
    ("sudo -u postgres psql -c 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity'", "approval"),
    ("sudo -u postgres psql -c 'SELECT pg_reload_conf()'", "allow"),
    ("sudo -u postgres psql -c 'SELECT pg_terminate_backend(4242); TRUNCATE orders'", "reject"),
    ("sudo -u postgres psql -c 'SELECT 1 \\g |id'", "reject"),
    ("sudo -u postgres pg_ctl -D /var/lib/postgresql/15/main reload", "allow"),
    ("sudo -u postgres pg_ctl -D /var/lib/postgresql/15/main promote", "approval"),
    ("sudo -u postgres pg_ctl -D /var/lib/postgresql/15/main initdb", "reject"),
    ("pg_ctlcluster 15 main restart", "allow"),
    ("pg_ctlcluster 15 main stop", "approval"),
    ("pg_ctlcluster 15 main promote", "approval"),
])
def test_a_postgresql_subcommand_is_judged_by_what_it_does_in_a_postgresql_incident(command: str, verdict: str) -> None:
    result = classify(command, scope=POSTGRES)
    assert result["verdict"] == verdict, result["reasons"]


def test_a_unit_class_is_judged_as_that_action_on_the_services_unit() -> None:
    stop = classify("nginx -s quit", scope=NGINX)
    assert stop["verdict"] == "approval" and "stops unit nginx.service" in stop["effects"], stop
    reload = classify("nginx -s reload", scope=NGINX)
    assert reload["verdict"] == "allow" and "reloads unit nginx.service" in reload["effects"], reload
    # outside the incident the same reload needs a human, as `systemctl reload nginx` does
    assert classify("nginx -s reload", scope=POSTGRES)["verdict"] == "approval"
    restart = classify("pg_ctlcluster 15 main restart", scope=POSTGRES)
    assert "restarts unit postgresql@15-main.service" in restart["effects"], restart


def test_a_session_function_on_one_backend_says_which() -> None:
    result = classify("sudo -u postgres psql -c 'SELECT pg_terminate_backend(4242)'", scope=POSTGRES)
    assert "pg_terminate_backend on backend PID 4242" in result["effects"]
    assert result["argv"][:4] == ["runuser", "-u", "postgres", "--"], result["argv"]


def test_journal_maintenance_is_a_change_not_a_read() -> None:
    for option in ("--vacuum-time=2weeks", "--rotate", "--flush"):
        result = classify(f"journalctl {option}", scope=NGINX)
        assert result["verdict"] == "approval", (option, result["reasons"])
        assert not any(e.startswith("reads the journal") for e in result["effects"]), result["effects"]


def test_a_user_row_makes_a_session_function_a_site_decision() -> None:
    policy = load_policy({"service_subcommands": {"psql": {"pg_cancel_backend": ["approve", "site rule: a DBA cancels"],
                                                           "pg_terminate_backend": ["refuse", "site rule: never"]}}})
    cancel = classify("sudo -u postgres psql -c 'SELECT pg_cancel_backend(4242)'", policy=policy, scope=POSTGRES)
    assert cancel["verdict"] == "approval" and any("site rule" in r for r in cancel["reasons"])
    terminate = classify("sudo -u postgres psql -c 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity'",
                         policy=policy, scope=POSTGRES)
    assert terminate["verdict"] == "reject" and any("site rule: never" in r for r in terminate["reasons"])


def test_flags_keep_their_case_in_the_table() -> None:
    assert service_cli.lookup("nginx", ["-T"]).does.endswith("prints it")
    assert service_cli.lookup("nginx", ["-t"]).does == "tests the nginx configuration"
    assert service_cli.lookup("nginx", ["-s", "RELOAD"]).cls == "reload"
