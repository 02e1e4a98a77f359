# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Realistic failures of the lab's fault kinds, as the health and evidence modules report
them, with host-specific PIDs, timestamps and host names (``host`` picks the variant).

Shared by the planner's tests and bench/prompt_size.py.
"""
from __future__ import annotations

TOOLS = {
    "present": ["chmod", "chown", "cp", "df", "dpkg", "du", "find", "ip", "kill", "mkdir", "mv", "nginx", "pgrep",
                "pkill", "ps", "python3", "redis-cli", "redis-server", "rm", "sed", "service", "ss", "sudo", "tail",
                "truncate"],
    "absent": ["curl", "fuser", "journalctl", "lsof", "systemctl", "wget"],
}
_HOSTS = {1: ("lab-web-01", "10.0.3.11", 4242, 811, "2025/03/04 10:11:12", "04 Mar 2025 10:11:12.345", "Mar  4 10:11:12"),
          2: ("lab-web-07.fleet.example.net", "10.0.9.77", 91377, 57, "2025/06/30 23:59:01", "30 Jun 2025 23:59:01.002",
              "Jun 30 23:59:01")}


def sample(fault: str, host: int = 1) -> dict:
    """``{"service", "error", "evidence", "host_tools", "hostname"}`` for one lab fault."""
    name, ip, pid, pid2, ngx_ts, redis_ts, syslog_ts = _HOSTS[host]
    tools = {"present": list(TOOLS["present"]), "absent": list(TOOLS["absent"])}
    nginx_ok_paths = {"/var/log/nginx": "directory, owner root:adm, mode 0755; filesystem at /: 41% used, 12.0 GiB free",
                      "/run": "directory, owner root:root, mode 0755; filesystem at /run: 1% used, 3.1 GiB free"}
    ss_none = "port 80: nothing listening"
    log_tail = (f"{ngx_ts} [notice] {pid2}#{pid2}: signal process started\n"
                f"{ngx_ts} [notice] {pid2}#{pid2}: exiting")
    if fault == "nginx_stopped":
        return _done(name, tools, "nginx", "nginx is not running", {
            "status": "nginx is not running ... failed!", "listeners": ss_none, "paths": nginx_ok_paths,
            "pid_files": {"/run/nginx.pid": "missing"}, "processes": "no process named or running nginx",
            "config_test": "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
                           "nginx: configuration file /etc/nginx/nginx.conf test is successful",
            "logs": {"/var/log/nginx/error.log": log_tail}})
    if fault == "nginx_port_conflict":
        return _done(name, tools, "nginx", "nginx is not running; port 80 is held by another process", {
            "status": "nginx is not running ... failed!",
            "listeners": f"0.0.0.0:80 held by python3 (pid {pid})",
            "paths": nginx_ok_paths, "pid_files": {"/run/nginx.pid": "missing"},
            "processes": "no process named or running nginx",
            "config_test": "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
                           "nginx: configuration file /etc/nginx/nginx.conf test is successful",
            "logs": {"/var/log/nginx/error.log":
                     f"{ngx_ts} [emerg] {pid2}#{pid2}: bind() to 0.0.0.0:80 failed (98: Address already in use)\n"
                     f"{ngx_ts} [emerg] {pid2}#{pid2}: still could not bind()"}})
    if fault == "nginx_config_syntax":
        return _done(name, tools, "nginx", "nginx is not running", {
            "status": "nginx is not running ... failed!", "listeners": ss_none, "paths": nginx_ok_paths,
            "pid_files": {"/run/nginx.pid": "missing"},
            "config_test": 'nginx: [emerg] directive "listen" is not terminated by ";" in '
                           "/etc/nginx/conf.d/zz-broken.conf:3\n"
                           "nginx: configuration file /etc/nginx/nginx.conf test failed",
            "logs": {"/var/log/nginx/error.log": log_tail}})
    if fault == "nginx_missing_log_dir":
        paths = dict(nginx_ok_paths)
        paths["/var/log/nginx"] = "missing (nearest existing parent /var/log: directory, owner root:root, mode 0755)"
        return _done(name, tools, "nginx", "nginx is not running", {
            "status": "nginx is not running ... failed!", "listeners": ss_none, "paths": paths,
            "pid_files": {"/run/nginx.pid": "missing"},
            "config_test": 'nginx: [alert] could not open error log file: open() "/var/log/nginx/error.log" '
                           "failed (2: No such file or directory)\n"
                           f'{ngx_ts} [emerg] {pid2}#{pid2}: open() "/var/log/nginx/error.log" failed '
                           "(2: No such file or directory)\n"
                           "nginx: configuration file /etc/nginx/nginx.conf test failed"})
    if fault == "nginx_stale_pid":
        return _done(name, tools, "nginx", "nginx is not running", {
            "status": "nginx is not running ... failed! (dead, pid file exists)", "listeners": ss_none,
            "paths": nginx_ok_paths,
            "pid_files": {"/run/nginx.pid": f"pid {pid2} is not running (stale PID file)"},
            "oom": f"{syslog_ts} {name} kernel: Killed process {pid2} (nginx)",
            "logs": {"/var/log/nginx/error.log": log_tail}})
    if fault == "nginx_binary_missing":
        tools["present"].remove("nginx")
        tools["absent"].append("nginx")
        return _done(name, tools, "nginx", "nothing listens on port 80", {
            "status": "", "listeners": ss_none, "paths": {
                "/usr/sbin/nginx": "missing (nearest existing parent /usr/sbin: directory, owner root:root, mode 0755)"},
            "processes": "no process named or running nginx"})
    redis_paths = {"/var/lib/redis": "directory, owner redis:redis, mode 0750; filesystem at /var/lib/redis: 3% used, 15.5 MiB free"}
    if fault == "redis_stopped":
        error = ("redis-cli ping: Could not connect to Redis at 127.0.0.1:6379: "
                 "Connection refused")
        return _done(name, tools, "redis-server", error, {
            "status": "redis-server is not running ... failed!", "paths": redis_paths,
            "listeners": "port 6379: nothing listening",
            "logs": {"/var/log/redis/redis-server.log":
                     f"{pid2}:M {redis_ts} # User requested shutdown...\n"
                     f"{pid2}:M {redis_ts} # Redis is now ready to exit, bye bye..."}})
    if fault == "redis_bad_dir_permissions":
        error = ("redis-cli ping: Could not connect to Redis at 127.0.0.1:6379: "
                 "Connection refused")
        return _done(name, tools, "redis-server", error, {
            "status": "redis-server is not running ... failed!",
            "paths": {"/var/lib/redis": "directory, owner root:root, mode 0700; filesystem at /var/lib/redis: 3% used"},
            "listeners": "port 6379: nothing listening",
            "logs": {"/var/log/redis/redis-server.log":
                     f"{pid2}:C {redis_ts} # Can't chdir to '/var/lib/redis': Permission denied"}})
    if fault == "redis_killed":
        error = ("redis-cli ping: Could not connect to Redis at 127.0.0.1:6379: "
                 "Connection refused")
        return _done(name, tools, "redis-server", error, {
            "status": "redis-server is not running ... failed! (dead, pid file exists)", "paths": redis_paths,
            "pid_files": {"/run/redis/redis-server.pid": f"pid {pid2} is not running (stale PID file)"},
            "listeners": "port 6379: nothing listening",
            "logs": {"/var/log/redis/redis-server.log": f"{pid2}:M {redis_ts} * Ready to accept connections tcp"}})
    if fault == "redis_disk_full":
        error = ("write probe failed: MISCONF Redis is configured to save RDB "
                 "snapshots, but it's currently unable to persist to disk")
        return _done(name, tools, "redis-server", error, {
            "status": f"redis-server is running (pid {pid2})",
            "paths": {"/var/lib/redis": "directory, owner redis:redis, mode 0750; user redis may rwx; filesystem at "
                                        "/var/lib/redis: 100% used, 0 B free\nlargest files:\n"
                                        "  16M /var/lib/redis/ballast.bin\n  4K /var/lib/redis/dump.rdb"},
            "listeners": f"127.0.0.1:6379 held by redis-server (pid {pid2})",
            "logs": {"/var/log/redis/redis-server.log":
                     f"{pid2}:M {redis_ts} # Write error saving DB on disk(fflush): No space left on device\n"
                     f"{pid2}:M {redis_ts} # Background saving error"}})
    if fault == "cron_stopped":
        return _done(name, tools, "cron", "no process named cron runs", {
            "status": "cron is not running ... failed!", "processes": "no process named or running cron"})
    if fault == "ssh_stopped":
        return _done(name, tools, "ssh", "nothing listens on port 22", {
            "status": "sshd is not running ... failed!", "listeners": "port 22: nothing listening"})
    raise KeyError(fault)


def _done(hostname, tools, service, error, evidence) -> dict:
    return {"service": service, "error": error, "evidence": evidence, "host_tools": tools, "hostname": hostname}


FAULTS = ("nginx_stopped", "nginx_port_conflict", "nginx_config_syntax", "nginx_missing_log_dir", "nginx_stale_pid",
          "nginx_binary_missing", "redis_stopped", "redis_bad_dir_permissions", "redis_killed", "redis_disk_full",
          "cron_stopped", "ssh_stopped")
