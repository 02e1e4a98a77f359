"""The operator kit of extensions/prometheus, checked by the tools that read it: the alert
rules by Prometheus' own `promtool check rules` (Debian package `prometheus`), the dashboard
by Grafana's typed models (grafana-foundation-sdk, generated from Grafana's schema), which
decode every panel with its panel plugin and every query as a Prometheus query. The rules'
and panels' PromQL runs against a real Prometheus in tests/integration/test_prometheus_stack.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

KIT = Path(__file__).resolve().parents[3] / "extensions" / "prometheus"
RULES = KIT / "sentinel_remediation.rules.yml"
DASHBOARD = KIT / "sentinel_remediation.dashboard.json"
METRIC = re.compile(r"\bsentinel_remediation_[a-z_]+")
# Names the collection writes (plugins/plugin_utils/report.py); every query must use only these.
from ansible_collections.sentinel.remediation.plugins.plugin_utils import report  # noqa: E402


def _promtool() -> str:
    tool = shutil.which("promtool")
    if not tool:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("promtool is missing (Debian package prometheus; scripts/setup installs it)", pytrace=False)
        pytest.skip("promtool is missing (Debian package prometheus)")
    return tool


def _known_metrics() -> set[str]:
    done = report.finish_report({"outcomes": [report.normalise_outcome("h", {"service": "s", "state": "healed"})]})
    families = report.metric_families(done) + report.counter_families(done)
    return {f["name"] for f in families}


def test_promtool_accepts_the_rules() -> None:
    proc = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 5 rules found" in proc.stdout


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    # The check above can fail: a rule with bad PromQL is refused by the same tool.
    broken = yaml.safe_load(RULES.read_text())
    broken["groups"][0]["rules"][0]["expr"] = "sum by (host (sentinel_remediation_runs_total"
    (tmp_path / "broken.yml").write_text(yaml.safe_dump(broken))
    proc = subprocess.run([_promtool(), "check", "rules", str(tmp_path / "broken.yml")], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode != 0


def test_rules_cover_failing_runs_stale_metrics_and_escalations_and_never_name_a_service() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    assert {"SentinelRemediationRunsFailing", "SentinelRemediationMetricsStale",
            "SentinelRemediationEscalated"} <= names
    known = _known_metrics()
    for rule in rules:
        assert rule["labels"]["component"] == "sentinel-remediation"
        assert "service" not in rule["labels"]
        used = set(METRIC.findall(rule["expr"]))
        assert used and used <= known, (rule["alert"], used - known)


def test_grafana_models_read_the_dashboard_with_every_panel_and_query() -> None:
    from grafana_foundation_sdk.cog import encoder, plugins, runtime
    from grafana_foundation_sdk.models import dashboard as model
    from grafana_foundation_sdk.models import prometheus

    plugins.register_default_plugins()
    data = json.loads(DASHBOARD.read_text())
    board = model.Dashboard.from_json(data)
    assert board.title == "sentinel.remediation" and board.uid == "sentinel-remediation"
    assert len(board.panels) == len(data["panels"]) >= 8
    known = _known_metrics()
    exprs = []
    for panel in board.panels:
        assert runtime.panelcfg_config(panel.type_val) is not None, f"{panel.title}: unknown panel type {panel.type_val}"
        assert panel.grid_pos is not None and panel.grid_pos.w > 0 and panel.grid_pos.h > 0
        assert panel.targets, panel.title
        for target in panel.targets:
            assert isinstance(target, prometheus.Dataquery), (panel.title, type(target))
            exprs.append(target.expr)
            used = set(METRIC.findall(target.expr))
            assert used and used <= known, (panel.title, used - known)
    # What Grafana would save back is what we ship: nothing was dropped as unknown.
    again = json.loads(json.dumps(board, cls=encoder.JSONEncoder))
    assert [p["title"] for p in again["panels"]] == [p["title"] for p in data["panels"]]
    assert [t["expr"] for p in again["panels"] for t in p["targets"]] == exprs
    assert {v["name"] for v in data["templating"]["list"]} == {"datasource", "host"}
