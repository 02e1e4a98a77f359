# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run's stores behind small facades: memory, journal, lease, plan share, pending plans.

Each facade owns its failure: a store that stops answering is named in a warning and the run
goes on with what is safe (the controller's file lease, the run's own plan directory, no
journal record means nothing runs).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import key_facts
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal as journal_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory as memory_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fleet import generalize
from ansible_collections.sentinel.remediation.plugins.plugin_utils import proven
from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import LeaseBusy, LeaseUnavailable, RedisLease
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import (
    PlanShare,
    PlanShareUnavailable,
    RedisPlanShare,
)

NAME = "sentinel.remediation.heal"
# Once per worker process: why plans are not shared through the Redis fact cache.
_announced_share: set = set()

__all__ = ["JournalStore", "LeaseBusy", "LeaseStore", "MemoryStore", "PendingPlans", "PlanStores", "Stores"]


class JournalStore:
    """The host's journal (journal.py): records read once per run, appends that warn on failure."""

    def __init__(self, journal, run: str, host: str, log: Callable[[str], None]):
        self.journal = journal
        self.run = run
        self.host = host
        self.log = log
        self._records: list | None = None

    def records(self) -> list[dict]:
        if self._records is None:
            try:
                self._records = self.journal.records()
            except journal_mod.JournalError as exc:
                self.log(f"{NAME}: {exc}")
                self._records = []
        return self._records

    def reread(self) -> None:
        """This run's own records count from now (the next ``records`` reads them)."""
        self._records = None

    def write(self, record: Mapping) -> None:
        """Append ``record`` for this host; raises ``JournalError`` (the caller decides)."""
        self.journal.append(dict(record, host=self.host))

    def append(self, record: Mapping) -> bool:
        """Append ``record`` for this host; False (with a warning shown) when the journal failed."""
        try:
            self.write(record)
        except journal_mod.JournalError as exc:
            self.log(f"{NAME}: {exc}")
            return False
        return True

    def interrupted(self, service: str) -> dict | None:
        return journal_mod.interrupted(self.records(), service)


class LeaseStore:
    """This host's lease: in the fact cache's Redis when there is one, else a file on this
    controller; a Redis that stops answering falls back to the file lease with a warning."""

    def __init__(self, file_lease, redis_lease=None, *, check_mode: bool, host: str, warn: Callable[[str], None]):
        self.file = file_lease
        self.current = redis_lease or file_lease
        self.check_mode = check_mode
        self.host = host
        self.warn = warn
        self.lost = False

    @classmethod
    def open(cls, file_lease, cache, *, check_mode: bool, host: str, warn: Callable[[str], None]) -> "LeaseStore":
        redis = None
        if cache.redis and not check_mode:
            try:
                redis = RedisLease.connect(cache.connection, prefix=cache.key_prefix, key=file_lease.key,
                                           owner=file_lease.owner, ttl=file_lease.ttl, process=file_lease.process)
            except LeaseUnavailable as exc:
                warn(f"{NAME}: host leases are kept on this controller only: {exc}")
        return cls(file_lease, redis, check_mode=check_mode, host=host, warn=warn)

    def take(self) -> None:
        """Take or renew the lease; raises ``LeaseBusy`` when another run holds the host."""
        try:
            self.current.acquire()
        except LeaseUnavailable as exc:
            self.warn(f"{NAME}: host leases are kept on this controller only from now: {exc}")
            self.current = self.file
            self.current.acquire()

    def kept(self) -> bool:
        """Whether this run still holds the host (True when the lease store cannot say)."""
        if self.check_mode:
            return True
        try:
            return self.current.holds()
        except (LeaseUnavailable, OSError) as exc:
            self.warn(f"{NAME}: could not check {self.host}'s lease after its commands: {exc}")
            return True

    def release(self) -> None:
        self.current.release()


