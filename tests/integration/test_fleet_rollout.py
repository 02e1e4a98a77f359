"""Canary waves and the fleet-wide stop (issue 29), on the session lab's three hosts: a fault on
every host is healed canary first, then wave by wave; a check failing on most of the fleet at
once acts on nothing (no plan, no command on any host) and is escalated once, with the list; a
failure on one host of a split pass is healed as before. Each test judges by what happened
inside the containers (a mark file the plan would write, the daemon's processes, the lab's own
health check) and by the journal of what was sent to each host."""
from __future__ import annotations

import copy
import json

import pytest

from llm_server import LLMServer
from sentinel_lab import kind_group_vars
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

FLEET = ["lab01", "lab02", "lab03"]
MARK = "/var/log/nginx/sentinel-fleet-mark"
# The plan the LLM gives for nginx: a trace on the host, then the fix.
PLAN = [f"touch {MARK}", "service nginx start"]


def nginx() -> dict:
    found = next(s for s in kind_group_vars("sysv")["remediate_services"] if s["name"] == "nginx")
    return dict(copy.deepcopy(found), confirm_attempts=0)


def journal(work: Workspace, host: str) -> list[dict]:
    path = work.artifacts_dir / "journal" / f"{host}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.exists() else []


def notified_hosts(result) -> list[str]:
    """The hosts for which the run worked out notifications (the role does only when there is news)."""
    return sorted({(e.get("event_data") or {}).get("host") for e in result.events
                   if e.get("event") == "runner_on_ok"
                   and str((e.get("event_data") or {}).get("task")).endswith("Work out who hears of what")})


@pytest.fixture
def fleet(lab):
    """The three hosts with nginx stopped and no mark; every host healthy again afterwards."""
    require_docker()
    for host in FLEET:
        lab.exec(host, f"rm -f {MARK}")
    yield lab
    for host in FLEET:
        lab.exec(host, f"rm -f {MARK}; service nginx start || true")
    assert all(lab.health(h, ["nginx"])["nginx"].healthy for h in FLEET)


def answer(commands: list[str]) -> dict:
    return {"plan": {"diagnosis": "nginx is down", "commands": commands, "rationale": "test"}}


def run(lab, tmp_path, broken: list[str], rules=None, requests=None, work=None, **variables):
    """One remediate.yml pass with nginx stopped on ``broken``; ``requests`` (a list) gets the
    chat requests the model server saw. ``work``: a Workspace kept across runs, whose every run
    has its own runner directory (a new Workspace per run reuses one, and its events hold the
    earlier runs' too)."""
    for host in broken:
        lab.inject(host, "nginx_stopped")
    rules = rules or [{"match": r"Service: nginx\b", "reply": answer(PLAN)}]
    with LLMServer(rules=rules) as server:
        if work is None:
            work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        work.llm_url = server.url
        result = work.run(extravars={"remediate_backend": "llm", "remediate_services": [nginx()], **variables})
        calls = len(server.requests)
        if requests is not None:
            requests.extend(server.chat_requests)
    return work, result, calls


def health_phase_row(result, host: str, service: str) -> dict:
    """The health phase's row of ``service`` on ``host``, as the task returned it (the last such
    event: a Workspace's runs share one runner directory, whose events may hold an earlier run's)."""
    for event in reversed(result.events):
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and data.get("host") == host \
                and str(data.get("task")).startswith("Check every watched service's health"):
            return next(r for r in data["res"]["health"]["services"] if r["name"] == service)
    raise AssertionError(f"no health phase result for {host}")


def test_a_check_failing_on_most_of_the_fleet_acts_on_nothing_and_escalates_once(fleet, tmp_path):
    work, result, calls = run(fleet, tmp_path, FLEET, remediate_fleet_stop_min_hosts=3)
    outcomes = result.outcomes()
    for host in FLEET:
        # Inside the container: the plan's mark was never written, nginx was not started (no plan,
        # no fallback restart, no remembered fix), the lab's check still fails.
        assert not fleet.exec(host, f"test -e {MARK}").ok, host
        assert fleet.exec(host, "pgrep -x nginx").stdout.strip() == "", host
        assert not fleet.health(host, ["nginx"])["nginx"].healthy, host
        records = journal(work, host)
        assert not [r for r in records if r.get("kind") == "intent"], host  # nothing was sent to run
        assert [r["hosts"] for r in records if r.get("kind") == "fleet_stop"] == [FLEET], records
        outcome = outcomes[(host, "nginx")]
        assert outcome["state"] == "escalated" and outcome["safeguards"] == ["fleet_stop"], outcome
        assert outcome["reason"].startswith(
            "fleet-wide stop: the nginx check fails on 3 of 3 checked hosts at once (lab01, lab02, lab03)"), outcome
        assert outcome["commands"] == [] and outcome["attempts"] == 0, outcome
    assert calls == 0  # no plan was asked for
    assert notified_hosts(result) == ["lab01"]  # one notice, carrying the list


