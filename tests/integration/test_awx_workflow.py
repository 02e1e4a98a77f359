"""The AWX workflow's playbooks, run in sequence through ansible-runner the way AWX runs them.

plan (awx_plan.yml) -> [approval node] -> execute (awx_execute.yml) -> verify (awx_verify.yml)

Like AWX: one private data dir and ident per job, extra vars of a node = the set_stats
artifacts of the nodes before it (``artifact_data`` of the ``playbook_on_stats`` event,
which AWX stores as the job's artifacts), nothing interactive. AWX's fact storage
(use_fact_cache) is played by a fact cache directory that the jobs share. Judged by the
lab's own health check. Also: syntax check and ansible-lint of the awx.awx configuration.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import ansible_runner
import pytest
from sentinel_lab import Lab

REPO = Path(__file__).resolve().parents[2]
PREFIX = "sentinel-drv"   # the lab of test_driver.py, reused (the test starts from healthy hosts)


def _job(tmp: Path, name: str, playbook: str, inventory: Path, extravars: dict) -> tuple[str, dict]:
    """One AWX job: its status and its set_stats artifacts."""
    (tmp / name).mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(tmp / name), project_dir=str(REPO), playbook=playbook, inventory=str(inventory),
        extravars={"remediate_backend": "runbook", "remediate_artifacts_dir": str(tmp / "remediation"), **extravars},
        ident=name, fact_cache_type="configured", quiet=True, suppress_env_files=True,
        envvars={"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp / "facts"), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
    )
    stats = [e for e in runner.events if e.get("event") == "playbook_on_stats"]
    artifacts = stats[-1]["event_data"].get("artifact_data") or {} if stats else {}
    return runner.status, dict(artifacts)


@pytest.fixture
def awx_lab(lab_factory) -> Iterator[Lab]:
    lab = lab_factory(PREFIX, 2)
    for host in ("lab01", "lab02"):
        if not all(h.healthy for h in lab.health(host).values()):
            lab.reset(host)
    yield lab
    for host in ("lab01", "lab02"):   # hand the shared hosts on healthy
        if not all(h.healthy for h in lab.health(host).values()):
            lab.reset(host)


@pytest.mark.lab
@pytest.mark.slow
def test_plan_approve_execute_verify(awx_lab: Lab, tmp_path: Path) -> None:
    lab = awx_lab
    inventory = lab.write_inventory(tmp_path / "hosts.yml")
    lab.inject("lab01", "nginx_stopped")         # its fix is policy-allowed: the plan node must still wait
    lab.inject("lab02", "nginx_config_syntax")   # its fix needs an approval anyway

    status, plan_artifacts = _job(tmp_path, "plan", "playbooks/awx_plan.yml", inventory, {})
    assert status == "successful"
    plans = plan_artifacts["sentinel_plans"]
    assert sorted((p["host"], p["service"]) for p in plans) == [("lab01", "nginx"), ("lab02", "nginx")]
    assert any("service nginx start" in c for p in plans for c in p["commands"])
    # Planning changed nothing: both are still broken while the approval node waits.
    assert not lab.health("lab01", ["nginx"])["nginx"].healthy
    assert not lab.health("lab02", ["nginx"])["nginx"].healthy

    # The approval node approves; AWX hands the plan node's artifacts to the next nodes.
    status, exec_artifacts = _job(tmp_path, "execute", "playbooks/awx_execute.yml", inventory, plan_artifacts)
    assert status == "successful"
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    assert lab.health("lab02", ["nginx"])["nginx"].healthy

    status, verify_artifacts = _job(tmp_path, "verify", "playbooks/awx_verify.yml", inventory,
                                    {**plan_artifacts, **exec_artifacts})
    assert status == "successful"
    assert verify_artifacts["sentinel_verify"] == {"lab01": True, "lab02": True}

    # Nothing left pending: a second execute with the same artifacts runs nothing again.
    status, dummy = _job(tmp_path, "execute-again", "playbooks/awx_execute.yml", inventory, plan_artifacts)
    assert status == "failed"   # resume refuses plans that no longer wait (already executed)


def test_controller_configuration_syntax_and_lint() -> None:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    for playbook in ("extensions/awx/configure_controller.yml", "playbooks/awx_plan.yml",
                     "playbooks/awx_execute.yml", "playbooks/awx_verify.yml"):
        proc = subprocess.run(["ansible-playbook", "--syntax-check", playbook], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, f"{playbook}: {proc.stdout}{proc.stderr}"
    if not shutil.which("ansible-lint"):
        pytest.skip("ansible-lint is not installed")
    proc = subprocess.run(["ansible-lint", "--offline", "extensions/awx/", "playbooks/awx_plan.yml",
                           "playbooks/awx_execute.yml", "playbooks/awx_execute_round.yml", "playbooks/awx_verify.yml"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_execution_environment_renders_offline(tmp_path: Path) -> None:
    if not shutil.which("ansible-builder"):
        pytest.skip("ansible-builder is not installed")
    context = tmp_path / "context"
    proc = subprocess.run(["ansible-builder", "create", "--file", "extensions/awx/execution-environment.yml",
                           "--context", str(context), "--output-filename", "Containerfile"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "ARG EE_BASE_IMAGE" in containerfile
    build = context / "_build"
    python_requirements = (build / "requirements.txt").read_text()
    assert "tree-sitter-bash" in python_requirements and "openai" in python_requirements   # the policy parser, the LLM client
    assert "sentinel.remediation" in (build / "requirements.yml").read_text()
