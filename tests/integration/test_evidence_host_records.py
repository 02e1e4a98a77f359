"""What the evidence says of the host, against what the host holds, on a SysV lab container:
when a drifted file changed and what the host's records say of that window; the small files
at the top of a data directory; the environment files the init script sources, and the
policy's scope built from them. Each module runs as the role runs it (real ansible, the docker
connection, user sentinel with become); every expectation is read in the container itself."""
from __future__ import annotations

import calendar
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy
from host_module import run_host_module

pytestmark = pytest.mark.lab

IMAGE = os.environ.get("SENTINEL_LAB_IMAGE", "sentinel-lab:latest")
NAMESPACE = os.environ.get("SENTINEL_LAB_NAMESPACE") or os.environ.get("SENTINEL_LAB_PREFIX") or "sentinel-test"
REDIS = {"name": "redis-server", "units": ["redis-server.service"], "processes": ["redis-server"], "user": "redis",
         "config_paths": ["/etc/redis"], "data_paths": ["/var/lib/redis"], "ports": [6379],
         "checks": [{"type": "service"}, {"type": "command", "argv": ["redis-cli", "ping"], "indicator": "PONG"}]}
POSTGRES_DATA = "/var/lib/postgresql/15/main"


def _docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


@pytest.fixture(scope="module")
def host():
    reason = None
    if not shutil.which("docker"):
        reason = "no docker command"
    elif _docker("info", check=False, timeout=30).returncode != 0:
        reason = "the Docker engine does not answer"
    elif _docker("image", "inspect", IMAGE, check=False).returncode != 0:
        reason = f"no image {IMAGE} (build it with lab/image/build.sh)"
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"lab container unavailable: {reason} (CI=true: lab tests must run)", pytrace=False)
        pytest.skip(f"lab container unavailable: {reason}")
    name = f"{NAMESPACE}-records-{uuid.uuid4().hex[:8]}"
    _docker("run", "-d", "--init", "--network", "none", "--name", name, "--hostname", "web1", IMAGE)
    try:
        deadline = time.monotonic() + 60
        while _docker("exec", name, "sh", "-c", "service redis-server status", check=False).returncode != 0:
            assert time.monotonic() < deadline, "redis did not start"
            time.sleep(0.5)
        yield name
    finally:
        _docker("rm", "-f", name, check=False)


def sh(host: str, script: str) -> str:
    return _docker("exec", host, "sh", "-c", script).stdout


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def test_a_drifted_file_says_when_it_changed_and_what_the_hosts_records_say_of_that_window(host: str) -> None:
    conf = "/etc/redis/redis.conf"
    # records from before the last healthy pass: not of the window
    sh(host, "printf '%s web1 sudo:   early : TTY=pts/0 ; PWD=/ ; USER=root ; COMMAND=/usr/bin/true\\n' "
             "\"$(date '+%b %e %H:%M:%S')\" >> /var/log/auth.log")
    time.sleep(3)
    before = time.time()
    healthy = run_host_module(host, "service_health", {"services": [REDIS], "known_good": True, "evidence": True})
    assert healthy["healthy"] is True, healthy
    after = time.time()
    time.sleep(3)
    # what an operator did in the window, as the host's own logs write it (local time, no year)
    sh(host, "printf '%s upgrade redis-server:amd64 5:7.0.15-1 5:7.0.15-2\\n%s configure redis-server:amd64 "
             "5:7.0.15-2 <none>\\n' \"$(date '+%F %T')\" \"$(date '+%F %T')\" >> /var/log/dpkg.log; "
             "printf '%s web1 sudo:  alice : TTY=pts/1 ; PWD=/home/alice ; USER=root ; COMMAND=/usr/bin/redis-cli "
             "-a Pl4nted-S3cret CONFIG SET dir /tmp\\n%s web1 sudo:  alice : TTY=pts/1 ; PWD=/home/alice ; USER=root ; "
             "COMMAND=/usr/bin/tee -a /etc/redis/redis.conf\\n' \"$(date '+%b %e %H:%M:%S')\" "
             "\"$(date '+%b %e %H:%M:%S')\" >> /var/log/auth.log")
    sh(host, f"echo 'sentinel-bogus-directive yes' >> {conf}; service redis-server stop >/dev/null 2>&1; "
             "service redis-server start >/dev/null 2>&1; true")
    failing = run_host_module(host, "service_health", {"services": [REDIS], "known_good": True, "evidence": True})
    [service] = failing["services"]
    assert service["healthy"] is False, service
    known = service["evidence"]["known_good"]
    [item] = [i for i in known["drift"] if i["path"] == conf]
    # the file's own times and its package, as the container says them
    mtime, ctime = (int(v) for v in sh(host, f"stat -c '%Y %Z' {conf}").split())
    assert item["mtime"] == iso(mtime) and item["ctime"] == iso(ctime)
    assert item["package_of"] == sh(host, f"dpkg -S {conf}").split(":", 1)[0]
    # the last healthy pass, which still saw the good version: the one run above
    passed = calendar.timegm(time.strptime(known["last_seen_good"], "%Y-%m-%dT%H:%M:%SZ"))
    assert int(before) - 1 <= passed <= after + 1, known["last_seen_good"]
    records = known["window_records"]
    text = "\n".join(records)
    assert any("dpkg upgrade redis-server:amd64 5:7.0.15-1 5:7.0.15-2" in line for line in records), records
    assert any("sudo: alice" in line and f"COMMAND=/usr/bin/tee -a {conf}" in line for line in records), records
    # the secret on the command line is redacted; the line from before the pass is not of the window
    assert "Pl4nted-S3cret" not in json.dumps(failing) and "early" not in text
    assert len(text.encode()) <= 1600
    sh(host, f"sed -i '/^sentinel-bogus-directive yes$/d' {conf}; service redis-server start >/dev/null 2>&1; true")


