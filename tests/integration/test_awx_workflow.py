"""The AWX workflow's playbooks, run in sequence through ansible-runner the way AWX runs them.

plan (awx_plan.yml) -> [approval node] -> execute (awx_execute.yml) -> verify (awx_verify.yml)

Like AWX: one private data dir and ident per job, extra vars of a node = the set_stats
artifacts of the nodes before it (``artifact_data`` of the ``playbook_on_stats`` event,
which AWX stores as the job's artifacts), nothing interactive. AWX's fact storage
(use_fact_cache) is played by a fact cache directory that the jobs share. Judged by the
lab's own health check. Also: syntax check and ansible-lint of the awx.awx configuration.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import ansible_runner
import pytest
import yaml
from llm_server import LLMServer
from sentinel_lab import Lab

REPO = Path(__file__).resolve().parents[2]
PREFIX = os.environ.get("SENTINEL_LAB_PREFIX", "sentinel") + "-awx"   # its own lab: test files run in parallel


def _job(tmp: Path, name: str, playbook: str, inventory: Path, extravars: dict,
         envvars: dict | None = None) -> tuple[str, dict]:
    """One AWX job: its status and its set_stats artifacts."""
    (tmp / name).mkdir()
    runner = ansible_runner.run(
        private_data_dir=str(tmp / name), project_dir=str(REPO), playbook=playbook, inventory=str(inventory),
        extravars={"remediate_backend": "runbook", "remediate_artifacts_dir": str(tmp / "remediation"), **extravars},
        ident=name, fact_cache_type="configured", quiet=True, suppress_env_files=True,
        envvars={"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(tmp / "facts"), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                 **(envvars or {})},
    )
    stats = [e for e in runner.events if e.get("event") == "playbook_on_stats"]
    artifacts = stats[-1]["event_data"].get("artifact_data") or {} if stats else {}
    return runner.status, dict(artifacts)


def _untag(value):
    """Plain data from ansible-core's tagged JSON (``{"value": ..., "__ansible_type": ...}``)."""
    if isinstance(value, dict):
        if "__ansible_type" in value and "value" in value:
            return _untag(value["value"])
        return {k: _untag(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untag(v) for v in value]
    return value


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
    # The approver reads the plan job's output; the artifacts carry references, not the plan's text.
    assert "service nginx start" in (tmp_path / "plan" / "artifacts" / "plan" / "stdout").read_text()
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


# What the model wrote, made to be evaluated by whoever templates it: on the controller,
# a lookup runs with the job's credentials. Extra vars are trusted templates in ansible-core.
_HOSTILE = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}"


@pytest.mark.lab
@pytest.mark.slow
def test_model_text_never_reaches_the_next_nodes_as_extra_vars(awx_lab: Lab, tmp_path: Path) -> None:
    """AWX turns the plan node's set_stats into the next nodes' extra vars, which ansible-core
    templates as the operator's own. A diagnosis or a command the model wrote (and whoever
    can write a log line the model reads) must not travel that way: the approver reads it in
    the plan job's output, the execute node loads the plan from the authenticated file."""
    lab = awx_lab
    marker = tmp_path / "templated-on-the-controller"
    hostile = _HOSTILE % marker
    answer = {"diagnosis": f"nginx is frozen {hostile}", "rationale": f"continue it {hostile}",
              "commands": ["pkill -CONT -x nginx"]}
    inventory = lab.write_inventory(tmp_path / "hosts.yml")
    lab.inject("lab01", "nginx_processes_stopped")   # no runbook: the model plans it
    with LLMServer(rules=[{"match": r"Service: nginx\b", "reply": {"plan": answer}}]) as server:
        env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key", "OPENAI_MODEL": "sentinel-test-model"}
        status, plan_artifacts = _job(tmp_path, "plan", "playbooks/awx_plan.yml", inventory,
                                      {"remediate_backend": "llm", "remediate_hosts": "lab01"}, env)
        stdout = (tmp_path / "plan" / "artifacts" / "plan" / "stdout").read_text()
        assert status == "successful", stdout[-4000:]
        assert "nginx is frozen" in stdout and "pkill -CONT -x nginx" in stdout   # the approver's view
        plans = plan_artifacts["sentinel_plans"]
        assert [(p["host"], p["service"]) for p in plans] == [("lab01", "nginx")]
        assert "{{" not in json.dumps(plan_artifacts)
        assert all(set(p) <= {"id", "host", "service", "plan_hash", "digest"} for p in plans), plans

        # Handed on with the text put back (a relay, or a hand): every node that reads the
        # plans refuses them before reading a value, so nothing runs and nothing is templated.
        tampered = {"sentinel_plans": [{**p, "diagnosis": hostile, "commands": [hostile]} for p in plans]}
        for node in ("execute", "verify"):
            status, dummy = _job(tmp_path, f"tampered-{node}", f"playbooks/awx_{node}.yml", inventory, tampered, env)
            output = (tmp_path / f"tampered-{node}" / "artifacts" / f"tampered-{node}" / "stdout").read_text()
            assert status == "failed", output[-4000:]
            assert re.search(r"refusing fields (diagnosis, commands|commands, diagnosis)", output), output[-4000:]
        assert not lab.health("lab01", ["nginx"])["nginx"].healthy   # nothing ran

        status, exec_artifacts = _job(tmp_path, "execute", "playbooks/awx_execute.yml", inventory, plan_artifacts, env)
        assert status == "successful", (tmp_path / "execute" / "artifacts" / "execute" / "stdout").read_text()[-4000:]
        status, dummy = _job(tmp_path, "verify", "playbooks/awx_verify.yml", inventory,
                             {**plan_artifacts, **exec_artifacts}, env)
        assert status == "successful"
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    assert not marker.exists()