def test_a_failure_on_one_host_of_a_split_pass_is_healed(fleet, tmp_path):
    _work, result, _calls = run(fleet, tmp_path, ["lab02"], remediate_fleet_stop_min_hosts=3)
    assert any(str((e.get("event_data") or {}).get("task")).startswith("Count the checks that fail")
               for e in result.events)  # the pass was split: every host's health, then the count
    assert result.outcomes()[("lab02", "nginx")]["state"] == "healed", result.outcomes()[("lab02", "nginx")]
    assert fleet.exec("lab02", f"test -e {MARK}").ok and fleet.health("lab02", ["nginx"])["nginx"].healthy
    assert not [h for h in ("lab01", "lab03") if fleet.exec(h, f"test -e {MARK}").ok]


def test_a_fault_on_many_hosts_is_healed_canary_first_then_in_waves(fleet, tmp_path):
    work, result, _calls = run(fleet, tmp_path, FLEET, remediate_canary_waves=[1])
    outcomes = result.outcomes()
    assert all(outcomes[(h, "nginx")]["state"] == "healed" for h in FLEET), outcomes
    assert all(fleet.exec(h, f"test -e {MARK}").ok and fleet.health(h, ["nginx"])["nginx"].healthy for h in FLEET)
    sent = {h: next(r["ts"] for r in journal(work, h) if r.get("kind") == "intent") for h in FLEET}
    verified = {h: next(r["ts"] for r in journal(work, h) if r.get("kind") == "result") for h in FLEET}
    order = sorted(FLEET, key=sent.get)  # canary, wave 2, wave 3
    assert outcomes[(order[0], "nginx")]["safeguards"] == ["canary"], outcomes[(order[0], "nginx")]
    for wave, host in enumerate(order, 1):  # the journal says where each host stood
        assert [(r["wave"], r["action"]) for r in journal(work, host) if r.get("kind") == "rollout"] == [(wave, "go")]
    for before, after in zip(order, order[1:]):
        assert "after_canary" in outcomes[(after, "nginx")]["safeguards"], outcomes[(after, "nginx")]
        assert sent[after] > verified[before], (before, after, sent, verified)  # each wave after the last healed


def test_a_remembered_fix_goes_with_the_heal_phase_and_never_to_a_check_the_fleet_count_stopped(fleet, tmp_path):
    # Run 1, a split pass with lab02 broken: the LLM's plan heals it, memory learns the fix.
    work, result, calls = run(fleet, tmp_path, ["lab02"], remediate_fleet_stop_min_hosts=3)
    assert result.outcomes()[("lab02", "nginx")]["state"] == "healed" and calls == 1
    fleet.exec("lab02", f"rm -f {MARK}")
    seen = len(journal(work, "lab02"))
    kept = work
    # Run 2, the same failure: the heal phase's first round trip re-checks nginx and carries the
    # remembered fix; the host runs it (the mark is back) with no plan asked for and no execute_plan.
    # The health phase read no evidence for it: the re-check that carries the fix reads it.
    work, result, calls = run(fleet, tmp_path, ["lab02"], work=kept, remediate_fleet_stop_min_hosts=3)
    outcome = result.outcomes()[("lab02", "nginx")]
    assert outcome["state"] == "healed" and calls == 0, outcome
    row = health_phase_row(result, "lab02", "nginx")
    assert not row["healthy"] and "evidence" not in row and row["evidence_deferred"], row
    assert fleet.exec("lab02", f"test -e {MARK}").ok and fleet.health("lab02", ["nginx"])["nginx"].healthy
    records = journal(work, "lab02")[seen:]
    kinds = [r.get("kind") for r in records]
    assert kinds.index("conditional") < kinds.index("intent"), kinds  # recorded before it went
    assert [r.get("source") for r in records if r.get("kind") == "intent"] == ["memory"], records
    assert not [h for h in ("lab01", "lab03") if fleet.exec(h, f"test -e {MARK}").ok]
    fleet.exec("lab02", f"rm -f {MARK}")
    seen = {h: len(journal(work, h)) for h in FLEET}
    # Run 3, every host broken: memory holds the fix for each (the fleet's memory), and the count
    # stops the nginx check: no fix reaches any host, nothing runs inside any container.
    work, result, calls = run(fleet, tmp_path, FLEET, remediate_fleet_stop_min_hosts=3)
    assert calls == 0
    for host in FLEET:
        assert not fleet.exec(host, f"test -e {MARK}").ok, host
        assert fleet.exec(host, "pgrep -x nginx").stdout.strip() == "", host
        assert not fleet.health(host, ["nginx"])["nginx"].healthy, host
        records = journal(work, host)[seen[host]:]
        assert not [r for r in records if r.get("kind") in ("conditional", "intent")], (host, records)
        outcome = result.outcomes()[(host, "nginx")]
        assert outcome["state"] == "escalated" and outcome["safeguards"] == ["fleet_stop"], outcome


