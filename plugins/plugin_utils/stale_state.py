# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files the host's evidence shows as stale state: every process they name (their writer) is gone.

A PID file, a lock, a guard its unit's ``ConditionPathExists=!`` waits on, a tool's "in
progress" marker each mean "while the process I name runs". When the host read that no
process it names runs (or the PID now belongs to a process that started after the file was
written: a reused PID), the file no longer means anything: it is stale state. The evidence
module (module_utils/file_writers.py) says so in three places, each beginning ``writer gone:``
or saying ``stale``:

* ``conditions``: ``{"ConditionPathExists=!PATH": "NOT met now: PATH exists (...); writer gone: ..."}``,
  the files its unit names;
* ``named_paths``: ``{PATH: {"writer": "writer gone: ...", ...}}``;
* ``pid_files``: ``{PATH: "pid N is not running (stale PID file)"}``.

A file that names no process (a freeze flag a team wrote by hand) is never stale by this rule.
"""
from __future__ import annotations

from collections.abc import Mapping

UNIT, EVIDENCE = "unit", "evidence"
_GONE = "writer gone:"


def _condition_path(key: str) -> str:
    """``/x`` of ``ConditionPathExists=!/x`` (``|`` and ``!`` prefixes dropped)."""
    value = key.partition("=")[2].strip().lstrip("|").strip().lstrip("!").strip()
    return value if value.startswith("/") else ""


def stale_files(evidence: Mapping | None) -> dict[str, str]:
    """``{path: "unit"|"evidence"}``: the files the evidence shows with every writer gone;
    ``unit`` when the service's unit names the file in one of its conditions."""
    if not isinstance(evidence, Mapping):
        return {}
    out: dict[str, str] = {}
    conditions = evidence.get("conditions")
    if isinstance(conditions, Mapping):
        for key, text in conditions.items():
            path = _condition_path(str(key))
            if path and _GONE in str(text):
                out[path] = UNIT
    named = evidence.get("named_paths")
    if isinstance(named, Mapping):
        for path, facts in named.items():
            if isinstance(facts, Mapping) and str(facts.get("writer") or "").startswith(_GONE):
                out.setdefault(str(path), EVIDENCE)
    pid_files = evidence.get("pid_files")
    if isinstance(pid_files, Mapping):
        for path, text in pid_files.items():
            if isinstance(text, str) and ("stale" in text.lower() or text.startswith(_GONE)):
                out.setdefault(str(path), EVIDENCE)
    return out
