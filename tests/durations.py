# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long each test file took at a full run, and the order that makes two workers end together.

scripts/test runs the suite with ``-n 2 --dist loadfile --no-loadscope-reorder``: one file runs
whole on one worker, and files are handed out in collection order, the next one to whichever
worker is nearly done. Handing out the longest files first (longest-processing-time first) keeps
a long file from starting last and running alone while the other worker idles.

The table is data (tests/data/file_seconds.json), refreshed from a full run's junit:
``python -m tests.durations tests/output/pytest.xml``. A file missing from it still runs: an
integration file is guessed at a minute (lab files are seldom quicker), anything else at nothing.
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "tests" / "data" / "file_seconds.json"
UNKNOWN_INTEGRATION_SECONDS = 60
SMALLEST_KEPT = 5  # files quicker than this are left out of the table: their order does not matter


def load_table(path: Path = TABLE) -> dict[str, float]:
    try:
        return {str(name): float(seconds) for name, seconds in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError):
        return {}  # no table: collection order; the suite still runs


def expected_seconds(relpath: str, table: dict[str, float]) -> float:
    if relpath in table:
        return table[relpath]
    return UNKNOWN_INTEGRATION_SECONDS if relpath.startswith("tests/integration/") else 0.0


# A job split into numbered shard files (``test_efficacy_replay_1.py``, ``_2.py``): split to bound
# each shard's lab, not to run side by side. Measured alone, a replay shard kept both cores busy
# (91 % over 323 s, /proc/stat), as the lab-faults file does: run together with it, three CPU-bound
# files slowed each other until the lab's and the engine's health checks timed out (a timed-out
# check is a degraded service, not what was recorded). The shards of a job form one chain.
_SHARD = re.compile(r"^(?P<job>.+)_\d+\.py$")


def chain(relpath: str) -> str:
    """The scheduling scope of a test file: itself, or for a shard ``<job>_<N>.py`` its job,
    ``<job>_*.py``, so the worker that takes the job runs its shards one after another."""
    match = _SHARD.match(relpath)
    return f"{match.group('job')}_*.py" if match else relpath


def longest_first(relpaths: list[str], table: dict[str, float]) -> list[str]:
    """The items' files, longest expected first; ties keep their collection order (sorted is stable)."""
    return sorted(relpaths, key=lambda relpath: -expected_seconds(relpath, table))


def seconds_by_file(junit: Path, root: Path = REPO) -> dict[str, float]:
    """Sum each test file's test times in a junit report (classname is the dotted module path)."""
    totals: Counter[str] = Counter()
    for case in ET.parse(junit).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        for end in range(len(parts), 0, -1):  # a class inside the module adds dotted parts after it
            candidate = Path(*parts[:end]).with_suffix(".py")
            if (root / candidate).is_file():
                totals[candidate.as_posix()] += float(case.get("time") or 0)
                break
    return dict(totals)


def refreshed(table: dict[str, float], measured: dict[str, float]) -> dict[str, int]:
    """The measured files replace their entries; entries of files the run did not have are kept."""
    merged = {**table, **measured}
    return {name: round(seconds) for name, seconds in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))
            if seconds >= SMALLEST_KEPT and (REPO / name).is_file()}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m tests.durations JUNIT_XML (a full run's report, e.g. tests/output/pytest.xml)", file=sys.stderr)
        return 2
    table = refreshed(load_table(), seconds_by_file(Path(argv[0])))
    TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{TABLE.relative_to(REPO)}: {len(table)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
