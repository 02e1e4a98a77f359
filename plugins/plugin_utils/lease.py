# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Host leases: one remediation at a time per real target, across runs on a controller.

The key is the target itself (connection, address, port), not its inventory name, so two
inventories that name one machine differently still exclude each other. A lease has an
owner and an expiry: a dead run's lease lapses, a live one renews it at every attempt.

Guarantees: between runs on one controller (or controllers sharing the lease directory
on a file system with working ``flock``), at most one run changes a target at a time; a
second run reports the target ``busy`` and changes nothing on it. A lease whose owner was
a process of this controller that no longer runs (a killed ``ansible-playbook``) lapses at
once; one held from another controller lapses at its expiry.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping

from ansible_collections.sentinel.remediation.plugins.plugin_utils import redis_connection


def target_key(host_vars: Mapping) -> str:
    """The real target behind an inventory host."""
    connection = str(host_vars.get("ansible_connection") or "ssh")
    address = str(host_vars.get("ansible_host") or host_vars.get("inventory_hostname") or "")
    port = str(host_vars.get("ansible_port") or "")
    if connection in ("local",):
        address = socket.gethostname()
    return f"{connection}://{address}:{port}"


def process_start(pid: int) -> str | None:
    """The start time of a live process (clock ticks since boot, /proc/PID/stat field 22)."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError, ValueError):
        return None


def _owner_gone(record: Mapping) -> bool:
    """Whether the lease's owner ran on this controller and that process is gone."""
    if record.get("node") != socket.gethostname() or not record.get("pid"):
        return False
    return process_start(int(record["pid"])) != str(record.get("start"))


class LeaseBusy(Exception):
    """Another run holds the target; the message says who and until when."""


class Lease:
    """A file lease under ``<directory>/<sha256(key)>.json``."""

    def __init__(self, directory: str, key: str, owner: str, ttl: float = 900.0,
                 process: tuple[int, str] | None = None):
        self.directory = directory
        # (pid, start time in clock ticks) of the owning run's process on this controller.
        self.process = process
        self.key = key
        self.owner = owner
        self.ttl = float(ttl)
        self.path = os.path.join(directory, hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + ".json")
        self.held = False

    def _locked(self, write):
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        with open(self.path + ".lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                try:
                    with open(self.path, encoding="utf-8") as handle:
                        current = json.load(handle)
                except (OSError, ValueError):
                    current = None
                return write(current if isinstance(current, dict) else None)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _store(self, record: dict | None) -> None:
        if record is None:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
            return
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def acquire(self, now: float | None = None) -> None:
        """Take or renew the lease; ``LeaseBusy`` when another live owner holds it."""
        def write(current):
            moment = time.time() if now is None else now
            if current and current.get("owner") != self.owner and _owner_gone(current):
                current = None  # its run was killed on this controller: nothing holds the target
            if current and current.get("owner") != self.owner and float(current.get("expires") or 0) > moment:
                left = int(float(current["expires"]) - moment)
                raise LeaseBusy(f"{self.key} is being remediated by {current.get('owner')} "
                                f"(since {current.get('since')}, lease ends in {left} s)")
            since = current.get("since") if current and current.get("owner") == self.owner else moment
            record = {"key": self.key, "owner": self.owner, "since": since, "expires": moment + self.ttl}
            if self.process:
                record.update(node=socket.gethostname(), pid=self.process[0], start=self.process[1])
            self._store(record)
        self._locked(write)
        self.held = True

    def holds(self) -> bool:
        """Whether this run still holds the lease (no other run took it since)."""
        def read(current):
            return bool(current) and current.get("owner") == self.owner
        return bool(self._locked(read))

    def release(self) -> None:
        if not self.held:
            return

        def write(current):
            if current and current.get("owner") == self.owner:
                self._store(None)
        self._locked(write)
        self.held = False


# ---------------------------------------------------------------- across controllers (Redis)

# Renew: replace the value only while it is still the one we read (ours). Release: delete
# only our own lease (or the dead owner's record we saw).
_RENEW = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
          "return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end return false")
_DELETE_IF = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class LeaseUnavailable(Exception):
    """The Redis lease store cannot be used; the message says why."""


