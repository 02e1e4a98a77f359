"""The collection as its users get it: the tarball of `ansible-galaxy collection build`, installed
with its declared dependencies only into a read-only collections path, used from a directory
outside the checkout with a configuration that knows nothing of the checkout.

One small lab (the session lab's three hosts) serves every step, in order: heal and escalate
with ansible-core alone (no community.general), leave a plan waiting and approve it with the
installed resume playbook, then the driver, installed on its own from driver/, against the
installed collection. What is asserted comes from outside: the lab's own health check, the
report files, the state directory, and a snapshot of every file under the install.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentinel_lab import Lab

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCRUBBED = ("ANSIBLE_", "SENTINEL_", "OPENAI_", "AZURE_OPENAI_", "PYTHONPATH", "XDG_", "VIRTUAL_ENV")


def _bundled_collections() -> Path:
    """Where pip's `ansible` package keeps the collections it bundles (community.general among them)."""
    import ansible_collections  # the pip package `ansible`: a namespace package in site-packages

    for base in ansible_collections.__path__:
        if (Path(base) / "community" / "general" / "MANIFEST.json").is_file():
            return Path(base)
    pytest.fail("the pip package `ansible` (bundled collections) is not installed in this venv")


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under root with the hash of its content (directories: their listing)."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            state[rel] = "dir"
        else:
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def _read_only(path: Path) -> list[Path]:
    """Make path read-only even for root: a read-only bind mount onto itself when this process may
    mount (root), always `chmod -R a-w`. Returns the mounts to undo."""
    subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
    if os.geteuid() != 0:
        return []
    mounted = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, check=False)
    if mounted.returncode != 0:
        return []
    remount = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, check=False)
    if remount.returncode != 0:
        subprocess.run(["umount", str(path)], check=False)
        return []
    return [path]


