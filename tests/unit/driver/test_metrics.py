"""The driver's metrics: `watch --metrics-port` scraped over HTTP and `--metrics-textfile`, both read
back with prometheus_client's own parser; `report --format html|prometheus -o FILE`. The passes are
real ansible-runner passes on a stand-in project (localhost)."""
from __future__ import annotations

import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sentinel_remediate import cli
from sentinel_remediate import report as r

from driver_support import stand_in_project

OUTCOMES = """    - name: Record escalated and healed outcomes
      ansible.builtin.set_stats:
        data:
          sentinel_remediation:
            - {service: nginx, state: escalated, escalation: exhausted, attempts: 3,
               llm: {calls: 2, prompt_tokens: 1000, completion_tokens: 80}}
            - {service: cron, state: healed, attempts: 1}
        per_host: true
        aggregate: true
"""


def _samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_watch_serves_metrics_on_loopback_and_writes_the_textfile(tmp_path: Path) -> None:
    project = stand_in_project(tmp_path / "project", tasks=OUTCOMES)
    (project / "playbooks" / "demo.yml").rename(project / "playbooks" / "remediate.yml")
    (project / "galaxy.yml").write_text("namespace: x\nname: y\nversion: 9.9.9\n")
    port = _free_port()
    textfile = tmp_path / "textfile" / "sentinel.prom"
    scraped: list[str] = []

    def scrape() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not scraped:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    text = response.read().decode()
                if "sentinel_remediation_last_run_outcomes{" in text:
                    scraped.append(text)
                    return
            except OSError:
                pass
            time.sleep(0.2)

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    code = cli.main(["watch", "-q", "--project-dir", str(project), "--state-dir", str(tmp_path / "state"),
                     "-i", str(project / "hosts.yml"), "--interval", "0.5", "--max-passes", "2",
                     "--metrics-port", str(port), "--metrics-textfile", str(textfile)])
    thread.join(5)
    assert code == r.EXIT_FAILED  # something escalated
    assert scraped, "the metrics endpoint never answered with the pass's metrics"
    got = _samples(scraped[0])
    passes = got[("sentinel_remediation_driver_passes_total", ())]
    assert passes >= 1
    H = ("host", "localhost")
    assert got[("sentinel_remediation_last_run_outcomes", (H, ("service", "nginx"), ("state", "escalated")))] == 1
    assert got[("sentinel_remediation_last_run_escalations", (H, ("reason", "exhausted"), ("service", "nginx")))] == 1
    assert got[("sentinel_remediation_last_run_attempts", (H, ("service", "nginx")))] == 3
    assert got[("sentinel_remediation_last_run_llm_tokens", (("kind", "prompt"),))] == 1000
    assert got[("sentinel_remediation_outcomes_total", (H, ("service", "cron"), ("state", "healed")))] == passes
    assert got[("sentinel_remediation_outcomes_total", (H, ("service", "cron"), ("state", "escalated")))] == 0
    assert got[("sentinel_remediation_llm_calls_total", ())] == 2 * passes
    assert got[("sentinel_remediation_last_run_ok", ())] == 0
    # The textfile holds the last pass, the same as its stored report says.
    stored = r.load_report(r.list_runs(tmp_path / "state" / "artifacts")[-1])
    from_file = _samples(textfile.read_text())
    P = ("producer", "driver")
    assert from_file[("sentinel_remediation_last_run_outcomes", (H, P, ("service", "cron"), ("state", "healed")))] == \
        stored["totals"]["healed"] == 1
    assert from_file[("sentinel_remediation_last_run_llm_calls", (P,))] == stored["llm"]["calls"] == 2
    assert from_file[("sentinel_remediation_run_duration_seconds", (P,))] >= 0
    # Its counters went on across the two passes of this watch.
    assert from_file[("sentinel_remediation_outcomes_total", (H, P, ("service", "cron"), ("state", "healed")))] == 2
    assert from_file[("sentinel_remediation_runs_total", (P, ("result", "failed")))] == 2
    assert not list(textfile.parent.glob(".*tmp*"))  # written through a temporary file, renamed


def test_watch_metrics_port_in_use_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = stand_in_project(tmp_path / "project")
    (project / "galaxy.yml").write_text("namespace: x\nname: y\nversion: 9.9.9\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = cli.main(["watch", "-q", "--project-dir", str(project), "--state-dir", str(tmp_path / "state"),
                         "--metrics-port", str(port), "--max-passes", "1"])
    assert code == r.EXIT_USAGE
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_report_writes_html_and_prometheus_files(tmp_path: Path) -> None:
    run_dir = tmp_path / "artifacts" / "run-20260101T000000Z-abcdef"
    run_dir.mkdir(parents=True)
    report = r.finish_report({"outcomes": [r.normalise_outcome("lab01", {"service": "nginx", "state": "healed",
                                                                         "attempts": 1})],
                              "run": {"ident": run_dir.name, "status": "successful", "rc": 0, "hosts": ["lab01"],
                                      "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:00:30Z"}})
    r.write_report(run_dir, report)
    assert (run_dir / "report.html").is_file()  # stored beside report.json
    assert cli.main(["report", "--format", "html", "-o", str(tmp_path / "out" / "run.html"),
                     "--state-dir", str(tmp_path)]) == r.EXIT_OK
    assert "lab01" in (tmp_path / "out" / "run.html").read_text()
    assert cli.main(["report", "--format", "prometheus", "-o", str(tmp_path / "out" / "run.prom"),
                     "--state-dir", str(tmp_path)]) == r.EXIT_OK
    got = _samples((tmp_path / "out" / "run.prom").read_text())
    assert got[("sentinel_remediation_run_duration_seconds", ())] == 30
    assert got[("sentinel_remediation_last_run_outcomes", (("host", "lab01"), ("service", "nginx"), ("state", "healed")))] == 1
