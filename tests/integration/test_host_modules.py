"""service_health, evidence and execute_plan through real `ansible` against lab containers.

The docker connection, the remote user `sentinel` and become, as the role runs them.
Each test sets up the state it needs, so they also run one by one, and asserts from
outside (docker exec: files on disk, live processes). Containers are named after
SENTINEL_LAB_PREFIX. Without Docker or the lab image they are skipped, except under
CI=true, where that is a failure. The systemd tests need a systemd lab image
(SENTINEL_LAB_SYSTEMD_IMAGE) and are skipped with the reason when there is none.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from host_module import run_host_module

pytestmark = pytest.mark.lab

IMAGE = os.environ.get("SENTINEL_LAB_IMAGE", "sentinel-lab:latest")
SYSTEMD_IMAGE = os.environ.get("SENTINEL_LAB_SYSTEMD_IMAGE", "sentinel-lab-systemd:latest")
PREFIX = os.environ.get("SENTINEL_LAB_PREFIX", "sentinel-test")
# What systemd as PID 1 needs in a container here (no --privileged), see docs/lab.md.
SYSTEMD_RUN_FLAGS = ("--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--tmpfs", "/run",
                     "--tmpfs", "/run/lock", "-e", "container=docker")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"lab container unavailable: {reason} (CI=true: lab tests must run)", pytrace=False)
    pytest.skip(f"lab container unavailable: {reason}")


def _docker(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


class Host:
    def __init__(self, name: str) -> None:
        self.name = name

    def sh(self, script: str, check: bool = True) -> str:
        return _docker("exec", self.name, "sh", "-c", script, check=check).stdout

    def wait_for(self, script: str, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while _docker("exec", self.name, "sh", "-c", script, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {what} did not happen within {timeout}s")
            time.sleep(0.3)

    def module(self, name: str, args: dict, check_mode: bool = False, become: bool = True) -> dict:
        """Run sentinel.remediation.<name> as user sentinel (with become); the host's result."""
        return run_host_module(self.name, name, args, become=become, check_mode=check_mode, timeout=120)

    def nginx_running(self) -> None:
        self.sh("test -d /var/log/nginx || install -d -o root -g adm -m 0755 /var/log/nginx;"
                " service nginx status >/dev/null || service nginx start")
        self.wait_for("service nginx status", "nginx start")


@pytest.fixture(scope="module")
def host():
    if not shutil.which("docker"):
        _unavailable("no docker command")
    if _docker("info", check=False, timeout=30).returncode != 0:
        _unavailable("the Docker engine does not answer (docker info)")
    if _docker("image", "inspect", IMAGE, check=False).returncode != 0:
        _unavailable(f"no image {IMAGE} (build it with lab/image/build.sh)")
    name = f"{PREFIX}-modules-{uuid.uuid4().hex[:8]}"
    _docker("run", "-d", "--init", "--network", "none", "--name", name, "--hostname", "web1",
            "--tmpfs", "/var/lib/redis:size=16m", IMAGE)
    try:
        lab_host = Host(name)
        lab_host.wait_for("service nginx status && service redis-server status", "boot")
        yield lab_host
    finally:
        _docker("rm", "-f", name, check=False)


NGINX_CHECKS = [
    {"type": "service"},
    {"type": "process", "pattern": "nginx: master process"},
    {"type": "port", "port": 80, "process": "nginx"},
    {"type": "http", "url": "http://127.0.0.1/", "timeout": 5},
]


def test_healthy_nginx_is_healthy(host: Host) -> None:
    host.nginx_running()
    # in check mode: the module only reads, so it answers the same
    result = host.module("service_health", {"service": "nginx", "checks": NGINX_CHECKS}, check_mode=True)
    assert result["healthy"] is True, result["checks"]
    assert result["error"] == "" and result["changed"] is False
    assert [c["type"] for c in result["checks"]] == ["service", "process", "port", "http"]


def test_stopped_nginx_fails_with_a_clear_error(host: Host) -> None:
    host.nginx_running()
    host.sh("service nginx stop")
    result = host.module("service_health", {"service": "nginx", "checks": NGINX_CHECKS})
    assert result["healthy"] is False
    assert result["error"] == "service nginx status: nginx is not running (rc 3)"
    assert [c["ok"] for c in result["checks"]] == [False, False, False, False]
    assert result["checks"][2]["detail"] == "port 80 is not listening"


