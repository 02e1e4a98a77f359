"""A real ansible-runner pass: the API key reaches ansible, and never the artifacts or argv."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from driver_support import stand_in_project
from sentinel_remediate import report as r
from sentinel_remediate.runner import PassOptions, State, run_pass, safe_env, scrub_artifacts

SECRET = "sk-test-DO-NOT-LEAK-4f1c2a9b7e"

TASKS = """\
    - name: Use the key as the planner would (its length only)
      ansible.builtin.debug:
        msg: "key length {{ lookup('ansible.builtin.env', 'OPENAI_API_KEY') | length }}"
    - name: Leak it on purpose; the driver must still keep it out of the artifacts
      ansible.builtin.command: printenv OPENAI_API_KEY
      changed_when: false
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return stand_in_project(tmp_path / "project", TASKS)


def test_api_key_never_in_artifacts(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    state = State(tmp_path / "state")
    options = PassOptions(playbook="playbooks/demo.yml", inventory=[str(project / "hosts.yml")], hosts=["localhost"],
                          extravars={"remediate_backend": "llm"})
    result = run_pass(state, project, options, out=None)

    assert result["run"]["status"] == "successful", result
    assert [(o["host"], o["service"], o["state"]) for o in result["outcomes"]] == [("localhost", "demo", "healthy")]
    assert r.exit_code(result) == r.EXIT_OK
    run_dir = state.artifacts / result["run"]["ident"]
    assert "key length 30" in (run_dir / "stdout").read_text()   # the key did reach ansible
    command = json.loads((run_dir / "command").read_text())
    assert SECRET not in " ".join(command["command"])
    assert command["env"]["OPENAI_API_KEY"] == "********"
    leaks = [p for p in state.root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaks == []
    assert not any((state.private).iterdir()), "the private data dir is removed after the run"


def test_scrub_and_safe_env(tmp_path: Path) -> None:
    (tmp_path / "job_events").mkdir()
    (tmp_path / "job_events" / "1-x.json").write_text(json.dumps({"stdout": f"key={SECRET}"}))
    (tmp_path / "command").write_text(json.dumps({"command": ["ansible-playbook"], "env": {
        "OPENAI_API_KEY": SECRET, "MY_TOKEN": "t0ken-value", "PATH": "/bin"}}))
    touched = scrub_artifacts(tmp_path, [SECRET])
    assert [p.name for p in touched] == ["1-x.json"]
    assert SECRET not in (tmp_path / "job_events" / "1-x.json").read_text()
    env = json.loads((tmp_path / "command").read_text())["env"]
    assert env == {"OPENAI_API_KEY": "********", "MY_TOKEN": "********", "PATH": "/bin"}
    assert safe_env({"OPENAI_BASE_URL": "http://127.0.0.1:1"}) == {"OPENAI_BASE_URL": "http://127.0.0.1:1"}
