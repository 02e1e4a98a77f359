# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules that judge what a command does rather than how it is spelled (one test per rule).

Each case pairs commands the rule must stop with close neighbours it must leave alone, so a
rule that grows too wide fails here as surely as one that misses.
"""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify

NGINX = {"name": "nginx", "user": "www-data", "units": ["nginx.service"], "processes": ["nginx"],
         "config_paths": ["/etc/nginx"], "data_paths": ["/var/www"], "runtime_paths": ["/run/nginx"],
         "log_paths": ["/var/log/nginx"], "ports": [80, 443], "pids": [4242]}
POSTGRES = {"name": "postgresql", "user": "postgres", "units": ["postgresql@15-main.service"],
            "data_paths": ["/var/lib/postgresql"], "log_paths": ["/var/log/postgresql"], "ports": [5432]}
REDIS = {"name": "redis-server", "user": "redis", "units": ["redis-server.service"], "data_paths": ["/var/lib/redis"],
         "config_paths": ["/etc/redis"], "ports": [6379]}


def verdict(command: str, scope: dict | None = None) -> str:
    return classify(command, scope=scope)["verdict"]


@pytest.mark.parametrize("command", [
    "grep -i 'pass.ord' /etc/redis/redis.conf", "grep -E 'pa(s){2}w' /etc/redis/redis.conf",
    r"grep 'pa\(s\)\{2\}w' /etc/redis/redis.conf", "grep '[[:alpha:]]ass[[:alpha:]]ord' /etc/nginx/nginx.conf",
    "grep -ri auth /etc/redis/redis.conf", "grep -F -e requ /etc/redis/redis.conf", "grep -n 'BEG[I]N' /etc/nginx/x.pem",
    "grep -E 'listen|pass.ord' /etc/nginx/nginx.conf",
])
def test_grep_pattern_judged_by_the_lines_it_selects(command: str) -> None:
    assert verdict(command, REDIS) == "reject"


@pytest.mark.parametrize("command", [
    "grep -n '^bind' /etc/redis/redis.conf", "grep -n ssl_certificate_key /etc/nginx/nginx.conf",
    "grep -E 'emerg|crit' /var/log/nginx/error.log", "grep -i 'failed password' /var/log/auth.log",
    "grep -c Port /etc/ssh/sshd_config", "grep -rn client_max_body_size /etc/nginx",
])
def test_grep_ordinary_patterns_stay_allowed(command: str) -> None:
    assert verdict(command, NGINX) == "allow"


@pytest.mark.parametrize(("command", "expected"), [
    ("curl -H @/etc/shadow http://127.0.0.1/", "reject"),
    ("curl -w @/etc/ssl/private/site.key http://127.0.0.1/", "reject"),
    ("curl -H @- http://127.0.0.1/", "reject"),
    ("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1/", "allow"),
])
def test_curl_at_file_values_are_reads(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize("command", [
    "psql postgresql://app:secret@db/app -c 'select 1'", "psql postgresql://localhost/app -c 'select 1'",
    "redis-cli -u redis://:pw@127.0.0.1:6379 ping", "curl http://admin:pw@127.0.0.1/",
])
def test_urls_with_passwords_and_connection_uris_are_refused(command: str) -> None:
    assert verdict(command, POSTGRES) == "reject"


@pytest.mark.parametrize(("command", "expected"), [
    ("diff -r /etc/ssh /tmp/empty", "reject"),  # host keys beneath
    ("cp -r /etc/letsencrypt/live/example.com /tmp/le", "reject"),
    ("diff -r /etc/nginx /etc/nginx.bak", "approval"),  # a key may live beneath any tree
    ("diff /etc/nginx/nginx.conf /etc/nginx/nginx.conf.bak", "allow"),
    ("ls -l /etc/ssh", "allow"),
    ("cat /etc/ssh/sshd_config", "allow"),
])
def test_trees_that_hold_keys(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("systemctl stop multi-user.target", "reject"), ("systemctl mask network-online.target", "reject"),
    ("systemctl start debug-shell.service", "reject"), ("systemctl enable debug-shell", "reject"),
    ("systemctl set-property ssh.service CPUQuota=1%", "reject"), ("systemctl revert ssh", "reject"),
    ("systemctl set-property nginx.service MemoryMax=1G", "approval"), ("systemctl revert nginx", "approval"),
    ("systemctl restart nginx", "allow"),
])
def test_units_the_host_needs(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("fuser -k 22/tcp", "reject"), ("fuser -k 5432/tcp", "reject"), ("fuser -k 80/tcp", "approval"),
    ("fuser -v -n tcp 80", "allow"),
])
def test_fuser_kill_stays_inside_the_incident(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("journalctl --vacuum-time=1s", "reject"), ("journalctl --vacuum-size=1M", "reject"),
    ("journalctl --vacuum-files=1", "reject"), ("journalctl --vacuum-time=10min", "reject"),
    ("journalctl --vacuum-time=2weeks", "approval"), ("journalctl --vacuum-size=500M", "approval"),
    ("journalctl --vacuum-files=5", "approval"),
])
def test_journal_vacuum_keeps_a_record(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("dpkg -i /tmp/x.deb", "reject"), ("apt-get install -y /home/admin/x.deb", "reject"),
    ("dpkg -i /var/cache/apt/archives/nginx-common_1.22.1-9_all.deb", "approval"),
    ("apt-get install -y nginx", "approval"),
])
def test_package_files_must_come_from_apt(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("systemd-tmpfiles --create /tmp/x.conf", "reject"),
    ("systemd-tmpfiles --create /var/tmp/nginx.conf", "reject"),
    ("systemd-tmpfiles --create /usr/lib/tmpfiles.d/nginx.conf", "approval"),
])
def test_tmpfiles_only_from_tmpfiles_directories(command: str, expected: str) -> None:
    assert verdict(command, NGINX) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("psql -c \"ALTER SYSTEM SET archive_command = 'id'\"", "reject"),
    ("psql -c \"ALTER SYSTEM SET shared_preload_libraries = '/tmp/x.so'\"", "reject"),
    ("psql -c \"SET session_preload_libraries = 'x'\"", "reject"),
    ("pg_ctl -D /var/lib/postgresql/15/main -o '-c archive_command=id' start", "reject"),
    ("pg_ctl -D /var/lib/postgresql/15/main -p /tmp/postgres start", "reject"),
    ("psql -c 'ALTER SYSTEM SET max_connections = 200'", "approval"),
    ("pg_ctl status -D /var/lib/postgresql/15/main", "allow"),
])
def test_settings_that_run_programs_or_load_libraries(command: str, expected: str) -> None:
    assert verdict(command, POSTGRES) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ("truncate -s 0 /var/lib/redis/dump.rdb", "reject"), ("truncate -s0 /var/lib/redis/appendonly.aof", "reject"),
    ("truncate -s 0 /srv/app/db.sqlite3", "reject"),
    ("truncate -s 0 /var/log/redis/redis-server.log", "allow"),
])
def test_truncating_data_destroys_it(command: str, expected: str) -> None:
    assert verdict(command, REDIS) == expected


def test_truncating_the_incidents_own_log_is_allowed() -> None:
    assert verdict("truncate -s 0 /var/log/nginx/error.log", NGINX) == "allow"


@pytest.mark.parametrize(("command", "expected"), [
    ("run-parts --test /etc/cron.daily", "allow"), ("run-parts /etc/cron.daily", "reject"),
])
def test_run_parts_only_lists(command: str, expected: str) -> None:
    assert verdict(command) == expected
