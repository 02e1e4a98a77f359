# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What undo costs on the host: keeping a path before a command, then finding what changed
and putting it back, with the host code itself (plugins/module_utils/snapshot.py) on this
machine's disk (BENCHMARKS.md). Two cases: one 4 KiB configuration file edited, and a tree of
500 small files removed. Medians in milliseconds; every put-back is checked.

    python bench/undo_cost.py [--rounds 20]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot  # noqa: E402


def _median_ms(values: list[float]) -> float:
    values = sorted(values)
    return round(values[len(values) // 2] * 1000, 2)


def measure(root: Path, changes: list[dict], prepare, mutate, rounds: int) -> dict:
    keep, back = [], []
    for number in range(rounds):
        prepare()
        session = snapshot.Session(str(root / "state"), "bench-1", number + 1, 10 ** 9, 3600)
        start = time.perf_counter()
        session.keep(changes)
        kept = time.perf_counter()
        mutate()
        session.changed()
        outcome = session.rollback()
        back.append(time.perf_counter() - kept)
        keep.append(kept - start)
        if outcome["failed"]:
            raise SystemExit(f"put-back failed: {outcome['failed']}")
    return {"keep_ms": _median_ms(keep), "changed_and_rollback_ms": _median_ms(back), "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="undo-bench-"))
    try:
        conf, tree = root / "site.conf", root / "tree"

        def one_file():
            conf.write_text("x" * 4096)

        def a_tree():
            shutil.rmtree(tree, ignore_errors=True)
            tree.mkdir()
            for index in range(500):
                (tree / f"{index}.conf").write_text(f"line {index}\n" * 50)

        figures = {
            "config_edited": measure(root, [{"path": str(conf), "tree": False}], one_file,
                                     lambda: conf.write_text("y"), args.rounds),
            "tree_of_500_removed": measure(root, [{"path": str(tree), "tree": True}], a_tree,
                                           lambda: shutil.rmtree(tree), max(3, args.rounds // 4)),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
