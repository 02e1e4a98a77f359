"""The driver and an installed collection: found by its MANIFEST.json, and ansible-playbook's own errors shown."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from sentinel_remediate import collection, runner


def _installed(base: Path, namespace: str = "sentinel", name: str = "remediation") -> Path:
    root = base / "ansible_collections" / namespace / name
    (root / "playbooks").mkdir(parents=True)
    info = {"namespace": namespace, "name": name, "version": "0.1.0"}
    (root / "MANIFEST.json").write_text(json.dumps({"collection_info": info}), encoding="utf-8")
    return root


def test_an_installed_collection_is_found_by_its_path_or_its_collections_path(tmp_path):
    root = _installed(tmp_path)
    assert collection.find_project_dir(str(root)) == root.resolve()
    assert collection.find_project_dir(str(tmp_path)) == root.resolve()


def test_another_installed_collection_is_not_taken_for_it(tmp_path):
    other = _installed(tmp_path, "community", "general")
    with pytest.raises(collection.DriverError, match="MANIFEST.json"):
        collection.find_project_dir(str(other))


def test_the_configuration_of_the_starting_directory_applies_to_an_installed_collection(tmp_path, monkeypatch):
    root = _installed(tmp_path / "install")
    user = tmp_path / "user"
    user.mkdir()
    (user / "ansible.cfg").write_text("[defaults]\n", encoding="utf-8")
    monkeypatch.chdir(user)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    assert runner.child_env(root, None)["ANSIBLE_CONFIG"] == str(user / "ansible.cfg")


def test_the_default_state_follows_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.delenv("SENTINEL_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert runner.State.from_options(None).root == (tmp_path / "sentinel-remediation").resolve()


STDOUT_219 = """[WARNING]: No inventory was parsed, only implicit localhost is available

PLAY [localhost] ***************************************************************

TASK [Check that the host pattern names hosts] *********************************
[ERROR]: Task failed: Action failed: remediate_hosts=nope matches no host of the inventory (3 host(s)); nothing
would be checked or healed.
Origin: /x/playbooks/remediate.yml:13:7

13     - name: Check that the host pattern names hosts
"""


def test_fatal_errors_are_ansibles_own_messages_with_their_continuation():
    assert runner.fatal_errors(STDOUT_219) == [
        "Task failed: Action failed: remediate_hosts=nope matches no host of the inventory (3 host(s)); nothing "
        "would be checked or healed."]


def test_fatal_errors_of_older_ansible_and_colour_codes():
    text = "\x1b[0;31mERROR! the role 'x.y.z' was not found in /roles\x1b[0m\n\nThe error appears to be in '/p.yml'"
    assert runner.fatal_errors(text) == ["the role 'x.y.z' was not found in /roles"]


def test_no_error_no_lines():
    assert runner.fatal_errors("PLAY RECAP\nlab01 : ok=1 changed=0\n") == []


def test_a_project_dir_without_the_collection_is_a_usage_error_naming_it(tmp_path, capsys):
    from sentinel_remediate import cli

    assert cli.main(["--project-dir", str(tmp_path), "report"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "MANIFEST.json" in err and "Traceback" not in err
