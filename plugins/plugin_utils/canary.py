# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Canary, then the fleet: a shared plan runs on the first hosts of its signature, is verified
there, and only then on the others.

Ansible runs the heal action of every host in its own worker, in parallel (up to ``forks``).
Hosts with one failure signature share one plan through the run's plan directory
(``plan_share.py``); the same directory holds the plan's rollout: each host that is about to
run the plan joins it, in arrival order. The first ``size`` hosts are the canaries: they run
at once and record whether the plan healed them. A host that joins later waits (bounded) for
every canary's verified outcome: all healed, it runs; one did not, it runs nothing and
escalates with that canary's evidence; no word within the wait, it runs nothing either.

Waves widen the rollout in steps: with ``waves`` ``[2, 5]`` the canary is followed by a wave
of 2 hosts, then one of 5, then everyone else; a host runs once every host of the waves
before its own healed (each records its verified outcome), and the first one that did not
stops every later wave.

A worker that waits holds one of the run's forks, but the canaries are already running (they
joined first), so the wait always ends. This is a wave through the plan share rather than a
play-level ``serial``: hosts with other failures never wait, and one pass still heals the
fleet. Without Redis the rollout is per run and per controller (``Rollout``, files in the
run's plan directory); with the Redis fact cache, where plans are shared by every controller,
the rollout is too (``RedisRollout``): one canary and one order of waves for a plan, whichever
controller runs each host, kept as long as the shared plan (``plan_share_ttl``).
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """What a host does with a shared plan: ``go`` (run it), ``stop`` (a canary did not heal),
    ``timeout`` (no canary reported in time); ``canary`` when this host is one."""

    action: str
    canary: bool
    detail: str = ""
    wave: int = 0


class _Waves:
    """The rule of a rollout, over a store of places (join) and verified outcomes (record)."""

    def __init__(self, size: int, wait: float, poll: float = 0.2, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, waves: Sequence[int] = ()):
        self.size = int(size)
        self.waves = [int(w) for w in waves]
        if self.size < 1 or any(w < 1 for w in self.waves):
            raise ValueError(f"a rollout's canary and waves are at least 1 host each, got {self.size} and {self.waves}")
        self.wait = float(wait)
        self.poll = poll
        self._sleep = sleep
        self._clock = clock

    def join(self, host: str) -> int:
        raise NotImplementedError

    def record(self, host: str, healed: bool, evidence: str, held: bool = False) -> None:
        raise NotImplementedError

    def _outcome(self, place: int) -> dict | None:
        raise NotImplementedError

    @staticmethod
    def _outcome_text(host: str, healed: bool, evidence: str, held: bool = False) -> str:
        """``held``: the plan did not finish there; it waits for a human (it is not a failure)."""
        return json.dumps({"host": host, "healed": bool(healed), "evidence": str(evidence)[:500], "held": bool(held)})

    def wave_of(self, place: int) -> tuple[int, int]:
        """The wave of a place in the rollout (0: the canary) and the place its wave starts at."""
        start, wave = 0, 0
        for length in [self.size, *self.waves]:
            if place < start + length:
                return wave, start
            start, wave = start + length, wave + 1
        return wave, start

    def verdict(self, host: str) -> Verdict:
        """Join, then: a canary goes at once; a later host waits for the verified outcome of every
        host of the waves before its own."""
        place = self.join(host)
        wave, start = self.wave_of(place)
        if wave == 0:
            return Verdict("go", canary=True)
        deadline = self._clock() + self.wait * wave
        while True:
            outcomes = [self._outcome(i) for i in range(start)]
            failed = next((o for o in outcomes if o is not None and not o.get("healed")), None)
            if failed is not None:
                failed_wave = self.wave_of(outcomes.index(failed))[0]
                who = f"the canary {failed.get('host')}" if failed_wave == 0 else \
                    f"{failed.get('host')} (wave {failed_wave + 1})"
                if failed.get("held"):
                    return Verdict("stop", canary=False, wave=wave, detail=(
                        f"{who} did not verify this plan: it waits there for a human ({failed.get('evidence')}); "
                        "it runs on no other host before it is verified"))
                return Verdict("stop", canary=False, wave=wave, detail=(
                    f"{who} ran this plan and it did not heal: {failed.get('evidence') or 'still failing'}"))
            if all(o is not None for o in outcomes):
                canaries = ", ".join(str(o.get("host")) for o in outcomes[:self.size])
                rest = len(outcomes) - self.size
                return Verdict("go", canary=False, wave=wave, detail=(
                    f"wave {wave + 1}: the canary {canaries} healed with this plan"
                    + (f", and the {rest} host{'s' if rest != 1 else ''} of the waves after it" if rest else "")))
            if self._clock() >= deadline:
                missing = sum(1 for o in outcomes if o is None)
                return Verdict("timeout", canary=False, wave=wave, detail=(
                    f"{missing} host{'s' if missing != 1 else ''} of the waves before wave {wave + 1} "
                    f"did not report within {self.wait * wave:g} s"))
            self._sleep(self.poll)


class Rollout(_Waves):
    """One plan's rollout in the run's plan directory: ``<dir>/rollout-<key>/``."""

    def __init__(self, plans_dir: str, key: str, size: int, wait: float, **kwargs):
        super().__init__(size, wait, **kwargs)
        self.dir = os.path.join(plans_dir, f"rollout-{key}")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)

    def _order(self) -> list[str]:
        try:
            with open(os.path.join(self.dir, "order.json"), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return []
        return [str(h) for h in data] if isinstance(data, list) else []

    def join(self, host: str) -> int:
        """This host's place in the rollout (0 first); the same place when it joins again."""
        with open(os.path.join(self.dir, "order.lock"), "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                order = self._order()
                if host not in order:
                    order.append(host)
                    tmp = os.path.join(self.dir, f"order.json.{os.getpid()}.tmp")
                    with open(tmp, "w", encoding="utf-8") as handle:
                        json.dump(order, handle)
                    os.replace(tmp, os.path.join(self.dir, "order.json"))
                return order.index(host)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def record(self, host: str, healed: bool, evidence: str, held: bool = False) -> None:
        """A host's verified outcome (the canary's, or a wave's)."""
        path = os.path.join(self.dir, f"outcome-{self.join(host)}.json")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(self._outcome_text(host, healed, evidence, held))
        os.replace(tmp, path)

    def _outcome(self, place: int) -> dict | None:
        try:
            with open(os.path.join(self.dir, f"outcome-{place}.json"), encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


# Gives a host its place once: the place it has, or the next one (the number of hosts so far).
_JOIN = ("local p = redis.call('HGET', KEYS[1], ARGV[1]) "
         "if not p then p = redis.call('HLEN', KEYS[1]) redis.call('HSET', KEYS[1], ARGV[1], p) end "
         "redis.call('EXPIRE', KEYS[1], ARGV[2]) return tonumber(p)")


class RedisRollout(_Waves):
    """One plan's rollout in the Redis every controller shares plans through (the client of
    ``redis_connection.connect``). Keys ``<prefix>rollout:<key>:order`` (host to place, set
    atomically) and ``<prefix>rollout:<key>:outcomes`` (place to outcome), both expiring with
    the shared plan (``ttl`` seconds after the last write)."""

    def __init__(self, client, prefix: str, key: str, size: int, wait: float, ttl: float, **kwargs):
        super().__init__(size, wait, **kwargs)
        self.client = client
        self.ttl = max(1, int(ttl))
        base = f"{prefix}rollout:{key}"
        self.order_key, self.outcomes_key = f"{base}:order", f"{base}:outcomes"

    def join(self, host: str) -> int:
        return int(self.client.eval(_JOIN, 1, self.order_key, host, self.ttl))

    def record(self, host: str, healed: bool, evidence: str, held: bool = False) -> None:
        try:
            pipe = self.client.pipeline()
            pipe.hset(self.outcomes_key, str(self.join(host)), self._outcome_text(host, healed, evidence, held))
            pipe.expire(self.outcomes_key, self.ttl)
            pipe.execute()
        except Exception:  # pylint: disable=broad-exception-caught  # redis.RedisError and its transports
            # This host's heal stands; the hosts waiting on its outcome time out and run nothing.
            return

    def _outcome(self, place: int) -> dict | None:
        raw = self.client.hget(self.outcomes_key, str(place))
        try:
            data = json.loads(raw) if raw is not None else None
        except (ValueError, UnicodeDecodeError):
            return None
        return data if isinstance(data, dict) else None


def rollout_verdict(host: str, shared, plans_dir: str, key: str, size: int, wait: float, ttl: float,
                    waves: Sequence[int] = ()) -> tuple[_Waves, Verdict, str]:
    """This host's verdict on a shared plan's rollout: through the Redis of the plan share when
    plans are shared there (``shared`` has a Redis ``client``), else through the run's plan
    directory; a Redis that stops answering falls back to the directory, with a warning."""
    client = getattr(shared, "client", None)
    if client is not None:
        rollout = RedisRollout(client, str(getattr(shared, "prefix", "")), key, size, wait, ttl, waves=waves)
        try:
            return rollout, rollout.verdict(host), ""
        except Exception as exc:  # pylint: disable=broad-exception-caught  # redis.RedisError and its transports
            warning = f"the canary of this plan is kept on this controller only: Redis failed: {exc}"
        rollout = Rollout(plans_dir, key, size, wait, waves=waves)
        return rollout, rollout.verdict(host), warning
    rollout = Rollout(plans_dir, key, size, wait, waves=waves)
    return rollout, rollout.verdict(host), ""
