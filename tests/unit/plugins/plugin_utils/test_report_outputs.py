# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report's Prometheus and HTML renderings: read back with a real Prometheus parser and a
real HTML parser, on hostile input."""
from __future__ import annotations

from html.parser import HTMLParser

import junitparser
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.sentinel.remediation.plugins.plugin_utils import report

HOSTILE = 'evil <script>alert("x")</script> \x00\x07\x1b[31m \ud800 caf\xe9 \ufffe "quoted" back\\slash\nnew line'


def hostile_report() -> dict:
    built = report.build_report(
        {"web<1>": [{"service": 'ng"inx', "state": "escalated", "escalation": "refused", "attempts": 2,
                     "reason": HOSTILE, "diagnosis": HOSTILE,
                     "commands": [{"command": "echo <b>" + HOSTILE, "source": "llm", "verdict": "allow", "rc": 1,
                                   "attempt": 1, "output": HOSTILE}],
                     "timeline": [{"attempt": 1, "source": "llm", "gate": "execute", "healthy": False,
                                   "error_after": HOSTILE}],
                     "llm": {"calls": 2, "prompt_tokens": 900, "completion_tokens": 40}},
                    {"service": "redis", "state": "healed", "attempts": 1}]},
        notifications=[{"host": "web<1>", "service": 'ng"inx', "kind": "refused", "channel": "slack",
                        "status": "failed", "error": HOSTILE}])
    built["started"], built["finished"] = "2026-11-26T06:00:00Z", "2026-11-26T06:00:42Z"
    return built


def test_metrics_parse_with_prometheus_own_parser_and_match_the_report():
    r = hostile_report()
    families = {f.name: f for f in text_string_to_metric_families(report.render_prometheus(r))}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    H = ("host", "web<1>")
    assert samples[("sentinel_remediation_last_run_outcomes", (H, ("service", 'ng"inx'), ("state", "escalated")))] == 1
    assert samples[("sentinel_remediation_last_run_outcomes", (H, ("service", "redis"), ("state", "healed")))] == 1
    assert samples[("sentinel_remediation_last_run_escalations", (H, ("reason", "refused"), ("service", 'ng"inx')))] == 1
    assert samples[("sentinel_remediation_last_run_attempts", (H, ("service", 'ng"inx')))] == 2
    assert samples[("sentinel_remediation_last_run_llm_calls", ())] == 2
    assert samples[("sentinel_remediation_last_run_llm_tokens", (("kind", "completion"),))] == 40
    assert samples[("sentinel_remediation_last_run_notifications", (("channel", "slack"), ("status", "failed")))] == 1
    assert samples[("sentinel_remediation_run_duration_seconds", ())] == 42
    assert samples[("sentinel_remediation_last_run_timestamp_seconds", ())] == 1795672842
    assert samples[("sentinel_remediation_last_run_ok", ())] == 0
    assert families["sentinel_remediation_last_run_outcomes"].type == "gauge"
    assert families["sentinel_remediation_outcomes"].type == "counter"   # sentinel_remediation_outcomes_total


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_one_safe_self_contained_page_whatever_the_input():
    page = report.render_html(hostile_report())
    page.encode("utf-8")  # a lone surrogate would make this raise
    seen = _Collect()
    seen.feed(page)
    assert "script" not in seen.tags and "img" not in seen.tags and "link" not in seen.tags
    assert "src=" not in page and "http://" not in page and "https://" not in page
    text = "".join(seen.text)
    assert 'evil <script>alert("x")</script>' in text  # shown as text, not run
    assert "\\x1b[31m" in text and "\\x00" in text and "\x1b" not in page and "\x00" not in page
    assert "caf\xe9" in text
    assert 'echo <b>evil' in text and "rc=1" in text and "still failing" in text
    assert seen.tags.count("tr") >= 3 and "style" in seen.tags


def test_junit_stays_valid_with_markup_and_control_characters(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(report.render_junit(hostile_report()), encoding="utf-8")
    suite = next(iter(junitparser.JUnitXml.fromfile(str(path))))
    cases = {case.name: case for case in suite}
    assert cases['web<1>/ng"inx']._elem.get("hostname") == "web<1>"
    assert 'evil <script>alert("x")</script>' in cases['web<1>/ng"inx'].result[0].message


def test_escalation_kind_is_derived_for_outcomes_recorded_without_one():
    built = report.build_report({"h": [
        {"service": "a", "state": "escalated", "reason": "plan 1 rejected by an operator"},
        {"service": "b", "state": "escalated", "commands": [{"command": "x", "rc": 1}]},
        {"service": "c", "state": "escalated", "refused": [{"command": "rm -rf /"}]},
        {"service": "d", "state": "escalated", "llm_error": "timeout"},
        {"service": "e", "state": "escalated"},
        {"service": "f", "state": "healed", "escalation": "refused"}]})
    assert [o["escalation"] for o in built["outcomes"]] == [
        "rejected", "exhausted", "refused", "llm_error", "needs_human", ""]
