# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's memory lookup with a large inventory, through the real fact cache plugins.

No containers: the fact cache of ``--hosts`` inventory hosts with ``--episodes`` episodes
each is written through the cache plugins themselves (sentinel.remediation.jsonfile, and
community.general.redis on a real redis-server started on 127.0.0.1), then read the way
heal.py reads it. Prints JSON on stdout; bench/fleet.py puts it in BENCHMARKS.md.

    python bench/memory_lookup.py --hosts 1000 --episodes 50
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _episodes(host: str, count: int, signatures: list[str]) -> list[dict]:
    """``count`` episodes of a host, in the shape heal.py remembers (memory.normalise_episode)."""
    out = []
    for i in range(count):
        signature = signatures[(sum(map(ord, host)) + i) % len(signatures)]
        service = signature.split(":", 1)[0]
        success = i % 3 != 0
        out.append({
            "signature": signature, "service": service, "host": host,
            "error": f"service: exit 3: {service} is not running ... failed!; port: nothing listens on :{8000 + i}",
            "diagnosis": f"{service} stopped after a crash; its PID file was left behind.",
            "commands": [{"command": f"rm -f /run/{service}/{service}.pid", "source": "llm", "verdict": "allow",
                          "rc": 0},
                         {"command": f"service {service} start", "source": "llm", "verdict": "allow",
                          "rc": 0 if success else 1}],
            "success": success, "attempts": 1 + i % 2, "started": "2026-11-23T10:00:00Z",
            "finished": "2026-11-23T10:00:09Z", "approval": "none",
            "facts": [f"stale_pid_file path=/run/{service}/{service}.pid", "process_missing"],
        })
    return out


def memory_lookup(hosts: int = 1000, episodes: int = 50, signature_count: int = 60, steps: int = 200) -> dict:
    """The planner's memory lookup with ``hosts`` inventory hosts of ``episodes`` episodes each.

    The fact cache is filled through the cache plugins themselves (their own format:
    sentinel.remediation.jsonfile files, community.general.redis keys and key set), then
    timed as heal.py reads it: the first planning step of a run reads every host's facts
    from a fresh cache plugin and builds the shared index (memory.index, written through
    PlanShare); every other planning step reads the shared index and looks its signature
    up. For contrast, the scan the index replaced (every host read at each step).
    """
    from ansible.plugins.loader import cache_loader, init_plugin_loader

    init_plugin_loader([str(REPO / ".collections")])  # before any ansible_collections import
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory as memory_mod
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_share import PlanShare
    from redis_server import RedisServer, redis_missing

    services = ["nginx", "redis-server", "cron", "ssh", "postgresql", "app"]
    signatures = [f"{services[i % len(services)]}:{i:016x}" for i in range(signature_count)]
    names = [f"host{i:04d}.example" for i in range(hosts)]
    work = Path(tempfile.mkdtemp(prefix="sentinel-bench-memory-"))
    results: dict = {"hosts": hosts, "episodes_per_host": episodes, "signatures": signature_count, "steps": steps}

    def measure(name: str, make_cache) -> dict:
        writer = make_cache()
        started = time.perf_counter()
        for host in names:
            writer.set(host, {"sentinel_memory": _episodes(host, episodes, signatures), "discovered_interpreter_python":
                              "/usr/bin/python3"})
        fill = time.perf_counter() - started

        def fleet_memories(cache) -> list:
            memories = []
            for host in names:
                facts = cache.get(host)
                memories.append((facts.get("sentinel_memory") or [])[-4 * episodes:])
            return memories

        share_dir = work / f"artifacts-{name}"
        started = time.perf_counter()
        reader = make_cache()  # a fresh plugin: nothing in its in-process cache
        built, how = PlanShare(str(share_dir), token="run-1").get_or_make(
            "memory-index", lambda: memory_mod.index(fleet_memories(reader)))
        first_step = time.perf_counter() - started
        assert how == "made" and len(built) == signature_count, (how, len(built))
        step_times = []
        for i in range(steps):
            started = time.perf_counter()
            index, how = PlanShare(str(share_dir), token="run-1").get_or_make("memory-index", dict)
            found = index.get(signatures[i % signature_count]) or {}
            step_times.append(time.perf_counter() - started)
            assert how == "shared" and found.get("signature"), how
        scan_times = []
        for i in range(3):
            started = time.perf_counter()
            memory_mod.lookup(fleet_memories(make_cache()), signatures[i])
            scan_times.append(time.perf_counter() - started)
        index_bytes = (share_dir / "plans" / "run-1" / "memory-index.json").stat().st_size
        row = {"fill_s": round(fill, 2), "first_step_s": round(first_step, 3),
               "step_ms_median": round(statistics.median(step_times) * 1000, 2),
               "step_ms_p95": round(sorted(step_times)[int(len(step_times) * 0.95) - 1] * 1000, 2),
               "index_kb": round(index_bytes / 1024, 1),
               "scan_per_step_s": round(statistics.median(scan_times), 3)}
        log(f"memory lookup ({name}, {hosts} hosts x {episodes} episodes): first step {row['first_step_s']} s, "
            f"then {row['step_ms_median']} ms per step (a full scan per step: {row['scan_per_step_s']} s)")
        return row

    facts_dir = work / "facts"
    results["jsonfile"] = measure("jsonfile", lambda: cache_loader.get(
        "sentinel.remediation.jsonfile", _uri=str(facts_dir), _prefix="", _timeout=0))
    results["jsonfile"]["cache_mb"] = round(sum(p.stat().st_size for p in facts_dir.iterdir()) / 1e6, 1)
    problem = redis_missing()
    if problem:
        results["redis"] = {"skipped": problem}
    else:
        with RedisServer(work) as server:
            results["redis"] = measure("redis", lambda: cache_loader.get(
                "community.general.redis", _uri=server.connection, _prefix="bench_", _timeout=0))
            results["redis"]["cache_mb"] = round(int(server.client.info("memory")["used_memory"]) / 1e6, 1)
    shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--signatures", type=int, default=60, help="distinct failure signatures in the memories")
    parser.add_argument("--steps", type=int, default=200, help="planning steps timed after the first")
    opts = parser.parse_args(argv)
    if min(opts.hosts, opts.episodes, opts.signatures, opts.steps) < 1:
        parser.error("every count must be at least 1")
    print(json.dumps(memory_lookup(opts.hosts, opts.episodes, opts.signatures, opts.steps), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