def test_a_rogue_server_on_port_80_is_named(host: Host) -> None:
    host.nginx_running()
    host.sh("service nginx stop")
    rogue = int(host.sh("cd /tmp && python3 -m http.server 80 >/dev/null 2>&1 & echo $!").strip())
    try:
        host.wait_for("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 80), 1)\"",
                      "the rogue server listening")
        result = host.module("service_health", {"service": "nginx", "checks": [
            {"type": "port", "port": 80, "process": "nginx"}, {"type": "http", "url": "http://127.0.0.1/"}]})
        assert result["healthy"] is False
        assert result["error"] == f"port 80 is held by python3 (pid {rogue}), not nginx"
        assert result["checks"][1]["ok"] is True  # something does answer HTTP: the port check tells them apart
        ev = host.module("evidence", {"service": "nginx", "ports": [80], "tools": ["nginx"]})
        assert f"0.0.0.0:80 held by python3 (pid {rogue})" in ev["evidence"]["listeners"]
    finally:
        host.sh(f"kill {rogue}", check=False)


def test_evidence_of_a_missing_log_dir_holds_the_config_test_error(host: Host) -> None:
    host.nginx_running()
    host.sh("rm -rf /var/log/nginx; service nginx restart", check=False)
    try:
        result = host.module("evidence", {
            "service": "nginx", "logs": ["/var/log/nginx/*.log"], "ports": [80], "config_test": ["nginx", "-t"],
            "paths": ["/var/log/nginx", "/run"], "pid_files": ["/run/nginx.pid"]})
        ev = result["evidence"]
        assert 'open() "/var/log/nginx/error.log" failed (2: No such file or directory)' in ev["config_test"]
        assert "\nrc 1\n" in ev["config_test"]
        assert ev["paths"]["/var/log/nginx"].startswith("missing (nearest existing parent /var/log")
        assert ev["logs"] == {"/var/log/nginx/*.log": "no file matches"}
        assert ev["status"].startswith("$ service nginx status\nrc ")
        assert set(ev) >= {"status", "config_test", "listeners", "paths", "pid_files", "processes", "oom", "logs"}
        assert {"lsof", "fuser", "systemctl", "journalctl", "curl"} <= set(result["tools"]["absent"])
        assert {"service", "ss", "ps", "nginx", "rm", "mv", "ln", "ls", "mkdir", "chown"} <= set(result["tools"]["present"])
        assert result["truncated"] is False and result["changed"] is False
    finally:
        host.sh("service nginx stop", check=False)
        host.nginx_running()


def test_a_secret_in_the_redis_log_never_leaves_the_host(host: Host) -> None:
    host.sh("echo '1:M 22 Nov 2025 10:00:00.000 # CONFIG SET requirepass s3cr3t-planted'"
            " >> /var/log/redis/redis-server.log")
    result = host.module("evidence", {"service": "redis-server", "logs": ["/var/log/redis/*.log"],
                                      "ports": [6379], "paths": ["/var/lib/redis"], "max_bytes": 3000})
    returned = json.dumps({k: result[k] for k in ("evidence", "tools", "truncated")})
    assert "s3cr3t-planted" not in returned
    log = result["evidence"]["logs"]["/var/log/redis/redis-server.log"]
    assert "CONFIG SET requirepass [REDACTED:requirepass]" in log
    # redis runs as its own user: even root in a container cannot read its fds, so the
    # holder is inferred from the socket's owner and said so
    assert "127.0.0.1:6379 listening as user redis" in result["evidence"]["listeners"]
    assert "redis-server" in result["evidence"]["listeners"]
    assert "owner redis:redis, mode 0750" in result["evidence"]["paths"]["/var/lib/redis"]
    assert _budget_bytes(result["evidence"]) <= 3000


