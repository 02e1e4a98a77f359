"""Every fault of lab/faults.yml really breaks its service and its catalogue fix really heals it.

Judged by the lab's own health check (lab/sentinel_lab.py), never by the collection.
One host per service group, so the faults of one service run one after another on the
same host: each fix must leave the host as healthy as it found it. A host left broken by
a failure is recreated before the next fault.
"""
from __future__ import annotations

import pytest
from sentinel_lab import Lab, load_catalogue

pytestmark = [pytest.mark.lab, pytest.mark.slow]

CATALOGUE = load_catalogue()
HOST_OF_SERVICE = {"nginx": "lab01", "redis": "lab02", "cron": "lab03", "ssh": "lab03"}


@pytest.fixture(scope="module")
def fault_lab(lab_factory) -> Lab:
    return lab_factory("sentinel-test-faults", 3)


def _broken(report) -> list[str]:
    return [f"{name}: {health.summary()}" for name, health in report.items() if not health.healthy]


@pytest.mark.parametrize("name", CATALOGUE.names())
def test_fault_breaks_and_catalogue_fix_heals(fault_lab: Lab, name: str) -> None:
    fault = CATALOGUE.get(name)
    host = HOST_OF_SERVICE[fault.service]
    if _broken(fault_lab.health(host)):
        fault_lab.reset(host)
    assert not _broken(fault_lab.health(host)), f"{host} is not healthy before {name}"

    fault_lab.inject(host, name)
    try:
        after_inject = fault_lab.health(host)
        assert not after_inject[fault.service].healthy, (
            f"{name} did not break {fault.service}: {after_inject[fault.service].checks}"
        )
        others = {s: h for s, h in after_inject.items() if s != fault.service}
        assert not _broken(others), f"{name} broke more than {fault.service}"

        fault_lab.fix(host, name)  # raises LabError unless the service is healthy again
        after_fix = fault_lab.health(host)
        assert not _broken(after_fix), f"after the fix of {name}: {_broken(after_fix)}"
    except BaseException:
        fault_lab.reset(host)
        raise
