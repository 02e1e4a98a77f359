"""Test set-up shared by every test: the checkout importable as sentinel.remediation."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COLLECTIONS = REPO / ".collections"


def _ensure_collection_path() -> None:
    link = COLLECTIONS / "ansible_collections" / "sentinel" / "remediation"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("..") / ".." / "..")
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    # Test helpers (tests/llm_server.py, lab/sentinel_lab.py) import as `tests.*` / `lab.*`.
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    os.environ.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
    # The role's state directory in the checkout, as scripts/setup sets it (not the user's XDG state).
    os.environ.setdefault("SENTINEL_STATE_DIR", str(REPO / ".cache"))


_ensure_collection_path()


# The longest test files first (tests/durations.py): scripts/test runs the suite on three workers,
# one file whole on one worker, handed out in collection order; a long file handed out last
# would run alone while the other workers idle.
def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
    from tests.durations import expected_seconds, load_table  # pylint: disable=import-outside-toplevel

    table = load_table()

    def relpath(item) -> str:
        try:
            return item.path.resolve().relative_to(REPO).as_posix()
        except ValueError:
            return item.path.name

    items.sort(key=lambda item: -expected_seconds(relpath(item), table))  # stable: ties keep their order


# The shards of one job (tests/durations.py, ``chain``) are one unit of work: with
# ``--dist loadfile`` a worker takes a job's shard files together and runs them one after another.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # pylint: disable=import-outside-toplevel

    from tests.durations import chain  # pylint: disable=import-outside-toplevel

    class ChainedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return chain(super()._split_scope(nodeid))

    return ChainedFileScheduling(config, log)
