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


_ensure_collection_path()
