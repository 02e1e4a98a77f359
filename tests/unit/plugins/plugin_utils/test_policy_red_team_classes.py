# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Classes of misjudgment a red team found (session 38), each stated with several spellings.

Every class was a command the policy read as harmless while the program does something else
with it: a file operand judged as text, a name a tool looks up in several directories, a
database name that is a whole connection string, content put into the file other programs
signal by. The spellings marked "held back" were not used while the rule was written; they
check that the rule is about what the command does, not about the strings it was fixed for.
"""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy, scope_from_service

NGINX = {"name": "nginx", "user": "www-data", "processes": ["nginx"], "units": ["nginx.service"],
         "config_paths": ["/etc/nginx"], "data_paths": ["/var/www"],
         "runtime_paths": ["/run/nginx", "/var/lib/nginx", "/var/cache/nginx"], "log_paths": ["/var/log/nginx"],
         "pid_files": ["/run/nginx.pid"], "ports": [80, 443]}


def _verdict(command: str) -> tuple[str, str]:
    found = classify(command, load_policy(), scope_from_service(NGINX, [4242, 4243]))
    return found["verdict"], " ".join(found["reasons"])


# ---------------------------------------------------------------- a file operand is a read

@pytest.mark.parametrize("command", [
    "named-checkzone example.com /etc/shadow",
    "named-checkzone -q example.org /root/.pgpass",          # held back
    "named-checkzone -k ignore x /etc/gshadow",               # held back
    "named-checkzone x /proc/1/environ",                      # held back
])
def test_a_zone_file_operand_is_judged_as_a_read_of_that_file(command):
    assert _verdict(command)[0] == "reject"


def test_a_zone_check_of_a_zone_file_still_runs():
    assert _verdict("named-checkzone example.com /etc/bind/db.example")[0] == "allow"


# ---------------------------------------------------------------- key material by what it is

@pytest.mark.parametrize("command", [
    "cat /etc/chrony/chrony.keys", "cat /etc/zabbix/zabbix_agentd.psk", "cat /etc/tinc/vpn/rsa_key.priv",
    "cat /etc/ceph/ceph.client.admin.keyring", "cat /etc/credstore/db.pass", "cat /var/lib/etcd/member/snap/db",
    "head -n 3 /var/lib/ceph/osd/ceph-0/keyring",             # held back
    "sort /etc/swanctl/conf.d/site.psk",                      # held back
    "nl /var/lib/etcd/member/wal/0000000000000000-0000000000000000.wal",  # held back
    "cat /etc/openvpn/auth.pass",                             # held back
    "tac /etc/ntp/ntp.keys",                                  # held back
    "zcat /var/lib/cloud/instances/i-123/user-data.txt.i",    # held back
])
def test_key_lists_keyrings_pre_shared_keys_and_credential_stores_are_secrets(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("command", ["cat /etc/passwd", "cat /etc/apt/keyrings/docker.asc",
                                     "ls -l /etc/chrony/chrony.keys"])
def test_public_files_and_metadata_of_keys_stay_readable(command):
    assert _verdict(command)[0] == "allow"


# ---------------------------------------------------------------- a database name that is a connection string

@pytest.mark.parametrize("command", [
    "psql -d postgresql://evil.example.com/app -c 'select 1'",
    "psql --dbname=postgres://10.0.0.9/x -c 'select 1'",
    "psql -d service=prod -c 'select 1'",
    "psql -d host=db2.internal -c 'select 1'",               # held back
    "psql -d options=-cstatement_timeout=0 -c 'select 1'",   # held back
    "pg_isready -d host=evil",
    "pg_isready --dbname=hostaddr=10.9.9.9",                  # held back
])
def test_a_connection_string_is_refused_wherever_the_database_name_goes(command):
    verdict, reason = _verdict(command)
    assert verdict == "reject" and "connection string" in reason


@pytest.mark.parametrize("command", ["psql -d app -c 'select 1'", "pg_isready -d app"])
def test_a_plain_database_name_is_allowed(command):
    assert _verdict(command)[0] == "allow"


# ---------------------------------------------------------------- account credentials in SQL

@pytest.mark.parametrize("command", [
    "mysql -e 'SHOW CREATE USER root'",
    "psql -c 'SELECT * FROM pg_subscription'",
    "mysql -e 'SHOW CREATE USER CURRENT_USER'",              # held back
    "psql -c 'SELECT subname, subconninfo FROM pg_subscription'",  # held back
    "mariadb -e 'show create user root@localhost'",          # held back
])
def test_statements_that_print_an_account_authentication_string_are_refused(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("line, secret", [
    ("CREATE USER 'root'@'localhost' IDENTIFIED WITH 'caching_sha2_password' AS '$A$005$abcdefgh1234' REQUIRE NONE",
     "abcdefgh1234"),
    ("GRANT ALL ON *.* TO app IDENTIFIED VIA mysql_native_password USING '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'",
     "2470C0C06DEE42FD"),
    ("GRANT USAGE ON *.* TO `x`@`%` IDENTIFIED VIA ed25519 USING 'ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY'",
     "ZIgUREUg5PVgQ6Ls"),
])
def test_a_stored_authentication_string_printed_back_by_the_server_is_redacted(line, secret):
    assert secret not in redact_text(line)


# ---------------------------------------------------------------- a copy that keeps an OS file's mode

@pytest.mark.parametrize("command", [
    "cp -p /usr/bin/sudo /run/nginx/s", "cp --preserve=mode /usr/bin/su /run/nginx/su",
    "cp --preserve /usr/bin/passwd /run/nginx/p", "cp -t /run/nginx /usr/bin/passwd -p",
    "cp --preserve=all,context /usr/bin/newgrp /var/lib/nginx/ng",   # held back
    "cp -pv /usr/lib/openssh/ssh-keysign /run/nginx/k",             # held back
    "cp -fp /sbin/unix_chkpwd /var/cache/nginx/u",                  # held back
    "cp --preserve=m /bin/su /run/nginx/s",                         # held back
])
def test_a_copy_keeping_the_mode_of_an_operating_system_file_needs_approval(command):
    verdict, reason = _verdict(command)
    assert verdict == "approval" and "set-user-ID" in reason


@pytest.mark.parametrize("command", [
    "cp /usr/bin/passwd /run/nginx/p", "cp --preserve=timestamps /usr/bin/passwd /run/nginx/p",
    "cp -p --no-preserve=mode /usr/bin/passwd /run/nginx/p", "cp -p /var/log/nginx/access.log /var/log/nginx/a.1",
])
def test_a_copy_that_does_not_keep_an_os_file_mode_is_judged_as_before(command):
    assert _verdict(command)[0] == "allow"


# ---------------------------------------------------------------- an account is not a service

@pytest.mark.parametrize("command", ["pkill -u www-data", "pkill -U www-data",
                                     "pkill --uid www-data",          # held back
                                     "pkill -USR1 -u www-data",       # held back
                                     "pkill --euid=www-data"])        # held back
def test_signalling_every_process_of_the_service_account_needs_approval(command):
    assert _verdict(command)[0] == "approval"


def test_naming_the_process_of_the_account_stays_allowed():
    assert _verdict("pkill -u www-data -x nginx")[0] == "allow"


# ---------------------------------------------------------------- names looked up in several directories

@pytest.mark.parametrize("command", [
    "systemd-analyze cat-config shadow", "systemd-analyze cat-config ssl/private/ssl-cert-snakeoil.key",
    "systemd-analyze cat-config sudoers.d/90-cloud-init-users",      # held back
    "systemd-analyze cat-config krb5.keytab",                        # held back
    "systemd-analyze cat-config ssh/ssh_host_ecdsa_key",             # held back
    "systemd-analyze --no-pager cat-config gshadow-",                # held back
    "systemd-analyze inspect-elf bash", "systemd-analyze verify ssh/x.service",
])
def test_systemd_analyze_reads_the_files_a_relative_name_resolves_to(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("command", ["systemd-analyze cat-config systemd/journald.conf",
                                     "systemd-analyze verify nginx.service", "systemd-analyze dump nginx.service"])
def test_systemd_analyze_on_the_incident_or_ordinary_configuration_is_allowed(command):
    assert _verdict(command)[0] == "allow"


# ---------------------------------------------------------------- whole unit state for many units

@pytest.mark.parametrize("command", [
    "systemctl cat '*'", "systemctl show 's*'", "systemd-analyze dump", "systemd-analyze dump 'ssh*'",
    "systemctl cat 'post*'",                     # held back
    "systemctl show '*.socket'",                 # held back
    "systemctl cat 'redis-serve?'",              # held back
    "systemd-analyze dump 'post*'",              # held back
    "systemd-analyze dump postgresql.service",   # held back
])
def test_printing_the_environment_of_units_a_pattern_or_no_name_reaches_needs_approval(command):
    verdict, reason = _verdict(command)
    assert verdict == "approval" and "environment" in reason.lower()


# ---------------------------------------------------------------- content put into a PID file

@pytest.mark.parametrize("command", [
    "sed -i 's/.*/1/' /run/nginx.pid", "cp /run/sshd.pid /run/nginx.pid", "dd if=/run/sshd.pid of=/run/nginx.pid",
    "cp /run/sshd.pid /run/nginx/nginx.pid", "ln -s /run/nginx/x /run/nginx.pid",
    "cp /proc/self/stat /var/run/nginx.pid",                 # held back
    "install -m 644 /run/crond.pid /run/nginx.pid",          # held back
    "sed -i -e '1s/^.*$/1/' /var/run/nginx.pid",             # held back
    "mv /run/sshd.pid /run/nginx/nginx.pid",                 # held back
])
def test_writing_content_into_a_pid_file_is_refused(command):
    verdict, reason = _verdict(command)
    assert verdict == "reject" and ("PID file" in reason or "pidfile" in reason)


@pytest.mark.parametrize("command", ["rm -f /run/nginx.pid", "truncate -s 0 /run/nginx.pid", "cat /run/nginx.pid",
                                     "pkill -F /run/nginx.pid"])
def test_a_stale_pid_file_may_still_be_removed_emptied_or_read(command):
    assert _verdict(command)[0] == "allow"


# ---------------------------------------------------------------- where root runs what it finds

@pytest.mark.parametrize("command", [
    "cp /tmp/x /etc/dhcp/dhclient-exit-hooks.d/x", "cp /tmp/x /etc/incron.d/x", "touch /run/nologin",
    "touch /etc/letsencrypt/renewal-hooks/post/x",              # held back
    "install -m 755 /tmp/x /etc/dhcp/dhclient-enter-hooks.d/z",  # held back
    "cp /tmp/x /etc/ppp/ipv6-up.d/x",                           # held back
    "install /tmp/x /etc/nologin",                              # held back
])
def test_hook_directories_and_login_switches_belong_to_the_operating_system(command):
    assert _verdict(command)[0] == "reject"


# ---------------------------------------------------------------- grep's own dialect

@pytest.mark.parametrize("command", [
    "grep -rh '^[A-Za-z0-9+/]\\{64\\}$' /etc/nginx", "grep -rE '^[[:alnum:]+/]{64}$' /etc/nginx",
    "grep -rx '[A-Za-z0-9+/=]*' /etc/nginx",
    "grep -r '[[:alnum:]+/=]\\{50,\\}' /etc/nginx",   # held back
    "grep -rP '^[A-Za-z\\d+/]{64}$' /etc/nginx",       # held back (missed at first: led to the -P reading)
])
def test_a_recursive_grep_printing_key_bodies_is_refused_in_every_dialect(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("command", ["grep -r include /etc/nginx", "grep -r '^[a-z_]\\+ ' /etc/nginx",
                                     "grep -rP 'server_name' /etc/nginx", "grep -P 'listen\\s+80' /etc/nginx/nginx.conf"])
def test_ordinary_recursive_searches_stay_allowed(command):
    assert _verdict(command)[0] == "allow"


def test_setting_the_resolver_log_level_needs_approval_reading_it_does_not():
    assert _verdict("resolvectl log-level debug")[0] == "approval"
    assert _verdict("resolvectl log-level")[0] == "allow"
