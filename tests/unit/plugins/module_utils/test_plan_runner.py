"""plan_runner: who runs each command, which PIDs may be signalled, and what comes back.

Real processes and real privilege changes: the unit tests run as root (the lab and CI
containers do), so dropping to `nobody` is tested for real; tests needing root skip otherwise.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe, plan_runner

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")


def nobody() -> plan_runner.Identity:
    return plan_runner.Identity.of_name("nobody")


@pytest.fixture()
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    deadline = time.monotonic() + 5
    while (host_probe.read_stat(proc.pid) or {}).get("comm") != "sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


# --- identities ----------------------------------------------------------------------------

def test_the_invoking_user_comes_from_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    entry = pwd.getpwnam("nobody")
    who = plan_runner.invoking_identity({"SUDO_UID": str(entry.pw_uid), "SUDO_GID": str(entry.pw_gid),
                                         "SUDO_USER": "nobody"})
    assert (who.uid, who.gid, who.name, who.home) == (entry.pw_uid, entry.pw_gid, "nobody", entry.pw_dir)
    # without sudo's variables, the module's own user: a connection as root stays root
    monkeypatch.setattr(os, "getegid", lambda: 0)
    assert plan_runner.invoking_identity({}).uid == 0
    # a named account wins
    assert plan_runner.invoking_identity({"SUDO_UID": "0"}, unprivileged_user="nobody").name == "nobody"
    with pytest.raises(plan_runner.PlanError, match="no-such-user-xyz"):
        plan_runner.invoking_identity({}, unprivileged_user="no-such-user-xyz")


def test_commands_needing_root_are_refused_when_the_module_is_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    me = plan_runner.Identity(1000, 1000, "sentinel")
    commands = plan_runner.normalise_commands([{"argv": ["true"], "become": True}, {"argv": ["true"]}])
    (root, problem), (mine, none) = plan_runner.plan_identities(commands, me)
    assert root is None and problem == "needs root, but the module runs as sentinel (uid 1000): run the task with become"
    assert mine is me and none is None
    # another unprivileged account cannot be reached without root either
    other = plan_runner.Identity(1001, 1001, "other")
    assert plan_runner.plan_identities(commands[1:], other)[0][1].startswith("cannot run as other")


@needs_root
def test_a_command_without_become_runs_as_the_invoking_user_with_its_groups() -> None:
    who = nobody()
    out = plan_runner.run_as(["sh", "-c", "id -u; id -g; id -G; echo $HOME $USER; pwd; echo ${SUDO_UID:-none}"],
                             who, timeout=10, output_max=1000)
    uid, gid, groups, env, cwd, sudo = out["stdout"].splitlines()
    assert (int(uid), int(gid)) == (who.uid, who.gid)
    assert set(int(g) for g in groups.split()) == set(os.getgrouplist("nobody", who.gid))  # root's groups dropped
    assert env == f"{who.home} nobody" and cwd == "/" and sudo == "none"
    # bytes on disk: a file it creates belongs to nobody
    shared = Path(tempfile.mkdtemp(prefix="plan-runner-"))  # pytest's tmp_path is private to root
    try:
        shared.chmod(0o777)
        target = shared / "made"
        assert plan_runner.run_as(["touch", str(target)], who, 10, 1000)["rc"] == 0
        assert target.stat().st_uid == who.uid
    finally:
        shutil.rmtree(shared)


@needs_root
def test_a_dropped_user_cannot_do_what_needs_root(tmp_path: Path) -> None:
    target = tmp_path / "root-only"
    target.write_text("x")
    target.chmod(0o600)
    result = plan_runner.run_as(["cat", str(target)], nobody(), 10, 1000)
    assert result["rc"] == 1 and "Permission denied" in result["stderr"]


# --- PIDs ----------------------------------------------------------------------------------

def test_a_pid_is_signalled_only_when_it_is_the_process_the_evidence_showed(sleeper) -> None:
    seen = host_probe.read_stat(sleeper.pid)
    right = {sleeper.pid: {"start": seen["start"], "comm": "sleep"}}
    assert plan_runner.pid_problem([sleeper.pid], right) is None
    assert plan_runner.pid_problem([sleeper.pid], {sleeper.pid: {"start": seen["start"], "comm": None}}) is None
    later = plan_runner.pid_problem([sleeper.pid], {sleeper.pid: {"start": seen["start"] + 5, "comm": "sleep"}})
    assert later == (f"PID {sleeper.pid} is another process now (sleep started at tick {seen['start']},"
                     f" the evidence showed sleep started at tick {seen['start'] + 5})")
    renamed = plan_runner.pid_problem([sleeper.pid], {sleeper.pid: {"start": seen["start"], "comm": "nginx"}})
    assert renamed == f"PID {sleeper.pid} runs sleep, the evidence showed nginx"
    blind = plan_runner.pid_problem([sleeper.pid], {})
    assert "no expected start time" in blind and "not signalled blindly" in blind
    assert plan_runner.pid_problem([1], {1: {"start": 0, "comm": "init"}}).startswith("PID 1 is never signalled")
    assert plan_runner.pid_problem([-1], {}).startswith("PID -1 is never signalled")


def test_a_vanished_pid_is_not_signalled() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    problem = plan_runner.pid_problem([gone.pid], {gone.pid: {"start": 1, "comm": "true"}})
    assert problem == f"PID {gone.pid} is gone (it was true started at tick 1): nothing to signal"


def test_run_plan_skips_a_kill_of_a_reused_pid_and_the_process_lives(sleeper) -> None:
    seen = host_probe.read_stat(sleeper.pid)
    me = plan_runner.invoking_identity({})
    commands = plan_runner.normalise_commands([
        {"argv": ["kill", "-TERM", str(sleeper.pid)], "pids": [sleeper.pid]},
        {"argv": ["true"]},
    ])
    expect = {sleeper.pid: {"start": seen["start"] - 1, "comm": "sleep"}}
    outcome = plan_runner.run_plan(commands, expect, me)
    first, second = outcome["results"]
    assert first["skipped"] is True and "another process now" in first["reason"] and first["rc"] is None
    assert second["skipped"] is True and second["reason"] == "not run: command 0 failed and stop_on_failure is true"
    assert outcome["stopped_at"] == 0 and outcome["ran"] == 0
    assert sleeper.poll() is None  # still alive: never signalled
    # the right identity: it runs, and the process is gone
    outcome = plan_runner.run_plan(commands, {sleeper.pid: {"start": seen["start"], "comm": "sleep"}}, me)
    assert [r["rc"] for r in outcome["results"]] == [0, 0] and outcome["stopped_at"] is None
    assert sleeper.wait(timeout=5) == -signal.SIGTERM


def test_a_pid_a_read_showed_is_signalled_later_only_while_it_is_that_very_process(sleeper) -> None:
    """A read's output names a PID (ps, pgrep -a): the host records when that process started, with
    the output. A plan approved later that signals the PID runs only while it is that process: the
    service's process now (``belongs``) is not enough, a reused PID is another process."""
    me = plan_runner.invoking_identity({})
    read = plan_runner.run_plan(plan_runner.normalise_commands(
        [{"argv": ["sh", "-c", f"echo 'sleep {sleeper.pid} 10:04 /bin/sleep'"]}]), {}, me)
    [result] = read["results"]
    started = host_probe.read_stat(sleeper.pid)["start"]
    assert result["pid_starts"] == {str(sleeper.pid): started}   # 10:04 is a time, not a PID
    kill = plan_runner.normalise_commands([{"argv": ["kill", "-TERM", str(sleeper.pid)], "pids": [sleeper.pid]}])

    def belongs(_pid):  # the service's process now, as far as that check can tell
        return None
    reused = plan_runner.normalise_expectations({str(sleeper.pid): {"seen": True, "start": started - 1}})
    outcome = plan_runner.run_plan(kill, reused, me, belongs=belongs)
    assert outcome["results"][0]["skipped"] and "another process now" in outcome["results"][0]["reason"]
    assert sleeper.poll() is None  # never signalled
    same = plan_runner.normalise_expectations({str(sleeper.pid): {"seen": True, "start": started}})
    assert plan_runner.run_plan(kill, same, me, belongs=belongs)["results"][0]["rc"] == 0
    assert sleeper.wait(timeout=5) == -signal.SIGTERM


