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

Past one controller (AWX job slicing, several controllers on parts of one inventory),
``RedisPlanShare`` does the same through the Redis that holds the fact cache: an atomic
claim per key with an owner and an expiry, the plan stored under an expiring key, and
the same bounded wait and fallback.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.sentinel.remediation.plugins.plugin_utils import redis_connection

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


# ---------------------------------------------------------------- across controllers (Redis)

PLAN_SOURCES = ("memory", "llm", "runbook", "fallback", "none")
# Deletes the claim only when it is still ours (or still the dead owner's we saw).
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class PlanShareUnavailable(Exception):
    """The Redis plan share cannot be used; the message says why."""


def plan_problem(plan: Any) -> str | None:
    """Why a stored plan cannot be reused (None when its shape is sound).

    Only the shape is checked here; every command is classified again by the policy
    on the host that runs it (heal.py), whoever planned it.
    """
    if not isinstance(plan, Mapping):
        return "the plan is not an object"
    if plan.get("source") not in PLAN_SOURCES:
        return f"unknown plan source {plan.get('source')!r}"
    commands = plan.get("commands")
    if not isinstance(commands, list):
        return "commands is not a list"
    for number, item in enumerate(commands, 1):
        if not isinstance(item, Mapping) or not isinstance(item.get("command"), str) or not item["command"].strip():
            return f"command {number} has no command text"
    for name in ("msg", "diagnosis", "planned_by"):
        if not isinstance(plan.get(name, ""), str):
            return f"{name} is not a string"
    values = plan.get("host_values", {})
    if not isinstance(values, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in values.items()):
        return "host_values is not a mapping of strings"
    if not isinstance(plan.get("dropped", []), list) or not isinstance(plan.get("llm", {}) or {}, Mapping):
        return "dropped or llm has the wrong type"
    return None


def _owner_dead(owner: str, here: str) -> bool:
    """True when the claim's owner ran on this machine and its process is gone."""
    try:
        machine, pid = owner.rsplit("/", 2)[0], int(owner.rsplit("/", 2)[1])
    except (ValueError, IndexError):
        return False
    if machine != here:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class RedisPlanShare:
    """Plans shared per key by every controller that uses one Redis.

    The first worker (any controller) to need a key claims it with ``SET NX`` and an
    expiry, plans, stores the plan under an expiring key and drops the claim. Others
    poll for the plan for at most ``wait`` seconds. A claim whose owner is gone (its
    expiry passed, or a process on this machine that no longer exists, or a planning
    step that failed) is taken over by the next waiter. When the wait runs out the
    worker plans alone (``alone``), so a stuck controller slows the others by at most
    ``wait`` and never stops them. A stored plan that is not valid JSON of a plan's
    shape is ignored with a warning (``warnings``) and replaced.

    Keys: ``<prefix>plan:<key>`` (the plan, ``ttl`` seconds) and
    ``<prefix>plan:<key>:claim`` (the owner, ``claim_ttl`` seconds).
    """

    def __init__(self, client: Any, prefix: str, wait: float, ttl: float, claim_ttl: float,
                 owner: str | None = None, poll: float = 0.2, sleep: Callable[[float], None] = time.sleep):
        self.client = client
        self.prefix = prefix
        self.wait = float(wait)
        self.ttl = max(1, int(ttl))
        self.claim_ttl = max(1, int(claim_ttl))
        self.machine = socket.gethostname()
        self.owner = owner or f"{self.machine}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self.poll = poll
        self._sleep = sleep
        self.warnings: list[str] = []

    @classmethod
    def connect(cls, uri: str, prefix: str, **kwargs: Any) -> RedisPlanShare:
        """A share on the fact cache's Redis; ``PlanShareUnavailable`` when it cannot be reached."""
        try:
            return cls(redis_connection.connect(uri, "plan sharing"), prefix, **kwargs)
        except redis_connection.RedisUnavailable as exc:
            raise PlanShareUnavailable(str(exc)) from exc

    def _keys(self, key: str) -> tuple[str, str]:
        base = f"{self.prefix}plan:{key}"
        return base, base + ":claim"

    def _read(self, plan_key: str) -> dict | None:
        raw = self.client.get(plan_key)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            data, problem = None, "not JSON"
        else:
            problem = plan_problem(data)
        if problem is None:
            return dict(data)
        message = f"ignored the shared plan {plan_key} in Redis: {problem}; planning it again"
        if message not in self.warnings:
            self.warnings.append(message)
        return None

    def _release(self, claim_key: str, owner: str) -> None:
        self.client.eval(_RELEASE, 1, claim_key, owner)

    def get_or_make(self, key: str, make: Callable[[], Mapping]) -> tuple[dict, str]:
        """(plan, how) as ``PlanShare.get_or_make``; Redis errors raise ``PlanShareUnavailable``."""
        errors = redis_connection.errors()
        plan_key, claim_key = self._keys(key)
        try:
            return self._get_or_make(plan_key, claim_key, make, errors)
        except errors as exc:
            raise PlanShareUnavailable(f"Redis failed while sharing a plan: {exc}") from exc

    def _publish(self, plan_key: str, claim_key: str, plan: Mapping, errors: type[Exception]) -> None:
        """Store a plan made here and drop the claim; a Redis failure now costs the others
        a plan of their own, never this host its plan (so it is a warning, not an error)."""
        try:
            self.client.set(plan_key, json.dumps(plan, default=str), ex=self.ttl)
        except errors as exc:
            self.warnings.append(f"could not store the plan {plan_key} in Redis for other runs: {exc}")
        self._drop_claim(claim_key, errors)

    def _drop_claim(self, claim_key: str, errors: type[Exception]) -> None:
        try:
            self._release(claim_key, self.owner)
        except errors:
            pass  # the claim expires by itself after claim_ttl

    def _get_or_make(self, plan_key: str, claim_key: str, make: Callable[[], Mapping],
                     errors: type[Exception]) -> tuple[dict, str]:
        found = self._read(plan_key)
        if found is not None:
            return found, "shared"
        deadline = time.monotonic() + self.wait
        while True:
            if self.client.set(claim_key, self.owner, nx=True, ex=self.claim_ttl):
                try:
                    found = self._read(plan_key)
                    if found is not None:
                        self._drop_claim(claim_key, errors)
                        return found, "shared"
                    plan = dict(make())
                except BaseException:
                    self._drop_claim(claim_key, errors)  # a failed planning step: the next waiter plans
                    raise
                self._publish(plan_key, claim_key, plan, errors)
                return plan, "made"
            found = self._read(plan_key)
            if found is not None:
                return found, "shared"
            holder = self.client.get(claim_key)
            if holder is not None and _owner_dead(holder.decode("utf-8", "replace"), self.machine):
                self._release(claim_key, holder.decode("utf-8", "replace"))
                continue
            if time.monotonic() >= deadline:
                return dict(make()), "alone"
            self._sleep(self.poll)
