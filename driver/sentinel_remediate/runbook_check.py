"""`sentinel-remediate runbooks check DIR...`: what a team's runbooks will do, before an incident.

For every runbook file: the schema (each problem names the file and the key), the
regexes and fact matchers, the placeholders, and every step classified by the
collection's policy engine, with the verdict (allow / approval / reject) and the reasons.
A step's placeholders are filled with example values for the policy, and the example
is shown. Warnings flag runbooks whose evidence is not specific (they would also fire
on a service that is merely stopped).

Exit codes: 0 usable (warnings and refused steps are shown), 1 a schema error (or, with
--strict, a refused step or a warning), 2 usage (no such directory, no collection).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from .collection import find_project_dir, load
from .errors import DriverError
from .exit_codes import EXIT_FAILED as EXIT_ERRORS, EXIT_OK


class CheckUsageError(Exception):
    pass


def _collection_modules(project_dir: str | None) -> SimpleNamespace:
    """The collection's runbooks, policy and fact modules, importable from the checkout if need be."""
    project = None
    try:
        load("plugins.plugin_utils.runbooks")
    except ImportError:
        try:
            project = find_project_dir(project_dir)
        except DriverError as exc:
            raise CheckUsageError(str(exc)) from exc
    try:
        return SimpleNamespace(runbooks=load("plugins.plugin_utils.runbooks", project),
                               policy=load("plugins.plugin_utils.policy", project),
                               facts=load("plugins.module_utils.failure_facts", project))
    except ImportError as exc:
        raise CheckUsageError(f"cannot load the collection's runbook checker from {project}: {exc} "
                              "(its Python requirements: requirements.txt)") from exc


def _plain_stop(service: str) -> dict:
    """A failure that shows only 'not running': what a specific runbook must NOT fit."""
    return {"service": service, "error": f"{service} is not running",
            "evidence": {"status": f"{service} is not running ... failed!",
                         "processes": f"no process named or running {service}"}}


_BENIGN_EFFECT = re.compile(r"^(?:reads|tests|checks|lists|shows|queries|starts|restarts|reloads)\b")


def _starts_only(steps: Sequence[Mapping], verdicts: Sequence[Mapping]) -> bool:
    """Whether a runbook's steps only look and (re)start: by the policy's ``effects`` when it
    gives them (C2), else by the words start/restart."""
    for step, verdict in zip(steps, verdicts):
        effects = verdict.get("effects")
        if isinstance(effects, list):
            if any(not _BENIGN_EFFECT.match(str(e)) for e in effects):
                return False
        elif not any(word in f" {step['command']} " for word in (" start ", " restart ")):
            return False
    return True


def _matchers(book: Mapping) -> list[str]:
    out = []
    for key, value in (book.get("match") or {}).items():
        if key == "exclusive":
            out.append(f"exclusive: {str(value).lower()}")
            continue
        items = value if isinstance(value, list) else [value]
        shown = []
        for item in items:
            if isinstance(item, Mapping):
                name, filters = next(iter(item.items()))
                shown.append(f"{name}({', '.join(f'{k}~{v}' for k, v in (filters or {}).items())})")
            else:
                shown.append(str(item))
        out.append(f"{key}: {', '.join(shown)}")
    return out


def runbook_problems(dirs: Sequence[str], project_dir: str | None = None) -> list[str]:
    """Schema problems of the runbooks in ``dirs`` (each naming the file and the key)."""
    mods = _collection_modules(project_dir)
    return mods.runbooks.collect_runbooks(list(dirs), bundled=True)[1]


def check_dirs(dirs: Sequence[str], policy: Mapping | None = None, project_dir: str | None = None) -> dict:
    """The check report for the runbook directories ``dirs`` (see the module's docs)."""
    for directory in dirs:
        if not Path(directory).is_dir():
            raise CheckUsageError(f"runbook directory {directory} does not exist or is not a directory")
    mods = _collection_modules(project_dir)
    try:
        loaded_policy = mods.policy.load_policy(dict(policy or {}))
    except ValueError as exc:
        raise CheckUsageError(f"bad policy: {exc}") from exc
    bundled = {b["id"]: b["path"] for b in mods.runbooks.collect_runbooks(bundled=True)[0]}
    bundled_dir = mods.runbooks.DEFAULT_DIR.resolve()
    report: dict[str, Any] = {"dirs": [str(d) for d in dirs], "runbooks": [], "errors": [],
                              "totals": {"runbooks": 0, "errors": 0, "warnings": 0, "allow": 0, "approval": 0,
                                         "reject": 0}}
    seen: dict[str, str] = {}
    for directory in dirs:
        for path in mods.runbooks.runbook_files(directory):
            books, problems = mods.runbooks.read_runbook_file(path)
            report["errors"].extend(problems)
            for book in books:
                if book["id"] in seen:
                    report["errors"].append(f"{path}: id: {book['id']!r} is also the id of a runbook in "
                                            f"{seen[book['id']]}")
                    continue
                seen[book["id"]] = str(path)
                report["runbooks"].append(_check_book(mods, book, loaded_policy, bundled, bundled_dir))
    totals = report["totals"]
    totals["runbooks"] = len(report["runbooks"])
    totals["errors"] = len(report["errors"])
    for entry in report["runbooks"]:
        totals["warnings"] += len(entry["warnings"])
        for step in entry["steps"]:
            totals[step["verdict"]] = totals.get(step["verdict"], 0) + 1
    return report