@pytest.mark.lab
@pytest.mark.slow
def test_deny_path_rejects_and_clears_the_pending_plans(awx_lab: Lab, tmp_path: Path) -> None:
    """The approval node is denied: the workflow's reject node (the job template that runs
    awx_execute.yml with awx_execute_reject) must escalate the plans (the job fails as any
    escalation does), run nothing, and leave nothing pending in the fact cache or the
    pending-plan files."""
    lab = awx_lab
    inventory = lab.write_inventory(tmp_path / "hosts.yml")
    lab.inject("lab01", "nginx_stopped")
    status, plan_artifacts = _job(tmp_path, "plan", "playbooks/awx_plan.yml", inventory, {})
    assert status == "successful"
    ids = [p["id"] for p in plan_artifacts["sentinel_plans"]]
    assert ids and list((tmp_path / "remediation" / "pending").glob("*.json"))

    config = yaml.safe_load((REPO / "extensions" / "awx" / "configure_controller.yml").read_text())[0]
    reject = next(t for t in config["vars"]["sentinel_templates"] if t["name"] == "Sentinel - reject denied plans")
    status, dummy = _job(tmp_path, "reject", reject["playbook"], inventory, {**plan_artifacts, **reject["extra_vars"]})
    output = (tmp_path / "reject" / "artifacts" / "reject" / "stdout").read_text()
    # The job fails because the service is escalated (remediate_fail_on_escalation), which
    # marks the denied workflow failed on the controller: the incident is not healed.
    assert status == "failed", output[-4000:]
    assert "lab01 nginx: ESCALATED" in output and "rejected by " in output, output[-4000:]
    assert not lab.health("lab01", ["nginx"])["nginx"].healthy           # nothing ran
    assert not list((tmp_path / "remediation" / "pending").glob("*.json"))
    # The jsonfile cache names files <prefix><host> (e.g. s1_lab01); ansible-core 2.19 stores
    # a JSON payload whose values carry their origin tags.
    raw = json.loads(next((tmp_path / "facts").glob("*lab01")).read_text())
    facts = _untag(json.loads(raw["__payload__"]) if "__payload__" in raw else raw)
    assert not facts.get("sentinel_pending")
    assert any(e.get("approval") == "rejected" or not e.get("success") for e in facts.get("sentinel_memory") or [])
    # Approving afterwards finds nothing: the plan is gone, not left pending forever.
    status, dummy = _job(tmp_path, "execute-late", "playbooks/awx_execute.yml", inventory, plan_artifacts)
    assert status == "failed"


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


