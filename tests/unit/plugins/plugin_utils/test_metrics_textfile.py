# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The textfile the collection writes for node_exporter: counters that start at 0 and continue
across runs, one file and one `producer` label per writer, atomic replacement. Every file is
read back with prometheus_client's own parser."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.sentinel.remediation.plugins.plugin_utils import report

HOSTILE = 'we"b\\1\nx'


def _report(*outcomes: tuple[str, str, str], escalation: str = "") -> dict:
    return report.finish_report({"outcomes": [
        report.normalise_outcome(host, {"service": service, "state": state, "attempts": 1 if state != "healthy" else 0,
                                        "escalation": escalation})
        for host, service, state in outcomes]})


def _samples(path: Path) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(path.read_text()) for s in f.samples}


def _outcome(producer: str, host: str, service: str, state: str) -> tuple:
    return ("sentinel_remediation_outcomes_total",
            (("host", host), ("producer", producer), ("service", service), ("state", state)))


def test_counters_exist_at_zero_before_the_first_event_then_count_it(tmp_path: Path) -> None:
    path = Path(report.write_metrics_textfile(_report(("lab01", "nginx", "healthy")), str(tmp_path), "driver",
                                              count=False))
    assert path == tmp_path / "sentinel_remediation_driver.prom"
    before = _samples(path)
    for state in report.STATES:   # every state of the known host and service, at 0
        assert before[_outcome("driver", "lab01", "nginx", state)] == 0
    for kind in report.ESCALATION_KINDS:
        assert before[("sentinel_remediation_escalations_total",
                       (("host", "lab01"), ("producer", "driver"), ("reason", kind), ("service", "nginx")))] == 0
    report.write_metrics_textfile(_report(("lab01", "nginx", "healed")), str(tmp_path), "driver")
    after = _samples(path)
    assert after[_outcome("driver", "lab01", "nginx", "healed")] == 1
    assert after[("sentinel_remediation_runs_total", (("producer", "driver"), ("result", "ok")))] == 1


def test_counters_continue_across_runs_and_keep_hosts_not_in_this_run(tmp_path: Path) -> None:
    target = str(tmp_path / "sentinel.prom")
    report.write_metrics_textfile(_report(("lab01", "nginx", "healed"), ("lab02", "cron", "healthy")), target, "cron")
    report.write_metrics_textfile(_report(("lab01", "nginx", "escalated"), escalation="exhausted"), target, "cron")
    report.write_metrics_textfile(_report(("lab01", "nginx", "healed")), target, "cron")
    got = _samples(Path(target))
    assert got[_outcome("cron", "lab01", "nginx", "healed")] == 2
    assert got[_outcome("cron", "lab01", "nginx", "escalated")] == 1
    assert got[("sentinel_remediation_escalations_total",
                (("host", "lab01"), ("producer", "cron"), ("reason", "exhausted"), ("service", "nginx")))] == 1
    assert got[_outcome("cron", "lab02", "cron", "healthy")] == 1       # lab02 was only in the first run
    assert got[("sentinel_remediation_runs_total", (("producer", "cron"), ("result", "failed")))] == 1
    # The gauges are the last run's: lab02 is not in it.
    assert got[("sentinel_remediation_last_run_outcomes", (("host", "lab01"), ("producer", "cron"), ("service", "nginx"),
                                                           ("state", "healed")))] == 1
    assert ("sentinel_remediation_last_run_outcomes", (("host", "lab02"), ("producer", "cron"), ("service", "cron"),
                                                       ("state", "healthy"))) not in got


def test_two_producers_in_one_directory_write_two_files_with_distinct_series(tmp_path: Path) -> None:
    report.write_metrics_textfile(_report(("lab01", "nginx", "healed")), str(tmp_path), "driver")
    report.write_metrics_textfile(_report(("lab01", "nginx", "healed")), str(tmp_path) + "/", "playbook")
    files = sorted(p.name for p in tmp_path.glob("*.prom"))
    assert files == ["sentinel_remediation_driver.prom", "sentinel_remediation_playbook.prom"]
    driver, playbook = (_samples(tmp_path / name) for name in files)
    assert not set(driver) & set(playbook)    # node_exporter would refuse a series exposed twice
    assert driver[_outcome("driver", "lab01", "nginx", "healed")] == 1
    assert playbook[_outcome("playbook", "lab01", "nginx", "healed")] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# One run of the producer, as its own process (a fork of a pytest-xdist worker, which has
# threads, can deadlock before it runs anything: fresh interpreters only).
_ONE_RUN = """
import sys
from ansible_collections.sentinel.remediation.plugins.plugin_utils import report
outcome = report.normalise_outcome("lab01", {"service": "nginx", "state": "healed", "attempts": 1, "escalation": ""})
report.write_metrics_textfile(report.finish_report({"outcomes": [outcome]}), sys.argv[1], "driver")
"""


def test_concurrent_runs_of_one_producer_lose_no_increment(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    runs = [subprocess.Popen([sys.executable, "-c", _ONE_RUN, str(tmp_path)], env=env, stderr=subprocess.PIPE, text=True)
            for dummy in range(12)]
    errors = [run.communicate(timeout=120)[1] for run in runs]
    assert [run.returncode for run in runs] == [0] * 12, errors
    assert _samples(tmp_path / "sentinel_remediation_driver.prom")[_outcome("driver", "lab01", "nginx", "healed")] == 12


def test_hostile_labels_round_trip_through_the_file(tmp_path: Path) -> None:
    for dummy in range(2):
        report.write_metrics_textfile(_report((HOSTILE, 'ng"inx', "healed")), str(tmp_path), "driver")
    got = _samples(tmp_path / "sentinel_remediation_driver.prom")
    assert got[_outcome("driver", report.printable(HOSTILE), 'ng"inx', "healed")] == 2


def test_a_damaged_file_restarts_the_counters_instead_of_failing_the_run(tmp_path: Path) -> None:
    path = tmp_path / "sentinel_remediation_driver.prom"
    path.write_bytes(b"\xff\xfe garbage {{{\nsentinel_remediation_outcomes_total{host=\"lab01\" 7\n")
    report.write_metrics_textfile(_report(("lab01", "nginx", "healed")), str(tmp_path), "driver")
    assert _samples(path)[_outcome("driver", "lab01", "nginx", "healed")] == 1


def test_render_without_a_producer_keeps_plain_labels() -> None:
    text = report.render_prometheus(_report(("lab01", "nginx", "healed")))
    assert 'sentinel_remediation_outcomes_total{host="lab01",service="nginx",state="healed"} 1' in text
    assert "producer=" not in text