def _budget_bytes(evidence: dict) -> int:
    """What max_bytes bounds: texts as UTF-8, structured sections as JSON."""
    total = 0
    for key, value in evidence.items():
        if key == "init":
            continue
        texts = list(value.values()) if isinstance(value, dict) else [value]
        if all(isinstance(t, str) for t in texts):
            total += sum(len(t.encode()) for t in texts)
        else:
            total += len(json.dumps(value, ensure_ascii=False, sort_keys=True).encode())
    return total


# --- the role's service definitions, in one round trip --------------------------------------

LAB_SERVICES = [
    {"name": "nginx", "processes": ["nginx"], "user": "www-data", "checks": NGINX_CHECKS,
     "logs": ["/var/log/nginx/error.log"], "ports": [80], "config_test": ["nginx", "-t"],
     "config_paths": ["/etc/nginx"], "paths": ["/var/log/nginx"], "pid_files": ["/run/nginx.pid"]},
    {"name": "redis-server", "processes": ["redis-server"], "user": "redis",
     "checks": [{"type": "command", "argv": ["redis-cli", "ping"], "indicator": "PONG"}],
     "logs": ["/var/log/redis/redis-server.log"], "ports": [6379], "data_paths": ["/var/lib/redis"]},
    {"name": "cron", "processes": ["cron"], "checks": [{"type": "process", "pattern": "^(/usr/sbin/)?cron( |$)"}],
     "pid_files": ["/run/crond.pid"]},
    {"name": "ssh", "processes": ["sshd"], "checks": [{"type": "port", "port": 22, "process": "sshd"}],
     "ports": [22], "config_test": ["sshd", "-t"], "runtime_paths": ["/run/sshd"]},
]


def _stat_start(host: Host, pid: int) -> int:
    return int(host.sh(f"cut -d' ' -f22 /proc/{pid}/stat").strip())


def _alive(host: Host, pid: int) -> bool:
    return _docker("exec", host.name, "kill", "-0", str(pid), check=False).returncode == 0


def test_one_call_checks_every_service_with_evidence_for_the_failing(host: Host) -> None:
    host.nginx_running()
    host.sh("service cron status >/dev/null && service cron stop", check=False)
    try:
        result = host.module("service_health", {"services": LAB_SERVICES, "evidence": True})
        by_name = {s["name"]: s for s in result["services"]}
        assert [s["name"] for s in result["services"]] == ["nginx", "redis-server", "cron", "ssh"]
        assert {n: s["healthy"] for n, s in by_name.items()} == {
            "nginx": True, "redis-server": True, "cron": False, "ssh": True}
        assert result["healthy"] is False and result["error"].startswith("cron: no process matches")
        assert "evidence" not in by_name["nginx"]
        cron = by_name["cron"]["evidence"]
        assert cron["init"] == "sysv" and cron["service_pids"] == [] and cron["processes"] == []
        assert cron["pid_files"] == {"/run/crond.pid": "missing"}  # pid_files reached the evidence
        assert {"rm", "mv", "ln", "ls", "mkdir", "rmdir", "chown", "chmod", "cat", "touch", "cp", "truncate",
                "service", "ss", "ps", "pkill", "kill", "ip", "nginx", "redis-cli", "sshd"} <= set(result["tools"]["present"])
        assert {"systemctl", "journalctl", "lsof", "fuser"} <= set(result["tools"]["absent"])
    finally:
        host.sh("service cron start", check=False)


def test_pid_files_reach_the_evidence_and_name_the_service_processes(host: Host) -> None:
    pid = int(host.sh("sleep 301 >/dev/null 2>&1 & echo $!").strip())
    host.sh(f"echo {pid} > /run/hostmods-test.pid")
    try:
        definition = {"name": "hostmods-unit", "processes": ["no-such-program"], "pid_files": ["/run/hostmods-test.pid"],
                      "checks": [{"type": "process", "pattern": "no-such-[p]rogram"}]}
        # as the monitor passes the whole definition
        health = host.module("service_health", {"services": [definition], "evidence": True})
        ev = health["services"][0]["evidence"]
        assert ev["service_pids"] == [pid]
        assert ev["processes"][0]["reasons"] == ["pid file /run/hostmods-test.pid"]
        assert ev["processes"][0]["start"] == _stat_start(host, pid)
        assert ev["pid_files"]["/run/hostmods-test.pid"] == f"pid {pid} is running as user root: sleep 301"
        # and as the evidence module takes it
        direct = host.module("evidence", dict(definition, service=definition["name"]))
        assert direct["evidence"]["service_pids"] == [pid]
    finally:
        host.sh(f"kill {pid}; rm -f /run/hostmods-test.pid", check=False)