def test_without_stop_on_failure_every_command_runs() -> None:
    me = plan_runner.invoking_identity({})
    commands = plan_runner.normalise_commands([{"argv": ["false"]}, {"argv": ["no-such-tool-xyz"]},
                                               {"argv": ["echo", "done"], "label": "echo done"}])
    outcome = plan_runner.run_plan(commands, {}, me, stop_on_failure=False)
    rcs = [r["rc"] for r in outcome["results"]]
    assert rcs == [1, 127, 0] and outcome["stopped_at"] == 0 and outcome["ran"] == 3
    assert outcome["results"][1]["stderr"] == "no-such-tool-xyz: command not found"
    assert outcome["results"][2]["stdout"] == "done\n" and outcome["results"][2]["label"] == "echo done"


# --- running -------------------------------------------------------------------------------

def test_argv_runs_without_a_shell() -> None:
    me = plan_runner.invoking_identity({})
    result = plan_runner.run_as(["echo", "$(id)", ";", "rm", "-rf", "/nonexistent-*"], me, 10, 1000)
    assert result["rc"] == 0 and result["stdout"] == "$(id) ; rm -rf /nonexistent-*\n"


def test_output_keeps_the_tail_redacted_and_bounded() -> None:
    me = plan_runner.invoking_identity({})
    script = ("import sys\nfor n in range(5000): print('line', n)\n"
              "print('CONFIG SET requirepass s3cr3t-at-the-end')\nsys.stderr.write('E' * 100000)\n")
    result = plan_runner.run_as([sys.executable, "-c", script], me, 20, 300)
    assert host_probe.byte_len(result["stdout"]) <= 300 and host_probe.byte_len(result["stderr"]) <= 300
    assert "line 4999" in result["stdout"] and "s3cr3t-at-the-end" not in result["stdout"]
    assert "requirepass [REDACTED" in result["stdout"]


