"""evidence run in-process against real files, processes and sockets on this machine."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe, service_evidence
from ansible_collections.sentinel.remediation.plugins.modules import evidence


def run_module(capsys: pytest.CaptureFixture, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        evidence.main()
    return json.loads(capsys.readouterr().out)


def started(proc: subprocess.Popen, program: str) -> subprocess.Popen:
    """Wait for the child's exec: just after fork, /proc still shows the parent's name."""
    deadline = time.monotonic() + 5
    while Path(f"/proc/{proc.pid}/comm").read_text().strip() != program and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


def texts_of(value) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts_of(v)]
    return [value]


def total_bytes(evidence: dict) -> int:
    """What the budget counts: texts as UTF-8, structured sections as JSON."""
    total = 0
    for key, value in evidence.items():
        if key == "init":
            continue
        if isinstance(value, (str, dict)) and all(isinstance(t, str) for t in texts_of(value)):
            total += sum(host_probe.byte_len(t) for t in texts_of(value))
        else:
            total += service_evidence.json_len(value)
    return total


@pytest.fixture()
def fake_init(no_systemd: Path) -> Path:
    return no_systemd


def test_log_tails_are_redacted_on_the_host(capsys, tmp_path: Path, fake_init) -> None:
    log = tmp_path / "redis-server.log"
    log.write_text("".join(f"1:M 22 Nov 10:00:{i:02d} * line {i}\n" for i in range(50))
                   + "1:M 22 Nov 10:01:00 # CONFIG SET requirepass s3cr3t-planted\n"
                   + "DATABASE_URL=postgres://app:hunter2@db/app\n")
    result = run_module(capsys, {"service": "redis-server", "logs": [str(log)], "log_lines": 5})
    tail = result["evidence"]["logs"][str(log)]
    out = json.dumps(result["evidence"])
    assert "s3cr3t-planted" not in out and "hunter2" not in out
    assert "requirepass [REDACTED:requirepass]" in tail
    assert tail.splitlines()[0].endswith("line 47")
    assert len(tail.splitlines()) == 5


def test_sections_and_status(capsys, tmp_path: Path, fake_init) -> None:
    # A service name no process on this machine has: lab containers' nginx processes are
    # visible from the host and would fill the processes section.
    result = run_module(capsys, {"service": "sentinel-unit-svc"})
    assert result["changed"] is False and result["truncated"] is False
    ev = result["evidence"]
    assert ev["status"] == "$ service sentinel-unit-svc status\nrc 3\nsentinel-unit-svc is not running."
    assert set(ev) == {"init", "collected_at", "status", "processes", "service_pids", "oom"}  # no logs, ports, paths... asked for
    assert ev["init"] == "sysv" and ev["processes"] == [] and ev["service_pids"] == []
    assert ev["oom"].startswith(("unavailable: ", "no OOM kill in ", "OOM kills in "))


def test_config_test_output_and_rc(capsys, fake_init) -> None:
    script = "import sys; print('syntax is ok'); sys.stderr.write('open() \"/var/log/x/error.log\" failed\\n'); sys.exit(1)"
    result = run_module(capsys, {"service": "nginx", "config_test": [sys.executable, "-c", script]})
    text = result["evidence"]["config_test"]
    assert "\nrc 1\n" in text
    assert 'open() "/var/log/x/error.log" failed' in text and "syntax is ok" in text


def test_listeners_name_their_holder(capsys, fake_init) -> None:
    with socket.socket() as server, socket.socket() as probe:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # bound, never listening
        result = run_module(capsys, {"service": "web", "ports": [port, closed]})
    me = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    lines = result["evidence"]["listeners"].splitlines()
    assert lines[0].startswith(f"127.0.0.1:{port} held by {me} (pid ")
    assert str(os.getpid()) in lines[0]
    assert lines[1] == f"port {closed}: nothing listening"


def test_paths_report_owner_mode_and_filesystem(capsys, tmp_path: Path, fake_init) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o700)
    result = run_module(capsys, {"service": "redis", "paths": [str(data), str(tmp_path / "gone")]})
    paths = result["evidence"]["paths"]
    assert "mode 0700" in paths[str(data)] and "inodes" in paths[str(data)]
    assert paths[str(tmp_path / "gone")].startswith("missing (nearest existing parent")


def test_pid_files_alive_stale_and_garbage(capsys, tmp_path: Path, fake_init) -> None:
    sleeper = started(subprocess.Popen(["sleep", "30"]), "sleep")
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        (tmp_path / "alive.pid").write_text(f"{sleeper.pid}\n")
        (tmp_path / "stale.pid").write_text(str(dead.pid))
        (tmp_path / "junk.pid").write_text("not-a-pid")
        files = [str(tmp_path / n) for n in ("alive.pid", "stale.pid", "junk.pid", "none.pid")]
        result = run_module(capsys, {"service": "x", "pid_files": files})
    finally:
        sleeper.kill()
        sleeper.wait()
    facts = result["evidence"]["pid_files"]
    assert facts[files[0]].startswith(f"pid {sleeper.pid} is running as user ") and facts[files[0]].endswith("sleep 30")
    assert facts[files[1]] == f"pid {dead.pid} is not running (stale PID file)"
    assert facts[files[2]] == "first line 'not-a-pid' is not a PID"
    assert facts[files[3]] == "missing"


def test_a_pid_file_with_more_lines_is_read_by_its_first(capsys, tmp_path):
    # PostgreSQL's postmaster.pid: the PID, then the data directory, start time, port, socket dir...
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "postmaster.pid").write_text(f"{dead.pid}\n/var/lib/postgresql/15/main\n1764139754\n5432\n"
                                             "/var/run/postgresql\n*\n  5432001         0\nready   \n")
    (tmp_path / "empty.pid").write_text("")
    files = [str(tmp_path / "postmaster.pid"), str(tmp_path / "empty.pid")]
    facts = run_module(capsys, {"service": "x", "pid_files": files})["evidence"]["pid_files"]
    assert facts[files[0]] == f"pid {dead.pid} is not running (stale PID file)"
    assert facts[files[1]] == "empty (no PID)"


def named_program(tmp_path: Path, target: str = "sleep") -> str:
    """A program with a name nothing else on this machine has (lab containers' processes are
    visible from here): a symlink, whose name becomes the process's comm."""
    name = "ev" + uuid.uuid4().hex[:10]
    (tmp_path / name).symlink_to(shutil.which(target))
    return str(tmp_path / name)


