"""Similar-incident recall end to end: playbooks/remediate.yml through ansible-runner on two
lab hosts, with the test LLM server standing in for the model.

A bad deploy snippet stops nginx on lab01 (nginx_config_syntax, /etc/nginx/conf.d/zz-broken.conf)
and is healed. Then the same kind of deploy breaks lab02 with another file name: the signature
differs (the config test names another file), so memory has no exact fix. With a model, the
model's prompt carries lab01's fix adapted to lab02's file, and the report says so. Without one,
the outcome carries the same fix as a hint and nothing of it runs: the file is still there and
the lab's own health check still sees nginx down.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator

import junitparser
import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.report import render_text
from llm_server import LLMServer
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PREFIX = f"{os.environ.get('SENTINEL_LAB_PREFIX', 'sentinel')}-recall"
# Recall is what is under test: no known-good restore ahead of it (a healthy pass of lab01 in the
# first test would make the snippet "new since the last healthy pass" in the second).
NO_KNOWN_GOOD = {"remediate_known_good": False}
OLD = "/etc/nginx/conf.d/zz-broken.conf"
NEW = "/etc/nginx/conf.d/yy-deploy.conf"
BROKEN = "server {\\n    listen 8081\\n    location / { return 204; }\\n}\\n"


def plan(path: str) -> dict:
    return {"plan": {"diagnosis": f"{path} lacks a ';'", "rationale": "disable the snippet, then start",
                     "commands": [f"mv {path} {path}.disabled", "service nginx start"]}}


# lab02's rule first: its prompt also quotes lab01's file (in the recalled fix).
RULES = [{"match": r"Failure: [\s\S]*yy-deploy\.conf:3", "reply": plan(NEW)},
         {"match": r"zz-broken\.conf:3", "reply": plan(OLD)}]


@pytest.fixture(scope="module")
def lab(lab_factory) -> Iterator:
    require_docker()
    made = lab_factory(PREFIX, 2)
    yield made
    for host in ("lab01", "lab02"):
        made.reset(host)


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer(rules=RULES) as running:
        yield running


def break_with(lab, host: str, path: str) -> None:
    """The catalogue's nginx_config_syntax with the snippet at ``path``."""
    lab.exec(host, f"printf '{BROKEN}' > {path} && service nginx stop && ! service nginx start >/dev/null 2>&1",
             check=True)
    assert not lab.health(host, ["nginx"])["nginx"].healthy


def repair(lab, host: str, path: str) -> None:
    lab.exec(host, f"rm -f {path} {path}.disabled && service nginx start", check=True)


def heal_lab01_first(lab, work: Workspace, extravars: dict) -> None:
    lab.inject("lab01", "nginx_config_syntax")
    first = work.run(extravars={"remediate_auto_approve": True, "remediate_hosts": "lab01", **NO_KNOWN_GOOD,
                                **extravars})
    assert first.status == "successful", first.stdout[-3000:]
    assert first.outcomes()[("lab01", "nginx")]["state"] == "healed", first.outcomes()[("lab01", "nginx")]
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    lab.exec("lab01", f"rm -f {OLD}.disabled", check=True)


def test_a_similar_incident_is_offered_to_the_model_adapted_to_this_host(lab, server, tmp_path):
    work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.yml"), llm_url=server.url)
    server.reset()
    heal_lab01_first(lab, work, {"remediate_backend": "llm"})
    assert len(server.chat_requests) == 1

    break_with(lab, "lab02", NEW)
    try:
        second = work.run(extravars={"remediate_backend": "llm", "remediate_auto_approve": True, **NO_KNOWN_GOOD})
        assert second.status == "successful", second.stdout[-3000:]
        outcome = second.outcomes()[("lab02", "nginx")]
        assert outcome["signature"] != first_signature(work)
        prompt = server.prompt_text(len(server.chat_requests) - 1)
        assert "Worked before on a similar incident (not identical: adapt the values to this host" in prompt
        assert f"`mv {NEW} {NEW}.disabled` (there: `mv {OLD} {OLD}.disabled`)" in prompt
        assert outcome["state"] == "healed", outcome
        assert outcome["recall"] == "offered"
        (recalled,) = outcome["recalled"]
        assert recalled["host"] == "lab01" and recalled["similarity"] >= 0.6
        assert recalled["commands"][0] == {"command": f"mv {NEW} {NEW}.disabled", "original": f"mv {OLD} {OLD}.disabled"}
        assert [c["source"] for c in outcome["commands"]] == ["llm", "llm"]
        assert lab.exec("lab02", f"test -f {NEW}.disabled && ! test -e {NEW}").ok
        assert lab.health("lab02", ["nginx"])["nginx"].healthy
        assert "similar incident on lab01" in render_text(second.report)
        junit = junitparser.JUnitXml.fromfile(str(work.root / "runner-2" / "junit.xml"))
        assert sum(suite.tests for suite in junit) == len(second.report["outcomes"])
    finally:
        repair(lab, "lab02", NEW)


def test_without_a_model_the_similar_fix_is_a_hint_and_nothing_of_it_runs(lab, tmp_path):
    work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.yml"))
    heal_lab01_first(lab, work, {"remediate_backend": "runbook"})

    break_with(lab, "lab02", NEW)
    try:
        second = work.run(extravars={"remediate_backend": "memory", "remediate_max_retries": 1, **NO_KNOWN_GOOD})
        outcome = second.outcomes()[("lab02", "nginx")]
        assert outcome["state"] == "escalated", outcome
        assert outcome["recall"] == "hint"
        (recalled,) = outcome["recalled"]
        assert recalled["host"] == "lab01"
        assert recalled["commands"][0]["command"] == f"mv {NEW} {NEW}.disabled"
        assert "similar incident" in outcome["reason"] and f"mv {NEW} {NEW}.disabled" in outcome["reason"]
        assert outcome["commands"] == []
        # Judged on the host: the snippet is where the fault put it, nginx is still down.
        assert lab.exec("lab02", f"test -f {NEW} && ! test -e {NEW}.disabled").ok
        assert not lab.health("lab02", ["nginx"])["nginx"].healthy
    finally:
        repair(lab, "lab02", NEW)


def first_signature(work: Workspace) -> str:
    """lab01's signature, from the report of the workspace's first run."""
    report = json.loads((work.root / "runner-1" / "report.json").read_text())
    return next(o["signature"] for o in report["outcomes"] if o["host"] == "lab01" and o["service"] == "nginx")
