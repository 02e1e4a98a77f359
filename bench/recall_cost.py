"""What similar-incident recall costs as the fleet grows: the index, once per run, and each
planning step.

Run from the collection root:
    .venv/bin/python bench/recall_cost.py [--hosts 1000] [--episodes 50] [--steps 200]

Not a test: it prints a Markdown table (BENCHMARKS.md, "Similar-incident recall"). Each host
remembers ``--episodes`` episodes of 12 fault kinds of 4 services, with host-specific paths,
ports and line numbers (so nearly every episode has its own signature), a quarter of them
failed. It measures ``memory.index`` and ``memory.recall_index`` (once per run, shared by
the run's hosts) and ``memory.similar_incidents`` for one planning step (mean and 95th
percentile over ``--steps`` incidents), and the size of the candidate pool per service.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory  # noqa: E402

KINDS = {
    "nginx": [("config: nginx: [emerg] unknown directive \"x\" in /etc/nginx/conf.d/{name}.conf:{n}",
               "mv /etc/nginx/conf.d/{name}.conf /etc/nginx/conf.d/{name}.conf.disabled"),
              ("missing /var/log/nginx/{name}", "mkdir -p /var/log/nginx/{name}"),
              ("port {port} held by python3", "kill {{port_owner_pid:{port}}}")],
    "redis": [("denied /var/lib/redis/{name}", "chown redis:redis /var/lib/redis/{name}"),
              ("disk full", "rm -f /var/lib/redis/temp-{n}.rdb"),
              ("config: Bad directive or wrong number of arguments at /etc/redis/{name}.conf:{n}",
               "sed -i {n}d /etc/redis/{name}.conf")],
    "postgresql": [("pid file /var/lib/postgresql/{name}/postmaster.pid stale",
                    "rm -f /var/lib/postgresql/{name}/postmaster.pid"),
                   ("denied /var/lib/postgresql/{name}", "chmod 0700 /var/lib/postgresql/{name}"),
                   ("missing /run/postgresql", "mkdir -p /run/postgresql")],
    "app": [("missing /srv/app/{name}/uploads", "mkdir -p /srv/app/{name}/uploads"),
            ("port {port} held by java", "kill {{port_owner_pid:{port}}}"),
            ("config: invalid value at /etc/app/{name}.yml:{n}", "app-config-check /etc/app/{name}.yml")],
}


def incident(rng: random.Random, service: str, kind: int) -> tuple[list[str], str]:
    fact, fix = KINDS[service][kind]
    values = {"name": f"site{rng.randrange(10_000)}", "n": rng.randrange(1, 400), "port": rng.randrange(8000, 9000)}
    return [fact.format(**values), f"status: {service} is not running"], fix.format(**values)


def fleet(hosts: int, episodes: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    out = {}
    for h in range(hosts):
        items = []
        for e in range(episodes):
            service = rng.choice(sorted(KINDS))
            facts, fix = incident(rng, service, rng.randrange(3))
            items.append({"signature": f"{service}:{rng.getrandbits(64):016x}", "service": service,
                          "host": f"web{h}", "error": f"{service} is not running", "facts": facts,
                          "success": rng.random() > 0.25, "finished": f"2026-11-{1 + e % 28:02d}T10:00:00Z",
                          "commands": [{"command": fix, "rc": 0}, {"command": f"service {service} start", "rc": 0}]})
        out[f"web{h}"] = items
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    memories = fleet(args.hosts, args.episodes)
    started = time.perf_counter()
    index = memory.index(memories)
    index_s = time.perf_counter() - started
    started = time.perf_counter()
    candidates = memory.recall_index(index)
    recall_s = time.perf_counter() - started
    rng = random.Random(11)
    times, found = [], 0
    for _step in range(args.steps):
        service = rng.choice(sorted(KINDS))
        facts, _fix = incident(rng, service, rng.randrange(3))
        started = time.perf_counter()
        result = memory.similar_incidents(candidates, service=service, signature=f"{service}:new", error=f"{service} "
                                          "is not running", facts=facts)
        times.append(time.perf_counter() - started)
        found += bool(result)
    times.sort()
    pool = max(len(v) for v in candidates.values())
    print(f"{args.hosts} hosts x {args.episodes} episodes ({len(index)} signatures)\n")
    print("| step | cost |\n|---|---|")
    print(f"| memory.index (once per run) | {index_s:.2f} s |")
    print(f"| memory.recall_index (once per run) | {recall_s:.2f} s |")
    print(f"| candidates kept per service (at most {memory.RECALL_POOL}) | {pool} |")
    print(f"| similar_incidents, one planning step: mean | {statistics.mean(times) * 1000:.1f} ms |")
    print(f"| similar_incidents, one planning step: p95 | {times[int(len(times) * 0.95) - 1] * 1000:.1f} ms |")
    print(f"| steps that recalled a similar incident | {found}/{args.steps} |")


if __name__ == "__main__":
    main()
