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

import sys
from pathlib import Path

import checkout_compare  # bench/: the two checkouts timed alternately

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


def main() -> int:
    return checkout_compare.compare(__doc__.split("\n", 1)[0], _PROBE, REPO, 'a checkout whose store is written by path',
                                    ('step', 'baseline median (ms)', 'held store median (ms)', 'difference (ms)'))


if __name__ == "__main__":
    sys.exit(main())
