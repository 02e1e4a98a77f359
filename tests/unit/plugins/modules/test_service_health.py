"""service_health run in-process against real processes, sockets and HTTP on this machine."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.modules import service_health


def run_module(capsys: pytest.CaptureFixture, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        service_health.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory):
    """A real `python -m http.server` on 127.0.0.1, on a port the kernel chose."""
    root = tmp_path_factory.mktemp("www")
    (root / "index.html").write_text("hello")
    (root / "sub").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    match = re.search(r"port (\d+)", line)
    assert match, f"http.server said {line!r}"
    name = Path(f"/proc/{proc.pid}/comm").read_text().strip()
    yield {"port": int(match.group(1)), "pid": proc.pid, "name": name, "root": str(root)}
    proc.kill()
    proc.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture()
def fake_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A `service` tool that says what a sysvinit script says for a stopped nginx."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "service"
    tool.write_text('#!/bin/sh\nif [ "$1" = nginx ]; then echo "$1 is not running ... failed!"; exit 3; fi\n'
                    'echo "$1 is running."\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "no-systemd"))
    return tool


def test_default_check_is_the_init_systems_status(capsys, fake_service) -> None:
    result = run_module(capsys, {"service": "nginx"})
    assert result["healthy"] is False
    assert result["changed"] is False
    assert "failed" not in result  # unhealthy is a normal result
    assert result["error"] == "service nginx status: nginx is not running (rc 3)"
    assert result["checks"] == [{"type": "service", "ok": False, "detail": result["error"]}]

    result = run_module(capsys, {"service": "cron"})
    assert result["healthy"] is True and result["error"] == ""


@pytest.fixture()
def fake_systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host where systemd runs: `systemctl show` answers from files named after the unit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    states = tmp_path / "units"
    states.mkdir()
    tool = bin_dir / "systemctl"
    tool.write_text(f'#!/bin/sh\n[ "$1" = show ] || exit 9\neval last=\\${{$#}}\n'
                    f'cat "{states}/$last" 2>/dev/null || printf "LoadState=not-found\\nActiveState=inactive\\n'
                    f'SubState=dead\\nResult=success\\n"\n')
    tool.chmod(0o755)
    (tmp_path / "systemd").mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "systemd"))
    return states


def test_systemd_is_asked_for_the_units_state(capsys, fake_systemd: Path) -> None:
    (fake_systemd / "nginx.service").write_text(
        "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nUnitFileState=enabled\n")
    (fake_systemd / "web.socket").write_text("LoadState=loaded\nActiveState=active\nSubState=listening\nResult=success\n")
    (fake_systemd / "masked.service").write_text("LoadState=masked\nActiveState=inactive\nSubState=dead\n"
                                                 "UnitFileState=masked\n")
    result = run_module(capsys, {"service": "nginx"})
    assert result["error"] == "nginx.service is failed/failed (result exit-code; unit file enabled)"
    result = run_module(capsys, {"service": "masked"})
    assert result["error"] == "masked.service is inactive (load state masked) (unit file masked)"
    # every unit of the service must be active; the failing one is named first
    result = run_module(capsys, {"services": [{"name": "web", "units": ["web.socket", "nginx.service"]}]})
    assert result["services"][0]["error"] == ("nginx.service is failed/failed (result exit-code; unit file enabled);"
                                              " web.socket is active/listening")
    (fake_systemd / "nginx.service").write_text("LoadState=loaded\nActiveState=active\nSubState=running\n")
    assert run_module(capsys, {"service": "nginx"})["healthy"] is True


def test_a_serving_http_server_passes_port_http_and_process_checks(capsys, http_server) -> None:
    port = http_server["port"]
    result = run_module(capsys, {"service": "web", "checks": [
        {"type": "port", "port": port, "process": http_server["name"]},
        {"type": "port", "port": port},
        {"type": "http", "url": f"http://127.0.0.1:{port}/", "timeout": 5},
        {"type": "process", "pattern": re.escape(http_server["root"])},
    ]})
    assert result["healthy"] is True, result
    assert [c["ok"] for c in result["checks"]] == [True, True, True, True]
    assert result["checks"][0]["detail"] == f"port {port} is held by {http_server['name']} (pid {http_server['pid']})"
    assert result["checks"][2]["detail"] == f"GET http://127.0.0.1:{port}/ returned 200"
    assert f"(pid {http_server['pid']})" in result["checks"][3]["detail"]


def test_a_port_held_by_the_wrong_process_names_the_holder(capsys, http_server) -> None:
    port = http_server["port"]
    result = run_module(capsys, {"service": "nginx", "checks": [{"type": "port", "port": port, "process": "nginx"}]})
    assert result["healthy"] is False
    assert result["error"] == f"port {port} is held by {http_server['name']} (pid {http_server['pid']}), not nginx"


def test_a_closed_port_and_a_missing_process_fail(capsys) -> None:
    port = _free_port()
    result = run_module(capsys, {"service": "ghost", "checks": [
        {"type": "port", "port": port},
        {"type": "process", "pattern": "no-such-process-[x]yz"},
        {"type": "process"},
    ]})
    assert [c["ok"] for c in result["checks"]] == [False, False, False]
    assert result["error"] == f"port {port} is not listening"  # the first failing check
    assert result["checks"][1]["detail"] == "no process matches 'no-such-process-[x]yz'"
    assert result["checks"][2]["detail"] == "no process matches 'ghost'"


def test_http_status_is_compared_and_redirects_are_not_followed(capsys, http_server) -> None:
    base = f"http://127.0.0.1:{http_server['port']}"
    result = run_module(capsys, {"service": "web", "checks": [
        {"type": "http", "url": f"{base}/missing"},
        {"type": "http", "url": f"{base}/missing", "status": 404},
        {"type": "http", "url": f"{base}/sub"},
        {"type": "http", "url": f"http://127.0.0.1:{_free_port()}/", "timeout": 2},
    ]})
    details = [c["detail"] for c in result["checks"]]
    assert [c["ok"] for c in result["checks"]] == [False, True, False, False]
    assert details[0] == f"GET {base}/missing returned 404, expected 200"
    assert details[2] == f"GET {base}/sub returned 301, expected 200"
    assert "refused" in details[3].lower()


def test_command_checks_rc_and_indicator_without_a_shell(capsys) -> None:
    py = sys.executable
    result = run_module(capsys, {"service": "redis", "checks": [
        {"type": "command", "argv": [py, "-c", "print('PONG')"], "indicator": "PONG"},
        {"type": "command", "argv": [py, "-c", "print('LOADING')"], "indicator": "PONG"},
        {"type": "command", "argv": [py, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(2)"]},
        {"type": "command", "argv": [py, "-c", "import sys; sys.exit(2)"], "rc": 2},
        {"type": "command", "argv": ["echo", "$(id)", ";", "true"], "indicator": "$(id) ; true"},
        {"type": "command", "argv": ["no-such-tool-xyz"]},
        {"type": "command", "argv": ["sleep", "5"], "timeout": 1},
    ]})
    oks = [c["ok"] for c in result["checks"]]
    details = [c["detail"] for c in result["checks"]]
    assert oks == [True, False, False, True, True, False, False]
    assert "lacks 'PONG': LOADING" in details[1]
    assert details[2].endswith("exited 2, expected 0: boom")
    assert details[5] == "no-such-tool-xyz exited 127, expected 0: no-such-tool-xyz: command not found"
    assert "exited 124" in details[6] and "timed out" in details[6]


def test_details_are_redacted(capsys) -> None:
    result = run_module(capsys, {"service": "db", "checks": [
        {"type": "command", "argv": ["echo", "password=hunter2-secret"], "indicator": "ready"}]})
    assert "hunter2-secret" not in json.dumps(result["checks"])  # (module_args echo the input)
    assert "[REDACTED:" in result["error"]


def test_check_mode_runs_the_checks(capsys, http_server) -> None:
    result = run_module(capsys, {"service": "web", "_ansible_check_mode": True,
                                 "checks": [{"type": "port", "port": http_server["port"]}]})
    assert result["healthy"] is True and result["changed"] is False


@pytest.mark.parametrize("checks, message", [
    ([{"type": "port"}], "port"),
    ([{"type": "http"}], "url"),
    ([{"type": "command"}], "argv"),
    ([{"type": "tcp"}], "type"),
])
def test_the_argument_spec_rejects_incomplete_checks(capsys, checks: list, message: str) -> None:
    result = run_module(capsys, {"service": "nginx", "checks": checks})
    assert result["failed"] is True
    assert message in result["msg"]


@pytest.mark.parametrize("checks, message", [
    ([{"type": "command", "argv": []}], "nginx: checks[0]: a command check needs a non-empty argv"),
    ([{"type": "process", "pattern": "("}], "nginx: checks[0]: bad process pattern"),
    ([{"type": "process", "pattern": "x"}, {"type": "http", "url": "ftp://127.0.0.1/"}],
     "nginx: checks[1]: url must be an http:// or https:// URL"),
])
def test_bad_check_values_fail_before_any_check_runs(capsys, checks: list, message: str) -> None:
    result = run_module(capsys, {"service": "nginx", "checks": checks})
    assert result["failed"] is True
    assert message in result["msg"]
    assert result["healthy"] is False and result["checks"] == []


# --- many services in one call -------------------------------------------------------------

def test_many_services_in_one_call_with_evidence_for_the_failing(capsys, fake_service, http_server, tmp_path) -> None:
    port = http_server["port"]
    log = tmp_path / "nginx.log"
    log.write_text(f'[emerg] open() "{tmp_path}/missing-dir/access.log" failed (2: No such file or directory)\n')
    result = run_module(capsys, {"services": [
        {"name": "web", "checks": [{"type": "port", "port": port, "process": http_server["name"]}]},
        {"name": "nginx", "logs": [str(log)], "ports": [port], "pid_files": [str(tmp_path / "nginx.pid")]},
        {"name": "app", "depends_on": ["nginx", "web"], "checks": [{"type": "port", "port": _free_port()}]},
        {"name": "cron"},
    ], "evidence": True, "evidence_max_bytes": 3000})
    assert result["changed"] is False and result["healthy"] is False
    web, nginx, app, cron = result["services"]
    assert [s["name"] for s in result["services"]] == ["web", "nginx", "app", "cron"]
    assert (web["healthy"], nginx["healthy"], app["healthy"], cron["healthy"]) == (True, False, False, True)
    assert result["error"] == "nginx: service nginx status: nginx is not running (rc 3)"
    assert "evidence" not in web and "evidence" not in cron  # healthy: no evidence
    ev = nginx["evidence"]
    assert ev["status"] == "$ service nginx status\nrc 3\nnginx is not running ... failed!"
    assert ev["pid_files"] == {str(tmp_path / "nginx.pid"): "missing"}
    assert ev["named_paths"][f"{tmp_path}/missing-dir/access.log"]["type"] == "missing"
    assert http_server["pid"] in ev["service_pids"]  # it holds the port nginx declares
    assert isinstance(nginx["truncated"], bool)  # lab containers' nginx processes may be visible from here
    assert app["blocked_by"] == ["nginx"] and "evidence" in app
    # Its dependencies as their own checks judged them in this call, not as an init script says.
    assert app["evidence"]["dependencies"] == {
        "nginx": "FAILING its own checks in this same check: service nginx status: nginx is not running (rc 3)",
        "web": "healthy: its own checks passed in this same check"}
    assert {"rm", "mv", "ln", "ls", "mkdir", "chown", "cat", "kill", "service"} <= set(result["tools"]["present"])
    assert {"lsof", "nginx", "cron"} <= set(result["tools"]["present"] + result["tools"]["absent"])


def test_without_evidence_the_call_only_checks(capsys, fake_service) -> None:
    result = run_module(capsys, {"services": [{"name": "nginx"}, {"name": "cron"}]})
    nginx, cron = result["services"]
    assert nginx == {"name": "nginx", "healthy": False, "error": "service nginx status: nginx is not running (rc 3)",
                     "checks": [{"type": "service", "ok": False, "detail": nginx["error"]}]}
    assert cron["healthy"] is True and "tools" in result


def test_evidence_max_services_bounds_the_call(capsys, fake_service) -> None:
    result = run_module(capsys, {"services": [{"name": "nginx"}, {"name": "nginx2", "checks": [
        {"type": "process", "pattern": "no-such-[p]rocess"}]}], "evidence": True, "evidence_max_services": 1})
    first, second = result["services"]
    assert "evidence" in first and "evidence" not in second
    assert second["skipped"] == "no evidence: evidence_max_services (1) reached"


def test_deferred_evidence_is_left_out_except_for_a_service_healed_from_these_rows(capsys, tmp_path: Path) -> None:
    # The health phase defers the evidence of services memory holds fixes for; one waiting for
    # a failing dependency is healed from this call's rows, so it gets its evidence here.
    base = _marker_service(tmp_path, "base")
    app = _marker_service(tmp_path, "app", depends_on=["base"])
    other = _marker_service(tmp_path, "other")
    result = run_module(capsys, {"services": [base, app, other], "evidence": True,
                                 "defer_evidence": ["base", "app"]})
    rows = {r["name"]: r for r in result["services"]}
    assert "evidence" not in rows["base"] and rows["base"]["evidence_deferred"].startswith("evidence deferred")
    assert rows["app"]["blocked_by"] == ["base"] and "evidence" in rows["app"] and "evidence_deferred" not in rows["app"]
    assert "evidence" in rows["other"] and "evidence_deferred" not in rows["other"]
    # Without evidence asked for, nothing is said deferred.
    bare = run_module(capsys, {"services": [base], "defer_evidence": ["base"]})
    assert "evidence_deferred" not in bare["services"][0]


def test_the_single_form_can_gather_evidence_too(capsys, fake_service) -> None:
    result = run_module(capsys, {"service": "nginx", "evidence": True})
    assert result["healthy"] is False and result["evidence"]["init"] == "sysv"
    assert run_module(capsys, {"service": "cron", "evidence": True}).get("evidence") is None


@pytest.mark.parametrize("args, message", [
    ({}, "one of the following is required: service, services"),
    ({"service": "x", "services": [{"name": "y"}]}, "mutually exclusive"),
    ({"services": [{"name": "a"}, {"name": "a"}]}, "each name once, got a more than once"),
    ({"services": [{"checks": []}]}, "name"),
    ({"services": [{"name": "a", "colour": "red"}]}, "colour"),
    ({"services": [{"name": "a", "checks": [{"type": "port"}]}]}, "port"),
    ({"services": [{"name": "a", "ports": [70000]}]}, "a: ports must be between 1 and 65535"),
    ({"service": "a", "evidence_max_bytes": 5}, "evidence_max_bytes must be at least 200"),
])
def test_bad_service_lists_are_named(capsys, args: dict, message: str) -> None:
    result = run_module(capsys, args)
    assert result["failed"] is True and message in result["msg"], result["msg"]


# ---------------------------------------------------------------- remembered fixes ahead
def _marker_service(tmp_path: Path, name: str = "flagd", **extra) -> dict:
    """A service that is healthy while its marker file exists (its 'fix' creates it)."""
    return {"name": name, "checks": [{"type": "command", "argv": ["test", "-e", str(tmp_path / f"{name}.up")]}],
            "logs": [str(tmp_path / f"{name}.log")], **extra}


def _signature_now(capsys, services: list, name: str) -> str:
    """The signature the controller computes from what the module returns (no fix sent)."""
    from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature
    row = next(r for r in run_module(capsys, {"services": services, "evidence": True})["services"] if r["name"] == name)
    return failure_signature(name, row["error"], row["evidence"], ["testhost"])


def test_a_remembered_fix_runs_where_the_host_finds_its_signature(capsys, tmp_path: Path) -> None:
    (tmp_path / "flagd.log").write_text("flagd: lost its flag file\n")
    services = [_marker_service(tmp_path)]
    signature = _signature_now(capsys, services, "flagd")
    touch = {"argv": ["touch", str(tmp_path / "flagd.up")], "become": False, "label": "touch flag"}
    result = run_module(capsys, {"services": services, "evidence": True, "hostnames": ["testhost"], "settle": 0,
                                 "remembered": [{"service": "flagd", "signature": "flagd:0000000000000000",
                                                 "commands": [{"argv": ["false"]}]},
                                                {"service": "flagd", "signature": signature, "commands": [touch]}]})
    assert (tmp_path / "flagd.up").exists()  # what ran: the file the fix creates
    row = result["services"][0]
    assert row["healthy"] is False and "evidence" in row  # the state found, before the fix
    ran = row["remembered"]
    assert ran["ran"] is True and ran["signature"] == signature and ran["stopped_at"] is None
    assert [r["rc"] for r in ran["results"]] == [0] and ran["results"][0]["label"] == "touch flag"
    assert ran["verify"]["healthy"] is True and "evidence" not in ran
    assert result["changed"] is False  # a health check reports; the heal action records the change


def test_a_remembered_fix_of_another_failure_does_not_run(capsys, tmp_path: Path) -> None:
    services = [_marker_service(tmp_path)]
    result = run_module(capsys, {"services": services, "evidence": True, "remembered": [
        {"service": "flagd", "signature": "flagd:0123456789abcdef",
         "commands": [{"argv": ["touch", str(tmp_path / "flagd.up")]}]}]})
    assert not (tmp_path / "flagd.up").exists()
    ran = result["services"][0]["remembered"]
    assert ran["ran"] is False and ran["signature"].startswith("flagd:") and ran["signature"] != "flagd:0123456789abcdef"


def test_a_failed_fix_is_checked_again_with_fresh_evidence(capsys, tmp_path: Path) -> None:
    services = [_marker_service(tmp_path)]
    signature = _signature_now(capsys, services, "flagd")
    result = run_module(capsys, {"services": services, "evidence": True, "settle": 0, "remembered": [
        {"service": "flagd", "signature": signature,
         "commands": [{"argv": ["false"]}, {"argv": ["touch", str(tmp_path / "flagd.up")]}]}],
        "hostnames": ["testhost"]})
    ran = result["services"][0]["remembered"]
    assert ran["ran"] is True and ran["stopped_at"] == 0 and ran["results"][1]["skipped"] is True
    assert not (tmp_path / "flagd.up").exists()
    assert ran["verify"]["healthy"] is False and ran["evidence"]["status"]  # gathered again after the fix


def test_no_fix_runs_in_check_mode_or_behind_a_failing_dependency(capsys, tmp_path: Path) -> None:
    base = _marker_service(tmp_path, "base")
    app = _marker_service(tmp_path, "app", depends_on=["base"])
    sig_app = _signature_now(capsys, [base, app], "app")
    sig_base = _signature_now(capsys, [base, app], "base")
    touch_app = {"argv": ["touch", str(tmp_path / "app.up")]}
    result = run_module(capsys, {"services": [base, app], "evidence": True, "hostnames": ["testhost"], "remembered": [
        {"service": "app", "signature": sig_app, "commands": [touch_app]}]})
    assert not (tmp_path / "app.up").exists() and "remembered" not in result["services"][1]
    assert result["services"][1]["blocked_by"] == ["base"]
    fix = {"service": "base", "signature": sig_base, "commands": [{"argv": ["touch", str(tmp_path / "base.up")]}]}
    checked = run_module(capsys, {"services": [base], "evidence": True, "hostnames": ["testhost"],
                                  "_ansible_check_mode": True, "remembered": [fix]})
    assert not (tmp_path / "base.up").exists() and "remembered" not in checked["services"][0]


@pytest.mark.parametrize("args, message", [
    ({"remembered": [{"service": "flagd", "signature": "s", "commands": [{"argv": []}]}]},
     "remembered[0]: commands[0].argv: a non-empty list of strings is needed"),
    ({"remembered": [{"service": "flagd", "signature": "s", "commands": [{"become": True}]}]}, "argv"),
    ({"settle": -1}, "settle must be at least 0, got -1"),
])
def test_bad_remembered_fixes_are_named(capsys, tmp_path: Path, args: dict, message: str) -> None:
    result = run_module(capsys, dict({"services": [_marker_service(tmp_path)], "evidence": True}, **args))
    assert result["failed"] is True and message in result["msg"], result["msg"]
    assert not (tmp_path / "flagd.up").exists()


def test_a_remembered_fix_takes_every_keep_option_the_plan_runner_takes():
    """A remembered fix runs through the same plan runner as execute_plan: a keep option one module
    knows and the other refuses fails every health check that carries such a fix (``meta`` did)."""
    from ansible_collections.sentinel.remediation.plugins.modules import execute_plan  # pylint: disable=import-outside-toplevel
    remembered = service_health.argument_spec()["remembered"]["options"]["commands"]["options"]
    planned = execute_plan.argument_spec()["commands"]["options"]
    assert remembered["keep"] == planned["keep"]
    for name, spec in remembered.items():
        assert planned.get(name) == spec, name


def test_a_remembered_fix_does_not_run_ahead_of_the_owner_s_note(capsys, tmp_path: Path, monkeypatch) -> None:
    from ansible_collections.sentinel.remediation.plugins.module_utils import operator_notes
    motd = tmp_path / "motd"
    monkeypatch.setattr(operator_notes, "NOTE_FILES", (str(motd),))
    monkeypatch.setattr(operator_notes, "NOTE_DIRS", ())
    motd.write_text("flagd is down ON PURPOSE (OPS-9): do not start flagd\n")
    services = [_marker_service(tmp_path)]
    signature = _signature_now(capsys, services, "flagd")
    fix = {"service": "flagd", "signature": signature, "commands": [{"argv": ["touch", str(tmp_path / "flagd.up")]}]}
    result = run_module(capsys, {"services": services, "evidence": True, "hostnames": ["testhost"], "settle": 0,
                                 "remembered": [fix]})
    row = result["services"][0]
    assert not (tmp_path / "flagd.up").exists() and "remembered" not in row
    assert row["evidence"]["operator_notes"] == {str(motd): "flagd is down ON PURPOSE (OPS-9): do not start flagd"}
    motd.write_text("flagd serves the flags of team OPS\n")  # a note that holds nothing: the fix runs
    fix["signature"] = _signature_now(capsys, services, "flagd")
    result = run_module(capsys, {"services": services, "evidence": True, "hostnames": ["testhost"], "settle": 0,
                                 "remembered": [fix]})
    assert (tmp_path / "flagd.up").exists() and result["services"][0]["remembered"]["ran"] is True