class RedisLease:
    """The same lease as ``Lease``, kept in the Redis of the fact cache, so controllers
    that share a Redis (AWX job slices, several controllers, a driver next to a plain
    playbook) exclude each other per target.

    The lease is one key, ``<prefix>lease:<sha256(target)>``, holding the owner record as
    JSON, with a Redis expiry of ``ttl``: taken with ``SET NX``, renewed and released with
    compare-and-set scripts, so a run never renews or drops a lease it does not hold. A
    record whose owner was a process of this controller that no longer runs is removed at
    once (the same rule as the file lease); another controller's lapses at its expiry.
    Redis errors raise ``LeaseUnavailable``; a busy target raises ``LeaseBusy``.
    """

    def __init__(self, client, prefix: str, key: str, owner: str, ttl: float = 900.0,
                 process: tuple[int, str] | None = None):
        self.client = client
        self.key = key
        self.owner = owner
        self.ttl = float(ttl)
        self.process = process
        self.name = f"{prefix}lease:{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}"
        self.held = False
        self._value: str | None = None

    @classmethod
    def connect(cls, uri: str, prefix: str, key: str, owner: str, ttl: float = 900.0,
                process: tuple[int, str] | None = None) -> RedisLease:
        """A lease on the fact cache's Redis (``host:port:db[:password]``)."""
        try:
            client = redis_connection.connect(uri, "the host lease")
        except redis_connection.RedisUnavailable as exc:
            raise LeaseUnavailable(str(exc)) from exc
        return cls(client, prefix, key, owner, ttl=ttl, process=process)

    def _record(self, since: float) -> str:
        record = {"key": self.key, "owner": self.owner, "since": since}
        if self.process:
            record.update(node=socket.gethostname(), pid=self.process[0], start=self.process[1])
        return json.dumps(record, sort_keys=True)

    def acquire(self, now: float | None = None) -> None:
        """Take or renew the lease; ``LeaseBusy`` when another live owner holds it."""
        errors = redis_connection.errors()
        moment = time.time() if now is None else now
        ttl_ms = max(1000, int(self.ttl * 1000))
        try:
            for _round in range(3):
                raw = self.client.get(self.name)
                if raw is None:
                    value = self._record(moment)
                    if self.client.set(self.name, value, nx=True, px=ttl_ms):
                        self._value, self.held = value, True
                        return
                    continue  # another run took it between our read and our write: look again
                text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                try:
                    current = json.loads(text)
                except ValueError:
                    current = {}
                current = current if isinstance(current, dict) else {}
                if current.get("owner") == self.owner:
                    value = self._record(float(current.get("since") or moment))
                    if self.client.eval(_RENEW, 1, self.name, text, value, ttl_ms):
                        self._value, self.held = value, True
                        return
                    continue
                if _owner_gone(current):
                    self.client.eval(_DELETE_IF, 1, self.name, text)  # its run was killed here
                    continue
                left = max(0, int(self.client.pttl(self.name) or 0) // 1000)
                raise LeaseBusy(f"{self.key} is being remediated by {current.get('owner') or 'an unknown run'} "
                                f"(since {current.get('since')}, lease ends in {left} s)")
        except errors as exc:
            raise LeaseUnavailable(f"the Redis lease for {self.key} could not be taken: {exc}") from exc
        raise LeaseBusy(f"{self.key} changed hands three times while this run tried to take it")

    def holds(self) -> bool:
        """Whether this run still holds the lease; ``LeaseUnavailable`` when Redis cannot say."""
        errors = redis_connection.errors()
        try:
            raw = self.client.get(self.name)
        except errors as exc:
            raise LeaseUnavailable(f"the Redis lease for {self.key} could not be read: {exc}") from exc
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        try:
            current = json.loads(text) if text else {}
        except ValueError:
            current = {}
        return isinstance(current, dict) and current.get("owner") == self.owner

    def release(self) -> None:
        if not self.held:
            return
        errors = redis_connection.errors()
        try:
            self.client.eval(_DELETE_IF, 1, self.name, self._value)
        except errors:
            pass  # it lapses at its expiry
        self.held = False