def test_processes_stopped_with_sigstop_show_as_stopped(host: Host) -> None:
    host.nginx_running()
    pids = sorted(int(p) for p in host.sh("pgrep -x nginx").split())
    host.sh("pkill -STOP -x nginx")
    try:
        host.wait_for("test \"$(ps -o stat= -C nginx | grep -vc '^T')\" = 0", "every nginx stopped")
        result = host.module("evidence", {"service": "nginx", "processes": ["nginx"], "ports": [80],
                                          "pid_files": ["/run/nginx.pid"]})
        ev = result["evidence"]
        assert ev["service_pids"] == pids
        assert {p["pid"]: p["state"] for p in ev["processes"]} == {pid: "stopped" for pid in pids}
        master = int(host.sh("cat /run/nginx.pid").strip())
        record = next(p for p in ev["processes"] if p["pid"] == master)
        assert {"name nginx", "pid file /run/nginx.pid"} <= set(record["reasons"])
        assert 80 in record["ports"] and record["user"] == "root"
        assert ev["pid_files"]["/run/nginx.pid"].endswith("(state stopped)")
        health = host.module("service_health", {"service": "nginx", "checks": [
            {"type": "process", "pattern": "nginx: master process"}]})
        assert health["healthy"] is False and "all are stopped" in health["error"]
    finally:
        host.sh("pkill -CONT -x nginx", check=False)


def test_a_zombie_shows_as_zombie(host: Host) -> None:
    # the child exits; its parent (exec'd into another sleep) never waits for it
    host.sh("ln -sf /bin/sleep /tmp/hmzombie")
    parent = int(host.sh("sh -c '/tmp/hmzombie 0.1 & exec /tmp/hmzombie 300' >/dev/null 2>&1 & echo $!").strip())
    try:
        host.wait_for(f"grep -l '^State:.*Z' $(grep -l '^PPid:.{parent}$' /proc/[0-9]*/status)", "the zombie")
        ev = host.module("evidence", {"service": "hmzombie"})["evidence"]
        states = {p["pid"]: (p["state"], p["ppid"]) for p in ev["processes"]}
        assert states[parent] == ("sleeping", states[parent][1])
        zombies = [pid for pid, (state, ppid) in states.items() if state == "zombie"]
        assert len(zombies) == 1 and states[zombies[0]][1] == parent
    finally:
        host.sh(f"kill {parent}; rm -f /tmp/hmzombie", check=False)


def test_a_config_error_brings_the_lines_around_it(host: Host) -> None:
    host.nginx_running()
    host.sh("cp /etc/nginx/nginx.conf /tmp/nginx.conf.orig && sed -i '18i\\\tbogus_directive on;' /etc/nginx/nginx.conf")
    try:
        assert "bogus_directive" in host.sh("sed -n 18p /etc/nginx/nginx.conf")
        result = host.module("evidence", {"service": "nginx", "config_test": ["nginx", "-t"],
                                          "config_paths": ["/etc/nginx"], "logs": ["/var/log/nginx/error.log"]})
        ev = result["evidence"]
        assert 'unknown directive "bogus_directive" in /etc/nginx/nginx.conf:18' in ev["config_test"]
        (context,) = ev["config_context"]
        assert (context["file"], context["line"]) == ("/etc/nginx/nginx.conf", 18)
        assert ">   18  \tbogus_directive on;" in context["text"].splitlines()
        assert "   17  " in context["text"] and "   22  " in context["text"]
        assert ev["named_paths"]["/etc/nginx/nginx.conf"]["type"] == "file"
        assert ev["named_paths"]["/etc/nginx/nginx.conf"]["named_in"] == "config_test"
    finally:
        host.sh("cp /tmp/nginx.conf.orig /etc/nginx/nginx.conf", check=False)


# --- execute_plan -----------------------------------------------------------------------------

