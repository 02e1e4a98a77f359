# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two checkouts' host code timed by one probe, alternately (bench/held_path_cost.py, store_writes_cost.py).

A probe is Python source run as ``python -c PROBE COLLECTIONS ROUNDS WORK`` with the checkout
importable as ``ansible_collections.sentinel.remediation``; it prints one JSON object of
step -> median milliseconds. The two checkouts run in alternating slices, so the load of a
shared machine falls on both alike; the table gives each step's median of the slices.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _collections(checkout: Path) -> Path:
    """A directory holding ``ansible_collections/sentinel/remediation`` as a link to ``checkout``."""
    link = Path(tempfile.mkdtemp(prefix="bench-collections-")) / "ansible_collections" / "sentinel"
    link.mkdir(parents=True)
    (link / "remediation").symlink_to(checkout.resolve())
    return link.parents[1]


def measure(checkout: Path, probe: str, rounds: int) -> dict:
    work, collections = tempfile.mkdtemp(prefix="bench-work-"), _collections(checkout)
    try:
        proc = subprocess.run([sys.executable, "-c", probe, str(collections), str(rounds), work],
                              capture_output=True, text=True, check=False, timeout=3600)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(collections, ignore_errors=True)  # the link to the checkout, not the checkout
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: the probe failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def compare(description: str, probe: str, this: Path, baseline_help: str, columns: tuple[str, str, str, str],
            argv=None) -> int:
    """Parse ``--baseline``/``--rounds``, time both checkouts, print the markdown table."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--baseline", type=Path, required=True, help=baseline_help)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args(argv)
    base: dict = {}
    mine: dict = {}
    slices = max(1, args.rounds // 25)
    for _slice in range(slices):
        for figures, checkout in ((base, args.baseline), (mine, this)):
            for name, value in measure(checkout, probe, args.rounds // slices).items():
                figures.setdefault(name, []).append(value)
    print("| " + " | ".join(columns) + " |")
    print("|---|---|---|---|")
    for name in mine:
        old, new = sorted(base[name])[len(base[name]) // 2], sorted(mine[name])[len(mine[name]) // 2]
        print(f"| {name} | {old:.2f} | {new:.2f} | {new - old:+.2f} |")
    return 0
