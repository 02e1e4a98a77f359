"""execute_plan run in-process: real commands, real processes, real files on this machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.modules import execute_plan


def run_module(capsys: pytest.CaptureFixture, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        execute_plan.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture()
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    deadline = time.monotonic() + 5
    while (host_probe.read_stat(proc.pid) or {}).get("comm") != "sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture()
def no_systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "no-systemd"))


def flag_check(path: Path) -> dict:
    """A health check that passes once ``path`` exists."""
    return {"type": "command", "argv": ["test", "-e", str(path)]}


def test_commands_run_in_order_then_the_service_is_verified(capsys, tmp_path: Path, no_systemd) -> None:
    flag = tmp_path / "healthy"
    result = run_module(capsys, {
        "commands": [{"argv": ["mkdir", str(tmp_path / "d")], "become": True, "label": "mkdir"},
                     {"argv": ["touch", str(flag)], "become": True}],
        "verify": {"name": "svc", "checks": [flag_check(flag)]},
    })
    assert result["changed"] is True and result["stopped_at"] is None
    assert [r["rc"] for r in result["results"]] == [0, 0]
    assert result["results"][0]["label"] == "mkdir" and "label" not in result["results"][1]
    assert result["results"][0]["user"] == host_probe.user_name(os.geteuid())
    assert result["verify"]["healthy"] is True and result["verify"]["rounds"] == 1
    assert "evidence" not in result
    assert (tmp_path / "d").is_dir() and flag.exists()


def test_verify_settles_until_healthy(capsys, tmp_path: Path, no_systemd) -> None:
    flag = tmp_path / "later"
    # the command returns at once; the "service" becomes healthy two seconds later
    result = run_module(capsys, {
        "commands": [{"argv": [sys.executable, "-c",
                               f"import os, subprocess; subprocess.Popen(['sh', '-c', 'sleep 2; touch {flag}'],"
                               " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)"]}],
        "verify": {"name": "svc", "checks": [flag_check(flag)]}, "settle": 8,
    })
    assert result["verify"]["healthy"] is True
    assert 2 <= result["verify"]["rounds"] <= 6 and 1.5 <= result["verify"]["seconds"] < 8


def test_still_failing_brings_evidence_for_the_next_attempt(capsys, tmp_path: Path, no_systemd) -> None:
    log = tmp_path / "svc.log"
    log.write_text(f"fatal: cannot open {tmp_path}/data/db.sqlite: No such file or directory\n")
    result = run_module(capsys, {
        "commands": [{"argv": ["false"]}, {"argv": ["touch", str(tmp_path / "never")]}],
        "verify": {"name": "svc-exec-test", "checks": [flag_check(tmp_path / "never")], "logs": [str(log)],
                   "data_paths": [str(tmp_path / "data")]},
        "settle": 3, "evidence": True, "evidence_max_bytes": 8000,
    })
    assert result["stopped_at"] == 0 and result["results"][1]["skipped"] is True
    assert not (tmp_path / "never").exists()
    assert result["verify"]["healthy"] is False
    assert result["verify"]["error"].startswith("test -e ") and "exited 1, expected 0" in result["verify"]["error"]
    ev = result["evidence"]
    assert ev["named_paths"][f"{tmp_path}/data/db.sqlite"]["type"] == "missing"
    assert ev["paths"][str(tmp_path / "data")].startswith("missing")
    assert result["evidence_truncated"] in (True, False)
    assert result["changed"] is True  # `false` ran


def test_a_watched_dependency_is_judged_by_its_own_checks(capsys, tmp_path: Path, no_systemd) -> None:
    """An init system can call a dependency running while it does not work (Debian's
    postgresql umbrella); given its definition, the evidence says what its checks found."""
    db_up = tmp_path / "db-up"
    base = {"commands": [{"argv": ["true"]}], "settle": 0, "evidence": True,
            "verify": {"name": "app-exec-test", "checks": [flag_check(tmp_path / "app-up")], "depends_on": ["db"]}}
    with_checks = run_module(capsys, dict(base, depends=[{"name": "db", "checks": [flag_check(db_up)]},
                                                         {"name": "unrelated", "checks": [flag_check(db_up)]}]))
    said = with_checks["evidence"]["dependencies"]
    assert list(said) == ["db"] and said["db"].startswith("FAILING its own checks in this same check: test -e ")
    assert with_checks["evidence"]["dependency_up"] == {"db": False}
    db_up.touch()
    healthy = run_module(capsys, dict(base, depends=[{"name": "db", "checks": [flag_check(db_up)]}]))
    assert healthy["evidence"]["dependencies"] == {"db": "healthy: its own checks passed in this same check"}
    assert healthy["evidence"]["dependency_up"] == {"db": True}
    # without definitions, the init system's answer as before
    plain = run_module(capsys, base)
    assert "its own checks" not in plain["evidence"]["dependencies"]["db"]


def test_no_command_ran_means_no_settling(capsys, tmp_path: Path, sleeper, no_systemd) -> None:
    started = time.monotonic()
    result = run_module(capsys, {
        "commands": [{"argv": ["kill", str(sleeper.pid)], "become": True, "pids": [sleeper.pid]}],
        "expect_pids": {str(sleeper.pid): {"start": 1, "comm": "sleep"}},
        "verify": {"name": "svc", "checks": [flag_check(tmp_path / "nope")]}, "settle": 30,
    })
    assert time.monotonic() - started < 10
    assert result["changed"] is False and result["verify"]["rounds"] == 1
    assert result["results"][0]["skipped"] is True and "another process now" in result["results"][0]["reason"]
    assert sleeper.poll() is None


def test_a_pid_matching_the_evidence_is_signalled(capsys, sleeper) -> None:
    start = host_probe.read_stat(sleeper.pid)["start"]
    result = run_module(capsys, {
        "commands": [{"argv": ["kill", str(sleeper.pid)], "become": True, "pids": [sleeper.pid]}],
        "expect_pids": {str(sleeper.pid): {"start": start, "comm": "sleep"}},
    })
    assert result["results"][0]["rc"] == 0 and "verify" not in result
    assert sleeper.wait(timeout=5) != 0


def test_check_mode_runs_nothing(capsys, tmp_path: Path, sleeper) -> None:
    result = run_module(capsys, {
        "commands": [{"argv": ["touch", str(tmp_path / "x")]},
                     {"argv": ["kill", str(sleeper.pid)], "pids": [sleeper.pid]}],
        "verify": {"name": "svc"}, "_ansible_check_mode": True,
    })
    assert not (tmp_path / "x").exists() and sleeper.poll() is None
    assert result["results"] == [] and "verify" not in result
    first, second = result["would_run"]
    assert first["runnable"] is True and first["argv"] == ["touch", str(tmp_path / "x")]
    assert second["runnable"] is False and "no expected start time" in second["reason"]
    assert result["changed"] is True


def test_secrets_in_argv_and_output_are_redacted(capsys) -> None:
    result = run_module(capsys, {"commands": [{"argv": ["echo", "password=hunter2-in-argv"]}]})
    assert "hunter2-in-argv" not in json.dumps(result["results"])


@pytest.mark.parametrize("args, message", [
    ({"commands": []}, "at least one command"),
    ({"commands": [{"argv": []}]}, "commands[0].argv"),
    ({"commands": [{"argv": ["true"]}], "expect_pids": {"x": {"start": 1}}}, "key 'x' is not a PID"),
    ({"commands": [{"argv": ["true"]}], "command_timeout": 0}, "command_timeout must be at least 1, got 0"),
    ({"commands": [{"argv": ["true"]}], "output_max": 5}, "output_max must be at least 100"),
    ({"commands": [{"argv": ["true"]}], "unprivileged_user": "no-such-user-xyz"}, "no such user"),
    ({"commands": [{"argv": ["true"]}], "verify": {"checks": []}}, "name"),
    ({"commands": [{"argv": ["true"]}], "verify": {"name": "a", "checks": [{"type": "http", "url": "x"}]}},
     "a: checks[0]: url must be an http:// or https:// URL"),
    ({"commands": [{"argv": ["true"], "shell": True}]}, "shell"),
    ({"commands": [{"argv": ["true"]}], "depends": [{"name": "db", "checks": [{"type": "port", "port": 0}]}]},
     "depends[0]: db: checks[0]: a port check needs a non-empty port"),
])
def test_bad_arguments_are_named_and_nothing_runs(capsys, args: dict, message: str) -> None:
    result = run_module(capsys, args)
    assert result["failed"] is True and message in result["msg"], result["msg"]
    assert result.get("results", []) == []


def test_an_attempt_that_did_not_heal_is_put_back_before_the_module_answers(capsys, tmp_path: Path, no_systemd) -> None:
    conf, made = tmp_path / "app.conf", tmp_path / "made"
    conf.write_text("port = 80\n")
    result = run_module(capsys, {
        "commands": [{"argv": ["sed", "-i", "s/80/8080/", str(conf)], "become": True,
                      "keep": [{"path": str(conf), "tree": False}]},
                     {"argv": ["mkdir", str(made)], "become": True, "keep": [{"path": str(made)}]}],
        "verify": {"name": "svc", "checks": [flag_check(tmp_path / "never")]}, "settle": 0,
        "snapshot": {"incident": "svc-20261128T060000Z", "dir": str(tmp_path / "store")},
    })
    assert [r["rc"] for r in result["results"]] == [0, 0] and result["verify"]["healthy"] is False
    kept = result["snapshot"]
    assert kept["rolled_back"] is True and sorted(kept["restored"]) == sorted([str(conf), str(made)])
    assert conf.read_text() == "port = 80\n" and not made.exists()
    assert "+port = 8080" in next(c["diff"] for c in kept["changed"] if c["path"] == str(conf))
    assert "port = 80" not in json.dumps(kept["changed"][0]["before"])  # summaries, never content


def test_a_healed_attempt_stays_and_is_recorded_for_a_later_undo(capsys, tmp_path: Path, no_systemd) -> None:
    flag = tmp_path / "healthy"
    result = run_module(capsys, {
        "commands": [{"argv": ["touch", str(flag)], "become": True, "keep": [{"path": str(flag)}]}],
        "verify": {"name": "svc", "checks": [flag_check(flag)]},
        "snapshot": {"incident": "svc-20261128T060000Z", "attempt": 1, "dir": str(tmp_path / "store")},
    })
    assert result["snapshot"]["rolled_back"] is False and flag.exists()
    assert [c["path"] for c in result["snapshot"]["changed"]] == [str(flag)]
    assert (tmp_path / "store" / "undo" / "svc-20261128T060000Z.json").is_file()


def test_a_command_whose_path_cannot_be_kept_waits_for_a_human(capsys, tmp_path: Path, no_systemd) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    target = tmp_path / "f"
    result = run_module(capsys, {
        "commands": [{"argv": ["touch", str(target)], "become": True, "keep": [{"path": str(target)}]}],
        "snapshot": {"incident": "svc-1", "dir": str(blocker / "store")},
    })
    assert result["results"][0]["skipped"] is True and "could not be undone" in result["results"][0]["reason"]
    assert not target.exists() and result["snapshot"]["error"]


def test_a_pid_read_in_a_commands_output_is_signalled_when_it_is_the_services_process(
        capsys, tmp_path: Path, sleeper, no_systemd) -> None:
    """No start time is known for a PID the model read in `ps` output: the host checks it is
    one of the service's processes (here `sleep`) just before the signal."""
    result = run_module(capsys, {
        "commands": [{"argv": ["kill", str(sleeper.pid)], "become": True, "pids": [sleeper.pid]}],
        "expect_pids": {str(sleeper.pid): {"seen": True}},
        "verify": {"name": "sleepy", "processes": ["sleep"], "checks": [flag_check(tmp_path / "up")]}, "settle": 0,
    })
    assert result["results"][0]["rc"] == 0, result["results"][0]
    assert sleeper.wait(timeout=5) != 0


def test_a_pid_read_in_output_that_is_another_programs_is_not_signalled(
        capsys, tmp_path: Path, sleeper, no_systemd) -> None:
    result = run_module(capsys, {
        "commands": [{"argv": ["kill", str(sleeper.pid)], "become": True, "pids": [sleeper.pid]}],
        "expect_pids": {str(sleeper.pid): {"seen": True}},
        "verify": {"name": "nginx", "processes": ["nginx"], "checks": [flag_check(tmp_path / "up")]}, "settle": 0,
    })
    skipped = result["results"][0]
    assert skipped["skipped"] is True and "not one of nginx's processes now" in skipped["reason"], skipped
    assert sleeper.poll() is None
    # without a service to check it against, a PID from text is never signalled
    bare = run_module(capsys, {"commands": [{"argv": ["kill", str(sleeper.pid)], "pids": [sleeper.pid]}],
                               "expect_pids": {str(sleeper.pid): {"seen": True}}})
    assert bare["results"][0]["skipped"] is True and "no service is given" in bare["results"][0]["reason"]
    assert sleeper.poll() is None
