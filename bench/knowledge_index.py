"""What the planner's knowledge index costs for an operator's documents: build, cache, query.

Run from the collection root:
    .venv/bin/python bench/knowledge_index.py [--docs 1000] [--queries 200] [--json bench/knowledge_index.json]

Not a test: it prints a Markdown table (BENCHMARKS.md, "Knowledge index"). It writes
``--docs`` synthetic Markdown documents (4-8 sections each, one of 60 services each, a
third with front matter, the rest named by their directory) into a temporary directory,
with the bundled runbooks, then measures:

- cold build: reading, splitting and tokenising every document (what the first planning
  task of a new content pays), and writing the JSON cache;
- importing rank-bm25 (and numpy) in a fresh Python process, and building its BM25 model
  from the cached term frequencies (the first query of a process pays both);
- a memory hit (the same process plans again) and a cache hit (a new Ansible worker
  process: the content key from every file's stat, then the JSON cache);
- queries with the service filter: mean and 95th percentile over ``--queries``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.sentinel.remediation.plugins.plugin_utils import knowledge as kn  # noqa: E402

SERVICES = [f"svc-{name}" for name in (
    "billing", "ledger", "search", "auth", "gateway", "mailer", "thumbnail", "export", "import", "reports",
    "catalog", "cart", "checkout", "payments", "fraud", "pricing", "inventory", "shipping", "tracking", "returns",
    "notify", "sms", "push", "audit", "archive", "backup", "metrics", "logs", "alerts", "config",
    "flags", "session", "profile", "avatar", "upload", "transcode", "stream", "chat", "presence", "feed",
    "ranking", "ads", "campaign", "coupon", "loyalty", "survey", "support", "tickets", "wiki", "cdn",
    "dns", "proxy", "queue", "scheduler", "cron-runner", "worker", "cache", "db-primary", "db-replica", "geo")]
WORDS = ("restart stop start reload config configuration port bind listen socket timeout connection refused "
         "permission denied owner mode directory file missing disk full space inode quota lock pid stale "
         "crash segfault memory oom killed worker master process thread pool queue backlog retry upstream "
         "certificate expired tls handshake dns resolve cache flush evict replica primary failover sync "
         "journal unit systemd masked enable disable deploy rollback version package upgrade dependency "
         "database schema migration index vacuum checkpoint log rotate truncate compress archive").split()
ERRORS = ["Address already in use", "No space left on device", "Permission denied", "connection refused",
          "certificate has expired", "too many open files", "out of memory", "lock file is held by pid",
          "unknown directive", "segmentation fault", "read-only file system", "no such file or directory"]


def write_docs(root: Path, count: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    sections = 0
    for index in range(count):
        service = SERVICES[index % len(SERVICES)]
        folder = root / service if index % 3 else root / "shared"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        if not index % 3:
            lines += ["---", f"services: [{service}]", f"title: {service} note {index}", "---"]
        lines += [f"# {service} operations note {index}", "", " ".join(rng.choices(WORDS, k=30)), ""]
        for number in range(rng.randint(4, 8)):
            sections += 1
            lines += [f"## {rng.choice(ERRORS).capitalize()} ({number})", ""]
            for _paragraph in range(rng.randint(1, 3)):
                lines += [" ".join(rng.choices(WORDS, k=rng.randint(25, 60))) + f" {rng.choice(ERRORS)}.", ""]
            lines += ["```", f"service {service} restart", "```", ""]
        (folder / f"note-{index:04d}.md").write_text("\n".join(lines))
    return sections


def _import_cost() -> float:
    """Seconds a fresh interpreter spends importing rank_bm25 (numpy included), minus startup."""
    def run(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - started
    return min(run("import rank_bm25") for _attempt in range(3)) - min(run("pass") for _attempt in range(3))


def timed(function):
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sentinel-knowledge-bench-"))
    try:
        docs, cache = work / "docs", work / "cache"
        sections = write_docs(docs, args.docs)
        size = sum(p.stat().st_size for p in docs.rglob("*.md"))

        kn._MEMORY.clear()
        cold, cold_s = timed(lambda: kn.load_knowledge([], [docs], cache_dir=cache))
        assert cold.origin == "built"
        rng = random.Random(11)
        queries = [(rng.choice(SERVICES), f"{rng.choice(ERRORS)} {' '.join(rng.choices(WORDS, k=8))}")
                   for _query in range(args.queries)]
        import_s = _import_cost()
        _first, first_query_s = timed(lambda: cold.query(queries[0][1], queries[0][0], 3))
        memory, memory_s = timed(lambda: kn.load_knowledge([], [docs], cache_dir=cache))
        assert memory.origin == "memory"
        kn._MEMORY.clear()
        _key, key_s = timed(lambda: kn.knowledge_key([], [docs]))
        cached, cached_s = timed(lambda: kn.load_knowledge([], [docs], cache_dir=cache))
        assert cached.origin == "cache"
        _bm25, bm25_s = timed(lambda: cached.index.bm25)
        times, others = [], 0
        for service, text in queries:
            result, seconds = timed(lambda s=service, t=text: cached.query(t, s, 3))
            times.append(seconds)
            others += any(r["other_service"] for r in result)
        cache_file = next(cache.glob("knowledge-*.json"))
        figures = {
            "documents": args.docs, "document_bytes": size, "sections": sections,
            "passages": len(cached.index), "runbooks": len(cached.runbooks), "services": len(SERVICES),
            "cold_build_s": round(cold_s, 3), "first_query_with_bm25_build_s": round(first_query_s, 3),
            "import_rank_bm25_s": round(import_s, 3),
            "memory_hit_ms": round(memory_s * 1000, 2), "content_key_ms": round(key_s * 1000, 1),
            "cache_hit_s": round(cached_s, 3), "bm25_build_from_cache_s": round(bm25_s, 3),
            "cache_file_bytes": cache_file.stat().st_size,
            "query_mean_ms": round(statistics.mean(times) * 1000, 2),
            "query_p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 2),
            "queries": len(times), "queries_answered_from_other_services": others,
            "python": platform.python_version(), "cpus": os.cpu_count(),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    f = figures
    print(f"{f['documents']} documents ({f['document_bytes'] / 1e6:.1f} MB), {f['passages']} passages "
          f"({f['sections']} sections + runbook parts), {f['services']} services\n")
    print("| step | cost |\n|---|---|")
    print(f"| cold build (read, split, tokenise, write the cache) | {f['cold_build_s']:.2f} s |")
    print(f"| import rank-bm25 and numpy in a fresh process | {f['import_rank_bm25_s']:.2f} s |")
    print(f"| first query after the build (imports rank-bm25, builds BM25) | {f['first_query_with_bm25_build_s']:.2f} s |")
    print(f"| same process again (memory) | {f['memory_hit_ms']:.2f} ms |")
    print(f"| new process: content key (stat of every file) | {f['content_key_ms']:.1f} ms |")
    print(f"| new process: key + JSON cache load | {f['cache_hit_s']:.2f} s |")
    print(f"| new process: BM25 model from the cached term frequencies | {f['bm25_build_from_cache_s']:.2f} s |")
    print(f"| query with the service filter, mean / p95 ({f['queries']} queries) | "
          f"{f['query_mean_ms']:.1f} / {f['query_p95_ms']:.1f} ms |")
    print(f"| cache file | {f['cache_file_bytes'] / 1e6:.1f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
