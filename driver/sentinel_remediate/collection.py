"""Where the sentinel.remediation collection the driver runs is, and the one way the driver
loads its Python code: as the package ``ansible_collections.sentinel.remediation`` from that
collection (a checkout, or an installed collection), never by file path."""
from __future__ import annotations

import atexit
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from .errors import DriverError

PACKAGE = "ansible_collections.sentinel.remediation"
COLLECTION = ("sentinel", "remediation")


def _manifest_names_us(manifest: Path) -> bool:
    try:
        info = json.loads(manifest.read_text(encoding="utf-8"))["collection_info"]
        return (info.get("namespace"), info.get("name")) == COLLECTION
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _is_collection_root(path: Path) -> bool:
    """A checkout (galaxy.yml) or an installed collection (MANIFEST.json naming sentinel.remediation), with playbooks/."""
    if not (path / "playbooks").is_dir():
        return False
    return (path / "galaxy.yml").is_file() or _manifest_names_us(path / "MANIFEST.json")


def find_project_dir(explicit: str | None = None) -> Path:
    """The sentinel.remediation collection whose playbooks the driver runs: the one named
    (--project-dir, SENTINEL_PROJECT_DIR; a checkout or an installed collection, or a
    collections path holding ansible_collections/sentinel/remediation), else the checkout
    this driver runs from, or the one Ansible's collections path finds.

    Never the current directory unless it is named: the driver runs that collection's
    playbooks with become, so a directory anyone could write to (``/tmp``, a shared
    project) holding ``galaxy.yml`` and ``playbooks/`` would otherwise decide what runs
    on every host, in preference to the installed collection."""
    candidates = []
    named = explicit or os.environ.get("SENTINEL_PROJECT_DIR")
    if named:
        base = Path(named).expanduser()
        candidates += [base, base / "ansible_collections" / "sentinel" / "remediation",
                       base / "sentinel" / "remediation"]
    else:
        candidates += [Path(__file__).resolve().parents[2]]
    for path in candidates:
        if _is_collection_root(path.resolve()):
            return path.resolve()
    if not named:
        found = _installed_collection()
        if found:
            return found
    where = str(candidates[0]) if named else ", ".join(str(c) for c in candidates) + " or Ansible's collections path"
    raise DriverError(
        f"no sentinel.remediation collection (a checkout with galaxy.yml, or an installed collection with "
        f"MANIFEST.json, and playbooks/) at {where}; install it (ansible-galaxy collection install) or use "
        "--project-dir / SENTINEL_PROJECT_DIR")


def _installed_collection() -> Path | None:
    try:
        proc = subprocess.run([tool("ansible-galaxy"), "collection", "list", "sentinel.remediation", "--format", "json"],
                              capture_output=True, text=True, timeout=60, check=False)
        data = json.loads(proc.stdout or "{}")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    for base in data:
        path = Path(base) / "sentinel" / "remediation"
        if _is_collection_root(path):
            return path
    return None


def tool(name: str) -> str:
    """An ansible CLI next to this interpreter (the venv), else from PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


def _importable_from(project: Path) -> Path:
    """The directory that holds ``ansible_collections/sentinel/remediation`` for ``project``."""
    if project.parent.name == "sentinel" and project.parent.parent.name == "ansible_collections":
        return project.parent.parent.parent           # an installed collection
    if (project / ".collections" / "ansible_collections" / "sentinel" / "remediation").exists():
        return project / ".collections"               # a checkout set up by scripts/setup
    base = Path(tempfile.mkdtemp(prefix="sentinel-collection-"))
    atexit.register(shutil.rmtree, base, True)
    link = base / "ansible_collections" / "sentinel" / "remediation"
    link.parent.mkdir(parents=True)
    link.symlink_to(project)
    return base


def load(name: str, project: Path | None = None) -> ModuleType:
    """``PACKAGE.name`` (``plugins.plugin_utils.report``): from the collection this process
    already imports (tests, a driver beside its checkout), else from the one at ``project``."""
    dotted = f"{PACKAGE}.{name}"
    try:
        return importlib.import_module(dotted)
    except ImportError:
        if project is None:
            raise
    base = str(_importable_from(project.resolve()))
    if base not in sys.path:
        sys.path.insert(0, base)
    importlib.invalidate_caches()  # ansible_collections is a namespace package: it sees the new entry
    return importlib.import_module(dotted)
