"""The report of one pass: built from the run's outcomes, stored as report.json, rendered.

The shape is that of the callback sentinel.remediation.remediation_report
(``{generated, outcomes, totals, llm, ok}``) plus a ``run`` section written by the
driver (ident, playbook, status, rc, hosts skipped because another pass held them).
"""
from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

STATES = ("healthy", "healed", "waiting_approval", "escalated", "failed", "unreachable")
FAILING = ("escalated", "failed", "unreachable")

# Exit codes of `run`, `watch` (its last pass), `approvals approve|reject` and `report`.
EXIT_OK = 0            # every service healthy or healed
EXIT_FAILED = 1        # something escalated, failed or was unreachable, or the run itself failed
EXIT_USAGE = 2         # bad command line, unknown run or approval id, missing files
EXIT_WAITING = 3       # nothing failed, but at least one plan waits for approval
EXIT_BUSY = 4          # nothing ran: every host was locked by another pass (without --wait)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(value: Any) -> str:
    """Text safe for a terminal: control characters (escape sequences...) made visible."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value if value is not None else ""))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def normalise_outcome(host: str, outcome: Any) -> dict:
    outcome = outcome if isinstance(outcome, Mapping) else {}
    llm = outcome.get("llm") if isinstance(outcome.get("llm"), Mapping) else {}
    state = str(outcome.get("state") or "failed")
    return {
        "host": host,
        "service": str(outcome.get("service") or "-"),
        "state": state if state in STATES else "failed",
        "attempts": _int(outcome.get("attempts")),
        "signature": outcome.get("signature") or "",
        "diagnosis": outcome.get("diagnosis") or "",
        "commands": [c for c in outcome.get("commands") or [] if isinstance(c, Mapping)],
        "refused": [c for c in outcome.get("refused") or [] if isinstance(c, Mapping)],
        "llm": {k: _int(llm.get(k)) for k in ("calls", "prompt_tokens", "completion_tokens")},
        "reason": outcome.get("reason") or "",
        "approval_id": outcome.get("approval_id") or "",
    }


def build_report(per_host: Mapping[str, Iterable[Any]], unreachable: Iterable[str] = ()) -> dict:
    """A report from outcomes per host (what the role's set_stats recorded) and unreachable hosts."""
    outcomes = [normalise_outcome(host, o) for host, records in per_host.items() for o in records or []]
    reported = {o["host"] for o in outcomes}
    outcomes += [normalise_outcome(h, {"state": "unreachable", "reason": "host unreachable"})
                 for h in sorted(set(unreachable) - reported)]
    return finish_report({"outcomes": outcomes})


def finish_report(report: dict) -> dict:
    """Sort the outcomes and (re)compute totals, LLM usage and ok."""
    outcomes = sorted(report.get("outcomes") or [], key=lambda o: (o["host"], o["service"]))
    report = dict(report)
    report["outcomes"] = json.loads(json.dumps(outcomes, default=str))
    report.setdefault("generated", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    report["totals"] = {s: sum(1 for o in outcomes if o["state"] == s) for s in STATES}
    report["llm"] = {k: sum(o["llm"][k] for o in outcomes) for k in ("calls", "prompt_tokens", "completion_tokens")}
    report["ok"] = not any(o["state"] in FAILING for o in outcomes)
    return report


def exit_code(report: Mapping) -> int:
    run = report.get("run") or {}
    totals = report.get("totals") or {}
    if run.get("busy_only"):
        return EXIT_BUSY
    if any(totals.get(s) for s in FAILING):
        return EXIT_FAILED
    if run and (run.get("status") != "successful" or run.get("rc") not in (0, None)):
        return EXIT_FAILED
    if run and not report.get("outcomes") and run.get("hosts"):
        return EXIT_FAILED  # the pass ran on hosts but recorded nothing: never a silent success
    if totals.get("waiting_approval"):
        return EXIT_WAITING
    return EXIT_OK


def outcome_line(o: Mapping) -> str:
    state = o["state"]
    if state == "healed":
        n = o["attempts"] or 1
        what = f"healed in {n} attempt{'s' if n != 1 else ''}"
    elif state == "waiting_approval":
        what = f"WAITING APPROVAL (id {o['approval_id']})" if o["approval_id"] else "WAITING APPROVAL"
    elif state in FAILING:
        what = state.upper()
    else:
        what = state
    line = f"{o['host']} {o['service']}: {what}"
    ran = "; ".join(
        f"`{c.get('command', '')}` [{c.get('source') or '?'}{'' if c.get('rc') in (0, None) else ' rc=' + str(c.get('rc'))}]"
        for c in o["commands"])
    if ran:
        line += f" | ran {ran}"
    if o["llm"]["calls"]:
        line += f" | llm {o['llm']['calls']} call(s), {o['llm']['prompt_tokens'] + o['llm']['completion_tokens']} tokens"
    if o["reason"] and state not in ("healthy", "healed"):
        line += f" | {o['reason']}"
    return printable(line)


def render_text(report: Mapping) -> str:
    run = report.get("run") or {}
    lines = []
    if run:
        lines.append(f"run {run.get('ident')} ({run.get('kind', 'run')}): {run.get('status')} rc={run.get('rc')}"
                     f" {run.get('started', '')} -> {run.get('finished', '')}")
        if run.get("check"):
            lines.append("DRY RUN (--check): plans and verdicts only; no command was run on any host")
        for host, holder in sorted((run.get("skipped") or {}).items()):
            lines.append(f"{host}: SKIPPED (locked by {printable(holder)})")
    lines += [outcome_line(o) for o in report.get("outcomes") or []]
    if not report.get("outcomes"):
        lines.append("no outcome recorded")
    totals = ", ".join(f"{k}={v}" for k, v in (report.get("totals") or {}).items() if v) or "nothing"
    llm = report.get("llm") or {}
    lines.append(f"totals: {totals} | llm calls={llm.get('calls', 0)} "
                 f"tokens={llm.get('prompt_tokens', 0) + llm.get('completion_tokens', 0)}")
    return "\n".join(lines) + "\n"


def render_json(report: Mapping) -> str:
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def render_junit(report: Mapping) -> str:
    outcomes = report.get("outcomes") or []
    run = report.get("run") or {}
    suite = ET.Element("testsuite", {
        "name": f"sentinel.remediation {run.get('ident', '')}".strip(),
        "tests": str(len(outcomes)),
        "failures": str(sum(1 for o in outcomes if o["state"] in FAILING)),
        "skipped": str(sum(1 for o in outcomes if o["state"] == "waiting_approval")),
        "errors": "0",
        "timestamp": str(report.get("generated", "")),
    })
    for o in outcomes:
        case = ET.SubElement(suite, "testcase", {"classname": o["host"], "name": f"{o['host']}/{o['service']}"})
        if o["state"] in FAILING:
            failure = ET.SubElement(case, "failure", {"type": o["state"], "message": printable(o["reason"] or o["state"])})
            failure.text = outcome_line(o)
        elif o["state"] == "waiting_approval":
            ET.SubElement(case, "skipped", {"message": f"waiting approval {o['approval_id']}".strip()})
        ET.SubElement(case, "system-out").text = printable(json.dumps(o, sort_keys=True))
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit}


# ---- stored runs --------------------------------------------------------------------------

REPORT_FILE = "report.json"


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
    tmp.write_text(render_json(report), encoding="utf-8")
    tmp.replace(path)
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
