"""Report rendering (text, JSON, JUnit), stored runs and exit codes."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sentinel_remediate import report as r

OUTCOMES = {
    "lab01": [
        {"service": "nginx", "state": "healed", "attempts": 2,
         "commands": [{"command": "service nginx start", "source": "runbook", "rc": 0}],
         "llm": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5}},
        {"service": "redis-server", "state": "healthy"},
    ],
    "lab02": [{"service": "nginx", "state": "waiting_approval", "approval_id": "abc123def456",
               "reason": "plan abc123def456 waits"}],
}


def _report(extra: dict | None = None, unreachable=()) -> dict:
    report = r.build_report(OUTCOMES, unreachable)
    report["run"] = {"ident": "run-x", "status": "successful", "rc": 0, "hosts": ["lab01", "lab02"], **(extra or {})}
    return r.finish_report(report)


def test_text_lists_each_outcome_and_totals() -> None:
    text = r.render_text(_report())
    assert "lab01 nginx: healed in 2 attempts | ran `service nginx start` [runbook] | llm 1 call(s), 15 tokens" in text
    assert "lab02 nginx: WAITING APPROVAL (id abc123def456)" in text
    assert "totals: healthy=1, healed=1, waiting_approval=1" in text


def test_json_round_trips() -> None:
    data = json.loads(r.render_json(_report()))
    assert data["totals"]["healed"] == 1 and data["llm"]["calls"] == 1 and data["ok"] is True


def test_junit_marks_failures_and_skips() -> None:
    report = _report(unreachable=["lab03"])
    root = ET.fromstring(r.render_junit(report).split("\n", 1)[1])
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "1" and suite.get("skipped") == "1"
    names = {c.get("name"): c for c in suite.iter("testcase")}
    assert names["lab03/-"].find("failure").get("type") == "unreachable"
    assert names["lab02/nginx"].find("skipped") is not None


@pytest.mark.parametrize(("change", "code"), [
    ({}, r.EXIT_WAITING),
    ({"outcomes": {"lab02": [{"service": "nginx", "state": "healed"}]}}, r.EXIT_OK),
    ({"outcomes": {"lab02": [{"service": "nginx", "state": "escalated"}]}}, r.EXIT_FAILED),
    ({"unreachable": ["lab09"]}, r.EXIT_FAILED),
    ({"run": {"status": "failed", "rc": 2}}, r.EXIT_FAILED),
    ({"run": {"busy_only": True}}, r.EXIT_BUSY),
    ({"outcomes": {}}, r.EXIT_FAILED),  # hosts ran, nothing recorded: never a silent success
])
def test_exit_codes(change: dict, code: int) -> None:
    outcomes = {**OUTCOMES, **change.get("outcomes", {})} if change.get("outcomes") else (
        {} if "outcomes" in change else OUTCOMES)
    report = r.build_report(outcomes, change.get("unreachable", ()))
    report["run"] = {"status": "successful", "rc": 0, "hosts": ["lab01"], **change.get("run", {})}
    assert r.exit_code(r.finish_report(report)) == code


def test_control_characters_never_reach_the_terminal() -> None:
    escalated = {"service": "x", "state": "escalated", "reason": "bad \x1b[31mred\x1b[0m"}
    report = r.finish_report(r.build_report({"lab01": [escalated]}))
    text = r.render_text(report)
    assert "\x1b" not in text and "\\x1b[31mred" in text


def test_stored_runs_last_and_prefix(tmp_path: Path) -> None:
    for ident in ("run-20250101T000000Z-aaaaaa", "run-20250101T000001Z-bbbbbb"):
        (tmp_path / ident).mkdir()
        r.write_report(tmp_path / ident, _report({"ident": ident}))
    assert r.find_run(tmp_path, None).name.endswith("bbbbbb")
    assert r.find_run(tmp_path, "run-20250101T000000Z").name.endswith("aaaaaa")
    with pytest.raises(LookupError, match="several runs"):
        r.find_run(tmp_path, "run-2025")
    with pytest.raises(LookupError, match="no run 'nope'"):
        r.find_run(tmp_path, "nope")
    assert r.origin_of_approval(tmp_path, "abc123def456")["ident"].endswith("bbbbbb")
