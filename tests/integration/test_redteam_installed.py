# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team: what the driver takes from the directory it is started in.

The driver runs the collection's playbooks (with become on every host), so which collection,
and which Ansible configuration, decide what runs. A directory others can write to (``/tmp``,
a shared project directory) must not decide either: a planted ``galaxy.yml`` with
``playbooks/``, or a planted ``ansible.cfg`` in a world-writable directory, must lose to the
installed collection and to Ansible's own rule. The driver's package is copied out of the
checkout (so it is not "the checkout it runs from") and asked in a fresh interpreter, with
the real ``ansible-galaxy`` finding an installed collection on the collections path.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def world(tmp_path: Path) -> dict:
    driver = tmp_path / "driver-copy"
    shutil.copytree(REPO / "driver" / "sentinel_remediate", driver / "sentinel_remediate")
    installed = tmp_path / "collections" / "ansible_collections" / "sentinel" / "remediation"
    (installed / "playbooks").mkdir(parents=True)
    (installed / "MANIFEST.json").write_text(json.dumps({"collection_info": {
        "namespace": "sentinel", "name": "remediation", "version": "0.1.0"}}))
    planted = tmp_path / "shared"
    (planted / "playbooks").mkdir(parents=True)
    (planted / "playbooks" / "remediate.yml").write_text("- hosts: all\n  tasks: []\n")
    (planted / "ansible.cfg").write_text("[defaults]\ncallbacks_enabled = planted\n")
    planted.chmod(0o1777)   # as /tmp: anyone may add files
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "SENTINEL_"))}
    env.update(PYTHONPATH=str(driver), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "collections"),
               ANSIBLE_HOME=str(tmp_path / "ansible-home"), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    return {"installed": installed, "planted": planted, "env": env}


def ask(world: dict, code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=world["planted"], env=world["env"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("galaxy", ["namespace: sentinel\nname: remediation\nversion: 9.9.9\n",
                                    "namespace: someone\nname: else\nversion: 1.0.0\n"])
def test_a_collection_planted_in_the_current_directory_loses_to_the_installed_one(world: dict, galaxy: str) -> None:
    (world["planted"] / "galaxy.yml").write_text(galaxy)
    found = ask(world, "from sentinel_remediate.collection import find_project_dir; print(find_project_dir())")
    assert Path(found) == world["installed"].resolve()


def test_the_current_directory_is_used_when_it_is_named(world: dict) -> None:
    (world["planted"] / "galaxy.yml").write_text("namespace: sentinel\nname: remediation\nversion: 9.9.9\n")
    found = ask(world, "from sentinel_remediate.collection import find_project_dir; print(find_project_dir('.'))")
    assert Path(found) == world["planted"].resolve()


def test_an_ansible_cfg_in_a_world_writable_directory_is_not_named_for_ansible(world: dict) -> None:
    code = ("from pathlib import Path; from sentinel_remediate.runner import child_env; "
            f"print(child_env(Path({str(world['installed'])!r}), None).get('ANSIBLE_CONFIG', ''))")
    assert ask(world, code) == ""
    world["planted"].chmod(0o755)    # the user's own directory: its configuration applies, as Ansible reads it
    assert ask(world, code) == str((world["planted"] / "ansible.cfg").resolve())


def test_a_world_writable_state_directory_is_refused_before_the_host_is_touched(tmp_path: Path) -> None:
    # The journal (what ran, what healed: memory learns fixes from it) and the leases are kept
    # there without a MAC; a directory every user may write to would let anyone plant them.
    state = tmp_path / "shared-state"
    state.mkdir()
    state.chmod(0o1777)   # as /tmp
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n    web1:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
        "      remediate_services: [{name: probe, checks: [{type: service}]}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"), XDG_CACHE_HOME=str(tmp_path / "cache"))

    def run(artifacts: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "sentinel.remediation.remediate",
                               "-i", str(inventory), "-e", f"remediate_artifacts_dir={artifacts}",
                               "-e", "remediate_backend=runbook"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)

    proc = run(state)
    assert proc.returncode != 0
    assert (f"the state directory {state} (remediate_artifacts_dir) cannot be trusted: {state}: every user may write "
            "to it (mode 1777)") in proc.stdout, proc.stdout[-3000:]
    assert not (state / "journal").exists() and not (state / "pending").exists()
    # A directory of its own under it is created 0700 and used.
    proc = run(state / "mine")
    assert "cannot be trusted" not in proc.stdout, proc.stdout[-3000:]
    assert (state / "mine").stat().st_mode & 0o777 == 0o700
