# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite's own layout: test modules are imported by their file name (no packages under
tests/integration), so two test files of one name anywhere under tests/ stop the whole
collection with "import file mismatch" (it happened twice, at stops 32 and 33)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _import_name(path: Path) -> str:
    """The module name pytest (prepend import mode) imports a test file as: its dotted path up
    to the first directory without ``__init__.py``, a bare file name outside packages."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_no_two_test_files_are_imported_under_one_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if path.relative_to(TESTS).parts[0] == "output":
            continue
        by_name[_import_name(path)].append(str(path.relative_to(TESTS)))
    assert len(by_name) > 50, sorted(by_name)  # the walk found the suite
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, shared
