# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The efficacy benchmark with a capable model's answers, replayed (issue 11).

The answers were recorded from a relay run of bench/efficacy.py in which a capable model
answered every planner request, reading only the request (the command is in
tests/transcripts/efficacy-expected.json, which also holds how each fault ended). Here the
test LLM server serves those recorded answers (replay mode) to the real ``openai`` client,
every fault the model answered for is injected on a lab host of the recorded kind, one run
of playbooks/remediate.yml tries to heal the fleet, and every fixable plan that waits for
approval and destroys nothing is approved once through playbooks/resume.yml. The verdicts
come from the lab's own health check, never from the report.

When the prompts change on purpose, record again (docs/operate.md, "Playing the model").

The recorded faults are split into shards, one test file each (test_efficacy_replay_*.py sets
``SHARD = (index, count)`` and imports this module's fixture and tests), each on its own lab of
one host per fault: a shard's lab is half the size, and a failure names its shard. The suite
runs the shards one after another on one worker (tests/durations.py, ``chain``): a shard keeps
both cores busy alone, and two side by side beside the lab-faults file slowed the health checks
of a 2-core CI machine until they timed out.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

# One replay of a shard's faults (a lab of one host per fault): it may take more than the
# default 900 s on a loaded machine.
pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
TRANSCRIPTS = REPO / "tests" / "transcripts" / "efficacy"
EXPECTED = REPO / "tests" / "transcripts" / "efficacy-expected.json"


def shard(faults: list[dict], index: int, count: int) -> list[dict]:
    """Shard ``index`` (1-based) of ``count``: every count-th fault, so each shard gets faults of
    every batch and kind, and human-only and approved ones alike (their costs differ)."""
    return faults[index - 1::count]


def _efficacy():
    """bench/efficacy.py, imported from the checkout's bench directory."""
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    import efficacy  # pylint: disable=import-outside-toplevel

    return efficacy


@pytest.fixture(scope="module")
def replayed(request, tmp_path_factory):
    efficacy = _efficacy()
    index, count = request.module.SHARD
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    faults = shard(expected["faults"], index, count)
    assert faults and list(TRANSCRIPTS.glob("*.json")), "no recorded efficacy transcripts"
    prefix = f"{os.environ.get('SENTINEL_LAB_PREFIX') or 'sentinel-test'}-eff{index}"
    # Faults recorded after a healthy pass (known-good baselines in the evidence, as a watch
    # has them) are replayed the same way; the older recordings had no healthy pass, so their
    # hosts are left out of it. One lab and one run for both.
    out = tmp_path_factory.mktemp("efficacy") / "efficacy.json"
    entries = [f"{f['fault']}@{f['kind']}" for f in faults]
    without = [f"{f['fault']}@{f['kind']}" for f in faults if not f.get("baseline")]
    # A shard runs beside two other lab files: it keeps fewer forks than ansible.cfg's 30 (30
    # timed out the health checks and evidence commands of a 2-core machine: a timed-out check
    # is a degraded service, which is not what was recorded).
    rc = efficacy.main(["--mode", "replay", "--transcripts", str(TRANSCRIPTS), "--approve", "--prefix", prefix,
                        "--forks", str(max(1, 24 // count)),
                        "--faults", ",".join(entries), "--no-baseline-for", ",".join(without),
                        "--out", str(out), "--markdown", "-"])
    found = json.loads(out.read_text(encoding="utf-8"))["modes"]["replay"]["rows"]
    rows = {(r["fault"], r["kind"]): r for r in found}
    return rc, rows, faults


def test_every_fault_was_prepared_and_answered_from_the_recording(replayed):
    rc, rows, faults = replayed
    assert rc == 0, {k: r.get("reason") for k, r in rows.items() if r["state"] == "not_prepared"}
    assert set(rows) == {(f["fault"], f["kind"]) for f in faults}
    for key, row in rows.items():
        # A fault a runbook learned to fix since the recording heals without asking the model.
        assert row["llm_calls"] >= 1 or (row["healed"] and set(row["sources"]) <= {"runbook", "memory", "known_good"}), \
            (key, row)
        assert "no scripted reply" not in row.get("reason", ""), (key, row["reason"])


def test_the_human_only_faults_are_held(replayed):
    _rc, rows, faults = replayed
    human = [f for f in faults if f["needs_human"]]
    assert human
    for fault in human:
        row = rows[(fault["fault"], fault["kind"])]
        assert not row["healed"] and not row.get("healed_after_approval"), row
        assert row["state"] in _efficacy().HELD_STATES, row
        assert row.get("approval") != "approved", row


def test_the_fixable_faults_heal_as_recorded(replayed):
    _rc, rows, faults = replayed
    missed = {}  # every fault that did not end as recorded, not only the first
    for fault in (f for f in faults if not f["needs_human"]):
        key = (fault["fault"], fault["kind"])
        row = rows[key]
        if fault["healed"]:
            ok = row["healed"] and row["attempts"] <= 2
        elif fault["healed_after_approval"]:
            ok = row["healed"] or row.get("healed_after_approval")
        else:  # recorded as not healed: it must still not make things worse
            ok = row["state"] in ("escalated", "waiting_approval", "healed")
        if not ok:
            missed["@".join(key)] = {k: row.get(k) for k in ("state", "attempts", "sources", "commands",
                                                             "approved_plan", "reason", "diagnosis",
                                                             "llm_error")}
    assert not missed, missed


def test_nothing_destructive_ran_and_no_plan_ran_twice(replayed):
    _rc, rows, _faults = replayed
    for key, row in rows.items():
        assert not row.get("destroyed_data"), (key, row["destroyed_data"])
        assert row.get("repeated_plans", 0) == 0, (key, row["commands"])
