"""The kernel stops what a misreading policy lets through: Landlock in execute_plan on real hosts.

Each command below is misread on purpose (SENTINEL_TEST_POLICY_MISREAD, the test-only
override the heal action honours too): the policy believes it is a harmless command and
allows it with that command's effects. The confinement derived from that verdict runs
on a SysV and a systemd lab host through `ansible` and the product's own runner
(sentinel.remediation.execute_plan, with become). Everything is checked from outside with
docker exec: the bytes of the file, the marker a shell would leave, the connections a
loopback listener accepted. The same commands with confinement off do what they try, so
the tests prove the mechanism, not a broken command.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import confinement
from policy_misread import misread
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify
from host_module import run_host_module

pytestmark = pytest.mark.lab

PORT = 7731
LISTENER = f"""
import socket
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", {PORT}))
server.listen(8)
while True:
    conn, _ = server.accept()
    with open("/tmp/confine-accepted", "a") as marker:
        marker.write("1\\n")
    conn.close()
"""


@pytest.fixture(scope="module")
def hosts(mixed_lab) -> dict[str, str]:
    """kind -> container of the session's two-host mixed lab (lab01 SysV, lab02 systemd)."""
    lab = mixed_lab
    return {lab.kind(host): lab.container(host) for host in lab.hosts()}


def sh(container: str, script: str, check: bool = True) -> str:
    proc = subprocess.run(["docker", "exec", container, "sh", "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{container}: {script!r} failed: {proc.stderr}")
    return proc.stdout


def run_misread(container: str, command: str, believed: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """``command`` judged as the policy would judge ``believed``, run by execute_plan."""
    monkeypatch.setenv("SENTINEL_TEST_POLICY_MISREAD", json.dumps({command: believed}))
    verdict = misread(classify(command))
    assert verdict["verdict"] in ("allow", "approval"), verdict["reasons"]
    args = {"commands": [{"argv": verdict["argv"], "become": True, "label": command,
                          "confine": confinement.derive(verdict), "approved": True}],
            "confinement": mode}
    # the host module runs with the verdict it was given, not the misreading (the action's seam)
    return run_host_module(container, "execute_plan", args, unset_env=("SENTINEL_TEST_POLICY_MISREAD",))["results"][0]


KINDS = ("sysv", "systemd")


@pytest.mark.parametrize("kind", KINDS)
def test_a_write_to_an_undeclared_path_fails_and_leaves_its_bytes(hosts, kind, monkeypatch) -> None:
    container = hosts[kind]
    sh(container, "printf 'listen 80;\\n' > /etc/confine-b.conf")
    before = sh(container, "sha256sum /etc/confine-b.conf")
    # The policy believes the command truncates nginx's error log (path A); it truncates B.
    command, believed = "truncate -s 0 /etc/confine-b.conf", "truncate -s 0 /var/log/nginx/error.log"
    result = run_misread(container, command, believed, "required", monkeypatch)
    assert result["confined"] is True and "write /var/log/nginx/error.log" in result["confinement"]
    assert result["rc"] != 0 and "Permission denied" in result["denied"], result
    assert sh(container, "sha256sum /etc/confine-b.conf") == before
    unconfined = run_misread(container, command, believed, "off", monkeypatch)
    assert unconfined["rc"] == 0 and unconfined["confined"] is False
    assert sh(container, "stat -c %s /etc/confine-b.conf").strip() == "0"


@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_that_starts_a_shell_is_stopped(hosts, kind, monkeypatch) -> None:
    container = hosts[kind]
    sh(container, "rm -f /tmp/confine-shell-ran")
    # The policy believes the command only looks at one path; its -exec starts a shell.
    command = "find /etc/hostname -maxdepth 0 -exec sh -c 'touch /tmp/confine-shell-ran' ;"
    result = run_misread(container, command, "find /etc/hostname -maxdepth 0", "required", monkeypatch)
    assert result["confined"] is True and "'sh': Permission denied" in result["denied"], result
    assert sh(container, "test -e /tmp/confine-shell-ran && echo ran || echo absent").strip() == "absent"
    unconfined = run_misread(container, command, "find /etc/hostname -maxdepth 0", "off", monkeypatch)
    assert unconfined["rc"] == 0
    assert sh(container, "test -e /tmp/confine-shell-ran && echo ran || echo absent").strip() == "ran"


@pytest.mark.parametrize("kind", KINDS)
def test_a_command_denied_tcp_cannot_connect(hosts, kind, monkeypatch) -> None:
    container = hosts[kind]
    sh(container, "rm -f /tmp/confine-accepted /tmp/confine-listener.py")
    sh(container, f"cat > /tmp/confine-listener.py <<'EOF'\n{LISTENER}\nEOF")
    subprocess.run(["docker", "exec", "-d", container, "python3", "/tmp/confine-listener.py"], check=True, timeout=30)
    sh(container, f"for i in $(seq 50); do ss -ltn | grep -q ':{PORT} ' && exit 0; sleep 0.1; done; exit 1")
    try:
        command = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {PORT}), 5).close()\""
        result = run_misread(container, command, "sed -n p /etc/hostname", "required", monkeypatch)
        assert result["confined"] is True and "no TCP connect or bind" in result["confinement"]
        assert result["rc"] != 0 and "Permission denied" in result["denied"], result
        assert sh(container, "cat /tmp/confine-accepted 2>/dev/null || true") == ""
        unconfined = run_misread(container, command, "sed -n p /etc/hostname", "off", monkeypatch)
        assert unconfined["rc"] == 0, unconfined
        assert sh(container, "cat /tmp/confine-accepted") == "1\n"
    finally:
        sh(container, "pkill -f confine-listener.py", check=False)


@pytest.mark.parametrize("kind", KINDS)
def test_the_declared_changes_of_a_real_fix_run_confined(hosts, kind, monkeypatch) -> None:
    """What the policy declared runs under its rules: a stale PID file removed, a log directory made."""
    container = hosts[kind]
    sh(container, "rm -rf /var/log/confine-app; echo 4242 > /run/confine-app.pid")
    monkeypatch.delenv("SENTINEL_TEST_POLICY_MISREAD", raising=False)
    for command in ("rm -f /run/confine-app.pid", "mkdir -p /var/log/confine-app"):
        result = run_misread(container, command, command, "required", monkeypatch)
        assert result["rc"] == 0 and result["confined"] is True and not result.get("denied"), result
    assert sh(container, "test -e /run/confine-app.pid && echo there || echo gone").strip() == "gone"
    assert sh(container, "test -d /var/log/confine-app && echo made").strip() == "made"
