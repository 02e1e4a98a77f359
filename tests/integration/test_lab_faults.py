"""Every fault of lab/faults.yml, on every host kind it names, really breaks its service
and its catalogue fix really heals it.

Judged by the lab's own health check (lab/lab_health.py), never by the collection. Per
fault and kind: the host is healthy, the fault is injected, the health check says the
fault's service is broken while the services outside its scope (the service, what it
needs and what needs it) stay healthy, the catalogue's fix runs, and every service of the
host is healthy again.

Fast on purpose: the faults share a few containers per kind (lanes) and the lanes run in
parallel threads; the faults of one lane run one after another on the same host, so each
fix must leave the host healthy. A host left broken by a failure, or changed for good by
a `reset_after` fault, is recreated before the next fault. The module fixture runs only
the cases pytest selected (`-k`), then each test reports its own case.

Environment: SENTINEL_LAB_FAULT_LANES (hosts per kind, default 3), SENTINEL_LAB_KINDS
(default "sysv,systemd"), SENTINEL_LAB_PREFIX (containers <prefix>-faults-labNN).
"""
from __future__ import annotations

import os
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
from sentinel_lab import KINDS, Lab, LabError, load_catalogue

# The module fixture runs every selected case before the first test reports (about six minutes
# for all of them on an idle 2-core machine, more beside the suite's other lab files): the
# first test carries that whole run, so its limit is the module's, not one case's.
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(2700)]

CATALOGUE = load_catalogue()
TEST_KINDS = [k for k in os.environ.get("SENTINEL_LAB_KINDS", ",".join(KINDS)).split(",") if k in KINDS]
LANES = max(1, int(os.environ.get("SENTINEL_LAB_FAULT_LANES", "3")))
CASES = [(name, kind) for name, fault in CATALOGUE.faults.items() for kind in fault.kinds if kind in TEST_KINDS]
BROKEN_WITHIN = 20  # seconds a fault may take to show in the health check
AFTER_FIX_WITHIN = 30  # seconds every service has to answer again after a fix


def case_id(name: str, kind: str) -> str:
    return f"{kind}-{name}"


@dataclass
class Outcome:
    name: str
    kind: str
    host: str = ""
    ok: bool = False
    steps: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0


def _broken(report) -> list[str]:
    return [f"{name}: {health.summary()}" for name, health in report.items() if not health.healthy]


def _run_case(lab: Lab, host: str, name: str, kind: str) -> Outcome:
    fault = CATALOGUE.get(name)
    outcome = Outcome(name, kind, host)
    started = time.monotonic()
    try:
        lab.clear_failures(host)
        before = lab.health(host)
        if _broken(before):
            outcome.steps.append("host not healthy before the fault: recreated")
            lab.reset(host)
            before = lab.health(host)
        assert not _broken(before), f"{host} is not healthy before {name}: {_broken(before)}"

        lab.inject(host, name)
        # One poll of every service until the fault's own is broken: its report also says
        # whether anything outside the fault's scope broke (each health check is a python
        # and a dozen probes in the host: the suite's CPU, counted per look).
        try:
            after_inject = lab.wait_health(host, healthy=False, broken=fault.service, timeout=BROKEN_WITHIN)
        except LabError as exc:
            raise AssertionError(f"{name} did not break {fault.service}: {exc}") from exc
        outcome.steps.append(f"broken: {after_inject[fault.service].summary()}")
        scope = CATALOGUE.scope(fault.service)
        outside = {s: h for s, h in after_inject.items() if s not in scope}
        assert not _broken(outside), f"{name} broke services outside {sorted(scope)}: {_broken(outside)}"

        lab.fix(host, name, wait=False)  # raises LabError when a fix command fails
        # Every service healthy after the fix: polled, not one look (a restarted database can
        # take a few seconds to answer its first query on a loaded machine); a service still
        # broken after the window fails the case with what its check said.
        try:
            lab.wait_health(host, timeout=AFTER_FIX_WITHIN)
        except LabError as exc:
            raise AssertionError(f"after the fix of {name}: {exc}") from exc
        outcome.steps.append("fixed: every service healthy")
        outcome.ok = True
        if fault.reset_after:
            lab.reset(host)
            outcome.steps.append("recreated (the fix leaves the host changed for good)")
    except (AssertionError, LabError) as exc:
        outcome.error = str(exc)
    except Exception:  # report it on this case and keep the lane going
        outcome.error = traceback.format_exc()
    if not outcome.ok:
        try:
            lab.reset(host)
        except LabError as exc:
            outcome.error += f"\n(and recreating {host} failed: {exc})"
    outcome.seconds = time.monotonic() - started
    return outcome


@pytest.fixture(scope="module")
def fault_outcomes(request: pytest.FixtureRequest, lab_factory) -> dict[tuple[str, str], Outcome]:
    """Run the selected cases on LANES hosts per kind, in parallel; {(fault, kind): Outcome}."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "case" in item.callspec.params]
    kinds = [k for k in TEST_KINDS if any(kind == k for _name, kind in selected)]
    if not kinds:
        return {}
    prefix = f"{os.environ.get('SENTINEL_LAB_PREFIX') or 'sentinel-test'}-faults"
    if kinds == list(KINDS):
        lab = lab_factory(prefix, LANES * len(KINDS), kind="mixed")
    else:
        lab = lab_factory(prefix, LANES, kind=kinds[0])
    lanes: dict[str, list[tuple[str, str]]] = {h: [] for h in lab.hosts()}
    hosts_of_kind = {k: [h for h in lanes if lab.kind(h) == k] for k in kinds}
    # Longest-first would balance better, but the catalogue order keeps each lane's story readable.
    for index, (name, kind) in enumerate(sorted(selected, key=lambda c: (c[1], list(CATALOGUE.faults).index(c[0])))):
        hosts = hosts_of_kind[kind]
        lanes[hosts[index % len(hosts)]].append((name, kind))

    def run_lane(host: str) -> list[Outcome]:
        return [_run_case(lab, host, name, kind) for name, kind in lanes[host]]

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        results = [o for lane in pool.map(run_lane, lanes) for o in lane]
    elapsed = time.monotonic() - started
    print(f"\nlab faults: {len(results)} cases on {len(lanes)} hosts in {elapsed:.0f} s; slowest: "
          + ", ".join(f"{o.kind}/{o.name} {o.seconds:.0f}s" for o in sorted(results, key=lambda o: -o.seconds)[:5]))
    return {(o.name, o.kind): o for o in results}


@pytest.mark.parametrize("case", CASES, ids=[case_id(n, k) for n, k in CASES])
def test_fault_breaks_and_catalogue_fix_heals(fault_outcomes: dict[tuple[str, str], Outcome], case) -> None:
    outcome = fault_outcomes[case]
    assert outcome.ok, f"{case_id(*case)} on {outcome.host}: {outcome.error}\nsteps: {outcome.steps}"