def test_execute_plan_runs_each_command_with_least_privilege(host: Host) -> None:
    host.sh("rm -f /tmp/hm-plain /tmp/hm-root")
    result = host.module("execute_plan", {"commands": [
        {"argv": ["touch", "/tmp/hm-plain"]},
        {"argv": ["id", "-u"]},
        {"argv": ["touch", "/tmp/hm-root"], "become": True},
        {"argv": ["id", "-u"], "become": True},
    ]})
    assert [r["rc"] for r in result["results"]] == [0, 0, 0, 0]
    assert [r["user"] for r in result["results"]] == ["sentinel", "sentinel", "root", "root"]
    assert result["results"][1]["stdout"].strip() == host.sh("id -u sentinel").strip() != "0"
    assert result["results"][3]["stdout"].strip() == "0"
    # from outside: who owns what each command wrote
    assert host.sh("stat -c %U /tmp/hm-plain /tmp/hm-root").split() == ["sentinel", "root"]
    assert result["changed"] is True and result["stopped_at"] is None


def test_without_become_a_command_needing_root_is_not_run(host: Host) -> None:
    host.sh("rm -f /tmp/hm-refused /tmp/hm-after")
    result = host.module("execute_plan", {"commands": [
        {"argv": ["touch", "/tmp/hm-refused"], "become": True},
        {"argv": ["touch", "/tmp/hm-after"]},
    ], "stop_on_failure": False}, become=False)
    refused, after = result["results"]
    assert refused["skipped"] is True and refused["rc"] is None
    assert refused["reason"].startswith("needs root, but the module runs as sentinel")
    assert after["rc"] == 0 and after["user"] == "sentinel"
    assert host.sh("ls /tmp/hm-refused /tmp/hm-after 2>&1", check=False).count("No such file") == 1


def test_a_pid_with_another_start_time_is_not_signalled(host: Host) -> None:
    pid = int(host.sh("sleep 302 >/dev/null 2>&1 & echo $!").strip())
    try:
        start = _stat_start(host, pid)
        kill = {"argv": ["kill", "-TERM", str(pid)], "become": True, "pids": [pid]}
        stale = host.module("execute_plan", {"commands": [kill, {"argv": ["true"]}],
                                             "expect_pids": {str(pid): {"start": start + 1, "comm": "sleep"}}})
        first, second = stale["results"]
        assert first["skipped"] is True and f"PID {pid} is another process now" in first["reason"]
        assert second["skipped"] is True and stale["stopped_at"] == 0 and stale["changed"] is False
        assert _alive(host, pid)  # never signalled
        # check mode says the same and runs nothing
        preview = host.module("execute_plan", {"commands": [kill], "expect_pids": {str(pid): {"start": start}}},
                              check_mode=True)
        assert preview["would_run"][0]["runnable"] is True and _alive(host, pid)
        # the process the evidence showed: signalled
        fresh = host.module("execute_plan", {"commands": [kill],
                                             "expect_pids": {str(pid): {"start": start, "comm": "sleep"}}})
        assert fresh["results"][0]["rc"] == 0
        host.wait_for(f"! kill -0 {pid}", "the sleep to end")
    finally:
        host.sh(f"kill {pid}", check=False)


def test_execute_plan_heals_and_verifies_in_one_call(host: Host) -> None:
    host.nginx_running()
    host.sh("service nginx stop")
    result = host.module("execute_plan", {
        "commands": [{"argv": ["service", "nginx", "start"], "become": True}],
        "verify": LAB_SERVICES[0], "evidence": True})
    assert result["results"][0]["rc"] == 0
    assert result["verify"]["healthy"] is True, result["verify"]
    assert "evidence" not in result
    host.wait_for("service nginx status", "nginx running")


