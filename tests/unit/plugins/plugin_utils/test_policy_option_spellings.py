# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Classes a red team found (session 42): a command the policy read otherwise than its program.

A tool's own rule that matched options by their exact spelling (the program's getopt_long
expands `--rem` to `--remove` and takes a value as the next word), a setting name the tool
turns into a path, and a `docker inspect` format, which is a Go template the client runs over
the whole container record. Spellings marked "held back" were written after the rule.
"""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy, scope_from_service

NGINX = {"name": "nginx", "user": "www-data", "processes": ["nginx"], "units": ["nginx.service"],
         "config_paths": ["/etc/nginx"], "data_paths": ["/var/www"],
         "runtime_paths": ["/run/nginx", "/var/lib/nginx", "/var/cache/nginx"], "log_paths": ["/var/log/nginx"],
         "pid_files": ["/run/nginx.pid"], "ports": [80, 443]}
WEBAPP = {"name": "webapp", "units": ["webapp.service"], "containers": ["webapp"]}


def _verdict(command: str, service: dict | None = None) -> tuple[str, str]:
    found = classify(command, load_policy(), scope_from_service(service or NGINX, []))
    return found["verdict"], " ".join(found["reasons"])


@pytest.mark.parametrize("command", [
    "systemd-tmpfiles --create --rem --prefix=/run/nginx",
    "systemd-tmpfiles --create --cle /etc/tmpfiles.d/nginx.conf",
    "systemd-tmpfiles --create --ro=/tmp/r /etc/tmpfiles.d/nginx.conf",
    "systemd-tmpfiles --prefix=/run/nginx --cr --remov",                    # held back
    "systemd-tmpfiles --create --roo /tmp/r /etc/tmpfiles.d/nginx.conf",    # held back
])
def test_an_abbreviated_tmpfiles_deletion_or_other_root_is_refused_like_the_full_option(command):
    verdict, reasons = _verdict(command)
    assert verdict == "reject"
    assert "abbreviates" in reasons or "refused" in reasons


def test_a_tmpfiles_prefix_is_the_same_option_attached_or_as_the_next_word():
    assert _verdict("systemd-tmpfiles --create --prefix /run/nginx")[0] == "allow"
    assert _verdict("systemd-tmpfiles --create --prefix=/run/nginx")[0] == "allow"
    assert _verdict("systemd-tmpfiles --create --prefix /")[0] == "reject"


@pytest.mark.parametrize("command", [
    "systemd-analyze security --security-policy=/etc/shadow nginx.service",
    "systemd-analyze --security-policy=/etc/ssl/private/ssl-cert-snakeoil.key security nginx.service",  # held back
])
def test_a_file_an_attached_option_value_names_is_judged_as_a_read(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("command", [
    "systemd-analyze --fuzz 1 service-watchdogs no",                        # held back
    "systemd-analyze --base-time yesterday log-level debug",                # held back
])
def test_an_option_value_given_as_the_next_word_is_not_taken_for_the_verb(command):
    verdict, reasons = _verdict(command)
    assert verdict == "reject"
    assert "read-only `systemd-analyze` verb" in reasons
    assert _verdict("systemd-analyze --iterations 5 calendar daily")[0] == "allow"


@pytest.mark.parametrize("command", [
    "sysctl kernel/../../../etc/shadow", "sysctl kernel.//.//.//.etc.shadow",
    "sysctl vm/../../../etc/passwd", "sysctl net.ipv4..ip_forward",        # held back
])
def test_a_setting_name_that_leaves_proc_sys_is_refused(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("command", [
    "sysctl net.ipv4.conf.all.rp_filter", "sysctl net/ipv4/conf/eth0.100/rp_filter", "sysctl -n fs.file-max"])
def test_setting_names_with_dots_or_slashes_are_read(command):
    assert _verdict(command)[0] == "allow"


@pytest.mark.parametrize("fmt", [
    "", "json", "{{json .Config -}}", "{{ .Config | json }}", "{{- json . -}}", "{{ (.Config) }}",
    "{{ $.Config -}}", "{{json $}}",
    "{{json (.Config)}}", "{{- . | json -}}", "{{.ContainerConfig -}}",                    # held back
    '{{define "x"}}{{json .}}{{end}}{{template "x" .}}', "{{with $}}{{json .Config}}{{end}}",  # held back
    "{{ \"}}\" }}{{json .Config}}", "{{/* }} */}}{{json .Config}}",
])
def test_a_format_reaching_the_record_or_its_environment_is_refused(fmt):
    verdict, reasons = _verdict(f"docker inspect --format '{fmt}' webapp", WEBAPP)
    assert verdict == "reject"
    assert "environment" in reasons


@pytest.mark.parametrize("fmt", [
    "{{- .State.Status -}}", "{{range .Mounts}}{{.Source}} {{end}}", "{{json .NetworkSettings.Ports}}",
    '{{index .Config.Labels "com.docker.compose.service"}}', "{{range $p, $c := .NetworkSettings.Ports}}{{$p}} {{end}}",
    '{{printf "%s" .State.Status}}', "{{.Config.Image}} {{.Config.User}}",                  # held back
])
def test_a_format_of_named_fields_is_allowed(fmt):
    assert _verdict(f"docker inspect --format '{fmt}' webapp", WEBAPP)[0] == "allow"


@pytest.mark.parametrize("command", [
    "mysql --defaults-extra-file=/tmp/x.cnf -e 'SELECT 1'", "mysqladmin --defaults-file=/home/alice/.my.cnf status",
    "mysql -e 'SELECT 1' --defaults-file=/var/lib/mysql/x.cnf",            # held back
    "mysqladmin --defaults-extra-file /tmp/x.cnf status",                   # held back
])
def test_an_option_file_from_where_other_accounts_write_is_refused(command):
    verdict, reasons = _verdict(command)
    assert verdict == "reject"
    assert "other accounts can write" in reasons


def test_an_option_file_kept_with_the_configuration_still_needs_only_approval():
    assert _verdict("mysql --defaults-file=/etc/mysql/debian.cnf -e 'SHOW PROCESSLIST'")[0] == "approval"


@pytest.mark.parametrize("command", [
    "docker compose -f /tmp/evil.yml up -d", "docker compose --project-directory /home/alice/app up -d",
    "docker compose -f /srv/webapp/config/compose.yml -f /tmp/override.yml up -d",  # held back
])
def test_compose_up_from_a_file_other_accounts_write_is_refused(command):
    service = {**WEBAPP, "config_paths": ["/srv/webapp/config"]}
    assert _verdict(command, service)[0] == "reject"
    assert _verdict("docker compose -f /srv/webapp/config/compose.yml up -d", service)[0] == "approval"
    assert _verdict("docker compose -f /tmp/evil.yml ps", service)[0] == "allow"


@pytest.mark.parametrize("command", ["docker compose logs -ft", "docker compose logs --follow=true web",
                                     "docker compose logs --timestamps -f"])  # the last held back
def test_compose_logs_follow_is_refused_however_it_is_spelled(command):
    assert _verdict(command, WEBAPP)[0] == "reject"
    assert _verdict("docker compose logs --tail 100 web", WEBAPP)[0] == "allow"


@pytest.mark.parametrize("command", [
    "nice --adjustment=-10 tail -n 5 /var/log/syslog", "ionice -c 1 -n 0 tail -n 5 /var/log/syslog",
    "nice -n-19 systemctl restart nginx",                                   # held back
    "ionice --class realtime --classdata 0 tail -n 5 /var/log/syslog",      # held back
])
def test_a_wrapper_may_only_lower_priority_however_the_value_is_spelled(command):
    assert _verdict(command)[0] == "reject"


@pytest.mark.parametrize("command", [
    "stdbuf -oL tail -n 5 /var/log/syslog", "ionice -c3 tail -n 5 /var/log/syslog",
    "timeout -s9 5 tail -n 5 /var/log/syslog", "sudo -nu www-data tail -n 5 /var/log/nginx/error.log",
    "timeout -s TERM -k 5 30 journalctl -u nginx -n 50 --no-pager",        # held back
])
def test_wrapper_and_sudo_options_are_read_attached_or_clustered(command):
    assert _verdict(command)[0] == "allow"


@pytest.mark.parametrize("command", [
    "timeout -sKILL 5 rm -rf /etc/nginx", "stdbuf -i0 -oL -eL find /etc -delete",   # held back
    "sudo -nu www-data rm -rf /var/www",                                             # held back
])
def test_a_wrapper_read_through_is_judged_by_what_it_runs(command):
    assert _verdict(command)[0] == "reject"
