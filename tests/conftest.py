"""Test set-up shared by every test: the checkout importable as sentinel.remediation."""
from __future__ import annotations

import os
import sys
from pathlib import Path

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


# The longest test files first: scripts/test runs the suite on two workers, one file whole on
# one worker, handed out in collection order; a long file handed out last would run alone.
_LONGEST_FIRST = ("test_efficacy_replay.py", "test_lab_faults.py", "test_reliability.py", "test_fault_injection.py")


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
    rank = {name: index for index, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
