"""Landlock confinement in the plan runner: real rulesets on this machine's kernel, real tools.

The kernel, not the runner, refuses: each test looks at the bytes on disk, the listener's
accepted connections, or the tool's own error, never at the runner's intentions.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import landlock, plan_runner

# Root: a denial is told from file permissions only where those never refuse.
needs_landlock = pytest.mark.skipif(landlock.abi_version() < 4 or os.geteuid() != 0,
                                    reason="needs Landlock ABI 4+ (TCP rules) and root")


def run(argv: list, confine, mode: str = "preferred", approved: bool = False) -> dict:
    commands = plan_runner.normalise_commands([{"argv": argv, "confine": confine, "approved": approved}])
    invoker = plan_runner.invoking_identity({})
    return plan_runner.run_plan(commands, {}, invoker, confinement=mode, timeout=20)["results"][0]


@pytest.fixture()
def files(tmp_path: Path):
    declared, other = tmp_path / "a" / "declared.conf", tmp_path / "b" / "other.conf"
    for path in (declared, other):
        path.parent.mkdir()
        path.write_bytes(b"listen 8080;\n")
    return declared, other


@needs_landlock
def test_a_write_outside_the_declared_path_is_refused_and_the_file_keeps_its_bytes(files) -> None:
    declared, other = files
    confine = {"write": [str(declared)], "create": [str(declared.parent)], "remove": [str(declared.parent)],
               "exec": ["sed"]}
    result = run(["sed", "-i", "s/8080/80/", str(other)], confine)
    assert result["rc"] != 0 and other.read_bytes() == b"listen 8080;\n"
    assert result["confined"] is True and "Permission denied" in result["denied"]
    assert "confinement denied" in result["reason"]
    # the declared file itself is changed
    assert run(["sed", "-i", "s/8080/80/", str(declared)], confine)["rc"] == 0
    assert declared.read_bytes() == b"listen 80;\n"


@needs_landlock
def test_the_same_write_runs_when_confinement_is_off(files) -> None:
    declared, other = files
    result = run(["sed", "-i", "s/8080/80/", str(other)], {"write": [str(declared)], "exec": ["sed"]}, mode="off")
    assert result["rc"] == 0 and other.read_bytes() == b"listen 80;\n" and result["confined"] is False


@needs_landlock
def test_a_tool_may_not_start_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    argv = ["find", str(tmp_path), "-maxdepth", "0", "-exec", "sh", "-c", f"echo > {marker}", ";"]
    result = run(argv, {"exec": ["find"]})
    # find reports the refused exec and exits 0: the refusal still fails the command
    assert not marker.exists() and "'sh': Permission denied" in result["denied"]
    assert run(argv, {"exec": ["find"]}, mode="off")["rc"] == 0 and marker.exists()


@pytest.fixture()
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    accepted = []

    def accept():
        while True:
            try:
                conn, _addr = server.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


@needs_landlock
def test_a_command_without_a_network_read_cannot_connect(listener) -> None:
    port, accepted = listener
    # the interpreter itself, not a launcher script on PATH (a pyenv shim execs a shell)
    python = os.path.realpath(sys.executable)
    argv = [python, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 5).close()"]
    refused = run(argv, {"exec": [python]})
    assert refused["rc"] != 0 and not accepted and "Permission denied" in refused["denied"]
    assert run(argv, {"exec": [python], "tcp": True})["rc"] == 0 and accepted


def test_where_landlock_is_missing_required_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(landlock, "_ABI", 0)
    target = tmp_path / "x"
    result = run(["touch", str(target)], {"create": [str(tmp_path)], "exec": ["touch"]}, mode="required")
    assert result["skipped"] and "confinement is required" in result["reason"] and not target.exists()


def test_where_landlock_is_missing_preferred_runs_only_what_a_human_approved(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(landlock, "_ABI", 0)
    target = tmp_path / "x"
    confine = {"create": [str(tmp_path)], "exec": ["touch"]}
    waiting = run(["touch", str(target)], confine)
    assert waiting["skipped"] and "needs a human's approval" in waiting["reason"] and not target.exists()
    approved = run(["touch", str(target)], confine, approved=True)
    assert approved["rc"] == 0 and target.exists() and approved["confined"] is False
    assert "a human approved it" in approved["confinement"]


def test_an_unconfinable_command_follows_the_same_rule(tmp_path: Path) -> None:
    result = run(["true"], {"unconfinable": "it runs scripts"})
    assert result["skipped"] and "it runs scripts" in result["reason"]


def test_service_control_runs_without_a_ruleset_and_says_why() -> None:
    result = run(["true"], {"exception": "service control: `service` runs init scripts"})
    assert result["rc"] == 0 and result["confined"] is False and "service control" in result["confinement"]


def test_a_bad_confine_is_a_plan_error_naming_the_key() -> None:
    with pytest.raises(plan_runner.PlanError, match=r"commands\[0\]\.confine\.write"):
        plan_runner.normalise_commands([{"argv": ["true"], "confine": {"write": ["relative/path"]}}])
    with pytest.raises(plan_runner.PlanError, match="unknown key"):
        plan_runner.normalise_commands([{"argv": ["true"], "confine": {"writes": []}}])


@needs_landlock
def test_the_rules_are_described_as_applied() -> None:
    result = run(["true"], {"exec": ["true"]})
    assert result["confined"] is True and result["rc"] == 0
    assert "exec only" in result["confinement"] and "no TCP connect or bind" in result["confinement"]