@dataclass
class Installed:
    base: Path
    tarball: Path
    collection: Path          # <install>/ansible_collections/sentinel/remediation
    install: Path             # the collections path of the installed collection
    deps: Path                # its declared dependencies, from the bundle
    site: Path                # the user's own collections (community.docker for the lab's connection)
    user: Path                # the user's working directory (ansible.cfg, inventory)
    state: Path               # XDG_STATE_HOME
    snapshot: dict[str, str]

    def env(self, with_deps: bool = True, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
        paths = [self.install] + ([self.deps] if with_deps else []) + [self.site]
        env.update({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(str(p) for p in paths),
                    "XDG_STATE_HOME": str(self.state), "XDG_CACHE_HOME": str(self.base / "xdg-cache"),
                    "ANSIBLE_HOME": str(self.base / "ansible-home"), "ANSIBLE_NOCOLOR": "1"})
        env.update(extra)
        return env

    def playbook(self, name: str, *args: str, with_deps: bool = True, report: str = "report.json",
                 timeout: float = 900) -> tuple[subprocess.CompletedProcess, dict]:
        """ansible-playbook on an installed playbook by its FQCN, from the user's directory."""
        path = self.user / report
        path.unlink(missing_ok=True)
        proc = subprocess.run([str(BIN / "ansible-playbook"), f"sentinel.remediation.{name}", *args],
                              cwd=self.user, env=self.env(with_deps, SENTINEL_REPORT_JSON=str(path)),
                              capture_output=True, text=True, timeout=timeout, check=False)
        assert path.is_file(), f"no report written (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
        return proc, json.loads(path.read_text(encoding="utf-8"))


def _outcomes(report: dict) -> dict[tuple[str, str], dict]:
    return {(o["host"], o["service"]): o for o in report.get("outcomes", [])}


@pytest.fixture(scope="module")
def installed(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("installed")
    dist, install, deps, site, user = (base / n for n in ("dist", "install", "deps", "site", "user"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    clean.update({"ANSIBLE_HOME": str(base / "ansible-home"), "ANSIBLE_CONFIG": str(base / "empty.cfg")})
    (base / "empty.cfg").write_text("[defaults]\n", encoding="utf-8")
    built = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", str(REPO), "--output-path", str(dist)],
                           cwd=base, env=clean, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (tarball,) = dist.glob("sentinel-remediation-*.tar.gz")
    # The tarball alone (no Galaxy: --offline); its dependencies are put beside it below.
    done = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps",
                           "-p", str(install), str(tarball)],
                          cwd=base, env=clean, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    collection = install / "ansible_collections" / "sentinel" / "remediation"
    manifest = json.loads((collection / "MANIFEST.json").read_text(encoding="utf-8"))
    bundle = _bundled_collections()
    for fqcn in manifest["collection_info"]["dependencies"]:
        namespace, name = fqcn.split(".")
        shutil.copytree(bundle / namespace / name, deps / "ansible_collections" / namespace / name, symlinks=True)
    # The lab's inventory reaches its containers with community.docker's connection: the user's own collection.
    shutil.copytree(bundle / "community" / "docker", site / "ansible_collections" / "community" / "docker",
                    symlinks=True)
    user.mkdir()
    lab.write_inventory(user / "hosts.yml", services=True)
    (user / "ansible.cfg").write_text(
        "[defaults]\n"
        "inventory = hosts.yml\n"
        "collections_scan_sys_path = false\n"   # nothing from the pip bundle but what is copied above
        "gathering = explicit\n"
        "host_key_checking = false\n"
        "interpreter_python = auto_silent\n"
        "retry_files_enabled = false\n"
        "callbacks_enabled = sentinel.remediation.remediation_report\n"
        "fact_caching = sentinel.remediation.jsonfile\n"
        "fact_caching_connection = facts\n"
        "fact_caching_timeout = 0\n"
        "[connection]\npipelining = true\n", encoding="utf-8")
    snapshot = _snapshot(install)
    mounts = []
    try:
        mounts = _read_only(install) + _read_only(deps)
        yield Installed(base, tarball, collection, install, deps, site, user, base / "xdg-state", snapshot)
    finally:
        for mount in mounts:
            subprocess.run(["umount", str(mount)], check=False)
        subprocess.run(["chmod", "-R", "u+w", str(install), str(deps)], check=False)
        for host in ("lab01", "lab02", "lab03"):
            if not all(h.healthy for h in lab.health(host).values()):
                lab.reset(host)


def test_the_tarball_holds_what_users_run_and_names_its_dependencies(installed: Installed) -> None:
    with tarfile.open(installed.tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
        # nothing shipped reads a test-only switch
        reads_test_switch = [m.name for m in tar.getmembers()
                             if m.name.endswith(".py") and b"SENTINEL_TEST_" in tar.extractfile(m).read()]
    assert not reads_test_switch
    for wanted in ("LICENSE", "meta/runtime.yml", "roles/remediate/tasks/escalate.yml", "playbooks/remediate.yml",
                   "playbooks/resume.yml", "plugins/action/heal.py", "docs/docsite/links.yml", "changelogs/changelog.yaml"):
        assert wanted in names, wanted
    for unwanted in ("tests", "lab", "bench", "molecule", "driver", "scripts", "docs/lab.md", "BENCHMARKS.md",
                     "ansible.cfg", "changelogs/fragments"):
        assert not [n for n in names if n == unwanted or n.startswith(unwanted + "/")], unwanted
    # test-only hooks never ship
    assert not [n for n in names if "_test_" in n or "sitecustomize" in n or "misread" in n]
    assert manifest["license_file"] == "LICENSE" and manifest["repository"]
    assert "community.general" in manifest["dependencies"]


def test_installed_collection_heals_and_escalates_with_ansible_core_alone(lab: Lab, installed: Installed) -> None:
    lab.inject("lab01", "nginx_stopped")
    lab.inject("lab02", "redis_killed")
    lab.inject("lab03", "nginx_binary_missing")   # only a human can fix it: escalated, no channel configured
    proc, report = installed.playbook("remediate", "-e", "remediate_backend=runbook", with_deps=False)
    outcomes = _outcomes(report)
    assert outcomes[("lab01", "nginx")]["state"] == "healed", outcomes[("lab01", "nginx")]
    assert outcomes[("lab02", "redis-server")]["state"] == "healed", outcomes[("lab02", "redis-server")]
    assert outcomes[("lab03", "nginx")]["state"] == "escalated", outcomes[("lab03", "nginx")]
    # The escalation fails lab03 (remediate_fail_on_escalation) and nothing else stopped the play.
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "community.general" not in proc.stdout + proc.stderr
    assert "escalated nginx on lab03" in proc.stdout
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    assert lab.health("lab02", ["redis"])["redis"].healthy
    assert not lab.health("lab03", ["nginx"])["nginx"].healthy
    # The run's state is in the user's XDG state directory, not in the collection.
    journal = installed.state / "sentinel-remediation" / "remediation" / "journal"
    for host in ("lab01", "lab02"):
        records = [json.loads(line) for line in (journal / f"{host}.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [r["kind"] for r in records if r["kind"] in ("intent", "result")][:2] == ["intent", "result"], records
    assert _snapshot(installed.install) == installed.snapshot
    lab.reset("lab03")


def test_installed_resume_playbook_runs_an_approved_plan(lab: Lab, installed: Installed) -> None:
    lab.inject("lab01", "nginx_config_syntax")   # its runbook edits nginx's configuration: gated
    proc, report = installed.playbook("remediate", "-e", "remediate_backend=runbook", "-e", "remediate_hosts=lab01")
    waiting = _outcomes(report)[("lab01", "nginx")]
    assert waiting["state"] == "waiting_approval", (waiting, proc.stdout[-3000:])
    pending = installed.state / "sentinel-remediation" / "remediation" / "pending" / f"{waiting['approval_id']}.json"
    assert pending.is_file()
    assert not lab.health("lab01", ["nginx"])["nginx"].healthy   # nothing ran

    proc, report = installed.playbook("resume", "-e", f"remediate_approve={waiting['approval_id']}",
                                      "-e", "remediate_hosts=lab01", report="resume.json")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _outcomes(report)[("lab01", "nginx")]["state"] == "healed", report
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    assert not pending.exists()
    assert _snapshot(installed.install) == installed.snapshot


def test_state_inside_the_installed_collection_is_refused_before_the_host_is_touched(
        lab: Lab, installed: Installed) -> None:
    inside = installed.collection / ".cache" / "remediation"
    proc = subprocess.run([str(BIN / "ansible-playbook"), "sentinel.remediation.remediate", "-e", "remediate_hosts=lab01",
                           "-e", f"remediate_artifacts_dir={inside}"], cwd=installed.user, env=installed.env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode != 0
    assert f"the state directory {inside} (remediate_artifacts_dir) is inside the installed collection" in proc.stdout, \
        proc.stdout[-3000:]
    assert _snapshot(installed.install) == installed.snapshot


def test_the_driver_installed_alone_runs_the_installed_collection(lab: Lab, installed: Installed) -> None:
    wheels, target = installed.base / "wheels", installed.base / "driver-site"
    built = subprocess.run([str(BIN / "pip"), "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO / "driver")],
                           cwd=installed.base, capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("sentinel_remediate-*.whl")
    done = subprocess.run([str(BIN / "pip"), "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    env = installed.env(PYTHONPATH=str(target))

    def driver(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sentinel_remediate", *args], cwd=installed.user, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    where = subprocess.run(
        [sys.executable, "-c", "import sentinel_remediate; print(sentinel_remediate.__file__)"],
        env=env, capture_output=True, text=True, check=False)
    assert where.stdout.startswith(str(target)), where.stdout + where.stderr

    # Found on the collections path of the user's ansible.cfg, and named explicitly.
    version = driver("--version")
    assert version.returncode == 0 and f"collection sentinel.remediation 0.1.0 at {installed.collection}" \
        in version.stdout, version.stdout + version.stderr
    named = driver("--project-dir", str(installed.install), "--version")
    assert str(installed.collection) in named.stdout, named.stdout + named.stderr

    lab.inject("lab02", "nginx_stopped")
    proc = driver("run", "-e", "remediate_backend=runbook", "--limit", "lab02", "--format", "json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert _outcomes(report)[("lab02", "nginx")]["state"] == "healed", report
    assert report["run"]["project_dir"] == str(installed.collection)
    assert lab.health("lab02", ["nginx"])["nginx"].healthy
    assert (installed.state / "sentinel-remediation" / "artifacts" / report["run"]["ident"] / "report.json").is_file()

    # A playbook that stops on its own error says why, without -v.
    failed = driver("run", "-e", "remediate_hosts=no_such_group", "--limit", "lab02")
    assert failed.returncode != 0
    assert "ansible-playbook failed" in failed.stderr and "no_such_group matches no host" in failed.stderr, \
        failed.stderr[-3000:]
    assert _snapshot(installed.install) == installed.snapshot


USER_PLAY = """---
- name: Heal nginx on the lab hosts
  hosts: lab
  gather_facts: false
  tasks:
    - name: Check and heal
      ansible.builtin.include_role:
        name: sentinel.remediation.remediate
      vars:
        remediate_backend: runbook
        remediate_services:
          - name: nginx
            units: [nginx.service]
            processes: [nginx]
            config_paths: [/etc/nginx]
            checks:
              - type: service
              - type: port
                port: 80
                process: nginx
"""


def test_every_installed_plugin_is_documented_and_a_user_playbook_lints(installed: Installed) -> None:
    env = installed.env()
    for kind in ("module", "filter", "lookup", "callback", "cache"):
        listed = subprocess.run([str(BIN / "ansible-doc"), "-t", kind, "--list", "--json", "sentinel.remediation"],
                                cwd=installed.user, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert listed.returncode == 0, listed.stderr
        names = sorted(json.loads(listed.stdout))
        assert names, kind
        shown = subprocess.run([str(BIN / "ansible-doc"), "-t", kind, *names], cwd=installed.user, env=env,
                               capture_output=True, text=True, timeout=300, check=False)
        assert shown.returncode == 0 and "[WARNING]" not in shown.stderr and "ERROR" not in shown.stderr, \
            (kind, shown.stderr[-3000:])
        for name in names:
            assert f"> {kind.upper()} {name}" in shown.stdout, (kind, name)
    assert "tree-sitter" in subprocess.run([str(BIN / "ansible-doc"), "sentinel.remediation.heal"], cwd=installed.user,
                                           env=env, capture_output=True, text=True, timeout=300, check=False).stdout

    (installed.user / "site.yml").write_text(USER_PLAY, encoding="utf-8")
    lint = subprocess.run([str(BIN / "ansible-lint"), "--offline", "--profile", "production", "site.yml"],
                          cwd=installed.user, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
    assert _snapshot(installed.install) == installed.snapshot
