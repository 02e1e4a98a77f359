# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What writing the host's store through held directories costs (BENCHMARKS.md).

A snapshot session of this checkout and of a baseline checkout (another worktree, e.g. main
before the store was held) keeps 20 files of 4 KiB (new bytes every round, so every put writes
an object), then saves its undo manifest (which prunes); and a known-good record of the same 20
files (each stored, one manifest). Each checkout runs in its own process, alternately, in slices;
the figure is the median wall time in milliseconds of each step, and the difference. Run as root
(the host side runs as root; snapshots keep owners).

    sudo python bench/store_writes_cost.py --baseline /work/main [--rounds 200]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_PROBE = r"""
import hashlib, json, os, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.sentinel.remediation.plugins.module_utils import known_good, snapshot
rounds, work = int(sys.argv[2]), sys.argv[3]
conf = os.path.join(work, "etc", "app")
os.makedirs(conf)
files = [os.path.join(conf, "%d.conf" % index) for index in range(20)]
times = {"capture of 20 files (session opened, kept)": [], "undo manifest saved (and pruned)": [],
         "known-good record of 20 files": []}
for number in range(rounds):
    for index, path in enumerate(files):
        with open(path, "wb") as handle:
            handle.write(("%d %d\n" % (number, index)).encode() * 512)
    started = time.perf_counter()
    session = snapshot.Session(os.path.join(work, "state"), "bench-1", number + 1, 10 ** 9, 3600)
    assert session.keep([{"path": path, "tree": False} for path in files]) == []
    middle = time.perf_counter()
    session.save([], False)
    ended = time.perf_counter()
    times["capture of 20 files (session opened, kept)"].append((middle - started) * 1000)
    times["undo manifest saved (and pruned)"].append((ended - middle) * 1000)
    current = {}
    for path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        current[path] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "mode": "0644", "uid": 0,
                         "gid": 0}
    started = time.perf_counter()
    known_good.Baselines(os.path.join(work, "kg")).record("bench", current)
    times["known-good record of 20 files"].append((time.perf_counter() - started) * 1000)
print(json.dumps({name: statistics.median(values) for name, values in times.items()}))
"""


def _collections(checkout: Path) -> Path:
    """The directory holding ``ansible_collections/sentinel/remediation`` for a checkout."""
    link = Path(tempfile.mkdtemp(prefix="store-bench-")) / "ansible_collections" / "sentinel"
    link.mkdir(parents=True)
    (link / "remediation").symlink_to(checkout.resolve())
    return link.parents[1]


def measure(checkout: Path, rounds: int) -> dict:
    work, collections = tempfile.mkdtemp(prefix="store-bench-work-"), _collections(checkout)
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, str(collections), str(rounds), work],
                              capture_output=True, text=True, check=False, timeout=3600)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(collections, ignore_errors=True)  # the link to the checkout, not the checkout
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: the probe failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout whose store is written by path")
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    base, this = {}, {}
    # alternate in slices, so the load of a shared machine falls on both alike
    slices = max(1, args.rounds // 25)
    for _slice in range(slices):
        for figures, checkout in ((base, args.baseline), (this, REPO)):
            for name, value in measure(checkout, args.rounds // slices).items():
                figures.setdefault(name, []).append(value)
    print("| step | baseline median (ms) | held store median (ms) | difference (ms) |")
    print("|---|---|---|---|")
    for name in this:
        old, new = sorted(base[name])[len(base[name]) // 2], sorted(this[name])[len(this[name]) // 2]
        print(f"| {name} | {old:.2f} | {new:.2f} | {new - old:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
