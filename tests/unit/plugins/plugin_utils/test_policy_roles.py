# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a command does judged by who acts on it later (issue 23): link and copy destinations,
process patterns against the host's process table, configuration paths of control tools,
credential files by location, units that change the system state."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy, scope_from_service

NGINX = {"name": "nginx", "user": "www-data", "processes": ["nginx"], "config_paths": ["/etc/nginx"],
         "data_paths": ["/var/www"], "runtime_paths": ["/run/nginx", "/var/lib/nginx"],
         "log_paths": ["/var/log/nginx"], "pid_files": ["/run/nginx.pid"], "ports": [80]}


def _host(*rows):
    """Evidence whose process table holds the incident's nginx (PIDs 10, 11) and ``rows``."""
    table = [{"pid": 10, "comm": "nginx", "user": "root", "cmdline": "nginx: master process /usr/sbin/nginx"},
             {"pid": 11, "comm": "nginx", "user": "www-data", "cmdline": "nginx: worker process"}]
    table += [{"pid": pid, "comm": comm, "user": "x", "cmdline": cmdline} for pid, comm, cmdline in rows]
    return scope_from_service(NGINX, [10, 11], {"service_pids": [10, 11], "processes": table})


def _verdict(command, scope=None):
    found = classify(command, load_policy(), scope if scope is not None else scope_from_service(NGINX, [10, 11]))
    return found["verdict"], " ".join(found["reasons"])


# ---------------------------------------------------------------- process patterns

def test_a_pattern_matching_only_the_incident_processes_is_allowed():
    assert _verdict("pkill -f 'nginx: worker'", _host((20, "redis-server", "/usr/bin/redis-server *:6379")))[0] == "allow"


def test_a_pattern_that_also_reaches_another_service_on_the_host_is_refused():
    scope = _host((30, "nginx-exporter", "/usr/bin/prometheus-nginx-exporter --nginx.scrape-uri=http://x"))
    verdict, reason = _verdict("pkill -f nginx", scope)
    assert verdict == "reject" and "nginx-exporter (PID 30)" in reason


def test_the_same_pattern_is_allowed_where_the_host_runs_nothing_else_matching():
    assert _verdict("pkill -f nginx", _host((30, "postgres", "/usr/lib/postgresql/15/bin/postgres")))[0] == "allow"


def test_a_pattern_reaching_only_other_services_needs_approval():
    verdict, reason = _verdict("pkill -f postgres", _host((30, "postgres", "/usr/lib/postgresql/15/bin/postgres")))
    assert verdict == "approval" and "not one of the incident's processes" in reason


@pytest.mark.parametrize("command", ["pkill -f 'nginx|postgres'", "killall -r 'nginx|redis'", "pkill -f 'nginx|mysqld'"])
def test_without_a_process_table_the_sample_command_lines_stand_in(command):
    verdict, reason = _verdict(command)
    assert verdict == "reject" and "other services" in reason


def test_an_alternation_naming_the_incident_no_longer_puts_the_whole_pattern_in_scope():
    scope = _host((40, "mariadbd", "/usr/sbin/mariadbd"))
    assert _verdict("pkill -f 'nginx|mariadbd'", scope)[0] == "reject"


# ---------------------------------------------------------------- links and copies

@pytest.mark.parametrize("command", [
    "ln -sf /etc/passwd /run/nginx.pid",
    "ln -sf /etc/cron.d/job /var/log/nginx/error.log",
    "ln /etc/hosts /run/nginx/nginx.pid",
    "ln -s /etc/nginx/nginx.conf /var/log/nginx/error.log",
])
def test_a_link_where_the_daemon_writes_is_refused(command):
    verdict, reason = _verdict(command)
    assert verdict == "reject" and "a daemon writes" in reason


def test_a_log_link_to_the_same_services_log_is_allowed():
    assert _verdict("ln -sf /var/log/nginx/access.log.1 /var/log/nginx/access.log")[0] == "allow"


@pytest.mark.parametrize("target", ["/tmp/evil.conf", "/var/www/html/uploads/x.conf", "/home/dev/site.conf"])
def test_configuration_linked_to_a_place_others_write_is_refused(target):
    verdict, reason = _verdict(f"ln -s {target} /etc/nginx/conf.d/x.conf")
    assert verdict == "reject" and "other accounts can write" in reason


def test_enabling_a_site_is_still_an_approved_configuration_change():
    assert _verdict("ln -s /etc/nginx/sites-available/shop /etc/nginx/sites-enabled/shop")[0] == "approval"