def _awx_tasks() -> list[tuple[str, dict]]:
    """``(module, args)`` of every awx.awx task in the controller configuration."""
    plays = yaml.safe_load((REPO / "extensions" / "awx" / "configure_controller.yml").read_text())
    found = []
    for play in plays:
        for task in play.get("tasks") or []:
            for key, value in task.items():
                if key.startswith("awx.awx."):
                    found.append((key, value))
    return found


def _options(module: str) -> dict:
    """The module's documented options, as `ansible-doc --json` prints them (its argument spec's docs)."""
    proc = subprocess.run(["ansible-doc", "--json", module], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)[module]["doc"]["options"]


def _check_args(module: str, args: dict, options: dict, where: str) -> None:
    for key, value in args.items():
        names = {name for name, doc in options.items() for name in [name, *(doc.get("aliases") or [])]}
        assert key in names, f"{where}: {module} has no option {key!r}"
        doc = next(d for n, d in options.items() if key == n or key in (d.get("aliases") or []))
        if isinstance(value, str) and "{{" not in value and doc.get("choices"):
            assert value in doc["choices"], f"{where}: {key}={value!r} not in {doc['choices']}"


def test_controller_configuration_arguments_match_the_awx_modules() -> None:
    tasks = _awx_tasks()
    wanted = {"awx.awx.credential_type", "awx.awx.credential", "awx.awx.project", "awx.awx.job_template",
              "awx.awx.workflow_job_template"}
    assert {module for module, _args in tasks} >= wanted
    for module, args in tasks:
        options = _options(module)
        _check_args(module, args, options, module)
        if module == "awx.awx.workflow_job_template":
            assert args["destroy_current_nodes"] is True   # re-runs replace the nodes
            node_options = options["workflow_nodes"]["suboptions"]
            for node in args["workflow_nodes"]:
                _check_args(module, node, node_options, f"node {node['identifier']}")
    # Each template the workflow names is created, and the approval's deny path rejects the plans.
    config = yaml.safe_load((REPO / "extensions" / "awx" / "configure_controller.yml").read_text())[0]
    templates = {t["name"]: t for t in config["vars"]["sentinel_templates"]}
    workflow = next(args for module, args in tasks if module == "awx.awx.workflow_job_template")
    nodes = {n["identifier"]: n for n in workflow["workflow_nodes"]}
    for node in nodes.values():
        jt = node["unified_job_template"]
        if jt["type"] == "job_template":
            assert jt["name"] in templates, jt["name"]
    deny = nodes["approve"]["related"]["failure_nodes"]
    assert [d["identifier"] for d in deny] == ["reject"]
    reject = templates[nodes["reject"]["unified_job_template"]["name"]]
    assert reject["playbook"] == "playbooks/awx_execute.yml" and reject["extra_vars"] == {"awx_execute_reject": True}
    assert any(t.get("job_type") == "check" for t in templates.values())   # a dry-run template


def test_credential_type_covers_azure_and_keyless_endpoints() -> None:
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import resolve_settings

    loader = yaml.SafeLoader
    loader.add_constructor("!unsafe", lambda l, node: l.construct_scalar(node))
    ctype = yaml.load((REPO / "extensions" / "awx" / "credential_type.yml").read_text(), Loader=loader)
    ctype = ctype["sentinel_credential_type"]
    assert ctype["inputs"]["required"] == ["base_url"]          # no dummy key for a keyless server
    injectors = ctype["injectors"]["env"]

    def inject(**inputs) -> dict:
        # What the controller does: render each injector with the inputs (missing ones empty).
        return {name: re.sub(r"{{\s*(\w+)\s*}}", lambda m: str(inputs.get(m.group(1), "")), template)
                for name, template in injectors.items()}

    azure = resolve_settings({}, env=inject(base_url="https://res.openai.azure.com", api_key="k",
                                            api_version="2024-10-21", deployment="planner"), ini={})
    assert (azure.provider, azure.auth) == ("azure", "api_key")
    assert (azure.deployment, azure.api_version) == ("planner", "2024-10-21")
    keyless = resolve_settings({}, env=inject(base_url="http://vllm.internal:8000/v1", model="qwen"), ini={})
    assert (keyless.provider, keyless.auth, keyless.api_key) == ("openai", "none", "")