def test_processes_of_the_service_are_listed_with_state(capsys, tmp_path: Path, fake_init) -> None:
    program = named_program(tmp_path)
    name = Path(program).name
    sleeper = started(subprocess.Popen([program, "31.5"]), name)
    os.kill(sleeper.pid, signal.SIGSTOP)
    try:
        result = run_module(capsys, {"name": name})  # the alias of service
    finally:
        sleeper.kill()
        sleeper.wait()
    ev = result["evidence"]
    assert ev["service_pids"] == [sleeper.pid]
    (record,) = ev["processes"]
    assert record["pid"] == sleeper.pid and record["ppid"] == os.getpid()
    assert record["comm"] == name and record["cmdline"] == f"{program} 31.5"
    assert record["state"] == "stopped" and record["reasons"] == [f"name {name}"]
    assert isinstance(record["start"], int) and record["started"].endswith("+00:00")


def test_every_key_of_a_service_definition_reaches_the_module(capsys, tmp_path: Path, fake_init) -> None:
    program = named_program(tmp_path)
    pidfile_proc = started(subprocess.Popen(["sleep", "33.5"]), "sleep")
    (tmp_path / "svc.pid").write_text(str(pidfile_proc.pid))
    for sub in ("conf", "data", "run", "logs", "other"):
        (tmp_path / sub).mkdir()
    (tmp_path / "conf" / "svc.conf").write_text("a\nb\nc\n")
    (tmp_path / "logs" / "svc.log").write_text("started\n")
    try:
        result = run_module(capsys, {
            "service": "svc-unit-test", "units": ["svc-unit-test.service"], "processes": [Path(program).name],
            "user": "nobody", "config_paths": [str(tmp_path / "conf")], "data_paths": [str(tmp_path / "data")],
            "runtime_paths": [str(tmp_path / "run")], "log_paths": [str(tmp_path / "logs")],
            "logs": [str(tmp_path / "logs" / "svc.log")], "ports": [1], "paths": [str(tmp_path / "other")],
            "config_test": [sys.executable, "-c", f"print('error in {tmp_path}/conf/svc.conf:2')"],
            "pid_files": [str(tmp_path / "svc.pid")], "depends_on": ["db"],
            "checks": [{"type": "command", "argv": ["svc-cli", "ping"]}],
            "error": f"cannot open {tmp_path}/run/svc.sock",
        })
    finally:
        pidfile_proc.kill()
        pidfile_proc.wait()
    ev = result["evidence"]
    # pid_files: the PID it names is one of the service's processes
    assert ev["service_pids"] == [pidfile_proc.pid]
    assert ev["processes"][0]["reasons"] == [f"pid file {tmp_path}/svc.pid"]
    assert ev["pid_files"][f"{tmp_path}/svc.pid"].startswith(f"pid {pidfile_proc.pid} is running")
    # config_paths, data_paths, runtime_paths, log_paths, paths: described, with the user's access
    assert list(ev["paths"]) == [str(tmp_path / d) for d in ("conf", "data", "run", "logs", "other")]
    assert all("; user nobody may " in line for line in ev["paths"].values())
    assert ev["config_context"][0]["line"] == 2  # the config test named a line under config_paths
    assert ev["named_paths"][f"{tmp_path}/run/svc.sock"] == {
        "type": "missing", "existing_parent": f"{tmp_path}/run", "parent_mode": "0755", "parent_owner": "root:root",
        "parent_user_access": "r-x", "named_in": "error"}
    assert ev["listeners"] == "port 1: nothing listening"
    assert ev["logs"] == {f"{tmp_path}/logs/svc.log": "started"}
    assert ev["dependencies"] == {"db": "not running (rc 3): db is not running."}
    assert ev["dependency_up"] == {"db": False}
    assert {"svc-cli", Path(program).name, "rm", "mv", "ln"} <= set(result["tools"]["absent"] + result["tools"]["present"])


