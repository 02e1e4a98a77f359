"""Unit tests for the remediation_report callback plugin."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from ansible_collections.sentinel.remediation.plugins.callback import remediation_report as rr
from ansible_collections.sentinel.remediation.plugins.plugin_utils import report

HEALED = {"service": "nginx", "state": "healed", "attempts": 2, "signature": "nginx:1",
          "commands": [{"command": "service nginx start", "source": "runbook", "verdict": "allow", "rc": 0},
                       {"command": "kill 4242", "source": "llm", "verdict": "allow", "rc": 1}],
          "llm": {"calls": 1, "prompt_tokens": 100, "completion_tokens": 20}}
ESCALATED = {"service": "redis-server", "state": "escalated", "attempts": 5, "reason": "still failing"}
WAITING = {"service": "cron", "state": "waiting_approval", "approval_id": "abc123def456"}
CUSTOM = {
    "web1": {"sentinel_remediation": [HEALED, ESCALATED]},
    "web2": {"sentinel_remediation": [{"service": "nginx", "state": "healthy"}, WAITING]},
    "_run": {"other": 1},
}


class FakeDisplay:
    verbosity = 0

    def __init__(self):
        self.lines, self.warnings = [], []

    def banner(self, text, **_):
        self.lines.append(f"== {text}")

    def display(self, text, **_):
        self.lines.append(text)

    def warning(self, text, **_):
        self.warnings.append(text)


def make_callback(json_path=None, junit_path=None, html_path=None, metrics_path=None):
    callback = rr.CallbackModule(display=FakeDisplay())
    options = {"json_path": json_path, "junit_path": junit_path, "html_path": html_path,
               "metrics_path": metrics_path, "metrics_producer": "playbook", "stats_key": "sentinel_remediation"}
    callback.get_option = options.__getitem__
    return callback


def test_documented_options():
    import yaml
    doc = yaml.safe_load(rr.DOCUMENTATION)
    assert doc["type"] == "aggregate"
    assert set(doc["options"]) == {"json_path", "junit_path", "html_path", "metrics_path", "metrics_producer",
                                   "stats_key"}
    assert rr.CallbackModule.CALLBACK_NEEDS_ENABLED is True


def test_build_report_lines_and_totals():
    report = rr.build_report(CUSTOM, {"web3": True, "web1": False})
    states = [(o["host"], o["service"], o["state"]) for o in report["outcomes"]]
    assert states == [("web1", "nginx", "healed"), ("web1", "redis-server", "escalated"),
                      ("web2", "cron", "waiting_approval"), ("web2", "nginx", "healthy"),
                      ("web3", "-", "unreachable")]
    assert report["totals"]["healed"] == 1 and report["totals"]["unreachable"] == 1
    assert report["llm"] == {"calls": 1, "prompt_tokens": 100, "completion_tokens": 20}
    assert report["ok"] is False
    line = rr.outcome_line(report["outcomes"][0])
    assert "healed in 2 attempts" in line and "[runbook]" in line and "rc=1" in line and "1 call(s), 120 tokens" in line
    assert "WAITING APPROVAL (id abc123def456)" in rr.outcome_line(report["outcomes"][2])
    assert "ESCALATED" in rr.outcome_line(report["outcomes"][1])


def test_bad_records_do_not_break_the_report():
    report = rr.build_report({"h": {"sentinel_remediation": ["junk", {"state": "weird", "llm": "x"}]}})
    assert [o["state"] for o in report["outcomes"]] == ["failed", "failed"]


def test_callback_prints_and_writes_files(tmp_path):
    json_path, junit_path = tmp_path / "out" / "report.json", tmp_path / "junit.xml"
    callback = make_callback(str(json_path), str(junit_path))
    callback.v2_runner_on_unreachable(SimpleNamespace(_host=SimpleNamespace(get_name=lambda: "web9")))
    callback.v2_playbook_on_stats(SimpleNamespace(custom=CUSTOM, dark={"web4": 1}))
    text = "\n".join(callback._display.lines)
    assert "web1 nginx: healed in 2 attempts" in text
    assert "web9 -: UNREACHABLE" in text and "web4 -: UNREACHABLE" in text
    data = json.loads(json_path.read_text())
    assert data["totals"]["escalated"] == 1 and len(data["outcomes"]) == 6
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite.get("tests") == "6" and suite.get("failures") == "3" and suite.get("skipped") == "1"
    names = [case.get("name") for case in suite.iter("testcase")]
    assert "web1/nginx" in names
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert sorted(failed) == ["web1/redis-server", "web4/-", "web9/-"]


def test_callback_writes_html_and_the_role_asked_metrics_textfile(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    html_path, textfile = tmp_path / "report.html", tmp_path / "textfile" / "sentinel.prom"
    callback = make_callback(html_path=str(html_path))
    custom = dict(CUSTOM, _run={"sentinel_remediation_settings": {"metrics_textfile": str(textfile)}})
    callback.v2_playbook_on_stats(SimpleNamespace(custom=custom, dark={}))
    assert html_path.read_text().startswith("<!DOCTYPE html>") and "web1" in html_path.read_text()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(textfile.read_text()) for s in f.samples}
    healed = [o["host"] for o in callback.report["outcomes"] if (o["service"], o["state"]) == ("nginx", "healed")]
    assert healed
    for host in healed:
        assert samples[("sentinel_remediation_last_run_outcomes",
                        (("host", host), ("producer", "playbook"), ("service", "nginx"), ("state", "healed")))] == 1
        assert samples[("sentinel_remediation_outcomes_total",
                        (("host", host), ("producer", "playbook"), ("service", "nginx"), ("state", "healed")))] == 1
    assert not list(textfile.parent.glob("*.tmp*"))


def test_callback_quiet_without_outcomes(tmp_path):
    callback = make_callback()
    callback.v2_playbook_on_stats(SimpleNamespace(custom={}, dark={}))
    assert callback._display.lines == []


def test_unwritable_path_warns(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    callback = make_callback(json_path=str(blocker / "report.json"))
    callback.v2_playbook_on_stats(SimpleNamespace(custom=CUSTOM, dark={}))
    assert callback._display.warnings and "cannot write" in callback._display.warnings[0]


@pytest.mark.parametrize("state", report.STATES)
def test_every_state_has_a_line(state):
    assert rr.outcome_line(report.normalise_outcome("h", {"service": "s", "state": state}))


def _failed_result(host, task, **result):
    return SimpleNamespace(_host=SimpleNamespace(get_name=lambda: host), _task=SimpleNamespace(get_name=lambda: task),
                           _result=result)


def test_hosts_that_fail_before_recording_are_listed(tmp_path):
    json_path = tmp_path / "report.json"
    callback = make_callback(str(json_path))
    # the docker connection's answer for a container stopped mid-run
    callback.v2_runner_on_failed(_failed_result(
        "web7", "Collect evidence for cron", msg="Module result deserialization failed: No start of json char found",
        module_stderr="Error response from daemon: Container 1134bacbe7de is not running"))
    callback.v2_runner_on_failed(_failed_result("web8", "Plan", msg="sentinel.remediation.plan: boom\n  more"))
    callback.v2_runner_on_failed(_failed_result("web3", "Ignored", msg="x"), ignore_errors=True)
    # web1 has outcomes: its later failure (the escalation's fail) adds no line
    callback.v2_runner_on_failed(_failed_result("web1", "Escalate", msg="escalated"))
    callback.v2_playbook_on_stats(SimpleNamespace(custom=CUSTOM, dark={}))
    outcomes = {o["host"]: o for o in json.loads(json_path.read_text())["outcomes"] if o["service"] == "-"}
    assert set(outcomes) == {"web7", "web8"}
    assert outcomes["web7"]["state"] == "unreachable"
    assert "is not running" in outcomes["web7"]["reason"] and "Collect evidence for cron" in outcomes["web7"]["reason"]
    assert outcomes["web8"]["state"] == "failed"
    assert outcomes["web8"]["reason"] == "task 'Plan' failed: sentinel.remediation.plan: boom more"
    text = "\n".join(callback._display.lines)
    assert "web7 -: UNREACHABLE" in text and "web8 -: FAILED" in text
