# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation report: its shape and its renderings, in one place.

The callback ``sentinel.remediation.remediation_report`` and the driver
(``sentinel-remediate``) both build and render reports with this module, so a report
reads the same wherever it is printed, stored or parsed.

A report is ``{generated, outcomes, totals, llm, ok}`` (the driver adds ``run``); an
outcome is the role's record of one host and service (docs/contracts.md) plus ``host``.
"""
from __future__ import annotations

import datetime
import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any

STATES = ("healthy", "healed", "waiting_approval", "dry_run", "busy", "escalated", "failed", "unreachable")
FAILING_STATES = ("escalated", "failed", "unreachable")
_LLM_KEYS = ("calls", "prompt_tokens", "completion_tokens")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Characters XML 1.0 cannot hold at all, even escaped.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def printable(value: Any) -> str:
    """Text safe for a terminal and for XML: control characters made visible as ``\\xNN``."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value if value is not None else ""))
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _plain(value: Any) -> Any:
    """Plain JSON-able data (set_stats values may carry ansible's tagged types)."""
    return json.loads(json.dumps(value, default=str))


def _dicts(value: Any) -> list[dict]:
    return [dict(v) for v in value or [] if isinstance(v, Mapping)] if isinstance(value, (list, tuple)) else []


def normalise_outcome(host: str, outcome: Any) -> dict:
    """An outcome with every key the report uses; anything unknown becomes ``failed``."""
    outcome = outcome if isinstance(outcome, Mapping) else {}
    llm = outcome.get("llm") if isinstance(outcome.get("llm"), Mapping) else {}
    state = str(outcome.get("state") or "failed")
    return {
        "host": str(host),
        "service": str(outcome.get("service") or "-"),
        "state": state if state in STATES else "failed",
        "attempts": _int(outcome.get("attempts")),
        "signature": str(outcome.get("signature") or ""),
        "diagnosis": str(outcome.get("diagnosis") or ""),
        "commands": _dicts(outcome.get("commands")),
        "planned": _dicts(outcome.get("planned")),
        "refused": _dicts(outcome.get("refused")),
        "llm": {k: _int(llm.get(k)) for k in _LLM_KEYS},
        "llm_error": str(outcome.get("llm_error") or ""),
        "sources": [str(s) for s in outcome.get("sources") or []] if isinstance(outcome.get("sources"), list) else [],
        "reason": str(outcome.get("reason") or ""),
        "approval_id": str(outcome.get("approval_id") or ""),
        "started": str(outcome.get("started") or ""),
        "finished": str(outcome.get("finished") or ""),
        "timeline": _dicts(outcome.get("timeline")),
        "recall": str(outcome.get("recall") or ""),
        "recalled": _recalled(outcome.get("recalled")),
    }


def _recalled(value: Any) -> list[dict]:
    """Similar incidents of an outcome: ``{signature, host, similarity, commands: [text]}``
    (a command adapted to this host keeps the text that ran there in ``original``)."""
    out = []
    for item in _dicts(value):
        try:
            score = round(float(item.get("similarity") or 0.0), 3)
        except (TypeError, ValueError):
            score = 0.0
        commands = []
        for entry in item.get("commands") or []:
            if isinstance(entry, Mapping):
                commands.append({k: str(entry[k]) for k in ("command", "original", "note") if entry.get(k)})
            elif isinstance(entry, str):
                commands.append({"command": entry})
        out.append({"signature": str(item.get("signature") or ""), "host": str(item.get("host") or ""),
                    "similarity": score, "commands": commands})
    return out


