# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one report module: shape, text and JUnit (checked with a real JUnit parser)."""
from __future__ import annotations

import json

import junitparser

from ansible_collections.sentinel.remediation.plugins.plugin_utils import report

HOSTILE = "bad \x00\x07\x1b[31m\ud800 reason \ufffe end"


def sample() -> dict:
    return report.build_report(
        {"web1": [{"service": "nginx", "state": "healed", "attempts": 2, "started": "2026-11-23T10:00:00Z",
                   "finished": "2026-11-23T10:00:09Z",
                   "commands": [{"command": "service nginx start", "source": "llm", "rc": 0}],
                   "llm": {"calls": 1, "prompt_tokens": 800, "completion_tokens": 50}},
                  {"service": "redis-server", "state": "escalated", "reason": HOSTILE}],
         "web2": {"service": "cron", "state": "dry_run",
                  "planned": [{"command": "service cron start", "verdict": "allow"}]},
         "web3": [{"service": "ssh", "state": "made-up"}]},
        unreachable=["web4"], failed={"web5": "task 'x' failed: boom"})


def test_shape_totals_and_states():
    r = sample()
    states = {(o["host"], o["service"]): o["state"] for o in r["outcomes"]}
    assert states == {("web1", "nginx"): "healed", ("web1", "redis-server"): "escalated",
                      ("web2", "cron"): "dry_run", ("web3", "ssh"): "failed", ("web4", "-"): "unreachable",
                      ("web5", "-"): "failed"}
    assert r["totals"]["failed"] == 2 and r["llm"]["prompt_tokens"] == 800
    assert r["ok"] is False and r["dry_run"] is True
    json.loads(report.render_json(r))


def test_text_lines_say_what_ran_and_what_would():
    text = report.render_text(sample())
    assert "web1 nginx: healed in 2 attempts | ran `service nginx start` [llm] | llm 1 call(s), 850 tokens" in text
    assert "web2 cron: DRY RUN (nothing ran) | would run `service cron start` [allow]" in text
    assert "\x1b" not in text and "\\x1b" in text


def test_junit_is_valid_for_any_input_and_has_hostnames_and_durations(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(report.render_junit(sample()), encoding="utf-8")
    xml = junitparser.JUnitXml.fromfile(str(path))
    suite = next(iter(xml))
    cases = {case.name: case for case in suite}
    assert len(cases) == 6 and suite.failures == 4 and suite.skipped == 1
    assert cases["web1/nginx"].time == 9.0
    assert cases["web1/nginx"]._elem.get("hostname") == "web1"
    failure = cases["web1/redis-server"].result[0]
    assert isinstance(failure, junitparser.Failure) and "reason" in failure.message


def test_warnings_of_the_collection_are_listed_per_host_and_rendered():
    built = report.build_report({"web1": [{"service": "nginx", "state": "healthy"}]},
                                warnings=[{"host": "web1", "warning": "memory held 9 episodes; kept 5"}])
    assert built["warnings"] == [{"host": "web1", "warning": "memory held 9 episodes; kept 5"}]
    assert built["ok"] is True  # a warning is no failure
    assert report.build_report({})["warnings"] == []
