# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A service on a shared lab host, set up for one test and put back after it."""
from __future__ import annotations

from contextlib import contextmanager

# The host's known-good baselines (plugins/module_utils/known_good.py): a healthy pass of any test
# records one per service, and it stays on the shared host until removed.
KNOWN_GOOD = "/var/lib/sentinel-remediation/known-good"


def forget_known_good(lab, host: str) -> None:
    """Remove every known-good baseline ``host`` keeps (manifests, staged restores, the aside log).
    A baseline a module's healthy pass left behind would make another module's first attempt a
    known-good restore of that module's own scene (a file it made is new since that pass)."""
    lab.exec(host, ["rm", "-rf", KNOWN_GOOD], check=True)


@contextmanager
def service_scene(lab, host: str, service: str, setup: str, teardown: str, check: bool = False, timeout: int = 60):
    """``setup`` run on ``host`` and ``service`` healthy before the body; ``teardown`` after it,
    and the host reset when the service is still not healthy (the next test on the shared host
    starts from a healthy one). ``check``: a failing ``setup`` fails the test."""
    lab.exec(host, setup, check=check, timeout=timeout)
    lab.wait_health(host, [service], timeout=timeout)
    yield
    lab.exec(host, teardown, timeout=timeout)
    if not lab.health(host, [service])[service].healthy:
        lab.reset(host)