def finish_report(report: Mapping) -> dict:
    """Sort the outcomes and (re)compute totals, LLM usage and ok (false when anything
    failed or the run reported an error, such as memory that could not be saved)."""
    report = dict(report)
    outcomes = sorted(report.get("outcomes") or [], key=lambda o: (o["host"], o["service"]))
    report["outcomes"] = _plain(outcomes)
    report.setdefault("generated", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    report["totals"] = {s: sum(1 for o in outcomes if o["state"] == s) for s in STATES}
    report["llm"] = {k: sum(o["llm"][k] for o in outcomes) for k in _LLM_KEYS}
    report.setdefault("errors", [])
    report.setdefault("warnings", [])
    report["ok"] = not any(o["state"] in FAILING_STATES for o in outcomes) and not report["errors"]
    report["dry_run"] = any(o["state"] == "dry_run" for o in outcomes)
    return report


def build_report(per_host: Mapping[str, Any], unreachable: Mapping[str, Any] | Iterable[str] = (),
                 failed: Mapping[str, str] | None = None, errors: Iterable[Mapping] = (),
                 warnings: Iterable[Mapping] = ()) -> dict:
    """A report from outcomes per host, unreachable hosts (a list, or host -> true or a
    reason), hosts whose run stopped on a failed task before recording (host -> reason),
    errors of the run (``{host, error}``: memory that could not be saved...) and warnings of
    the collection's tasks (``{host, warning}``: an oversized memory entry cut...)."""
    outcomes: list[dict] = []
    for host in sorted(per_host or {}):
        records = per_host[host]
        if isinstance(records, Mapping):
            records = [records]
        for record in records or []:
            outcomes.append(normalise_outcome(host, record))
    reported = {o["host"] for o in outcomes}
    dark = unreachable if isinstance(unreachable, Mapping) else {h: True for h in unreachable or ()}
    for host, why in sorted(dark.items()):
        if why and host not in reported:
            reason = why if isinstance(why, str) else "host unreachable"
            outcomes.append(normalise_outcome(host, {"state": "unreachable", "reason": reason}))
            reported.add(host)
    for host, why in sorted((failed or {}).items()):
        if why and host not in reported:
            outcomes.append(normalise_outcome(host, {"state": "failed", "reason": str(why)}))
    errors = [{"host": str(e.get("host") or "-"), "error": printable(e.get("error") or "")} for e in errors or ()]
    for error in errors:
        for outcome in outcomes:
            if outcome["host"] == error["host"] and outcome["state"] in ("healed", "escalated", "waiting_approval"):
                outcome["reason"] = "; ".join(r for r in (outcome["reason"], error["error"]) if r)
    warnings = [{"host": str(w.get("host") or "-"), "warning": printable(w.get("warning") or "")}
                for w in warnings or ()]
    return finish_report({"outcomes": outcomes, "errors": errors, "warnings": warnings})


# ------------------------------------------------------------------------------ renderings

def outcome_line(o: Mapping) -> str:
    """One human line for a host/service outcome."""
    state = o["state"]
    if state == "healed":
        n = o["attempts"] or 1
        what = f"healed in {n} attempt{'s' if n != 1 else ''}"
    elif state == "waiting_approval":
        what = f"WAITING APPROVAL (id {o['approval_id']})" if o["approval_id"] else "WAITING APPROVAL"
    elif state == "dry_run":
        what = "DRY RUN (nothing ran)"
    elif state == "busy":
        what = "BUSY (another run holds this host)"
    elif state in FAILING_STATES:
        what = state.upper()
    else:
        what = state
    line = f"{o['host']} {o['service']}: {what}"
    ran = "; ".join(
        f"`{c.get('command', '')}` [{c.get('source') or '?'}{'' if c.get('rc') in (0, None) else ' rc=' + str(c.get('rc'))}]"
        for c in o["commands"] if c.get("rc") is not None)
    if ran:
        line += f" | ran {ran}"
    if state in ("dry_run", "waiting_approval") and o.get("planned"):
        line += " | would run " + "; ".join(f"`{c.get('command', '')}` [{c.get('verdict', '?')}]" for c in o["planned"])
    if o.get("recall") == "exact":
        line += " | planned from memory of this same failure"
    for item in o.get("recalled") or []:
        how = "offered to the model" if o.get("recall") == "offered" else "hint only, not run"
        texts = "; ".join(f"`{c.get('command', '')}`" for c in item.get("commands") or [])
        line += f" | similar incident on {item.get('host') or '?'} ({item.get('similarity', 0):.2f}, {how}): {texts}"
    if o["llm"]["calls"]:
        line += f" | llm {o['llm']['calls']} call(s), {o['llm']['prompt_tokens'] + o['llm']['completion_tokens']} tokens"
    if o.get("llm_error") and state not in ("healthy", "healed"):
        line += f" | llm error: {o['llm_error']}"
    if o["reason"] and state not in ("healthy", "healed"):
        line += f" | {o['reason']}"
    return printable(line)


def totals_line(report: Mapping) -> str:
    totals = ", ".join(f"{k}={v}" for k, v in (report.get("totals") or {}).items() if v) or "nothing"
    llm = report.get("llm") or {}
    return (f"totals: {totals} | llm calls={llm.get('calls', 0)} prompt_tokens={llm.get('prompt_tokens', 0)} "
            f"completion_tokens={llm.get('completion_tokens', 0)}" + (" | DRY RUN" if report.get("dry_run") else ""))


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
    lines += [f"ERROR {e['host']}: {e['error']}" for e in report.get("errors") or []]
    lines += [f"WARNING {w['host']}: {w['warning']}" for w in report.get("warnings") or []]
    lines.append(totals_line(report))
    return "\n".join(lines) + "\n"


def render_json(report: Mapping) -> str:
    return json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"


def _seconds(outcome: Mapping) -> float:
    try:
        start = datetime.datetime.strptime(outcome.get("started") or "", "%Y-%m-%dT%H:%M:%SZ")
        end = datetime.datetime.strptime(outcome.get("finished") or "", "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return 0.0
    return max((end - start).total_seconds(), 0.0)


def render_junit(report: Mapping) -> str:
    """JUnit XML, one test case per host and service; valid whatever the outcomes hold."""
    outcomes = report.get("outcomes") or []
    run = report.get("run") or {}
    suite = ET.Element("testsuite", {
        "name": printable(f"sentinel.remediation {run.get('ident', '')}".strip()),
        "tests": str(len(outcomes)),
        "failures": str(sum(1 for o in outcomes if o["state"] in FAILING_STATES)),
        "skipped": str(sum(1 for o in outcomes if o["state"] in ("waiting_approval", "dry_run"))),
        "errors": "0",
        "time": f"{sum(_seconds(o) for o in outcomes):.1f}",
        "timestamp": printable(report.get("generated", "")),
    })
    for o in outcomes:
        case = ET.SubElement(suite, "testcase", {
            "classname": printable(o["host"]), "name": printable(f"{o['host']}/{o['service']}"),
            "hostname": printable(o["host"]), "time": f"{_seconds(o):.1f}"})
        if o["state"] in FAILING_STATES:
            failure = ET.SubElement(case, "failure", {"type": o["state"], "message": printable(o["reason"] or o["state"])})
            failure.text = outcome_line(o)
        elif o["state"] in ("waiting_approval", "dry_run"):
            label = f"waiting approval {o['approval_id']}" if o["state"] == "waiting_approval" else "dry run"
            ET.SubElement(case, "skipped", {"message": printable(label.strip())})
        ET.SubElement(case, "system-out").text = printable(json.dumps(o, sort_keys=True))
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit}
