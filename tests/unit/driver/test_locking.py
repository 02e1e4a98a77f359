"""Per-host locks between two driver processes."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sentinel_remediate.locking import HostLocks, LockTimeout, holder_of, lock_path

DRIVER = Path(__file__).resolve().parents[3] / "driver"


def _holder(lock_dir: Path, hosts: list[str], seconds: float) -> subprocess.Popen:
    """Another process that takes the locks of `hosts`, says so, and keeps them `seconds`."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(DRIVER)!r})
        from pathlib import Path
        from sentinel_remediate.locking import HostLocks
        locks = HostLocks(Path({str(lock_dir)!r}), "run-other").acquire({hosts!r})
        print("held", flush=True)
        time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_process_skips_busy_hosts_and_names_the_holder(tmp_path: Path) -> None:
    other = _holder(tmp_path, ["lab01"], 30)
    try:
        locks = HostLocks(tmp_path, "run-me").acquire(["lab01", "lab02"])
        assert sorted(locks.held) == ["lab02"]
        assert locks.busy["lab01"]["pid"] == other.pid
        assert locks.busy["lab01"]["ident"] == "run-other"
        locks.release()
    finally:
        other.kill()
        other.wait()


def test_wait_times_out_then_succeeds_once_the_holder_is_gone(tmp_path: Path) -> None:
    other = _holder(tmp_path, ["lab01"], 30)
    waited = []
    with pytest.raises(LockTimeout, match="still locked by pid"):
        HostLocks(tmp_path, "run-me").acquire(["lab01"], wait=True, timeout=0.6, poll=0.1,
                                              on_wait=lambda h, info: waited.append(h))
    assert waited == ["lab01"]
    other.kill()  # a killed holder leaves no stale lock: flock dies with the process
    other.wait()
    with HostLocks(tmp_path, "run-me").acquire(["lab01"], wait=True, timeout=5, poll=0.1) as locks:
        assert list(locks.held) == ["lab01"]
        assert holder_of(tmp_path, "lab01")["ident"] == "run-me"


def test_wait_blocks_until_released(tmp_path: Path) -> None:
    other = _holder(tmp_path, ["lab01"], 1.0)
    start = time.monotonic()
    with HostLocks(tmp_path, "run-me").acquire(["lab01"], wait=True, timeout=20, poll=0.1) as locks:
        assert list(locks.held) == ["lab01"]
    assert time.monotonic() - start >= 0.5
    other.wait()


def test_partial_acquire_is_rolled_back_on_timeout(tmp_path: Path) -> None:
    other = _holder(tmp_path, ["lab02"], 30)
    try:
        with pytest.raises(LockTimeout):
            HostLocks(tmp_path, "run-me").acquire(["lab01", "lab02"], wait=True, timeout=0.3, poll=0.1)
        # lab01 was taken first (sorted order) and must have been released again.
        with HostLocks(tmp_path, "run-3").acquire(["lab01"]) as locks:
            assert list(locks.held) == ["lab01"]
    finally:
        other.kill()
        other.wait()


def test_lock_file_names_are_safe(tmp_path: Path) -> None:
    assert lock_path(tmp_path, "lab01").name == "lab01.lock"
    odd = lock_path(tmp_path, "../../etc/passwd")
    assert odd.parent == tmp_path and "/" not in odd.name
    assert lock_path(tmp_path, "a:b") != lock_path(tmp_path, "a_b")
