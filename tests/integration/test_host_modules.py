"""service_health and evidence through real `ansible` against one lab container.

The docker connection, the remote user `sentinel` and become, as the role runs them.
Each test sets up the state it needs, so they also run one by one. Without Docker or
the lab image they are skipped, except under CI=true, where that is a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("SENTINEL_LAB_IMAGE", "sentinel-lab:latest")
ANSIBLE = str(Path(sys.executable).parent / "ansible")


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

    def module(self, name: str, args: dict, check_mode: bool = False) -> dict:
        """Run sentinel.remediation.<name> with become, as user sentinel; the host's result."""
        argv = [ANSIBLE, "all", "-i", f"{self.name},", "-c", "community.docker.docker", "-u", "sentinel",
                "-b", "-m", f"sentinel.remediation.{name}", "-a", json.dumps(args)]
        if check_mode:
            argv.append("--check")
        env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
        try:
            report = json.loads(proc.stdout)
            result = report["plays"][0]["tasks"][0]["hosts"][self.name]
        except (ValueError, KeyError, IndexError) as exc:
            raise AssertionError(f"ansible gave no result ({exc}): {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        assert not result.get("failed") and not result.get("unreachable"), result
        return result

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
    name = f"sentinel-test-modules-{uuid.uuid4().hex[:8]}"
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
        assert {"service", "ss", "ps", "nginx", "redis-cli"} <= set(result["tools"]["present"])
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
    assert sum(len(t.encode()) for t in _texts(result["evidence"])) <= 3000


def _texts(value) -> list:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return [value]
