# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite hands its longest files out first (tests/durations.py), so two workers end together."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import durations

REPO = Path(__file__).resolve().parents[2]


def test_every_file_in_the_duration_table_exists_and_the_table_is_longest_first() -> None:
    raw = json.loads(durations.TABLE.read_text(encoding="utf-8"))
    assert len(raw) > 20, raw
    missing = [name for name in raw if not (REPO / name).is_file()]
    assert not missing, f"renamed or removed test files still in {durations.TABLE.name}: {missing}"
    assert list(raw.values()) == sorted(raw.values(), reverse=True)


def test_longest_files_come_first_and_unknown_files_still_run() -> None:
    table = {"tests/integration/test_a.py": 30.0, "tests/integration/test_b.py": 300.0, "tests/unit/test_c.py": 9.0}
    files = ["tests/unit/test_new_unit.py", "tests/unit/test_c.py", "tests/integration/test_a.py",
             "tests/integration/test_new_lab.py", "tests/integration/test_b.py"]
    assert durations.longest_first(files, table) == [
        "tests/integration/test_b.py", "tests/integration/test_new_lab.py",  # an unknown lab file: a minute
        "tests/integration/test_a.py", "tests/unit/test_c.py", "tests/unit/test_new_unit.py"]


def test_a_missing_or_broken_table_leaves_collection_order(tmp_path: Path) -> None:
    broken = tmp_path / "file_seconds.json"
    broken.write_text("[not a table", encoding="utf-8")
    assert durations.load_table(broken) == {}
    assert durations.load_table(tmp_path / "absent.json") == {}


def test_a_junit_report_is_summed_per_file_and_merged_into_the_table(tmp_path: Path) -> None:
    junit = tmp_path / "pytest.xml"
    junit.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.integration.test_undo" name="a" time="40.5"/>'
        '<testcase classname="tests.integration.test_undo" name="b" time="20"/>'
        '<testcase classname="tests.unit.test_file_durations.Some" name="c" time="7"/>'
        '<testcase classname="tests.integration.test_gone_away" name="d" time="99"/>'
        '</testsuite></testsuites>', encoding="utf-8")
    measured = durations.seconds_by_file(junit)
    assert measured == {"tests/integration/test_undo.py": 60.5, "tests/unit/test_file_durations.py": 7.0}
    kept = {"tests/integration/test_eda.py": 100.0, "tests/integration/test_gone_away.py": 50.0, "tests/unit/test_cli.py": 1.0}
    assert durations.refreshed(kept, measured) == {
        "tests/integration/test_eda.py": 100, "tests/integration/test_undo.py": 60, "tests/unit/test_file_durations.py": 7}


def test_collection_puts_the_heavier_file_first_and_ci_keeps_that_order() -> None:
    light = "tests/unit/test_test_layout.py"  # not in the table: a unit file counts as nothing
    table = durations.load_table()
    assert durations.expected_seconds(light, table) == 0.0
    first, second = "tests/integration/test_efficacy_replay_1.py", "tests/integration/test_confinement.py"
    assert durations.expected_seconds(first, table) > durations.expected_seconds(second, table) > 0
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", second, light, first],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
    files = [line.split("::", 1)[0] for line in listed.stdout.splitlines() if "::" in line]
    assert files, listed.stdout + listed.stderr
    order = list(dict.fromkeys(files))
    assert order == [first, second, light], order
    # xdist would re-sort files by their number of tests unless told not to
    assert "--dist loadfile --no-loadscope-reorder" in (REPO / "scripts" / "test").read_text(encoding="utf-8")


def test_the_shards_of_one_job_are_one_chain_and_other_files_their_own():
    assert durations.chain("tests/integration/test_efficacy_replay_1.py") == "tests/integration/test_efficacy_replay_*.py"
    assert durations.chain("tests/integration/test_efficacy_replay_2.py") == "tests/integration/test_efficacy_replay_*.py"
    assert durations.chain("tests/integration/test_lab_faults.py") == "tests/integration/test_lab_faults.py"
    assert durations.chain("tests/unit/test_policy.py") == "tests/unit/test_policy.py"