def test_execute_plan_still_failing_brings_evidence(host: Host) -> None:
    host.nginx_running()
    host.sh("service nginx stop; mv /var/log/nginx /var/log/nginx.moved")
    try:
        result = host.module("execute_plan", {
            "commands": [{"argv": ["service", "nginx", "start"], "become": True}, {"argv": ["true"]}],
            "verify": LAB_SERVICES[0], "settle": 2, "evidence": True})
        assert result["results"][0]["rc"] != 0 and result["stopped_at"] == 0
        assert result["results"][1]["skipped"] is True
        assert result["verify"]["healthy"] is False
        ev = result["evidence"]
        assert ev["named_paths"]["/var/log/nginx/error.log"]["type"] == "missing"
        assert ev["named_paths"]["/var/log/nginx/error.log"]["existing_parent"] == "/var/log"
    finally:
        host.sh("rm -rf /var/log/nginx; mv /var/log/nginx.moved /var/log/nginx", check=False)
        host.nginx_running()


# --- systemd hosts ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def systemd_host():
    if not shutil.which("docker"):
        _unavailable("no docker command")
    if _docker("image", "inspect", SYSTEMD_IMAGE, check=False).returncode != 0:
        pytest.skip(f"no systemd lab image {SYSTEMD_IMAGE} (set SENTINEL_LAB_SYSTEMD_IMAGE to a systemd lab image"
                    " with nginx, sudo and the user sentinel)")
    name = f"{PREFIX}-modules-systemd-{uuid.uuid4().hex[:8]}"
    _docker("run", "-d", "--network", "none", "--name", name, "--hostname", "sd1", *SYSTEMD_RUN_FLAGS,
            SYSTEMD_IMAGE, "/sbin/init")
    try:
        lab_host = Host(name)
        lab_host.wait_for("systemctl is-system-running | grep -Eq 'running|degraded'", "systemd boot", timeout=60)
        lab_host.wait_for("systemctl is-active nginx.service", "nginx.service active", timeout=30)
        yield lab_host
    finally:
        _docker("rm", "-f", name, check=False)


SYSTEMD_NGINX = {"name": "nginx", "units": ["nginx.service"], "checks": [
    {"type": "service"}, {"type": "port", "port": 80, "process": "nginx"}],
    "config_test": ["nginx", "-t"], "config_paths": ["/etc/nginx"], "ports": [80]}


def test_systemd_health_evidence_and_a_fix_in_one_trip_each(systemd_host: Host) -> None:
    host = systemd_host
    healthy = host.module("service_health", {"services": [SYSTEMD_NGINX], "evidence": True})
    assert healthy["healthy"] is True, healthy
    assert {"systemctl", "journalctl"} <= set(healthy["tools"]["present"])
    ev = host.module("evidence", dict(SYSTEMD_NGINX, service="nginx"))["evidence"]
    main_pid = int(host.sh("systemctl show -p MainPID --value nginx.service").strip())
    assert ev["init"] == "systemd" and ev["unit"]["ActiveState"] == "active"
    assert ev["unit"]["FragmentPath"].endswith("/nginx.service")
    assert main_pid in ev["service_pids"]
    master = next(p for p in ev["processes"] if p["pid"] == main_pid)
    assert "unit nginx.service" in master["reasons"]

    host.sh("cp /etc/nginx/nginx.conf /root/nginx.conf.good && sed -i '18i\\\tbogus_directive on;' /etc/nginx/nginx.conf")
    host.sh("systemctl restart nginx.service", check=False)
    failing = host.module("service_health", {"services": [SYSTEMD_NGINX], "evidence": True})
    (nginx,) = failing["services"]
    assert nginx["healthy"] is False
    assert nginx["error"].startswith("nginx.service is failed/failed (result exit-code")
    ev = nginx["evidence"]
    assert ev["unit"]["ActiveState"] == "failed" and ev["unit"]["Result"] == "exit-code"
    assert "bogus_directive" in ev["journal"]
    assert ev["config_context"][0]["line"] == 18 and "bogus_directive" in ev["config_context"][0]["text"]

    fixed = host.module("execute_plan", {
        "commands": [{"argv": ["cp", "/root/nginx.conf.good", "/etc/nginx/nginx.conf"], "become": True},
                     {"argv": ["systemctl", "restart", "nginx.service"], "become": True}],
        "verify": SYSTEMD_NGINX, "evidence": True})
    assert [r["rc"] for r in fixed["results"]] == [0, 0]
    assert fixed["verify"]["healthy"] is True, fixed["verify"]
    assert host.sh("systemctl is-active nginx.service").strip() == "active"
