# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment builds from this checkout (no container engine needed).

extensions/awx/build-ee --create-only runs the real `ansible-galaxy collection build` and
`ansible-builder create`; the test then reads the rendered context and repeats, on this
machine, the galaxy stage's install (offline, with the Galaxy server pointed at a dead
port) and the builder stage's dependency introspection, with ansible-builder's own scripts.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_EE = REPO / "extensions" / "awx" / "build-ee"
# What a published collection holds; everything else in the checkout stays out.
COLLECTION_TOP = {"MANIFEST.json", "FILES.json", "README.md", "changelogs", "docs", "extensions", "meta",
                  "playbooks", "plugins", "roles", "runbooks"}
NEVER = re.compile(r"(^|/)(driver|lab|bench|scripts|tests|molecule|inventories|\.venv|\.cache|\.collections|"
                   r"__pycache__|[^/]+\.egg-info|artifacts)(/|$)|\.pyc$|^ansible\.cfg$|^requirements\.(txt|yml)$")


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Path:
    if not shutil.which("ansible-builder", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"):
        pytest.fail("ansible-builder is not installed (pip install -r requirements.txt)")
    ctx = tmp_path_factory.mktemp("ee") / "context"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([str(BUILD_EE), "--create-only", "--context", str(ctx)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ctx


def test_the_collection_tarball_holds_only_the_collection(context: Path) -> None:
    tarball = context / "_build" / "collections" / "sentinel-remediation.tar.gz"
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    top = {name.split("/", 1)[0] for name in names}
    assert top <= COLLECTION_TOP, top - COLLECTION_TOP
    assert {"plugins", "roles", "playbooks", "meta"} <= top
    leaked = [name for name in names if NEVER.search(name)]
    assert not leaked, leaked
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert manifest["collection_info"]["version"] == galaxy["version"]
    assert manifest["collection_info"]["dependencies"] == {}
    assert "example.invalid" not in json.dumps(manifest)


def test_the_context_installs_the_collection_from_the_local_artifact(context: Path, tmp_path: Path) -> None:
    build = context / "_build"
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.is_file()).read_text()
    base = re.search(r'^ARG EE_BASE_IMAGE="([^"]+)"', containerfile, re.MULTILINE).group(1)
    assert "@sha256:" in base or re.search(r":\d+(\.\d+)+$", base), f"base image not pinned: {base}"
    assert re.search(r'^ARG ANSIBLE_GALAXY_CLI_COLLECTION_OPTS=".*--offline', containerfile, re.MULTILINE)
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    assert "COPY _build /build" in containerfile

    requirements = yaml.safe_load((build / "requirements.yml").read_text())
    entries = requirements["collections"]
    assert entries and all(entry.get("type") == "file" and (build / entry["name"]).is_file() for entry in entries), entries

    # The galaxy stage's command, here: offline, and any Galaxy contact would hit a closed port.
    installed = tmp_path / "collections"
    # No ansible.cfg: the checkout's own collections path would make the install a no-op.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")},
           "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(installed),
           "ANSIBLE_GALAXY_SERVER": "http://127.0.0.1:9"}
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    proc = subprocess.run([str(galaxy), "collection", "install", "--offline", "-r", "requirements.yml",
                           "--collections-path", str(installed)], cwd=build, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    root = installed / "ansible_collections" / "sentinel" / "remediation"
    assert (root / "plugins" / "action" / "plan.py").is_file()
    assert not (root / "driver").exists() and not (root / "lab").exists()

    # The builder stage's introspection finds the collection's runtime Python packages
    # (meta/execution-environment.yml), never the repository's development requirements.
    proc = subprocess.run([sys.executable, str(build / "scripts" / "introspect.py"), "introspect",
                           "--user-pip", str(build / "requirements.txt"), "--user-bindep", str(build / "bindep.txt"),
                           str(installed)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    found = yaml.safe_load(proc.stdout)
    python = " ".join(found["python"])
    for package in ("openai", "tree-sitter-bash", "rank-bm25"):
        assert f"{package}" in python and "from collection sentinel.remediation" in python
    for dev in ("molecule", "pytest", "ansible-lint", "ansible-rulebook"):
        assert dev not in python


def test_navigator_settings_name_the_built_image() -> None:
    settings = yaml.safe_load((REPO / "extensions" / "awx" / "ansible-navigator.yml").read_text())["ansible-navigator"]
    ee = yaml.safe_load((REPO / "extensions" / "awx" / "execution-environment.yml").read_text())
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert ee["options"]["tags"] == [f"sentinel-remediation-ee:{version}"]   # what build-ee tags by default
    assert settings["execution-environment"]["image"].split("/")[-1] in ee["options"]["tags"]
    passed = settings["execution-environment"]["environment-variables"]["pass"]
    assert {"OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_API_VERSION"} <= set(passed)
