# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which PIDs a file names, and whether its writer still runs, read from this machine's /proc."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import file_writers, host_probe


@pytest.mark.parametrize("text, bare, expected", [
    ("pgrestore-drill pid 41877 started 2026-11-27T23:10:02Z: restoring", False, [41877]),
    ("PID=512\nHOST=db1\n", False, [512]),
    ('{"pid": 4242, "started": "2026-11-27"}', False, [4242]),
    ("owner_pid: 77\n", False, [77]),
    ("MAINPID=9001", False, [9001]),
    ("locked by job (pid 31)", False, [31]),
    ("  1234\n", True, [1234]),
    ("75\n/var/lib/postgresql/15/main\n1795863736\n5432\n", True, [75]),
])
def test_the_pid_a_file_names_is_read_in_its_usual_dresses(text, bare, expected) -> None:
    assert file_writers.pids_named(text, bare=bare) == expected


@pytest.mark.parametrize("text, bare", [
    ("1234\n", False),                       # a bare number means a PID only in a PID or lock file
    ("rapid 55 and pidfile 12", False),     # words that merely contain "pid"
    ("version 15, port 5432", True),
    ("pid 0", False),                        # not a process
    ("pid 99999999", False),                 # beyond any pid_max
    ("Frozen by the DBA on call at 05:40 UTC; do not remove this file", True),
])
def test_text_that_names_no_pid_gives_none(text, bare) -> None:
    assert file_writers.pids_named(text, bare=bare) == []


def test_a_file_named_for_a_pid_or_lock_takes_a_bare_number() -> None:
    assert file_writers.holds_pid_by_name("/run/nginx.pid")
    assert file_writers.holds_pid_by_name("/var/lib/dpkg/lock-frontend")
    assert file_writers.holds_pid_by_name("/var/lock/LCK..ttyS0")
    assert not file_writers.holds_pid_by_name("/var/lib/postgresql/15/main/RESTORE_IN_PROGRESS")


@pytest.fixture()
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    deadline = time.monotonic() + 5
    # exec sets the name before the arguments: wait for both
    while (host_probe.process_record(proc.pid) or {}).get("cmdline") != "sleep 60" and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_marker_whose_writer_exited_is_stale(tmp_path) -> None:
    pid = _gone_pid()
    marker = tmp_path / "RESTORE_IN_PROGRESS"
    marker.write_text(f"pgrestore-drill pid {pid} started: restoring backup\n")
    found = file_writers.writer_state(str(marker))
    assert found["state"] == "gone"
    assert found["line"].startswith("writer gone: pid %d is not running" % pid)
    assert "stale" in found["line"]


def test_a_marker_whose_writer_runs_reports_it_alive_with_what_it_is(tmp_path, sleeper) -> None:
    marker = tmp_path / "guard"
    marker.write_text(f"pid {sleeper.pid}\n")
    found = file_writers.writer_state(str(marker))
    assert found["state"] == "alive"
    assert found["line"].startswith("writer alive: pid %d runs `sleep 60`" % sleeper.pid)
    judged = found["pids"][0]
    assert judged["comm"] == "sleep" and judged["user"] and judged["started"]


def test_a_pid_whose_process_started_after_the_file_was_written_is_a_reused_pid(tmp_path, sleeper) -> None:
    marker = tmp_path / "app.pid"
    marker.write_text(f"{sleeper.pid}\n")
    an_hour_ago = time.time() - 3600
    os.utime(marker, (an_hour_ago, an_hour_ago))   # written before the live process existed
    found = file_writers.writer_state(str(marker))
    assert found["state"] == "gone"
    assert found["pids"][0].get("reused") is True
    assert "the PID was reused, it is not the writer" in found["line"]
    assert "sleep 60" in found["line"]


def test_one_live_writer_among_several_named_keeps_the_file_meant(tmp_path, sleeper) -> None:
    marker = tmp_path / "state.json"
    marker.write_text('{"pid": %d, "parent_pid": %d}' % (_gone_pid(), sleeper.pid))
    assert file_writers.writer_state(str(marker))["state"] == "alive"


def test_a_process_holding_an_flock_on_the_file_is_a_live_writer(tmp_path) -> None:
    lock = tmp_path / "maintenance"
    lock.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('locked', flush=True); time.sleep(60)", str(lock)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"locked"
        assert holder.pid in file_writers.lock_holders(str(lock))
        found = file_writers.writer_state(str(lock))
        assert found["state"] == "alive" and "holds a lock on it now" in found["pids"][0]["why"]
    finally:
        holder.kill()
        holder.wait()
    assert file_writers.writer_state(str(lock)) is None   # empty and unlocked: it names no writer


def test_a_file_naming_no_process_has_no_writer_to_judge(tmp_path) -> None:
    flag = tmp_path / "FROZEN"
    flag.write_text("DBA-5120: frozen for the copy. Do not remove this file.\n")
    assert file_writers.writer_state(str(flag)) is None
    assert file_writers.writer_state(str(tmp_path / "absent")) is None


def test_a_pid_file_naming_a_reused_pid_is_reported_stale(tmp_path, sleeper) -> None:
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence
    pid_file = tmp_path / "svc.pid"
    pid_file.write_text(f"{sleeper.pid}\n")
    assert service_evidence.pid_file_text(str(pid_file)).startswith(f"pid {sleeper.pid} is running as user ")
    an_hour_ago = time.time() - 3600
    os.utime(pid_file, (an_hour_ago, an_hour_ago))
    text = service_evidence.pid_file_text(str(pid_file))
    assert text.startswith(f"stale PID file, writer gone: pid {sleeper.pid} now runs `sleep 60`"), text


def test_a_named_marker_file_gets_its_writer_line_in_named_paths(tmp_path) -> None:
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence
    pid = _gone_pid()
    marker = tmp_path / "RESTORE_IN_PROGRESS"
    marker.write_text(f"drill pid {pid} started\n")
    found = service_evidence.named_paths([("journal", f"skipped: ConditionPathExists=!{marker}")], None)
    assert found[str(marker)]["writer"].startswith(f"writer gone: pid {pid} is not running")