def test_the_small_files_of_a_data_directory_are_what_the_directory_holds(host: str) -> None:
    sh(host, f"printf 'primary_conninfo=x\\n' > {POSTGRES_DATA}/standby.signal; "
             f"chown postgres:postgres {POSTGRES_DATA}/standby.signal; chmod 0600 {POSTGRES_DATA}/standby.signal")
    result = run_host_module(host, "evidence", {"service": "postgresql", "data_paths": [POSTGRES_DATA],
                                                "max_bytes": 12000})
    markers = result["evidence"]["data_markers"]
    # every small regular file at the top, and nothing else: read in the container
    listed = sh(host, f"find {POSTGRES_DATA} -maxdepth 1 -type f -size -257c -printf '%p\\n'").split()
    assert sorted(markers) == sorted(listed) and f"{POSTGRES_DATA}/PG_VERSION" in markers
    for path in listed:
        owner, mode, size = sh(host, f"stat -c '%U:%G %a %s' {path}").split()
        assert markers[path].startswith(f"owner {owner}, mode {int(mode, 8):04o}, {size} bytes, modified "), markers
    assert markers[f"{POSTGRES_DATA}/PG_VERSION"].endswith(": " + sh(host, f"cat {POSTGRES_DATA}/PG_VERSION").strip())
    assert markers[f"{POSTGRES_DATA}/standby.signal"].endswith(": primary_conninfo=x")
    # the data files and the subdirectories' files are not read
    assert not any("/base/" in p or "/global/" in p for p in markers)


def test_the_environment_file_the_init_script_sources_is_the_services_configuration(host: str) -> None:
    # this host keeps redis's environment where another distribution would: its init script says so
    sh(host, "mkdir -p /etc/sysconfig && cp /etc/default/redis-server /etc/sysconfig/redis-server && "
             "sed -i 's#/etc/default/\\$NAME#/etc/sysconfig/$NAME#g' /etc/init.d/redis-server")
    try:
        result = run_host_module(host, "evidence", {"service": "redis-server", "config_paths": ["/etc/redis"]})
        evidence = result["evidence"]
        sourced = sh(host, "grep -o '^[[:space:]]*\\. /etc/[^ ]*' /etc/init.d/redis-server").split()
        assert [p.replace("$NAME", "redis-server") for p in sourced if p != "."] == ["/etc/sysconfig/redis-server"]
        assert evidence["environment_files"] == ["/etc/sysconfig/redis-server"]
        assert "/etc/sysconfig/redis-server" in evidence["environment"]
        # the policy's scope, built from that evidence: the file the host named is the service's own
        scope = policy.scope_from_service({"name": "redis-server", "config_paths": ["/etc/redis"]}, [], evidence)
        loaded = policy.load_policy(None)
        own = policy.classify("sed -i s/x/y/ /etc/sysconfig/redis-server", loaded, scope=scope)
        assert own["verdict"] == "approval" and "the service's configuration" in own["reasons"][0], own
        guess = policy.classify("sed -i s/x/y/ /etc/default/redis-server", loaded, scope=scope)
        assert "outside the incident's scope" in guess["reasons"][0], guess
        assert policy.classify("sed -i s/x/y/ /etc/default/grub", loaded, scope=scope)["verdict"] == "reject"
    finally:
        sh(host, "sed -i 's#/etc/sysconfig/\\$NAME#/etc/default/$NAME#g' /etc/init.d/redis-server")
