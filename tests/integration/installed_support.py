"""The collection as its users get it, shared by the tests of installed use (one per session).

`install_collection` builds the tarball with `ansible-galaxy collection build`, installs it
(offline, no Galaxy) with its declared dependencies only, taken from the pip package
`ansible`'s bundle, and makes both read-only. `install_driver` makes a virtualenv and
installs the driver into it from driver/pyproject.toml with pip, as driver/README.md says,
together with the Python packages the collection declares (meta/ee-requirements.txt of the
installed collection). `Installed.for_user` adds a user's working directory outside the
checkout: an ansible.cfg that knows nothing of the checkout, an inventory, an XDG state dir.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCRUBBED = ("ANSIBLE_", "SENTINEL_", "OPENAI_", "AZURE_OPENAI_", "PYTHONPATH", "XDG_", "VIRTUAL_ENV")

USER_CFG = (
    "[defaults]\n"
    "inventory = hosts.yml\n"
    "collections_scan_sys_path = false\n"   # nothing from the pip bundle but what is copied beside the install
    "gathering = explicit\n"
    "host_key_checking = false\n"
    "interpreter_python = auto_silent\n"
    "retry_files_enabled = false\n"
    "callbacks_enabled = sentinel.remediation.remediation_report\n"
    "fact_caching = sentinel.remediation.jsonfile\n"
    "fact_caching_connection = facts\n"
    "fact_caching_timeout = 0\n"
    "[connection]\npipelining = true\n")


def clean_env() -> dict[str, str]:
    """This process's environment without anything that points at the checkout or a test switch."""
    return {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}


def bundled_collections() -> Path:
    """Where pip's `ansible` package keeps the collections it bundles (community.general among them)."""
    import ansible_collections  # the pip package `ansible`: a namespace package in site-packages

    for base in ansible_collections.__path__:
        if (Path(base) / "community" / "general" / "MANIFEST.json").is_file():
            return Path(base)
    pytest.fail("the pip package `ansible` (bundled collections) is not installed in this venv")


def snapshot(root: Path) -> dict[str, str]:
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


def read_only(path: Path) -> list[Path]:
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


def undo_read_only(mounts: list[Path], paths: list[Path]) -> None:
    for mount in mounts:
        subprocess.run(["umount", str(mount)], check=False)
    subprocess.run(["chmod", "-R", "u+w", *(str(p) for p in paths)], check=False)


@dataclass(frozen=True)
class Installed:
    base: Path
    tarball: Path
    collection: Path          # <install>/ansible_collections/sentinel/remediation
    install: Path             # the collections path of the installed collection
    deps: Path                # its declared dependencies, from the bundle
    site: Path                # the user's own collections (community.docker for the lab's connection)
    snapshot: dict[str, str]
    user: Path | None = None  # the user's working directory (ansible.cfg, inventory)
    state: Path | None = None  # XDG_STATE_HOME

    def collections_path(self, with_deps: bool = True) -> str:
        paths = [self.install] + ([self.deps] if with_deps else []) + [self.site]
        return os.pathsep.join(str(p) for p in paths)

    def for_user(self, user: Path, lab) -> Installed:
        """A user's directory outside the checkout: ansible.cfg, the lab's inventory (each kind's
        remediate_services set explicitly), and an XDG state directory beside it."""
        user.mkdir(parents=True)
        lab.write_inventory(user / "hosts.yml", services=True)
        (user / "ansible.cfg").write_text(USER_CFG, encoding="utf-8")
        return dataclasses.replace(self, user=user, state=user.parent / f"{user.name}-xdg-state")

    def env(self, with_deps: bool = True, **extra: str) -> dict[str, str]:
        env = clean_env()
        home = (self.user or self.base).parent / f"{(self.user or self.base).name}-home"
        env.update({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                    "ANSIBLE_COLLECTIONS_PATH": self.collections_path(with_deps),
                    "XDG_STATE_HOME": str(self.state or home / "state"), "XDG_CACHE_HOME": str(home / "cache"),
                    "ANSIBLE_HOME": str(home / "ansible"), "ANSIBLE_NOCOLOR": "1"})
        env.update(extra)
        return env

    def playbook(self, name: str, *args: str, with_deps: bool = True, report: str = "report.json",
                 timeout: float = 900) -> tuple[subprocess.CompletedProcess, dict]:
        """ansible-playbook on an installed playbook by its FQCN, from the user's directory."""
        assert self.user is not None, "for_user() first"
        path = self.user / report
        path.unlink(missing_ok=True)
        proc = subprocess.run([str(BIN / "ansible-playbook"), f"sentinel.remediation.{name}", *args],
                              cwd=self.user, env=self.env(with_deps, SENTINEL_REPORT_JSON=str(path)),
                              capture_output=True, text=True, timeout=timeout, check=False)
        assert path.is_file(), f"no report written (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
        return proc, json.loads(path.read_text(encoding="utf-8"))


def install_collection(base: Path) -> tuple[Installed, list[Path]]:
    """Build, install and make read-only; returns the install and the mounts to undo."""
    dist, install, deps, site = (base / n for n in ("dist", "install", "deps", "site"))
    clean = clean_env()
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
    bundle = bundled_collections()
    for fqcn in manifest["collection_info"]["dependencies"]:
        namespace, name = fqcn.split(".")
        shutil.copytree(bundle / namespace / name, deps / "ansible_collections" / namespace / name, symlinks=True)
    # The lab's inventory reaches its containers with community.docker's connection: the user's own collection.
    shutil.copytree(bundle / "community" / "docker", site / "ansible_collections" / "community" / "docker",
                    symlinks=True)
    state = snapshot(install)
    mounts = read_only(install) + read_only(deps)
    return Installed(base, tarball, collection, install, deps, site, state), mounts


def install_driver(venv: Path, collection: Path) -> Path:
    """A virtualenv with the driver installed from driver/pyproject.toml and the collection's declared
    Python packages (its meta/ee-requirements.txt); returns its `sentinel-remediate`."""
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert made.returncode == 0, made.stderr[-3000:]
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(REPO / "driver"),
                          "-r", str(collection / "meta" / "ee-requirements.txt")],
                         cwd=venv, env=clean_env(), capture_output=True, text=True, timeout=900, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]
    driver = venv / "bin" / "sentinel-remediate"
    assert driver.is_file(), sorted(p.name for p in (venv / "bin").iterdir())
    return driver
