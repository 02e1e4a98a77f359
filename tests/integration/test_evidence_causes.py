"""Evidence that reaches the cause, against lab containers (issue 28): liveness, a cut request
that keeps the named line, ownership markers in the request, a start systemd skipped.

The same containers and helpers as test_host_modules.py (the modules run through real
`ansible` with the docker connection and become); the verdicts come from what ran in the
container, the request the controller builds from the host's evidence, and the lab's own
health check (lab/lab_health.py, piped into the container as lab/sentinel_lab.py does).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

# the module-scoped lab containers and the helpers that drive them
from test_host_modules import LAB_SERVICES, SYSTEMD_NGINX, Host, host, systemd_host  # noqa: F401 pylint: disable=unused-import

from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import build_messages

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
SSH = next(s for s in LAB_SERVICES if s["name"] == "ssh")
CRON = next(s for s in LAB_SERVICES if s["name"] == "cron")


def lab_oracle(host: Host, *services: str) -> dict:
    """The lab's own health check inside the container: {service: healthy}."""
    proc = subprocess.run(["docker", "exec", "-i", host.name, "python3", "-", *services],
                          input=(REPO / "lab" / "lab_health.py").read_text(encoding="utf-8"),
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_sigstopped_sshd_and_cron_are_not_healthy(host: Host) -> None:
    host.sh("service ssh status >/dev/null || service ssh start; service cron status >/dev/null || service cron start",
            check=False)
    host.wait_for("service ssh status && service cron status", "ssh and cron running")
    assert {n: r["healthy"] for n, r in lab_oracle(host, "ssh", "cron").items()} == {"ssh": True, "cron": True}
    assert host.module("service_health", {"services": [SSH, CRON]})["healthy"] is True
    host.sh("pkill -STOP -x sshd; pkill -STOP -x cron")
    try:
        host.wait_for("test -z \"$(ps -o stat= -C sshd,cron | grep -v '^T')\"", "sshd and cron stopped")
        # the PID file, the process and the listening socket are all still there
        assert host.sh("ss -ltnH 'sport = :22' | wc -l").strip() != "0"
        oracle = lab_oracle(host, "ssh", "cron")
        assert oracle["ssh"]["healthy"] is False and oracle["cron"]["healthy"] is False, oracle
        alive = {n: next(c for c in r["checks"] if c["name"] == "alive") for n, r in oracle.items()}
        assert alive["ssh"]["ok"] is False and "(T)" in alive["ssh"]["detail"]
        assert alive["cron"]["ok"] is False and "(T)" in alive["cron"]["detail"]

        result = host.module("service_health", {"services": [SSH, CRON]})
        by_name = {s["name"]: s for s in result["services"]}
        assert by_name["ssh"]["healthy"] is False
        assert "which is not alive: pid" in by_name["ssh"]["error"] and "stopped" in by_name["ssh"]["error"]
        assert by_name["cron"]["healthy"] is False and "stopped" in by_name["cron"]["error"]
        # the init script says "running" (a PID exists); the check judges the process's state
        (init,) = host.module("service_health", {"services": [dict(SSH, checks=[{"type": "service"}])]})["services"]
        assert init["healthy"] is False
        assert init["error"].startswith("service ssh status: ")
        assert "but its processes are not alive: pid" in init["error"], init
    finally:
        host.sh("pkill -CONT -x sshd; pkill -CONT -x cron", check=False)
    assert host.module("service_health", {"services": [SSH, CRON]})["healthy"] is True


def _big_nginx_conf(host: Host, header: str = "") -> int:
    """nginx.conf with many settings before an unknown directive; the directive's line number."""
    host.sh("cp /etc/nginx/nginx.conf /tmp/nginx.conf.orig")
    script = (
        "{ " + (f"printf '%s\\n' '{header}'; " if header else "")
        + "sed -n '1,/^http {/p' /tmp/nginx.conf.orig; "
        "for n in $(seq 1 160); do echo \"\\t# filler comment $n of a large file, nothing to do with the fault\"; done; "
        "echo '\\tbogus_cause_directive on;'; sed '1,/^http {/d' /tmp/nginx.conf.orig; } > /etc/nginx/nginx.conf")
    host.sh(script)
    return int(host.sh("grep -n bogus_cause_directive /etc/nginx/nginx.conf | cut -d: -f1").strip())


NGINX = next(s for s in LAB_SERVICES if s["name"] == "nginx")


def _request(result: dict, service: str = "nginx") -> str:
    messages = build_messages(service=service, error=result["error"], evidence=result["evidence"], max_commands=3,
                              now="2026-11-28T06:30:00Z")
    return messages[1]["content"]


def test_a_cut_request_still_holds_the_line_the_error_names(host: Host) -> None:
    host.nginx_running()
    line = _big_nginx_conf(host)
    try:
        host.sh("service nginx stop", check=False)
        # a noisy log: more evidence than the request's budget holds
        host.sh("for n in $(seq 1 200); do echo \"2026/11/28 06:00:00 [notice] 1#1: noise $n $(printf 'n%.0s' $(seq 1 90))\";"
                " done >> /var/log/nginx/error.log")
        result = host.module("service_health", {"services": [NGINX], "evidence": True, "evidence_max_bytes": 12000,
                                                "evidence_log_lines": 200})
        (nginx,) = result["services"]
        assert nginx["healthy"] is False
        ev = nginx["evidence"]
        assert f"/etc/nginx/nginx.conf:{line}" in ev["config_test"]
        user = _request(nginx)
        # the request was cut (the evidence is larger than its budget) and says so ...
        assert "chars cut" in user or "left out for size" in user
        # ... but the line the config test names is there, whole, and the file's facts with it
        assert re.search(rf"(?m)^>\s*{line}\s+bogus_cause_directive on;$", user), user
        named = ev["named_paths"]["/etc/nginx/nginx.conf"]
        assert named["type"] == "file" and named["owner"] == "root:root" and named["mode"] == "0644"
        assert named["first_lines"][0].startswith("user ")
        assert "Now (UTC): 2026-11-28T06:30:00Z" in user
    finally:
        host.sh("cp /tmp/nginx.conf.orig /etc/nginx/nginx.conf", check=False)
        host.nginx_running()


def test_ownership_markers_reach_the_request(host: Host) -> None:
    host.nginx_running()
    header = "# This file is managed by Puppet (module profile::web); ticket WEB-4211. Local changes will be overwritten."
    _big_nginx_conf(host, header)
    try:
        host.sh("service nginx stop", check=False)
        result = host.module("service_health", {"services": [NGINX], "evidence": True})
        (nginx,) = result["services"]
        ev = nginx["evidence"]
        said = f"says: line 1: {header}"
        assert said in ev["named_paths"]["/etc/nginx/nginx.conf"]["managed_by"]
        assert said in ev["ownership"]["/etc/nginx/nginx.conf"]
        # the package's own, unchanged conffile is said too, where it is named
        mime = subprocess.run(["docker", "exec", host.name, "sh", "-c",
                               "grep -c '^ /etc/nginx/mime.types ' /var/lib/dpkg/status"],
                              capture_output=True, text=True, check=False).stdout.strip()
        user = _request(nginx)
        assert "managed by Puppet (module profile::web); ticket WEB-4211" in user
        assert "the owner's intent wins" in build_messages(service="nginx", error="", evidence={},
                                                           max_commands=3)[0]["content"]
        assert mime == "1"  # the lab's nginx config comes from a package: conffiles are recorded
    finally:
        host.sh("cp /tmp/nginx.conf.orig /etc/nginx/nginx.conf", check=False)
        host.nginx_running()


SYSTEMD_SSH = {"name": "ssh", "units": ["ssh.service"], "processes": ["sshd"],
               "checks": [{"type": "service"}, {"type": "port", "port": 22, "process": "sshd"}], "ports": [22]}


def test_a_start_systemd_skipped_on_a_condition_is_not_healed(systemd_host: Host) -> None:
    host = systemd_host
    condition = host.sh("systemctl show -p ConditionPathExists --value ssh.service || true")
    unit = host.sh("systemctl cat ssh.service")
    if "sshd_not_to_be_run" not in unit:
        pytest.skip(f"this image's ssh.service has no ConditionPathExists on sshd_not_to_be_run: {condition}")
    host.sh("systemctl stop ssh.service ssh.socket 2>/dev/null; touch /etc/ssh/sshd_not_to_be_run", check=False)
    try:
        ran = host.module("execute_plan", {"commands": [{"argv": ["systemctl", "start", "ssh.service"], "become": True}],
                                           "verify": SYSTEMD_SSH, "settle": 2})
        (start,) = ran["results"]
        assert start["rc"] == 0  # what the exit code alone would call a success
        assert "systemd SKIPPED the start" in start["afterwards"] and "ConditionResult=no" in start["afterwards"]
        assert "sshd_not_to_be_run" in start["afterwards"], start["afterwards"]
        assert ran["verify"]["healthy"] is False
        assert host.sh("systemctl show -p ConditionResult --value ssh.service").strip() == "no"
        assert lab_oracle(host, "ssh")["ssh"]["healthy"] is False
    finally:
        host.sh("rm -f /etc/ssh/sshd_not_to_be_run; systemctl start ssh.service", check=False)


def test_a_sigstopped_daemon_under_systemd_is_not_active_for_the_check(systemd_host: Host) -> None:
    host = systemd_host
    host.wait_for("systemctl is-active nginx.service", "nginx active")
    main = int(host.sh("systemctl show -p MainPID --value nginx.service").strip())
    host.sh(f"kill -STOP {main}")
    try:
        host.wait_for(f"grep -q '^State:.*T' /proc/{main}/status", "nginx master stopped")
        assert host.sh("systemctl is-active nginx.service").strip() == "active"  # systemd's bookkeeping
        result = host.module("service_health", {"services": [dict(SYSTEMD_NGINX, checks=[{"type": "service"}])]})
        (nginx,) = result["services"]
        assert nginx["healthy"] is False
        assert f"but its main process is not alive: pid {main} stopped" in nginx["error"], nginx["error"]
    finally:
        host.sh(f"kill -CONT {main}", check=False)
