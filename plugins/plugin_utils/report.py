# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation report: its shape and its renderings, in one place.

The callback ``sentinel.remediation.remediation_report`` and the driver
(``sentinel-remediate``) both build and render reports with this module, so a report
reads the same wherever it is printed, stored or parsed.

A report is ``{generated, outcomes, totals, llm, ok, errors, warnings, notifications}``
(the callback adds ``started``/``finished``, the driver a ``run`` section); an outcome is
the role's record of one host and service (docs/contracts.md) plus ``host``. Renderings:
text, JSON, JUnit XML, Prometheus text format and a self-contained HTML page.
"""
from __future__ import annotations

import datetime
import fcntl
import html
import json
import os
import re
import tempfile
import time
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any

try:
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import vocabulary
except ImportError:  # loaded by its path (the driver, without the collection on sys.path): the sibling file
    import importlib.util

    _SPEC = importlib.util.spec_from_file_location(
        "sentinel_remediation_vocabulary", os.path.join(os.path.dirname(os.path.abspath(__file__)), "remediation",
                                                        "vocabulary.py"))
    vocabulary = importlib.util.module_from_spec(_SPEC)
    _SPEC.loader.exec_module(vocabulary)

STATES = vocabulary.STATES
FAILING_STATES = vocabulary.FAILING_STATES
SAFEGUARDS = vocabulary.SAFEGUARDS
ESCALATION_KINDS = vocabulary.ESCALATION_KINDS
_LLM_KEYS = ("calls", "prompt_tokens", "completion_tokens")
# Characters XML 1.0 cannot hold at all, even escaped.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _unseen(char: str, lines: bool) -> bool:
    """Whether a terminal or a page would act on ``char`` rather than show it: a control
    character (escape sequences, carriage return, line breaks: ``\\n`` only where the text is a
    block of lines), a line or paragraph separator, or a format character (bidirectional
    overrides and isolates that show text in another order, zero-width and invisible ones)."""
    if char == "\t" or (lines and char == "\n"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


def printable(value: Any, lines: bool = False) -> str:
    """Text safe for a terminal, a page and XML, shown rather than obeyed: control, format and
    line-separator characters made visible as ``\\xNN``/``\\uNNNN``, so text a host wrote (a log
    line, a file name) cannot forge a line, reorder or hide what an approver reads. ``lines``:
    the text is a block (a command's output) whose ``\\n`` stay line breaks."""
    text = "".join(((f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") if _unseen(c, lines) else c)
                   for c in str(value if value is not None else ""))
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
        "escalation": escalation_of(dict(outcome, state=state)),
        "approval_id": str(outcome.get("approval_id") or ""),
        "approved_by": str(outcome.get("approved_by") or ""),
        "started": str(outcome.get("started") or ""),
        "finished": str(outcome.get("finished") or ""),
        "timeline": _dicts(outcome.get("timeline")),
        "undo_id": str(outcome.get("undo_id") or ""),
        # the failing dependencies this service's incident waits on (linked incidents of one host)
        "waits_on": [str(d) for d in outcome.get("waits_on") or []] if isinstance(outcome.get("waits_on"), list) else [],
        "recall": str(outcome.get("recall") or ""),
        "recalled": _recalled(outcome.get("recalled")),
        "safeguards": [str(g) for g in outcome.get("safeguards") or [] if str(g) in SAFEGUARDS]
        if isinstance(outcome.get("safeguards"), list) else [],
    }


def escalation_of(outcome: Mapping) -> str:
    """The kind of an escalation (``incident.escalation_kind``); an outcome recorded without
    one (an older role) gets it from what it carries. ``""`` when not escalated."""
    if outcome.get("state") != "escalated":
        return ""
    kind = str(outcome.get("escalation") or "")
    if kind in ESCALATION_KINDS:
        return kind
    reason = str(outcome.get("reason") or "")
    if "rejected by an operator" in reason:
        return "rejected"
    if any(isinstance(c, Mapping) and c.get("rc") is not None for c in outcome.get("commands") or []):
        return "exhausted"
    if outcome.get("refused"):
        return "refused"
    if outcome.get("llm_error"):
        return "llm_error"
    return "needs_human"


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
    report["notifications"] = normalise_notifications(report.get("notifications"))
    report["ok"] = not any(o["state"] in FAILING_STATES for o in outcomes) and not report["errors"]
    report["dry_run"] = any(o["state"] == "dry_run" for o in outcomes)
    return report


_NOTIFY_STATUS = ("sent", "failed", "skipped")
# The role's notification channels (roles/remediate/tasks/notify_*.yml): their series exist from the first run.
NOTIFY_CHANNELS = ("mail", "pagerduty", "slack", "webhook")


def normalise_notifications(value: Any) -> list[dict]:
    """Notification records ``{host, service, kind, channel, status, error}`` (role task
    ``sentinel.remediation.notifications``), sorted; an unknown status counts as failed."""
    out = []
    for item in _dicts(value):
        status = str(item.get("status") or "failed")
        out.append({"host": str(item.get("host") or "-"), "service": str(item.get("service") or "-"),
                    "kind": str(item.get("kind") or ""), "channel": str(item.get("channel") or "?"),
                    "status": status if status in _NOTIFY_STATUS else "failed",
                    "error": printable(item.get("error") or "")})
    return sorted(out, key=lambda n: (n["host"], n["service"], n["channel"]))


def build_report(per_host: Mapping[str, Any], unreachable: Mapping[str, Any] | Iterable[str] = (),
                 failed: Mapping[str, str] | None = None, errors: Iterable[Mapping] = (),
                 warnings: Iterable[Mapping] = (), notifications: Iterable[Mapping] = ()) -> dict:
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
    return finish_report({"outcomes": outcomes, "errors": errors, "warnings": warnings,
                          "notifications": list(notifications or ())})


# ------------------------------------------------------------------------------ renderings

def undo_summary(record: Mapping) -> str:
    """One attempt's undo in words: what was put back, what could not be, what stays changed
    (the host's record, plugin_utils/undo.py). Here, not imported: the driver loads this module by path."""
    if not isinstance(record, Mapping) or not record:
        return ""
    parts = []
    if record.get("restored"):
        parts.append("restored " + ", ".join(str(p) for p in record["restored"]))
    if record.get("failed"):
        parts.append("could NOT restore " + ", ".join(str(f.get("path")) for f in _dicts(record["failed"])))
    if not record.get("rolled_back") and record.get("changed"):
        parts.append("changed " + ", ".join(str(c.get("path")) for c in _dicts(record["changed"]))
                     + f" (undo id {record.get('incident')})")
    if record.get("unkept"):
        parts.append("not kept: " + "; ".join(str(u) for u in record["unkept"]))
    if record.get("error"):
        parts.append(str(record["error"]))
    return "; ".join(parts)


def outcome_line(o: Mapping) -> str:  # noqa: C901 pylint: disable=too-many-branches
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
    elif state == "waiting":
        what = "WAITING on " + ", ".join(o.get("waits_on") or ["its dependencies"])
    elif state in FAILING_STATES:
        what = state.upper()
    else:
        what = state
    line = f"{o['host']} {o['service']}: {what}"
    if o.get("approved_by") and o.get("approval_id"):
        verb = "rejected" if "rejected by" in str(o.get("reason") or "") else "approved"
        line += f" | plan {o['approval_id']} {verb} by {o['approved_by']}"
    ran = "; ".join(
        f"`{c.get('command', '')}` [{c.get('source') or '?'}{'' if c.get('rc') in (0, None) else ' rc=' + str(c.get('rc'))}]"
        for c in o["commands"] if c.get("rc") is not None)
    if ran:
        line += f" | ran {ran}"
    if state in ("dry_run", "waiting_approval") and o.get("planned"):
        line += " | would run " + "; ".join(f"`{c.get('command', '')}` [{c.get('verdict', '?')}]" for c in o["planned"])
    for step in o.get("timeline") or []:  # what each attempt changed and what was put back (undo.py)
        undone = undo_summary(step.get("undo") or {})
        if undone:
            line += f" | attempt {step.get('attempt')}: {undone}"
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
    elif report.get("dry_run"):
        lines.append("DRY RUN (--check): plans and verdicts only; no command was run on any host")
        for host, holder in sorted((run.get("skipped") or {}).items()):
            lines.append(f"{host}: SKIPPED (locked by {printable(holder)})")
    lines += [outcome_line(o) for o in report.get("outcomes") or []]
    if not report.get("outcomes"):
        lines.append("no outcome recorded")
    lines += [f"ERROR {e['host']}: {e['error']}" for e in report.get("errors") or []]
    lines += [f"WARNING {w['host']}: {w['warning']}" for w in report.get("warnings") or []]
    lines += [f"NOTIFIED {n['channel']}: {n['host']} {n['service']} ({n['kind']}): {n['status']}"
              + (f": {n['error']}" if n.get("error") else "") for n in report.get("notifications") or []]
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


# ------------------------------------------------------------------------------ metrics

METRIC_PREFIX = "sentinel_remediation_"


def _epoch(text: Any) -> float | None:
    try:
        return datetime.datetime.strptime(str(text or ""), "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return None


def run_times(report: Mapping) -> tuple[float | None, float | None]:
    """(started, finished) of the run as epoch seconds: the driver's ``run`` section, else
    the callback's ``started``/``finished``, else the report's ``generated`` as the end."""
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    started = _epoch(run.get("started")) or _epoch(report.get("started"))
    finished = _epoch(run.get("finished")) or _epoch(report.get("finished")) or _epoch(report.get("generated"))
    return started, finished


def metric_families(report: Mapping) -> list[dict]:
    """The run's metrics as data: ``[{name, type, help, samples: [(labels, value)], total}]``.

    Gauges of the last run (a textfile and a scrape show the same): outcomes by host, service
    and state, escalations by host, service and reason, attempts, LLM calls and tokens,
    notifications, the run's duration, end time and verdict. A family made with ``total`` (the
    help of its counter) counts things: its gauge is ``last_run_<name>``, and the textfile
    writers add each run's values to the counter ``<name>_total`` (``counter_families``).
    Every label set of a family is listed, with 0, so a counter exists before its first event."""
    outcomes = report.get("outcomes") or []
    pairs = sorted({(o["host"], o["service"]) for o in outcomes})
    families = []

    def family(name: str, help_text: str, samples: list, kind: str = "gauge", total: str = "") -> None:
        families.append({"name": METRIC_PREFIX + ("last_run_" if total else "") + name, "type": kind,
                         "help": help_text, "samples": samples,
                         "total": total, "counter": METRIC_PREFIX + name + "_total" if total else ""})

    family("outcomes", "Host/service outcomes of the last run, by host, service and state.",
           [({"host": host, "service": svc, "state": st},
             sum(1 for o in outcomes if (o["host"], o["service"], o["state"]) == (host, svc, st)))
            for host, svc in pairs for st in STATES],
           total="Host/service outcomes over all runs, by host, service and state.")
    family("escalations", "Escalated host/service outcomes of the last run, by host, service and reason.",
           [({"host": host, "service": svc, "reason": kind},
             sum(1 for o in outcomes if (o["host"], o["service"]) == (host, svc) and o["state"] == "escalated"
                 and (o.get("escalation") or "needs_human") == kind))
            for host, svc in pairs for kind in ESCALATION_KINDS],
           total="Escalations over all runs, by host, service and reason.")
    family("safeguards", "Host/service outcomes of the last run on which a safeguard acted, by host, service and safeguard.",
           [({"host": host, "service": svc, "safeguard": g},
             sum(1 for o in outcomes if (o["host"], o["service"]) == (host, svc) and g in o.get("safeguards", ())))
            for host, svc in pairs for g in SAFEGUARDS],
           total="Host/service outcomes on which a safeguard acted, over all runs, by host, service and safeguard.")
    family("attempts", "Remediation attempts made in the last run, by host and service.",
           [({"host": host, "service": svc}, sum(o["attempts"] for o in outcomes if (o["host"], o["service"]) == (host, svc)))
            for host, svc in pairs],
           total="Remediation attempts over all runs, by host and service.")
    llm = report.get("llm") or {}
    family("llm_calls", "LLM calls made in the last run.", [({}, _int(llm.get("calls")))],
           total="LLM calls over all runs.")
    family("llm_tokens", "LLM tokens spent in the last run, by kind.",
           [({"kind": "prompt"}, _int(llm.get("prompt_tokens"))),
            ({"kind": "completion"}, _int(llm.get("completion_tokens")))],
           total="LLM tokens over all runs, by kind.")
    notes = report.get("notifications") or []
    channels = sorted(set(NOTIFY_CHANNELS) | {n["channel"] for n in notes})
    family("notifications", "Notifications of the last run, by channel and status.",
           [({"channel": ch, "status": st}, sum(1 for n in notes if n["channel"] == ch and n["status"] == st))
            for ch in channels for st in _NOTIFY_STATUS],
           total="Notifications over all runs, by channel and status.")
    started, finished = run_times(report)
    family("run_duration_seconds", "Wall-clock seconds of the last run.",
           [({}, round(max(finished - started, 0.0), 3) if started and finished else 0.0)])
    family("last_run_timestamp_seconds", "When the last run ended (Unix time).", [({}, finished or 0.0)])
    family("last_run_ok", "1 when nothing escalated, failed or was unreachable in the last run.",
           [({}, 1 if report.get("ok") else 0)])
    family("last_run_dry_run", "1 when the last run was a dry run (check mode).",
           [({}, 1 if report.get("dry_run") else 0)])
    return families


def label_key(labels: Mapping) -> tuple:
    """A hashable, ordered form of a label set (the keys of ``parse_prometheus`` samples)."""
    # as written (``printable``, idempotent): a label read back from the file is the same key
    return tuple(sorted((str(k), printable(v)) for k, v in labels.items()))


def counter_families(report: Mapping, previous: Mapping[str, Mapping] | None = None, count: bool = True) -> list[dict]:
    """The counters ``<name>_total`` of every family of ``metric_families`` that has a
    ``total``: the previous values (``parse_prometheus`` of the last file) plus this run's,
    over the label sets of both. ``count=False`` adds nothing: it only creates, at 0, the
    label sets of ``report`` that are new (before a run, so the first event is an increase)."""
    previous = previous or {}
    out = []
    runs = {"name": "", "total": "Runs, by result (ok: nothing escalated, failed or was unreachable).",
            "counter": METRIC_PREFIX + "runs_total",
            "samples": [({"result": "ok"}, 1 if report.get("ok") else 0),
                        ({"result": "failed"}, 0 if report.get("ok") else 1)]}
    for fam in metric_families(report) + [runs]:
        if not fam.get("total"):
            continue
        name = fam["counter"]
        values = dict((previous.get(name) or {}).get("samples") or {})
        for labels, value in fam["samples"]:
            key = label_key(labels)
            values[key] = values.get(key, 0) + (value if count else 0)
        out.append({"name": name, "type": "counter", "help": fam["total"],
                    "samples": [(dict(key), value) for key, value in sorted(values.items())]})
    return out


def _label_value(value: Any) -> str:
    return printable(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _render_families(families: Iterable[Mapping], producer: str = "") -> str:
    lines = []
    for fam in families:
        lines.append(f"# HELP {fam['name']} {fam['help']}")
        lines.append(f"# TYPE {fam['name']} {fam['type']}")
        for labels, value in fam["samples"]:
            labels = {"producer": producer, **labels} if producer else dict(labels)
            inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
            lines.append(f"{fam['name']}{{{inner}}} {_number(value)}" if inner else f"{fam['name']} {_number(value)}")
    return "\n".join(lines) + "\n"


def render_prometheus(report: Mapping, previous: Mapping[str, Mapping] | None = None, producer: str = "") -> str:
    """The run's metrics in Prometheus' text exposition format (node_exporter's textfile
    collector): the gauges of this run, then the counters over runs (``previous`` + this
    run). ``producer`` labels every sample, so that two writers of textfiles in one
    directory never expose the same series."""
    return _render_families(metric_families(report) + counter_families(report, previous), producer)


_SAMPLE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


def parse_prometheus(text: str, producer: str = "") -> dict[str, dict]:
    """Families of a text exposition (as ``render_prometheus`` writes it): name ->
    ``{type, help, samples: {label key: value}}``, without the ``producer`` label. Lines it
    cannot read are skipped: a damaged file costs its counters, never the run."""
    families: dict[str, dict] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) == 4:
                fam = families.setdefault(parts[2], {"type": "untyped", "help": "", "samples": {}})
                fam["help" if parts[1] == "HELP" else "type"] = parts[3]
            continue
        match = _SAMPLE.match(line.strip())
        if not match:
            continue
        labels = {}
        raw = match.group("labels") or ""
        for item in _LABEL.finditer(raw):
            labels[item.group("key")] = re.sub(r"\\[\\n\"]", lambda m: _UNESCAPE[m.group()], item.group("value"))
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        if producer and labels.get("producer") not in (None, producer):
            continue
        labels.pop("producer", None)
        fam = families.setdefault(match.group("name"), {"type": "untyped", "help": "", "samples": {}})
        fam["samples"][label_key(labels)] = value
    return families


def textfile_path(path: str, producer: str) -> str:
    """Where a producer's textfile goes: ``path`` itself, or inside ``path`` when it is a
    directory (or ends with ``/``), ``sentinel_remediation_<producer>.prom``, so that writers
    with different producer names never share (and overwrite) one file."""
    if path.endswith(os.sep) or os.path.isdir(path):
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", producer or "default")
        return os.path.join(path, f"sentinel_remediation_{safe}.prom")
    return path


def write_metrics_textfile(report: Mapping, path: str, producer: str, count: bool = True) -> str:
    """Write the report's metrics for node_exporter's textfile collector; returns the file.

    The counters continue the file's previous values (under an exclusive lock on a side
    file, so two runs of one producer never lose an increment); the file is replaced
    atomically (written beside it, then renamed: the collector never reads half a file).
    ``count=False`` (before a run) keeps the file's last gauges and creates the report's new
    label sets at 0."""
    target = textfile_path(os.path.expanduser(path), producer)
    directory = os.path.dirname(os.path.abspath(target))
    os.makedirs(directory, exist_ok=True)
    base = os.path.basename(target)
    with open(os.path.join(directory, f".{base}.lock"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(target, encoding="utf-8") as handle:
                previous = parse_prometheus(handle.read(), producer)
        except (OSError, UnicodeDecodeError):
            previous = {}
        if count:
            text = render_prometheus(report, previous, producer)
        else:
            gauges = [{"name": name, "type": fam["type"], "help": fam["help"],
                       "samples": [(dict(key), value) for key, value in sorted(fam["samples"].items())]}
                      for name, fam in previous.items() if fam["type"] != "counter"]
            text = _render_families(gauges + counter_families(report, previous, count=False), producer)
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return target


# ------------------------------------------------------------------------------ HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0 0 4px;font-size:20px}
header .meta{color:#b9c0cf;font-size:13px}main{padding:18px 28px;max-width:1200px}
.chips span{display:inline-block;margin:8px 6px 0 0;padding:3px 10px;border-radius:12px;background:#e3e7ee;color:#1d2330;font-size:13px}
table{border-collapse:collapse;width:100%;background:#fff;margin:10px 0 18px}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #e3e7ee;vertical-align:top}
th{background:#eef1f5;font-weight:600}code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-all;margin:4px 0 0;background:#f7f8fa;padding:6px;border-radius:4px}
.state{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.healthy,.healed{background:#1f8a4c}.waiting_approval,.dry_run,.busy{background:#b7791f}
.escalated,.failed,.unreachable{background:#c53030}.sent{color:#1f8a4c}.failed-note{color:#c53030}
section.outcome{background:#fff;border-left:6px solid #cfd5df;margin:0 0 16px;padding:10px 16px;border-radius:4px}
section.s-healed,section.s-healthy{border-color:#1f8a4c}section.s-escalated,section.s-failed,
section.s-unreachable{border-color:#c53030}section.s-waiting_approval,section.s-dry_run{border-color:#b7791f}
section.outcome h2{font-size:16px;margin:4px 0 8px}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dt{color:#5b6475}dd{margin:0}.verdict-allow{color:#1f8a4c}.verdict-approval{color:#b7791f}.verdict-reject{color:#c53030}
.banner{background:#fff4d6;border:1px solid #e6c46a;padding:8px 12px;border-radius:4px}
"""


def _e(value: Any, lines: bool = False) -> str:
    """Text safe inside HTML: control characters made visible, markup escaped."""
    return html.escape(printable(value, lines), quote=True)


def _attempt_rows(o: Mapping) -> str:
    timeline = o.get("timeline") or []
    commands = o.get("commands") or []
    if not timeline and not commands:
        return ""
    rows = []
    numbers = [t.get("attempt") for t in timeline] or sorted({c.get("attempt") for c in commands})
    by_number = {t.get("attempt"): t for t in timeline}
    for number in numbers:
        step = by_number.get(number, {})
        healthy = step.get("healthy")
        after = "healthy" if healthy else ("still failing" if healthy is False else "-")
        if step.get("error_after") and healthy is False:
            after += ": " + str(step.get("error_after"))
        ran = [c for c in commands if c.get("attempt") == number]
        cells = []
        for c in ran:
            rc = c.get("rc")
            output = f"<pre>{_e(c.get('output'), lines=True)}</pre>" if c.get("output") else ""
            skipped = f" <em>{_e(c.get('skipped'))}</em>" if c.get("skipped") else ""
            if c.get("confinement"):  # whether the kernel held it to its verdict, and how
                skipped += f" <small>{_e(c.get('confinement'))}</small>"
            if c.get("denied"):
                skipped += f" <strong>confinement denied: {_e(c.get('denied'))}</strong>"
            cells.append(f"<div><code>{_e(c.get('command'))}</code> [{_e(c.get('source') or '?')}] "
                         f"<span class=\"verdict-{_e(c.get('verdict'))}\">{_e(c.get('verdict') or '?')}</span> "
                         f"rc={_e('-' if rc is None else rc)}{skipped}{output}</div>")
        rows.append(f"<tr><td>{_e(number)}</td><td>{_e(step.get('source', ''))}</td><td>{_e(step.get('gate', ''))}</td>"
                    f"<td>{_e(step.get('diagnosis', ''))}</td><td>{''.join(cells) or '-'}</td><td>{_e(after)}</td>"
                    f"<td>{_e(step.get('started', ''))}<br>{_e(step.get('finished', ''))}</td></tr>")
    return ("<table class=\"timeline\"><tr><th>#</th><th>source</th><th>gate</th><th>diagnosis</th>"
            "<th>commands (verdict, rc, output tail)</th><th>after</th><th>time</th></tr>" + "".join(rows) + "</table>")


def _outcome_section(o: Mapping, index: int) -> str:
    facts = [("reason", o.get("reason")), ("escalation", o.get("escalation")), ("diagnosis", o.get("diagnosis")),
             ("approval id", o.get("approval_id")), ("signature", o.get("signature")),
             ("sources", ", ".join(o.get("sources") or [])), ("llm error", o.get("llm_error")),
             ("started", o.get("started")), ("finished", o.get("finished"))]
    llm = o.get("llm") or {}
    if llm.get("calls"):
        facts.append(("llm", f"{llm.get('calls')} call(s), {llm.get('prompt_tokens', 0)} prompt + "
                             f"{llm.get('completion_tokens', 0)} completion tokens"))
    body = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts if v)
    parts = [f"<section class=\"outcome s-{_e(o['state'])}\" id=\"o{index}\">",
             f"<h2>{_e(o['host'])} / {_e(o['service'])} <span class=\"state {_e(o['state'])}\">{_e(o['state'])}</span>"
             f" <small>{_e(o['attempts'])} attempt(s)</small></h2>"]
    if body:
        parts.append(f"<dl>{body}</dl>")
    parts.append(_attempt_rows(o))
    if o.get("planned"):
        parts.append("<p>plan (not run):</p><ul>" + "".join(
            f"<li><code>{_e(c.get('command'))}</code> <span class=\"verdict-{_e(c.get('verdict'))}\">"
            f"{_e(c.get('verdict') or '?')}</span></li>" for c in o["planned"]) + "</ul>")
    if o.get("refused"):
        parts.append("<p>refused by the policy:</p><ul>" + "".join(
            f"<li><code>{_e(r.get('command'))}</code> [{_e(r.get('source') or '?')}]: "
            f"{_e('; '.join(str(x) for x in r.get('reasons') or []))}</li>" for r in o["refused"]) + "</ul>")
    if o.get("recalled"):
        parts.append("<p>similar incidents:</p><ul>" + "".join(
            f"<li>{_e(r.get('host'))} ({_e(r.get('similarity'))}): "
            + "; ".join(f"<code>{_e(c.get('command'))}</code>" for c in r.get("commands") or []) + "</li>"
            for r in o["recalled"]) + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def render_html(report: Mapping) -> str:
    """One self-contained page (inline CSS, no script, no external asset): a summary row per
    host and service, then each outcome with its attempts, commands, verdicts, rc and output."""
    outcomes = report.get("outcomes") or []
    run = report.get("run") if isinstance(report.get("run"), Mapping) else {}
    title = f"sentinel.remediation report {run.get('ident') or report.get('generated', '')}".strip()
    meta = [f"generated {report.get('generated', '')}"]
    started, finished = run_times(report)
    if started and finished:
        meta.append(f"{max(finished - started, 0):.0f} s")
    if run:
        meta.append(f"{run.get('kind', 'run')} {run.get('status', '')} rc={run.get('rc')}")
    totals = "".join(f"<span>{_e(k)}: {_e(v)}</span>" for k, v in (report.get("totals") or {}).items() if v)
    llm = report.get("llm") or {}
    totals += (f"<span>llm calls: {_e(llm.get('calls', 0))}, tokens: "
               f"{_e(_int(llm.get('prompt_tokens')) + _int(llm.get('completion_tokens')))}</span>")
    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
             f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
             f"<header><h1>{_e(title)}</h1><div class=\"meta\">{_e(' | '.join(meta))}</div>"
             f"<div class=\"chips\">{totals}</div></header><main>"]
    if report.get("dry_run") or run.get("check"):
        parts.append("<p class=\"banner\">DRY RUN (check mode): plans and verdicts only; no command was run.</p>")
    rows = "".join(
        f"<tr class=\"outcome-row\" data-host=\"{_e(o['host'])}\"><td>{_e(o['host'])}</td><td>"
        f"<a href=\"#o{i}\">{_e(o['service'])}</a></td><td><span class=\"state {_e(o['state'])}\">{_e(o['state'])}"
        f"</span></td><td>{_e(o['attempts'])}</td><td>{_e(o.get('reason') if o['state'] not in ('healthy', 'healed') else '')}"
        f"</td></tr>" for i, o in enumerate(outcomes))
    parts.append("<table class=\"summary\"><tr><th>host</th><th>service</th><th>state</th><th>attempts</th>"
                 f"<th>reason</th></tr>{rows or '<tr><td colspan=5>no outcome recorded</td></tr>'}</table>")
    for label, items, key in (("errors", report.get("errors"), "error"), ("warnings", report.get("warnings"), "warning")):
        if items:
            parts.append(f"<h3>{label}</h3><ul>" + "".join(
                f"<li>{_e(i.get('host'))}: {_e(i.get(key))}</li>" for i in items) + "</ul>")
    if report.get("notifications"):
        parts.append("<h3>notifications</h3><table><tr><th>host</th><th>service</th><th>reason</th><th>channel</th>"
                     "<th>status</th></tr>" + "".join(
                         f"<tr><td>{_e(n['host'])}</td><td>{_e(n['service'])}</td><td>{_e(n['kind'])}</td>"
                         f"<td>{_e(n['channel'])}</td><td class=\"{'sent' if n['status'] == 'sent' else 'failed-note'}\">"
                         f"{_e(n['status'])}{(': ' + _e(n['error'])) if n.get('error') else ''}</td></tr>"
                         for n in report["notifications"]) + "</table>")
    parts += [_outcome_section(o, i) for i, o in enumerate(outcomes) if o["state"] != "healthy"]
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit,
             "prometheus": render_prometheus, "html": render_html}
