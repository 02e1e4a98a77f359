"""The report of one pass: built from the run's outcomes, stored as report.json, rendered.

The shape and the renderings are the collection's (plugins/plugin_utils/report.py, shared
with the callback sentinel.remediation.remediation_report); the driver adds a ``run``
section (ident, playbook, status, rc, hosts skipped because another pass held them), the
exit codes and the stored runs.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from .collection import find_project_dir, load
from .errors import DriverError
# EXIT_USAGE too, so callers read every code as reporting.EXIT_*.
from .exit_codes import EXIT_BUSY, EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WAITING  # noqa: F401 pylint: disable=unused-import

# The names this module takes from the collection's report module (loaded on first use).
_SHARED_NAMES = {"STATES": "STATES", "FAILING": "FAILING_STATES", "printable": "printable",
                 "normalise_outcome": "normalise_outcome", "finish_report": "finish_report",
                 "outcome_line": "outcome_line", "render_text": "render_text", "render_json": "render_json",
                 "render_junit": "render_junit", "render_html": "render_html",
                 "render_prometheus": "render_prometheus", "metric_families": "metric_families",
                 "counter_families": "counter_families", "label_key": "label_key",
                 "write_metrics_textfile": "write_metrics_textfile",
                 "METRIC_PREFIX": "METRIC_PREFIX", "RENDERERS": "RENDERERS"}
_collection_root: Path | None = None
_shared: ModuleType | None = None


def use_collection(root: Path) -> None:
    """Take the report module from this collection (the one the driver runs: --project-dir)."""
    global _collection_root, _shared
    if root != _collection_root:
        _collection_root, _shared = root, None


def _candidate_roots() -> list[Path]:
    roots = [_collection_root] if _collection_root else []
    named = os.environ.get("SENTINEL_PROJECT_DIR")
    if named:
        base = Path(named).expanduser()
        roots += [base, base / "ansible_collections" / "sentinel" / "remediation"]
    roots.append(Path(__file__).resolve().parents[2])   # the checkout this driver runs from
    return roots


def _load_shared() -> ModuleType:
    """The collection's report module (plugins/plugin_utils/report.py, standard library only):
    one shape and one rendering for the callback and the driver. From the collection the
    driver runs (a checkout, or an installed collection found on Ansible's collections path)."""
    roots = [root for root in _candidate_roots() if (root / "plugins" / "plugin_utils" / "report.py").is_file()]
    if not roots:
        try:
            roots = [find_project_dir(None)]
        except DriverError as exc:
            raise ImportError(f"sentinel-remediate: {exc}") from None
    return load("plugins.plugin_utils.report", roots[0])


def shared() -> ModuleType:
    global _shared
    if _shared is None:
        _shared = _load_shared()
    return _shared


def __getattr__(name: str) -> Any:
    if name in _SHARED_NAMES:
        return getattr(shared(), _SHARED_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_report(per_host: Mapping[str, Iterable[Any]], unreachable: Iterable[str] = ()) -> dict:
    """A report from outcomes per host (what the role's set_stats recorded) and unreachable hosts."""
    return shared().build_report(per_host, list(unreachable))


def exit_code(report: Mapping) -> int:
    run = report.get("run") or {}
    totals = report.get("totals") or {}
    if run.get("busy_only"):
        return EXIT_BUSY
    if any(totals.get(s) for s in shared().FAILING_STATES):
        return EXIT_FAILED
    if run and (run.get("status") != "successful" or run.get("rc") not in (0, None)):
        return EXIT_FAILED
    if run and not report.get("outcomes") and run.get("hosts"):
        return EXIT_FAILED  # the pass ran on hosts but recorded nothing: never a silent success
    if totals.get("waiting_approval"):
        return EXIT_WAITING
    return EXIT_OK


# ---- stored runs --------------------------------------------------------------------------

REPORT_FILE = "report.json"
HTML_FILE = "report.html"   # beside report.json: the page a person opens from the artifacts


def list_runs(artifacts_dir: Path) -> list[Path]:
    """Run directories that hold a report, oldest first."""
    if not artifacts_dir.is_dir():
        return []
    runs = [p for p in artifacts_dir.iterdir() if (p / REPORT_FILE).is_file()]
    return sorted(runs, key=lambda p: ((p / REPORT_FILE).stat().st_mtime, p.name))


def find_run(artifacts_dir: Path, run: str | None) -> Path:
    """The run named (an ident or a unique prefix of one), or the last one."""
    runs = list_runs(artifacts_dir)
    if not runs:
        raise LookupError(f"no run recorded under {artifacts_dir}")
    if not run or run == "last":
        return runs[-1]
    exact = [p for p in runs if p.name == run]
    matches = exact or [p for p in runs if p.name.startswith(run)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no run {run!r}; the last ones: {', '.join(p.name for p in runs[-5:])}")
    raise LookupError(f"{run!r} names several runs: {', '.join(p.name for p in matches)}")


def load_report(run_dir: Path) -> dict:
    return json.loads((run_dir / REPORT_FILE).read_text(encoding="utf-8"))


def write_report(run_dir: Path, report: Mapping) -> Path:
    path = run_dir / REPORT_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(shared().render_json(report), encoding="utf-8")
    tmp.replace(path)
    page = run_dir / HTML_FILE
    tmp = page.with_suffix(".tmp")
    tmp.write_text(shared().render_html(report), encoding="utf-8")
    tmp.replace(page)
    return path


def origin_of_approval(artifacts_dir: Path, approval_id: str) -> dict:
    """The ``run`` section of the newest stored run that left this plan waiting ({} if none)."""
    for run_dir in reversed(list_runs(artifacts_dir)):
        try:
            stored = load_report(run_dir)
        except (OSError, ValueError):
            continue
        if any(o.get("approval_id") == approval_id for o in stored.get("outcomes") or []):
            return stored.get("run") or {}
    return {}