class PlanStores:
    """Where plans are shared: the run's plan directory (memory indexes, rollouts) and, per
    failure signature, the fact cache's Redis when it is the cache (every run and controller)."""

    def __init__(self, artifacts_dir: str, *, wait: float, ttl: float, claim_ttl: float, cache,
                 warn: Callable[[str], None], run_share=None, signature_share=None):
        self.artifacts_dir = artifacts_dir
        self.wait = wait
        self.ttl = ttl
        self.claim_ttl = claim_ttl
        self.cache = cache
        self.warn = warn
        self._run_share = run_share
        self._shared = signature_share

    def run_share(self) -> PlanShare:
        if self._run_share is None:
            self._run_share = PlanShare(self.artifacts_dir, wait=self.wait)
            self._run_share.prune()
        return self._run_share

    def signature_share(self):
        if self._shared is not None:
            return self._shared
        self._shared = self.run_share()
        if not self.cache.redis:
            return self._shared
        try:
            self._shared = RedisPlanShare.connect(self.cache.connection, prefix=self.cache.key_prefix,
                                                  wait=self.wait, ttl=self.ttl, claim_ttl=self.claim_ttl)
        except PlanShareUnavailable as exc:
            self._failed(str(exc))
        return self._shared

    def _failed(self, reason: str) -> None:
        message = f"{NAME}: plans are shared within this run only: {reason}"
        if message not in _announced_share:
            _announced_share.add(message)
            self.warn(message)
        self._shared = self.run_share()

    def in_run(self, key: str, make: Callable[[], Any]):
        """``(value, how)`` made once per run (``PlanShare.get_or_make``)."""
        return self.run_share().get_or_make(key, make)

    def per_signature(self, key: str, make: Callable[[], Any]):
        """``(plan, how)`` made once for every host with the same failure; a shared store that
        fails falls back to the run's plan directory."""
        share = self.signature_share()
        try:
            plan, how = share.get_or_make(key, make)
        except PlanShareUnavailable as exc:
            self._failed(str(exc))
            plan, how = self.run_share().get_or_make(key, make)
        for warning in getattr(share, "warnings", ()):
            self.warn(f"{NAME}: {warning}")
        return plan, how