def test_a_plan_proven_on_enough_hosts_runs_without_a_canary_and_an_unproven_one_canaries(fleet, tmp_path):
    # Run 1, lab02 broken: the LLM's plan heals it; the fleet's memory now shows it healed on 1 host.
    work, result, calls = run(fleet, tmp_path, ["lab02"])
    assert result.outcomes()[("lab02", "nginx")]["state"] == "healed" and calls == 1
    fleet.exec("lab02", f"rm -f {MARK}")
    seen = {h: len(journal(work, h)) for h in FLEET}
    # Run 2, every host broken, a canary of 2: one host's proof is not enough. The remembered plan
    # goes through the loop (no fix with the health check): two canaries, then the third host.
    work, result, calls = run(fleet, tmp_path, FLEET, remediate_canary_size=2)
    outcomes = result.outcomes()
    assert calls == 0 and all(outcomes[(h, "nginx")]["state"] == "healed" for h in FLEET), outcomes
    assert all(fleet.exec(h, f"test -e {MARK}").ok and fleet.health(h, ["nginx"])["nginx"].healthy for h in FLEET)
    records = {h: journal(work, h)[seen[h]:] for h in FLEET}
    assert not [h for h in FLEET if [r for r in records[h] if r.get("kind") == "conditional"]], records
    canaries = sorted(h for h in FLEET if "canary" in outcomes[(h, "nginx")]["safeguards"])
    (last,) = [h for h in FLEET if h not in canaries]
    assert len(canaries) == 2 and "after_canary" in outcomes[(last, "nginx")]["safeguards"], outcomes
    sent_last = next(r["ts"] for r in records[last] if r.get("kind") == "intent")
    assert all(next(r["ts"] for r in records[h] if r.get("kind") == "result") < sent_last for h in canaries)
    for host in FLEET:
        fleet.exec(host, f"rm -f {MARK}")
    seen = {h: len(journal(work, h)) for h in FLEET}
    # Run 3, every host broken again: the plan healed this failure on 3 hosts, at least the canary's
    # 2: it goes with each host's health check, at once, with no canary and no rollout.
    work, result, calls = run(fleet, tmp_path, FLEET, remediate_canary_size=2)
    outcomes = result.outcomes()
    assert calls == 0 and all(outcomes[(h, "nginx")]["state"] == "healed" for h in FLEET), outcomes
    for host in FLEET:
        assert fleet.exec(host, f"test -e {MARK}").ok and fleet.health(host, ["nginx"])["nginx"].healthy, host
        records = journal(work, host)[seen[host]:]
        assert [r.get("kind") for r in records if r.get("kind") in ("conditional", "rollout")] == ["conditional"], records
        assert not {"canary", "after_canary"} & set(outcomes[(host, "nginx")]["safeguards"]), outcomes[(host, "nginx")]


def test_a_remembered_fix_that_does_not_heal_falls_back_to_evidence_and_the_model(fleet, tmp_path):
    # Run 1 (a split pass): the model's plan heals lab02, memory learns it.
    work, result, calls = run(fleet, tmp_path, ["lab02"], remediate_fleet_stop_min_hosts=3)
    kept = work
    assert result.outcomes()[("lab02", "nginx")]["state"] == "healed" and calls == 1
    # Run 2: the same failure, but the fix's first command now fails on the host (its mark is a
    # dangling link that root's `touch` cannot follow; nothing the evidence reads, so the
    # signature is the same). The proven fix goes with the re-check and does not heal; the pass
    # falls back to the full path from the evidence the re-check read (the health phase deferred
    # it): the model is asked, its repeat of the failed plan is refused, and the runbook heals.
    fleet.exec("lab02", f"rm -f {MARK} && ln -s /nonexistent/sentinel/mark {MARK}")
    try:
        rules = [{"match": r"Service: nginx\b", "reply": answer(PLAN)}]
        requests: list = []
        work, result, calls = run(fleet, tmp_path, ["lab02"], rules=rules, requests=requests, work=kept,
                                  remediate_fleet_stop_min_hosts=3)
        assert "evidence" not in health_phase_row(result, "lab02", "nginx")  # deferred to the re-check
        outcome = result.outcomes()[("lab02", "nginx")]
        assert outcome["state"] == "healed", outcome
        ran = [(c.get("attempt"), c.get("source"), c.get("command")) for c in outcome["commands"]]
        # Attempt 1, memory's fix with the re-check (stopped at its failed `touch`); attempt 2 the
        # full path's plan, from the sources ahead of the model (calls: whether it was asked).
        assert ran[0] == (1, "memory", f"touch {MARK}") and ran[-1][:2] == (2, "runbook"), ran
        assert outcome["attempts"] == 2 and outcome["diagnosis"], outcome
        # The model was asked with the re-check's evidence; its answer, the plan that just failed,
        # was refused as already run (never twice), and the runbook's start healed.
        users = [str(m.get("content")) for r in requests for m in r["messages"] if m.get("role") == "user"]
        assert calls == len(requests) >= 1 and "Failure: service nginx status: nginx is not running" in users[0], users
        assert any("this exact plan already ran in attempt 1" in text for text in users), users
        assert fleet.exec("lab02", f"test -L {MARK}").ok  # the failed command changed nothing
        assert fleet.health("lab02", ["nginx"])["nginx"].healthy  # the lab's own check
    finally:
        fleet.exec("lab02", f"rm -f {MARK}")
