# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment: its ansible-builder context, and a real image running a real job.

extensions/awx/build-ee --create-only runs the real `ansible-galaxy collection build` and
`ansible-builder create`; the tests then read the rendered context and repeat, on this
machine, the galaxy stage's install (offline, with the Galaxy server pointed at a dead
port) and the builder stage's dependency introspection, with ansible-builder's own scripts.

lab/image/ee/build.sh builds the image with no registry (Debian packages, wheels and files
in the build context; once per recipe hash, as the lab images), and a remediation job runs
in it as AWX runs one: ansible-runner with process isolation in that container image, the
root file system read-only, no network, the hosts reached through the docker connection
over the daemon's socket. Jobs heal a host, escalate one (no notification channel), and
leave a plan waiting that a second job, with the installed resume playbook, approves. The
driver, a controller like AWX itself, runs beside the image against the collections the
image carries. Judged by the lab's own health check, the runner's artifacts and the reports
the jobs wrote.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import ansible_runner
import pytest
import yaml
from installed_support import clean_env, read_only, undo_read_only

REPO = Path(__file__).resolve().parents[2]
BUILD_EE = REPO / "extensions" / "awx" / "build-ee"
# What a published collection holds; everything else in the checkout stays out.
COLLECTION_TOP = {"MANIFEST.json", "FILES.json", "LICENSE", "README.md", "changelogs", "docs", "extensions", "meta",
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
    assert manifest["collection_info"]["dependencies"] == galaxy["dependencies"]  # declared, and only those
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
    assert {"collections/sentinel-remediation.tar.gz", "collections/community-docker.tar.gz",
            "collections/community-general.tar.gz"} <= {entry["name"] for entry in entries}
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
    for name in ("docker", "general"):
        assert (installed / "ansible_collections" / "community" / name / "MANIFEST.json").is_file()
    assert not (root / "driver").exists() and not (root / "lab").exists()

    # The builder stage's introspection finds the collection's runtime Python packages
    # (meta/execution-environment.yml), never the repository's development requirements.
    proc = subprocess.run([sys.executable, str(build / "scripts" / "introspect.py"), "introspect",
                           "--user-pip", str(build / "requirements.txt"), "--user-bindep", str(build / "bindep.txt"),
                           str(installed)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    found = yaml.safe_load(proc.stdout)
    python = " ".join(found["python"])
    assert "redis" in python    # the lease and plan-share code imports it
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


# ---------------------------------------------------------------------------------------
# The image, built here, running a job the way AWX does.

EE_BUILD = REPO / "lab" / "image" / "ee" / "build.sh"
PLAYBOOK = """---
# A user's project: the installed collection's playbook, by its FQCN.
- name: Remediate
  ansible.builtin.import_playbook: sentinel.remediation.remediate
"""


@pytest.fixture(scope="module")
def ee_image(lab) -> str:
    """The EE image reference (built once per recipe hash; the collection layer per checkout)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(EE_BUILD)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout.split()[-1]


def _in_image(image: str, *command: str) -> str:
    """stdout of a command in the image as a job sees it: read-only, no network, /runner and /tmp writable."""
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp",
                           "--tmpfs", "/runner", image, *command], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, f"{command}: {proc.stderr[-2000:]}"
    return proc.stdout


def test_the_image_holds_the_collection_and_what_it_imports(ee_image: str) -> None:
    listing = json.loads(_in_image(ee_image, "ansible-galaxy", "collection", "list", "--format", "json"))
    found = {name: info["version"] for path in listing.values() for name, info in path.items()}
    assert found.get("sentinel.remediation") == yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert {"community.docker", "community.general"} <= set(found)
    imports = "import redis, openai, tree_sitter_bash, rank_bm25, ansible_runner; print('ok')"
    assert _in_image(ee_image, "python3", "-c", imports).strip() == "ok"
    assert _in_image(ee_image, "docker", "--version").startswith("Docker version")
    # Read-only: the installed collection cannot be written to by a job.
    probe = "/usr/share/ansible/collections/ansible_collections/sentinel/remediation/.probe"
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--read-only", ee_image, "touch", probe],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "Read-only file system" in proc.stderr, proc.stderr


# One job of the image over three hosts of the session lab, one fault each: one heals, one only
# a person can fix (escalated, no notification channel configured), one waits for approval;
# then a second job approves the waiting plan with the installed resume playbook.
HEAL, ESCALATE, WAIT = "lab01", "lab03", "lab02"
APPROVAL_KEY = secrets.token_hex(32)
FAULTS = {HEAL: "nginx_stopped", ESCALATE: "nginx_binary_missing", WAIT: "nginx_config_syntax"}


def _ensure_healthy(lab, *hosts: str) -> None:
    for host in hosts:
        if not all(h.healthy for h in lab.health(host).values()):
            lab.reset(host)


def _job(work: Path, image: str, ident: str, limit: str, playbook: str = "remediate.yml", **extravars: object):
    """ansible-runner as AWX runs a job: a private data directory of its own (the user's project, the
    inventory), process isolation in the image, read-only, no network; the state directory (pending
    plans, journal, fact cache) on a volume that outlives the job, as a persistent volume would."""
    private = work / ident
    shutil.copytree(work / "project", private / "project")
    shutil.copytree(work / "inventory", private / "inventory")
    runner = ansible_runner.run(
        private_data_dir=str(private), playbook=playbook, ident=ident, limit=limit, quiet=True,
        process_isolation=True, process_isolation_executable="docker", container_image=image,
        # As an AWX container group would: no network (the hosts are reached through the
        # daemon's socket), and nothing writable but the job's own directory, /tmp and the state volume.
        container_options=["--network=none", "--read-only", "--tmpfs", "/tmp",
                           "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{work / 'state'}:/state"],
        extravars={"remediate_backend": "runbook", "remediate_artifacts_dir": "/state/remediation", **extravars},
        envvars={"ANSIBLE_CALLBACKS_ENABLED": "sentinel.remediation.remediation_report",
                 "SENTINEL_REPORT_JSON": f"/state/{ident}.json",
                 # Every job runs in a fresh container: the approval key comes from a credential
                 # (docs/operate.md), so the job that approves can check what the planning job wrote.
                 "SENTINEL_APPROVAL_KEY": APPROVAL_KEY,
                 "ANSIBLE_CACHE_PLUGIN": "sentinel.remediation.jsonfile",
                 "ANSIBLE_CACHE_PLUGIN_CONNECTION": "/state/facts",
                 "ANSIBLE_GATHERING": "explicit", "ANSIBLE_NOCOLOR": "1"},
    )
    stdout = (private / "artifacts" / ident / "stdout").read_text(errors="replace")
    # The runner's own record: what it ran, in the image, read-only.
    command = json.loads((private / "artifacts" / ident / "command").read_text())["command"]
    assert command[:2] == ["docker", "run"] and image in command and "--read-only" in command
    report_file = work / "state" / f"{ident}.json"
    assert report_file.is_file(), f"no report ({runner.status}, rc {runner.rc}):\n{stdout[-4000:]}"
    outcomes = {(o["host"], o["service"]): o for o in json.loads(report_file.read_text())["outcomes"]}
    return runner, stdout, outcomes


@pytest.fixture(scope="module")
def fleet_job(lab, ee_image: str, tmp_path_factory) -> Iterator[dict]:
    """The first job, over the three hosts. The user's project: the installed collection's playbooks
    imported by their FQCN."""
    work = tmp_path_factory.mktemp("ee-jobs")
    (work / "project").mkdir()
    (work / "state").mkdir()
    (work / "project" / "remediate.yml").write_text(PLAYBOOK)
    (work / "project" / "resume.yml").write_text(PLAYBOOK.replace("remediate\n", "resume\n"))
    lab.write_inventory(work / "inventory" / "hosts.yml", services=True)
    _ensure_healthy(lab, *FAULTS)
    for host, fault in FAULTS.items():
        lab.inject(host, fault)
    assert not any(lab.health(host, ["nginx"])["nginx"].healthy for host in FAULTS)
    try:
        # No known-good restore ahead of the runbooks: it would take lab02's new snippet out alone.
        runner, stdout, outcomes = _job(work, ee_image, "fleet", ",".join(FAULTS), remediate_known_good=False)
        yield {"work": work, "runner": runner, "stdout": stdout, "outcomes": outcomes}
    finally:
        _ensure_healthy(lab, *FAULTS)


@pytest.mark.lab
@pytest.mark.slow
def test_a_job_heals_a_lab_host_inside_the_read_only_image(lab, fleet_job: dict) -> None:
    stdout, work = fleet_job["stdout"], fleet_job["work"]
    assert fleet_job["outcomes"][(HEAL, "nginx")]["state"] == "healed", fleet_job["outcomes"]
    # The lab's own check, from outside the container.
    assert lab.health(HEAL, ["nginx"])["nginx"].healthy, stdout[-4000:]
    # Nothing failed on the healed host (the runner's own per-host counts).
    assert HEAL not in fleet_job["runner"].stats["failures"] and HEAL in fleet_job["runner"].stats["ok"]
    assert any(work.joinpath("state", "remediation").rglob("*")), "no artifacts in the state directory"


@pytest.mark.lab
@pytest.mark.slow
def test_a_job_in_the_image_escalates_what_only_a_person_can_fix(lab, fleet_job: dict) -> None:
    runner, stdout = fleet_job["runner"], fleet_job["stdout"]
    assert fleet_job["outcomes"][(ESCALATE, "nginx")]["state"] == "escalated", fleet_job["outcomes"]
    # No notification channel configured: the escalation fails its host (remediate_fail_on_escalation),
    # and nothing else failed the job.
    assert runner.status == "failed" and runner.rc == 2, stdout[-4000:]
    assert (fleet_job["work"] / "fleet" / "artifacts" / "fleet" / "rc").read_text() == "2"
    assert set(runner.stats["failures"]) == {ESCALATE}, runner.stats
    assert f"escalated nginx on {ESCALATE}" in stdout
    assert "Read-only file system" not in stdout, stdout[-4000:]
    assert not lab.health(ESCALATE, ["nginx"])["nginx"].healthy


@pytest.mark.lab
@pytest.mark.slow
def test_a_job_in_the_image_resumes_an_approved_plan(lab, ee_image: str, fleet_job: dict) -> None:
    work = fleet_job["work"]
    waiting = fleet_job["outcomes"][(WAIT, "nginx")]
    assert waiting["state"] == "waiting_approval", (waiting, fleet_job["stdout"][-3000:])
    pending = work / "state" / "remediation" / "pending" / f"{waiting['approval_id']}.json"
    assert pending.is_file(), sorted(str(p) for p in (work / "state").rglob("*"))
    assert not lab.health(WAIT, ["nginx"])["nginx"].healthy   # nothing ran

    # A second job (another container of the image), as the approval node of an AWX workflow runs it.
    runner, stdout, outcomes = _job(work, ee_image, "resume", WAIT, playbook="resume.yml",
                                    remediate_approve=waiting["approval_id"])
    assert runner.status == "successful" and runner.rc == 0, stdout[-4000:]
    assert outcomes[(WAIT, "nginx")]["state"] == "healed", outcomes
    assert lab.health(WAIT, ["nginx"])["nginx"].healthy
    assert not pending.exists()


@pytest.fixture(scope="module")
def image_collections(ee_image: str, tmp_path_factory) -> Iterator[Path]:
    """The collections path of the image (sentinel.remediation, community.docker, community.general),
    copied out byte for byte and made read-only."""
    target = tmp_path_factory.mktemp("ee-collections") / "collections"
    name = f"sentinel-ee-copy-{os.getpid()}"
    subprocess.run(["docker", "create", "--name", name, ee_image], capture_output=True, text=True, check=True)
    try:
        copied = subprocess.run(["docker", "cp", f"{name}:/usr/share/ansible/collections", str(target)],
                                capture_output=True, text=True, check=False)
        assert copied.returncode == 0, copied.stderr
    finally:
        subprocess.run(["docker", "rm", name], capture_output=True, check=False)
    mounts = read_only(target)
    try:
        yield target
    finally:
        undo_read_only(mounts, [target])


@pytest.mark.lab
@pytest.mark.slow
def test_the_driver_runs_the_collection_the_image_carries(lab, image_collections: Path, installed_driver: Path,
                                                          tmp_path: Path) -> None:
    """The driver is a controller, like AWX: it starts ansible-runner and keeps locks, reports and pending
    plans on its host, so it runs beside the EE, not inside a job of it. What it must work with is the
    EE's content: here the collections the image carries, copied out read-only, run by the driver
    installed in its own venv from a directory outside the checkout."""
    _ensure_healthy(lab, HEAL)
    collection = image_collections / "ansible_collections" / "sentinel" / "remediation"
    inventory = lab.write_inventory(tmp_path / "hosts.yml", services=True)
    env = {**clean_env(), "ANSIBLE_COLLECTIONS_PATH": str(image_collections), "ANSIBLE_HOME": str(tmp_path / "home"),
           "XDG_STATE_HOME": str(tmp_path / "state"), "ANSIBLE_NOCOLOR": "1"}
    lab.inject(HEAL, "nginx_stopped")
    proc = subprocess.run([str(installed_driver), "--project-dir", str(image_collections), "run", "-i", str(inventory),
                           "--limit", HEAL, "-e", "remediate_backend=runbook", "--format", "json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["run"]["project_dir"] == str(collection)
    assert [(o["host"], o["service"], o["state"]) for o in report["outcomes"] if o["state"] != "healthy"] \
        == [(HEAL, "nginx", "healed")], report["outcomes"]
    assert lab.health(HEAL, ["nginx"])["nginx"].healthy
    assert (tmp_path / "state" / "sentinel-remediation" / "artifacts" / report["run"]["ident"] / "report.json").is_file()