@pytest.mark.parametrize("command", [
    "cp /etc/nginx/nginx.conf /var/www/html/nginx.txt",
    "cp -t /var/www/html /etc/hosts",
    "mv /var/log/nginx/access.log /var/www/html/log.txt",
    "install -m 644 /etc/hostname /var/www/html/h",
    "ln /etc/nginx/nginx.conf /var/www/html/n.txt",
    "ln -s /etc/passwd /var/www/html/users.txt",
])
def test_publishing_configuration_or_service_files_is_refused(command):
    verdict, reason = _verdict(command)
    assert verdict == "reject" and "publishes" in reason


def test_restoring_a_page_from_a_backup_needs_approval_and_copies_inside_the_site_are_allowed():
    assert _verdict("cp /var/backups/www/index.html /var/www/html/index.html")[0] == "approval"
    assert _verdict("cp /var/www/html/index.html /var/www/html/index.html.orig")[0] == "allow"


@pytest.mark.parametrize("dest", ["/etc/update-motd.d/99-x", "/etc/tmpfiles.d/x.conf", "/etc/skel/.profile",
                                  "/etc/kernel/postinst.d/zz", "/etc/rc.local"])
def test_directories_other_daemons_read_for_jobs_are_refused(dest):
    assert _verdict(f"cp /var/www/html/x {dest}")[0] == "reject"


# ---------------------------------------------------------------- tool configuration paths

@pytest.mark.parametrize("command, verdict", [
    ("supervisorctl -c /etc/shadow status", "reject"),
    ("supervisorctl --configuration=/root/.aws/credentials status", "reject"),
    ("squid -k parse -f /tmp/squid.conf", "reject"),
    ("postfix -c /root check", "reject"),
    ("rabbitmqctl -n /etc/shadow status", "reject"),
    ("supervisorctl -c /etc/supervisor/supervisord.conf status", "allow"),
    ("squid -k parse -f /etc/squid/squid.conf", "allow"),
])
def test_configuration_options_of_control_tools_are_judged_as_paths(command, verdict):
    assert _verdict(command, scope_from_service({"name": "squid"}))[0] == verdict


# ---------------------------------------------------------------- credentials by location

@pytest.mark.parametrize("path", ["/var/lib/rabbitmq/.erlang.cookie", "/etc/postfix/sasl_passwd", "/etc/nslcd.conf",
                                  "/etc/sssd/sssd.conf", "/etc/corosync/authkey", "/etc/exim4/passwd.client"])
def test_credential_files_are_refused_by_what_they_are_for(path):
    verdict, reason = _verdict(f"cat {path}")
    assert verdict == "reject" and "credentials" in reason
    assert _verdict(f"ls -l {path}")[0] == "allow"  # metadata stays readable


@pytest.mark.parametrize("path", ["/var/www/html/wp-config.php", "/srv/shop/settings.py",
                                  "/var/www/app/config/database.yml", "/opt/api/appsettings.Production.json"])
def test_application_configuration_in_its_code_area_needs_approval(path):
    verdict, reason = _verdict(f"cat {path}")
    assert verdict == "approval" and "database password" in reason


def test_another_units_environment_needs_approval_and_the_incidents_is_readable():
    assert _verdict("systemctl cat postgresql")[0] == "approval"
    assert _verdict("systemctl show redis-server")[0] == "approval"
    assert _verdict("cat /etc/systemd/system/postgresql.service.d/override.conf")[0] == "approval"
    assert _verdict("systemctl cat nginx")[0] == "allow"
    assert _verdict("systemctl show postgresql -p ActiveState")[0] == "allow"


# ---------------------------------------------------------------- system state

@pytest.mark.parametrize("command", [
    "systemctl start runlevel0.target", "systemctl start runlevel1.target", "systemctl start sigpwr.target",
    "systemctl start initrd-switch-root.target", "systemctl start graphical.target",
    "systemctl start --job-mode=isolate multi-user.target", "systemctl restart nginx --job-mode isolate",
])
def test_units_that_change_the_system_state_are_refused_not_gated(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("script", ["sendsigs", "umountfs", "umountroot", "killprocs"])
def test_sysv_shutdown_scripts_are_refused(script):
    policy = load_policy({"absent_tools": ["systemctl", "journalctl"]})
    assert classify(f"/etc/init.d/{script} start", policy, scope_from_service(NGINX))["verdict"] == "reject"


def test_evidence_listing_only_the_service_still_meets_the_other_services_samples():
    """The evidence collects the service's own processes; the samples stand in for the rest."""
    verdict, reason = _verdict("pkill -f 'nginx|postgres'", _host())
    assert verdict == "reject" and "postgres" in reason
