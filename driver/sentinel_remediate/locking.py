"""Per-host locks, so that two driver processes never run passes on the same host at once.

One lock file per host under ``<state dir>/locks/``, held with ``fcntl.flock`` for the
whole pass. flock locks belong to the open file, so they vanish when the process dies
(no stale locks after a crash or a kill -9). Hosts are always locked in sorted order,
so two drivers waiting for overlapping sets of hosts cannot deadlock.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class LockTimeout(TimeoutError):
    """Waiting for a host's lock took longer than allowed."""


def lock_path(lock_dir: Path, host: str) -> Path:
    # Inventory names may hold ':' or '/' (IPv6, URLs); keep the file name safe and unique.
    safe = _UNSAFE.sub("_", host) or "_"
    if safe != host:
        safe = f"{safe}-{hashlib.sha256(host.encode()).hexdigest()[:10]}"
    return lock_dir / f"{safe}.lock"


def holder_of(lock_dir: Path, host: str) -> dict:
    """What the current holder wrote into the lock file ({} when unknown)."""
    try:
        text = lock_path(lock_dir, host).read_text(encoding="utf-8")
        data = json.loads(text) if text.strip() else {}
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def describe_holder(info: dict) -> str:
    if not info:
        return "another driver process"
    return f"pid {info.get('pid', '?')}, run {info.get('ident', '?')}, since {info.get('since', '?')}"


@dataclass
class HostLocks:
    """The locks one pass holds. Use as a context manager or call release()."""

    lock_dir: Path
    ident: str
    held: dict[str, int] = field(default_factory=dict)   # host -> open fd
    busy: dict[str, dict] = field(default_factory=dict)  # host -> holder info (skipped hosts)

    def _try(self, host: str) -> bool:
        path = lock_path(self.lock_dir, host)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        info = {"pid": os.getpid(), "ident": self.ident, "host": host,
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self.held[host] = fd
        return True

    def acquire(
        self,
        hosts: Iterable[str],
        wait: bool = False,
        timeout: float | None = None,
        poll: float = 0.5,
        on_wait: Callable[[str, dict], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> HostLocks:
        """Lock every host; busy hosts are waited for (wait=True) or recorded in ``busy``."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for host in sorted(set(hosts)):
                if self._try(host):
                    continue
                if not wait:
                    self.busy[host] = holder_of(self.lock_dir, host)
                    continue
                if on_wait:
                    on_wait(host, holder_of(self.lock_dir, host))
                while not self._try(host):
                    if should_stop and should_stop():
                        raise LockTimeout(f"stopped while waiting for the lock of {host}")
                    if deadline is not None and time.monotonic() >= deadline:
                        raise LockTimeout(
                            f"{host} is still locked by {describe_holder(holder_of(self.lock_dir, host))} "
                            f"after {timeout:g} s")
                    time.sleep(poll)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        for fd in self.held.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self.held.clear()

    def __enter__(self) -> HostLocks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