def test_a_command_past_its_timeout_is_killed_with_its_children() -> None:
    me = plan_runner.invoking_identity({})
    started = time.monotonic()
    result = plan_runner.run_as(["sh", "-c", "echo started; sleep 30 & sleep 30"], me, timeout=1, output_max=1000)
    assert time.monotonic() - started < 10
    assert result["rc"] == 124 and result["reason"] == "timed out after 1s and was killed"
    assert result["stdout"] == "started\n"


def test_a_daemon_keeping_the_pipes_open_does_not_hold_the_plan(tmp_path: Path) -> None:
    me = plan_runner.invoking_identity({})
    pid_file = tmp_path / "daemon.pid"
    started = time.monotonic()
    # the shell exits at once; the background sleep keeps stdout open
    result = plan_runner.run_as(["sh", "-c", f"sleep 20 & echo $! > {pid_file}; echo ok"], me, 15, 1000)
    try:
        assert result["rc"] == 0 and result["stdout"] == "ok\n"
        assert time.monotonic() - started < 5
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_the_environment_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_SECRET_TOKEN", "leak-me")
    me = plan_runner.invoking_identity({})
    result = plan_runner.run_as(["env"], me, 10, 4000)
    names = sorted(line.split("=", 1)[0] for line in result["stdout"].splitlines())
    assert names == sorted(["PATH", "HOME", "USER", "LOGNAME", "LC_ALL", "LANG", "TERM", "PAGER", "SYSTEMD_PAGER",
                            "SYSTEMD_COLORS"])
    assert "/usr/sbin" in dict(line.split("=", 1) for line in result["stdout"].splitlines())["PATH"]


# --- arguments and check mode ----------------------------------------------------------------

