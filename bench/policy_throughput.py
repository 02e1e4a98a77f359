"""Commands classified per second by the policy engine, on one core.

Run from the collection root:  .venv/bin/python bench/policy_throughput.py [--seconds 5]
Not a test: it prints a figure (BENCHMARKS.md quotes it). The workload is every command of
the policy corpora (tests/corpora/policy: harmful and legitimate, allowed, gated and
refused), each classified in its incident scope on its kind of host, as the filter does
it: the policy and the scope are compiled once per incident, every command is parsed and
judged from scratch (there is no result cache).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import (  # noqa: E402
    classify,
    compile_scope,
    load_policy,
)

CORPORA = ROOT / "tests" / "corpora" / "policy"


def workload() -> list[tuple[str, object, object]]:
    """(command, loaded policy, compiled scope or None) for every corpus entry."""
    scopes = yaml.safe_load((CORPORA / "scopes.yml").read_text(encoding="utf-8"))
    policies = {name: load_policy(over or None) for name, over in scopes["hosts"].items()}
    compiled = {}
    items = []
    for path in sorted(CORPORA.glob("*.yml")):
        if path.name == "scopes.yml":
            continue
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for kind in ("legitimate", "harmful"):
            for entry in doc[kind]:
                host, scope = entry.get("host", doc["host"]), entry.get("scope", doc["scope"])
                policy = policies[host]
                if (host, scope) not in compiled:
                    data = scopes["scopes"][scope]
                    compiled[(host, scope)] = (compile_scope(data, policy["default_scope"], policy["scope"])
                                               if data else None)
                items.append((entry["command"], policy, compiled[(host, scope)]))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to measure")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    items = workload()
    start = time.perf_counter()
    load_policy({"absent_tools": ["lsof"]})
    load_ms = (time.perf_counter() - start) * 1000
    verdicts = {"allow": 0, "approval": 0, "reject": 0}
    for command, policy, scope in items:  # warm imports and regex caches, not results
        verdicts[classify(command, policy, scope)["verdict"]] += 1
    done = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        for command, policy, scope in items:
            classify(command, policy, scope)
        done += len(items)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    # CPU time is what one core spent; on a shared machine wall time also counts waiting for it.
    print(f"{done} commands in {cpu:.2f} s of CPU on one core: {done / cpu:,.0f} commands/s "
          f"({1e6 * cpu / done:.1f} us each); wall {elapsed:.2f} s ({done / elapsed:,.0f}/s wall). "
          f"Corpus of {len(items)} commands: {verdicts['allow']} allowed, {verdicts['approval']} gated, "
          f"{verdicts['reject']} refused. load_policy with overrides: {load_ms:.1f} ms")


if __name__ == "__main__":
    main()