def _check_book(mods: SimpleNamespace, book: dict, policy: Mapping, bundled: Mapping, bundled_dir: Path) -> dict:
    rb = mods.runbooks
    entry: dict[str, Any] = {
        "id": book["id"], "file": book["path"], "title": book["title"], "services": book["services"] or ["any"],
        "init": book["init"], "escalate": book["escalate"], "priority": book["priority"],
        "match": _matchers(book), "overrides": None, "warnings": [], "steps": []}
    if book["id"] in bundled and Path(book["path"]).resolve().parent != bundled_dir:
        entry["overrides"] = bundled[book["id"]]
    examples = [rb.example_command(step["command"], book) for step in book["steps"]]
    verdicts = mods.policy.classify_many(examples, policy) if examples else []
    verdicts = rb.gate_steps(verdicts, book["steps"], book["id"])
    for step, example, verdict in zip(book["steps"], examples, verdicts):
        entry["steps"].append({"command": step["command"], "example": example if example != step["command"] else None,
                               "why": step["why"], "approval": step["approval"], "verdict": verdict["verdict"],
                               "reasons": list(verdict.get("reasons") or []), "display": verdict.get("display")})
    # Specific evidence: a runbook that does more than start the service must not fit a
    # service that is merely stopped.
    requires_cause = any(mods.facts.FACTS[r["fact"]].klass == mods.facts.CAUSE
                         for r in book["_facts"] + book["_any_facts"])
    if not book["_exclusive"] and not requires_cause and not book["escalate"]:
        entry["warnings"].append("exclusive: false and no cause fact required: it fits any failure of its services")
    for service in book["services"] or ["example-service"]:
        plain = _plain_stop(service)
        if rb.match_runbooks([book], plain["service"], plain["error"], plain["evidence"]) and \
                (book["escalate"] or not _starts_only(book["steps"], verdicts)):
            entry["warnings"].append(
                f"it fits a {service} that shows only 'not running', yet its steps do more than start it: "
                "match on the evidence specific to its fault (facts such as port_held_by_other, stale_pid_file, "
                "config_invalid, path_missing)")
            break
    return entry


def render_text(report: Mapping) -> str:
    lines = []
    for entry in report["runbooks"]:
        head = f"{entry['file']}: {entry['id']} (services: {', '.join(entry['services'])}"
        head += f"; init: {', '.join(entry['init'])})" if entry["init"] else ")"
        lines.append(head)
        if entry["overrides"]:
            lines.append(f"  overrides the bundled runbook {entry['overrides']}")
        for matcher in entry["match"]:
            lines.append(f"  match {matcher}")
        if entry["escalate"]:
            lines.append("  ESCALATE: a human is needed; no command runs")
        for number, step in enumerate(entry["steps"], 1):
            lines.append(f"  {number}. {step['command']}")
            if step["example"]:
                lines.append(f"     classified as: {step['example']}   (placeholders filled with example values)")
            reasons = "; ".join(step["reasons"])
            lines.append(f"     -> {step['verdict'].upper()}: {reasons}")
        for warning in entry["warnings"]:
            lines.append(f"  WARNING: {warning}")
    for error in report["errors"]:
        lines.append(f"ERROR {error}")
    t = report["totals"]
    lines.append(f"{t['runbooks']} runbook(s), {t['errors']} error(s), {t['warnings']} warning(s); steps: "
                 f"{t.get('allow', 0)} allow, {t.get('approval', 0)} approval, {t.get('reject', 0)} reject")
    return "\n".join(lines) + "\n"


def exit_code(report: Mapping, strict: bool = False) -> int:
    totals = report["totals"]
    if totals["errors"]:
        return EXIT_ERRORS
    if strict and (totals.get("reject") or totals["warnings"]):
        return EXIT_ERRORS
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction, parents: Sequence[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("runbooks", parents=list(parents), help="check a team's runbooks before an incident")
    rsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = rsub.add_parser("check", parents=list(parents),
                        help="validate runbooks and show each step's policy verdict",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("dirs", nargs="+", metavar="DIR", help="directory of runbook files (*.yml, *.yaml)")
    c.add_argument("--policy", metavar="FILE", help="YAML policy overrides (as the role's remediation_policy)")
    c.add_argument("--strict", action="store_true", help="also fail on refused steps and warnings")
    c.add_argument("--format", choices=["text", "json"], default="text")


def run(args: argparse.Namespace) -> int:
    policy = None
    if args.policy:
        try:
            policy = yaml.safe_load(Path(args.policy).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CheckUsageError(f"cannot read the policy file {args.policy}: {exc}") from exc
        if not isinstance(policy, Mapping):
            raise CheckUsageError(f"{args.policy}: a policy file is a YAML mapping")
    report = check_dirs(args.dirs, policy, getattr(args, "project_dir", None))
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(report))
    return exit_code(report, args.strict)