class MemoryStore:
    """This host's episodes (the ``sentinel_memory`` fact) and the fleet's index over them."""

    def __init__(self, episodes: list, *, memory_max: int, host: str, hostnames, plans: PlanStores,
                 fleet: Callable[[], list] = list, changed: bool = False):
        self.episodes = episodes
        self.memory_max = memory_max
        self.host = host
        self.hostnames = tuple(hostnames)
        self.plans = plans
        self.fleet = fleet
        self.changed = changed  # a cut entry is written back: the next run does not pay for it again
        self._index = None
        self._recall = None

    @classmethod
    def from_fact(cls, stored, *, memory_max: int, warn: Callable[[str], None], **kwargs) -> "MemoryStore":
        cut = isinstance(stored, list) and len(stored) > memory_max
        if cut:
            warn(f"{NAME}: {kwargs['host']}'s memory held {len(stored)} episodes; kept the newest {memory_max} "
                 "(remediate_memory_max)")
            stored = stored[-memory_max:]
        return cls(memory_mod.normalise_memory(stored), memory_max=memory_max, changed=cut, **kwargs)

    def index(self) -> dict:
        """The fleet's memory index, made once per run (the first host builds it)."""
        if self._index is None:
            self._index = self.plans.in_run("memory-index", lambda: memory_mod.index([self.episodes] + self.fleet()))[0]
        return self._index

    def proven_index(self) -> dict:
        """Which hosts each plan healed each signature on (proven.py), made once per run."""
        return self.plans.in_run("proven-index", lambda: proven.index([self.episodes] + self.fleet()))[0]

    def own_index(self) -> dict:
        return memory_mod.index([self.episodes]) if self.episodes else {}

    def recall_index(self) -> dict:
        """Recall candidates by service, made once per run from the memory index."""
        if self._recall is None:
            self._recall = self.plans.in_run("recall-index", lambda: memory_mod.recall_index(self.index()))[0]
        return self._recall

    def signatures(self, prefix: str) -> list[str]:
        """The failure signatures starting with ``prefix`` memory knows, this host's first."""
        own, index = self.own_index(), self.index()
        return [sig for sig in list(own) + [s for s in index if s not in own] if sig.startswith(prefix)]

    def plans_for(self, signature: str, own: Mapping | None = None) -> tuple[list[dict], list[str]]:
        """What memory offers for ``signature``: the plans that healed it (this host's first;
        none this host demoted) and the commands that failed on it. ``own``: this host's
        memory's summary of ``signature`` when the caller has it (``memory.index``)."""
        known = self.index().get(signature) or {}
        # Episodes written during this run by this host are not in the run's index yet.
        if own is None:
            own = memory_mod.lookup([self.episodes], signature) if self.episodes else {}
        successes = list(own.get("successes") or []) + [
            s for s in known.get("successes") or [] if s not in (own.get("successes") or [])]
        demoted = {tuple(d["commands"]) for d in own.get("demoted") or []}
        successes = [s for s in successes if tuple(s["commands"]) not in demoted]
        failed = list(dict.fromkeys(list(known.get("failed_commands") or []) + list(own.get("failed_commands") or [])))
        return successes, failed

    def similar(self, service: str, signature: str, error: str, evidence, definition, failed) -> list[dict]:
        """Similar incidents healed before (memory.similar_incidents): this host's own
        episodes first (those of this run are not in the run's index yet), then the fleet's."""
        own = memory_mod.recall_index(memory_mod.index([self.episodes])).get(service, []) if self.episodes else []
        seen = {(c["signature"], tuple(c["commands"])) for c in own}
        pool = own + [c for c in self.recall_index().get(service, [])
                      if (c.get("signature"), tuple(c.get("commands") or [])) not in seen]
        return memory_mod.similar_incidents(
            pool, service=service, signature=signature, error=error,
            facts=key_facts(service, error, evidence, self.hostnames), service_def=definition,
            host=self.host, failed_commands=failed)

    def remember(self, incident, attempt, evidence, definition) -> None:
        """The attempt as an episode (engine.episode), PIDs generalised to placeholders."""
        facts = key_facts(incident.service, incident.error, evidence, self.hostnames)
        record = engine.episode(incident, attempt, facts)
        # Remembered commands keep {port_owner_pid:N} rather than a PID that means nothing next time.
        record["commands"] = generalize(record["commands"], evidence, incident.service, definition.get("ports") or [])
        if not record["commands"] and incident.approval != "rejected":
            return
        self.episodes = memory_mod.append_episode(self.episodes, record, self.memory_max)
        self.changed = True


class PendingPlans:
    """Which plans of this host wait for approval (the ``sentinel_pending`` fact): the cache
    holds the index for resume.yml's host filter; what runs is read from the sealed file only."""

    def __init__(self, stored=None):
        self.entries = dict(stored) if isinstance(stored, Mapping) else {}
        self.changed = False

    def add(self, approval_id: str, entry: Mapping) -> None:
        self.entries[approval_id] = dict(entry)
        self.changed = True

    def forget(self, approval_id: str) -> None:
        if approval_id in self.entries:
            del self.entries[approval_id]
            self.changed = True

    def service_of(self, approval_id: str) -> str:
        return str((self.entries.get(approval_id) or {}).get("service") or "?")


class Stores:
    """The run's stores, one of each."""

    def __init__(self, memory: MemoryStore, journal: JournalStore, lease: LeaseStore, plans: PlanStores,
                 pending: PendingPlans):
        self.memory = memory
        self.journal = journal
        self.lease = lease
        self.plans = plans
        self.pending = pending

    def facts(self) -> dict:
        """The facts this run changed, to be written back to the fact cache."""
        out = {}
        if self.memory.changed:
            out["sentinel_memory"] = self.memory.episodes
        if self.pending.changed:
            out["sentinel_pending"] = self.pending.entries
        return out
