"""Fixtures for tests against the lab's real containers (see docs/lab.md).

`lab` is one session lab of three hosts for any test that needs hosts to break and heal;
`mixed_lab` is one SysV and one systemd host for the tests that need systemd;
`lab_factory(prefix, count, kind="sysv")` makes a lab of one's own (its own container
prefix; `kind` sysv, systemd or mixed) when a test must not share hosts. Every lab made
here is removed when the session ends, unless SENTINEL_LAB_KEEP=1. Without Docker or the
lab image the tests are skipped with the reason, except under CI=true, where a missing lab
is a failure.

`installed_collection` is the collection as users get it (the built tarball installed
read-only with its declared dependencies), and `installed_driver` the driver installed into
a virtualenv of its own: one of each per session, shared by every test of installed use.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

LAB_DIR = Path(__file__).resolve().parents[2] / "lab"
if str(LAB_DIR) not in sys.path:
    sys.path.insert(0, str(LAB_DIR))

from installed_support import Installed, install_collection, install_driver, undo_read_only  # noqa: E402
from sentinel_lab import Lab, kinds_for  # noqa: E402

# One per pytest-xdist worker (scripts/test runs three): workers never share containers.
_WORKER = f"-{os.environ['PYTEST_XDIST_WORKER']}" if os.environ.get("PYTEST_XDIST_WORKER") else ""
SESSION_PREFIX = "sentinel-test" + _WORKER
MIXED_PREFIX = "sentinel-confine" + _WORKER


def _unavailable(reason: str) -> None:
    message = f"the lab is not available: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: lab tests must run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[Callable[..., Lab]]:
    made: dict[str, Lab] = {}
    problem: list[str] = []

    def make(prefix: str, count: int = 3, kind: str = "sysv") -> Lab:
        if problem:
            _unavailable(problem[0])
        kinds = sorted(set(kinds_for(count, kind)))
        lab = made.get(prefix) or Lab(prefix=prefix)
        reason = lab.image_problem(kinds)
        if reason:
            if kinds == ["sysv"]:
                problem.append(reason)
            _unavailable(reason)
        made[prefix] = lab
        lab.up(count, kind=kind)
        return lab

    yield make
    if os.environ.get("SENTINEL_LAB_KEEP") != "1":
        for lab in made.values():
            lab.down()


@pytest.fixture(scope="session")
def lab(lab_factory: Callable[..., Lab]) -> Lab:
    """Three running hosts (lab01..lab03, prefix sentinel-test) with healthy services."""
    return lab_factory(SESSION_PREFIX, 3)


@pytest.fixture(scope="session")
def mixed_lab(lab_factory: Callable[..., Lab]) -> Lab:
    """Two hosts, lab01 SysV and lab02 systemd (prefix sentinel-confine), shared by the files
    that need a systemd host: one systemd boot per worker. Each file puts back what it changes."""
    return lab_factory(MIXED_PREFIX, 2, kind="mixed")


@pytest.fixture(scope="session")
def lab_inventory(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A static Ansible inventory (group `lab`) of the session lab's hosts."""
    return lab.write_inventory(tmp_path_factory.mktemp("lab-inventory") / "hosts.yml")


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The built tarball installed read-only (see tests/integration/installed_support.py)."""
    installed, mounts = install_collection(tmp_path_factory.mktemp("installed"))
    try:
        yield installed
    finally:
        undo_read_only(mounts, [installed.install, installed.deps])


@pytest.fixture(scope="session")
def installed_driver(installed_collection: Installed) -> Path:
    """`sentinel-remediate` of a virtualenv holding the driver (pip, driver/pyproject.toml) and the
    installed collection's Python requirements."""
    return install_driver(installed_collection.base / "driver-venv", installed_collection.collection)
