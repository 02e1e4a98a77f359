# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One plan per failure signature across the hosts of a run, without lock-step.

Each host heals in its own worker process. The first worker that needs the plan for a
key (a failure signature plus the incident's history) takes the key's lock, plans, and
writes the plan; the others block on the lock (bounded) and read it. A host whose plan
is already made goes on at once; hosts with other signatures never wait. When the wait
runs out, the host plans alone and says so: slower, never stuck.

Files live on the controller under ``<artifacts_dir>/plans/<run>/``; ``run_token`` names
the run (the ansible-playbook process all workers of a run share).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from typing import Any

STALE_RUN_SECONDS = 24 * 3600


def run_token() -> str:
    """The same string in every worker of one ansible-playbook run, different across runs."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/stat", encoding="ascii") as handle:
            started = handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "0"
    return f"run-{parent}-{started}"


def share_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


class PlanShare:
    """A directory of plans shared by the workers of one run."""

    def __init__(self, base_dir: str, token: str | None = None, wait: float = 300.0,
                 sleep: Callable[[float], None] = time.sleep):
        self.base = os.path.join(base_dir, "plans")
        self.dir = os.path.join(self.base, token or run_token())
        self.wait = float(wait)
        self._sleep = sleep
        os.makedirs(self.dir, mode=0o700, exist_ok=True)

    def prune(self, now: float | None = None) -> None:
        """Forget the plan directories of runs older than a day (best effort)."""
        now = time.time() if now is None else now
        try:
            entries = os.listdir(self.base)
        except OSError:
            return
        for name in entries:
            path = os.path.join(self.base, name)
            try:
                if path != self.dir and now - os.path.getmtime(path) > STALE_RUN_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                continue

    def _read(self, path: str) -> dict | None:
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def get_or_make(self, key: str, make: Callable[[], Mapping]) -> tuple[dict, str]:
        """(plan, how): how is ``made`` (this worker planned), ``shared`` (another worker's
        plan) or ``alone`` (the wait ran out; planned here without sharing)."""
        path = os.path.join(self.dir, f"{key}.json")
        found = self._read(path)
        if found is not None:
            return found, "shared"
        with open(os.path.join(self.dir, f"{key}.lock"), "a", encoding="utf-8") as lock:
            deadline = time.monotonic() + self.wait
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return dict(make()), "alone"
                    self._sleep(0.05)
            try:
                found = self._read(path)
                if found is not None:
                    return found, "shared"
                plan = dict(make())
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as handle:
                    json.dump(plan, handle, default=str)
                os.replace(tmp, path)
                return plan, "made"
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