def test_globs_and_missing_logs(capsys, tmp_path: Path, fake_init) -> None:
    (tmp_path / "a.log").write_text("alpha\n")
    (tmp_path / "b.log").write_text("")
    (tmp_path / "old.log.1.gz").write_bytes(b"\x1f\x8b binary")
    result = run_module(capsys, {"service": "x", "logs": [str(tmp_path / "*.log*"), "/no/such.log"]})
    logs = result["evidence"]["logs"]
    assert logs == {str(tmp_path / "a.log"): "alpha", str(tmp_path / "b.log"): "(empty)", "/no/such.log": "missing"}


def test_everything_stays_within_max_bytes(capsys, tmp_path: Path, fake_init) -> None:
    logs = []
    for index in range(4):
        path = tmp_path / f"big{index}.log"
        path.write_text("".join(f"{index} entry {n} " + "x" * 80 + "\n" for n in range(400)))
        logs.append(str(path))
    result = run_module(capsys, {"service": "nginx", "logs": logs, "log_lines": 200, "max_bytes": 3000,
                                 "paths": [str(tmp_path)], "ports": [1]})
    assert result["truncated"] is True
    assert total_bytes(result["evidence"]) <= 3000
    assert result["evidence"]["status"].startswith("$ service nginx status")  # short sections first
    # every log got a share, and each share ends with its newest line
    for path in logs:
        assert result["evidence"]["logs"][path].rstrip().endswith("x" * 10)
        assert "entry 399" in result["evidence"]["logs"][path]


def test_tools_report_present_and_absent(capsys, fake_init) -> None:
    result = run_module(capsys, {"service": "x", "tools": ["sh", "service", "no-such-tool-xyz"]})
    assert result["tools"] == {"present": ["service", "sh"], "absent": ["no-such-tool-xyz"]}
    result = run_module(capsys, {"service": "x"})
    assert "lsof" in result["tools"]["present"] + result["tools"]["absent"]


def test_check_mode_collects_too(capsys, fake_init) -> None:
    result = run_module(capsys, {"service": "nginx", "_ansible_check_mode": True})
    assert result["changed"] is False and "status" in result["evidence"]


@pytest.mark.parametrize("args, message", [
    ({"max_bytes": 10}, "max_bytes"),
    ({"log_lines": -1}, "log_lines"),
    ({"ports": [0]}, "ports must be between 1 and 65535"),
    ({"data_paths": ["relative/dir"]}, "data_paths must be absolute paths"),
    ({"checks": [{"type": "process", "pattern": "("}]}, "bad process pattern"),
    ({"timeout": 0}, "timeout must be positive"),
    ({"colour": "red"}, "colour"),
])
def test_bad_arguments_fail(capsys, args: dict, message: str) -> None:
    result = run_module(capsys, dict(service="nginx", **args))
    assert result["failed"] is True and message in result["msg"]