@pytest.mark.parametrize("commands, message", [
    ([], "at least one command"),
    ([{"argv": []}], "commands[0].argv"),
    ([{"argv": ["true"]}, {"argv": ["kill", "x"], "pids": ["x"]}], "commands[1].pids"),
])
def test_bad_commands_are_named(commands: list, message: str) -> None:
    with pytest.raises(plan_runner.PlanError) as caught:
        plan_runner.normalise_commands(commands)
    assert message in str(caught.value)


@pytest.mark.parametrize("expect, message", [
    ({"abc": {"start": 1}}, "key 'abc' is not a PID"),
    ({"12": {"comm": "x"}}, "expect_pids[12]: needs start"),
    ({"12": {"start": "soon"}}, "expect_pids[12].start"),
    ({"12": {"start": 1, "comm": 5}}, "expect_pids[12].comm"),
])
def test_bad_expectations_are_named(expect: dict, message: str) -> None:
    with pytest.raises(plan_runner.PlanError) as caught:
        plan_runner.normalise_expectations(expect)
    assert message in str(caught.value)


def test_expectations_from_yaml_have_string_keys() -> None:
    assert plan_runner.normalise_expectations({"42": {"start": "77", "comm": "nginx"}}) == {
        42: {"start": 77, "comm": "nginx"}}


def test_preview_runs_nothing_and_says_what_would_be_refused(sleeper, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = host_probe.read_stat(sleeper.pid)
    me = plan_runner.invoking_identity({})
    commands = plan_runner.normalise_commands([
        {"argv": ["kill", str(sleeper.pid)], "become": True, "pids": [sleeper.pid]},
        {"argv": ["kill", str(sleeper.pid)], "pids": [sleeper.pid], "label": "second"},
    ])
    would = plan_runner.preview(commands, {sleeper.pid: {"start": seen["start"], "comm": "sleep"}}, me)
    assert sleeper.poll() is None
    if os.geteuid() == 0:
        assert would[0] == {"argv": ["kill", str(sleeper.pid)], "become": True, "user": "root", "pids": [sleeper.pid],
                            "runnable": True, "reason": ""}
    assert would[1]["label"] == "second" and would[1]["runnable"] is True
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    refused = plan_runner.preview(commands, {}, plan_runner.Identity(4242, 4242, "someone"))
    assert refused[0]["runnable"] is False and refused[0]["reason"].startswith("needs root")
    assert refused[1]["reason"].startswith(f"PID {sleeper.pid} has no expected start time")


def test_long_output_keeps_its_first_and_last_lines():
    import subprocess as sp  # pylint: disable=import-outside-toplevel

    script = "for i in $(seq 1 5000); do echo line-$i; done"
    proc = sp.Popen(["sh", "-c", script], stdout=sp.PIPE, stderr=sp.PIPE)
    out, err, timed_out = plan_runner._read_tails(proc, 10, 2000)  # pylint: disable=protected-access
    proc.wait()
    text = out.decode()
    assert text.startswith("line-1\nline-2\n") and text.rstrip().endswith("line-5000")
    assert "bytes cut ...]" in text and not timed_out and err == b""
    proc = sp.Popen(["sh", "-c", "echo short"], stdout=sp.PIPE, stderr=sp.PIPE)
    out, _err, _t = plan_runner._read_tails(proc, 10, 2000)  # pylint: disable=protected-access
    proc.wait()
    assert out == b"short\n"


def test_a_seen_pid_needs_no_start_time_and_is_checked_by_the_service_membership() -> None:
    expect = plan_runner.normalise_expectations({"5151": {"seen": True}})
    assert expect == {5151: {"start": None, "comm": None, "seen": True}}
    assert plan_runner.pid_problem([5151], expect, belongs=lambda pid: None) is None
    assert plan_runner.pid_problem([5151], expect, belongs=lambda pid: "PID 5151 runs sleep") == "PID 5151 runs sleep"
    assert "no service is given" in plan_runner.pid_problem([5151], expect)
