"""The operator's knowledge end to end: sentinel-remediate --runbook-dir / --docs-dir on a lab host.

nginx_docroot_unreadable (nginx runs, a page is mode 0600, GET / answers 403) has no
bundled runbook. Without the team's runbooks, no runbook is used; with them, their
runbook heals it. Judged by the lab's own health check and the file's mode on the host.
Planning uses runbooks only (no LLM); the runbook's chmod needs approval, which the lab
run gives (remediate_auto_approve).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sentinel_lab import Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
KNOWLEDGE = REPO / "tests" / "data" / "knowledge"
PREFIX = f"{os.environ.get('SENTINEL_LAB_PREFIX', 'sentinel')}-knowledge"
PAGE = "/var/www/html/index.nginx-debian.html"
COMMON = ["-e", "remediate_backend=runbook", "-e", "remediate_auto_approve=true", "-e", "remediate_max_retries=1",
          "-l", "lab01", "--format", "json"]


@pytest.fixture(scope="module")
def lab(lab_factory) -> Iterator[Lab]:
    made = lab_factory(PREFIX, 1)
    yield made
    made.reset("lab01")


@pytest.fixture(scope="module")
def env(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("knowledge")
    environ = dict(os.environ)
    environ.update({
        "SENTINEL_STATE_DIR": str(base / "state"),
        "SENTINEL_KNOWLEDGE_CACHE": str(base / "knowledge-cache"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(base / "facts"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "driver"), environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "SENTINEL_TEST_INVENTORY": str(lab.write_inventory(base / "hosts.yml")),
    })
    environ.pop("OPENAI_API_KEY", None)
    environ.pop("OPENAI_BASE_URL", None)
    return environ


def run(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    argv = [sys.executable, "-m", "sentinel_remediate", "run", "-i", env["SENTINEL_TEST_INVENTORY"], *COMMON, *args]
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON report (rc {proc.returncode}): {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc, report


def nginx_outcome(report: dict) -> dict:
    return next(o for o in report["outcomes"] if o["host"] == "lab01" and o["service"] == "nginx")


def test_an_operator_runbook_heals_a_fault_the_bundled_ones_cannot(lab: Lab, env: dict[str, str]) -> None:
    lab.inject("lab01", "nginx_docroot_unreadable")
    assert not lab.health("lab01", ["nginx"])["nginx"].healthy

    # Bundled knowledge only: no runbook fits (a plain start or restart is not a fix for a
    # 403), so the plan comes from the fallback and the service stays broken.
    _proc, report = run(env)
    outcome = nginx_outcome(report)
    assert outcome["state"] != "healed", outcome
    assert all(c["source"] != "runbook" for c in outcome["commands"]), outcome
    assert not lab.health("lab01", ["nginx"])["nginx"].healthy

    # The team's runbooks and documents: their runbook's chmod heals it.
    proc, report = run(env, "--runbook-dir", str(KNOWLEDGE / "runbooks"), "--docs-dir", str(KNOWLEDGE / "docs"))
    outcome = nginx_outcome(report)
    assert outcome["state"] == "healed", (outcome, proc.stderr[-3000:])
    assert [(c["command"], c["source"]) for c in outcome["commands"]] == [
        (f"chmod 0644 {PAGE}", "runbook")], outcome
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    mode = lab.exec("lab01", ["stat", "-c", "%a", PAGE], check=True).stdout.strip()
    assert mode == "644"
    # the index was built and cached for the run, keyed by the knowledge's content
    assert list(Path(env["SENTINEL_KNOWLEDGE_CACHE"]).glob("knowledge-*.json"))


def test_a_bad_operator_runbook_stops_the_run_before_any_host_is_touched(
        lab: Lab, env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "broken.yml").write_text("id: broken\nmatch: {facts: [port_taken]}\nsteps: [{command: service x start}]\n")
    lab.inject("lab01", "nginx_stopped")
    try:
        argv = [sys.executable, "-m", "sentinel_remediate", "run", "-i", env["SENTINEL_TEST_INVENTORY"], *COMMON,
                "--runbook-dir", str(tmp_path)]
        proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 2, proc.stderr
        assert f"{tmp_path / 'broken.yml'}: match.facts[0]: unknown fact 'port_taken'" in proc.stderr
        assert not lab.health("lab01", ["nginx"])["nginx"].healthy   # nothing ran
    finally:
        lab.fix("lab01", "nginx_stopped")
