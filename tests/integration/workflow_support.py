"""Shared by the workflow's integration tests: run the collection's playbooks through
ansible-runner (as AWX does) against a lab, and read what they report."""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@dataclass
class Run:
    status: str
    rc: int
    stats: dict
    report: dict
    stdout: str
    facts_dir: Path
    artifacts_dir: Path
    events: list = field(default_factory=list)

    def outcomes(self) -> dict[tuple[str, str], dict]:
        return {(o["host"], o["service"]): o for o in self.report.get("outcomes", [])}

    def states(self, service: str | None = None) -> dict[str, str]:
        return {f"{h}/{s}": o["state"] for (h, s), o in self.outcomes().items() if service in (None, s)}

    def changed(self) -> int:
        return sum((self.stats.get("changed") or {}).values())


class Workspace:
    """One test's controller state: fact cache, artifacts and runner dirs under tmp_path."""

    def __init__(self, tmp_path: Path, inventory: Path, llm_url: str | None = None, extra_env: dict | None = None):
        self.root = tmp_path
        self.inventory = inventory
        self.facts_dir = tmp_path / "facts"
        self.artifacts_dir = tmp_path / "artifacts"
        self.llm_url = llm_url
        self.extra_env = dict(extra_env or {})
        self.count = 0

    def env(self) -> dict:
        venv_bin = str(Path(sys.executable).parent)
        env = {
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_COLLECTIONS_PATH": os.environ.get("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".collections")),
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.facts_dir),
            "ANSIBLE_CALLBACKS_ENABLED": "sentinel.remediation.remediation_report",
            "ANSIBLE_NOCOLOR": "1",
            "OPENAI_BASE_URL": self.llm_url or "",
            "OPENAI_API_KEY": "test-key" if self.llm_url else "",
            "OPENAI_MODEL": "sentinel-test-model" if self.llm_url else "",
        }
        env.update(self.extra_env)
        return env

    def run(self, playbook: str = "remediate.yml", extravars: dict | None = None, tags: str | None = None,
            check: bool = False) -> Run:
        self.count += 1
        private = self.root / f"runner-{self.count}"
        private.mkdir(parents=True, exist_ok=True)
        report_path = private / "report.json"
        env = self.env() | {"SENTINEL_REPORT_JSON": str(report_path),
                            "SENTINEL_REPORT_JUNIT": str(private / "junit.xml")}
        extravars = {"remediate_artifacts_dir": str(self.artifacts_dir), **(extravars or {})}
        runner = ansible_runner.run(
            private_data_dir=str(private), ident="run", playbook=str(PLAYBOOKS / playbook),
            inventory=str(self.inventory), envvars=env, extravars=extravars, tags=tags,
            # Not "jsonfile": ansible-runner would then point the fact cache (the workflow's
            # memory) at a fresh directory of each run's artifacts.
            fact_cache_type="configured", quiet=True, rotate_artifacts=1, timeout=600,
            cmdline="--check" if check else None)
        stdout = runner.stdout.read() if runner.stdout else ""
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        return Run(runner.status, runner.rc, runner.stats or {}, report, stdout, self.facts_dir,
                   self.artifacts_dir, list(runner.events))


def lab_service(service: str) -> str:
    """The lab's health-check name of a collection service name."""
    return {"redis-server": "redis"}.get(service, service)


def require_docker() -> None:
    import pytest

    if shutil.which("docker") is None:
        message = "docker is not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: lab tests must run)", pytrace=False)
        pytest.skip(message)
