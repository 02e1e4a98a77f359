# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Callback plugin: one summary of a remediation run (text, JSON, JUnit XML)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: remediation_report
type: aggregate
version_added: 0.1.0
author: Sentinel Remediation maintainers (@sentinel-remediation)
short_description: Summarise a remediation run per host and service, as text, JSON and JUnit XML
description:
  - At the end of each playbook run, prints one line per host and service from the
    outcomes that the C(sentinel.remediation.remediate) role records with
    M(ansible.builtin.set_stats) under the key C(sentinel_remediation) - healthy, healed in
    N attempts, waiting approval, escalated, failed - with the commands run and where they
    came from (memory, runbook, LLM), and the LLM calls and tokens spent.
  - Hosts that were unreachable get a line of their own, and so do hosts whose run stopped
    on a failed task before their outcomes were recorded (state C(failed), with the task and
    its message). A host whose container went away under the C(community.docker.docker)
    connection (which reports that as a failed task) is listed as unreachable.
  - Optionally writes the same report as JSON and as JUnit XML (one test case per host
    and service; escalated, failed and unreachable ones are failures), for CI and AWX.
  - Prints nothing when the run recorded no outcome and no host was unreachable.
requirements:
  - Enable it with C(callbacks_enabled = sentinel.remediation.remediation_report) in
    C(ansible.cfg) (or C(ANSIBLE_CALLBACKS_ENABLED)).
options:
  json_path:
    description: Write the report as JSON to this file (directories are created).
    type: path
    env:
      - name: SENTINEL_REPORT_JSON
      - name: ANSIBLE_CALLBACK_REMEDIATION_REPORT_JSON_PATH
    ini:
      - section: callback_remediation_report
        key: json_path
  junit_path:
    description: Write the report as JUnit XML to this file (directories are created).
    type: path
    env:
      - name: SENTINEL_REPORT_JUNIT
      - name: ANSIBLE_CALLBACK_REMEDIATION_REPORT_JUNIT_PATH
    ini:
      - section: callback_remediation_report
        key: junit_path
  stats_key:
    description: The M(ansible.builtin.set_stats) key holding the outcome lists.
    type: str
    default: sentinel_remediation
    ini:
      - section: callback_remediation_report
        key: stats_key
"""

import json
import os
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from ansible.plugins.callback import CallbackBase

STATES = ("healthy", "healed", "waiting_approval", "dry_run", "escalated", "failed", "unreachable")
FAILING_STATES = ("escalated", "failed", "unreachable")
# What the docker daemon answers when the container under a connection is gone: the docker
# connection turns it into a failed task (module_stderr), not into an unreachable host.
_HOST_GONE = re.compile(r"Error response from daemon: (Container \S+ is (not running|paused|restarting)|No such container)")


def _plain(value):
    """Plain JSON-able data (set_stats values may carry ansible's tagged types)."""
    return json.loads(json.dumps(value, default=str))


def _int(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def normalise_outcome(host: str, outcome) -> dict:
    """An outcome record with every key the report uses."""
    outcome = outcome if isinstance(outcome, Mapping) else {}
    llm = outcome.get("llm") if isinstance(outcome.get("llm"), Mapping) else {}
    state = str(outcome.get("state") or "failed")
    commands = [c for c in (outcome.get("commands") or []) if isinstance(c, Mapping)]
    refused = [c for c in (outcome.get("refused") or []) if isinstance(c, Mapping)]
    return {
        "host": host,
        "service": str(outcome.get("service") or "-"),
        "state": state if state in STATES else "failed",
        "attempts": _int(outcome.get("attempts")),
        "signature": outcome.get("signature") or "",
        "diagnosis": outcome.get("diagnosis") or "",
        "commands": commands,
        "refused": refused,
        "llm": {k: _int(llm.get(k)) for k in ("calls", "prompt_tokens", "completion_tokens")},
        "reason": outcome.get("reason") or "",
        "approval_id": outcome.get("approval_id") or "",
        "sources": [str(x) for x in outcome.get("sources") or []],
        "llm_error": str(outcome.get("llm_error") or ""),
        "planned": [c for c in outcome.get("planned") or [] if isinstance(c, Mapping)],
        "timeline": [t for t in outcome.get("timeline") or [] if isinstance(t, Mapping)],
    }


def build_report(custom: Mapping, unreachable: Mapping | None = None, stats_key: str = "sentinel_remediation",
                 failed: Mapping | None = None) -> dict:
    """The report from ``stats.custom`` (host -> {stats_key: [outcome...]}), unreachable hosts
    (host -> true or a reason) and hosts that failed a task (host -> reason)."""
    outcomes: list[dict] = []
    for host in sorted(k for k in (custom or {}) if k != "_run"):
        records = (custom[host] or {}).get(stats_key) if isinstance(custom[host], Mapping) else None
        if isinstance(records, Mapping):
            records = [records]
        for record in records or []:
            outcomes.append(normalise_outcome(host, record))
    reported = {o["host"] for o in outcomes}
    # A host that went unreachable before its outcomes were recorded gets one line.
    for host, dark in sorted((unreachable or {}).items()):
        if not dark or host in reported:
            continue
        reason = dark if isinstance(dark, str) else "host unreachable"
        outcomes.append(normalise_outcome(host, {"state": "unreachable", "reason": reason}))
        reported.add(host)
    # A host whose run stopped on a failed task before it recorded anything is not silent.
    for host, why in sorted((failed or {}).items()):
        if why and host not in reported:
            outcomes.append(normalise_outcome(host, {"state": "failed", "reason": str(why)}))
    outcomes.sort(key=lambda o: (o["host"], o["service"]))
    totals = {state: sum(1 for o in outcomes if o["state"] == state) for state in STATES}
    llm = {k: sum(o["llm"][k] for o in outcomes) for k in ("calls", "prompt_tokens", "completion_tokens")}
    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "outcomes": _plain(outcomes),
        "totals": totals,
        "llm": llm,
        "ok": not any(o["state"] in FAILING_STATES for o in outcomes),
    }


def _commands_text(outcome: dict) -> str:
    parts = []
    for command in outcome["commands"]:
        rc = command.get("rc")
        rc_text = "" if rc in (0, None) else f" rc={rc}"
        parts.append(f"`{command.get('command', '')}` [{command.get('source') or '?'}{rc_text}]")
    return "; ".join(parts)


def outcome_line(outcome: dict) -> str:
    """One human line for a host/service outcome."""
    state = outcome["state"]
    if state == "healed":
        n = outcome["attempts"] or 1
        what = f"healed in {n} attempt{'s' if n != 1 else ''}"
    elif state == "waiting_approval":
        what = f"WAITING APPROVAL (id {outcome['approval_id']})" if outcome["approval_id"] else "WAITING APPROVAL"
    else:
        what = state.upper() if state in FAILING_STATES else state
    line = f"{outcome['host']} {outcome['service']}: {what}"
    commands = _commands_text(outcome)
    if commands:
        line += f" | ran {commands}"
    if outcome["llm"]["calls"]:
        tokens = outcome["llm"]["prompt_tokens"] + outcome["llm"]["completion_tokens"]
        line += f" | llm {outcome['llm']['calls']} call(s), {tokens} tokens"
    if outcome["reason"] and state not in ("healthy", "healed"):
        line += f" | {outcome['reason']}"
    return line


def junit_xml(report: dict) -> bytes:
    """JUnit XML with one test case per host/service."""
    outcomes = report["outcomes"]
    suite = ET.Element("testsuite", {
        "name": "sentinel.remediation",
        "tests": str(len(outcomes)),
        "failures": str(sum(1 for o in outcomes if o["state"] in FAILING_STATES)),
        "skipped": str(sum(1 for o in outcomes if o["state"] == "waiting_approval")),
        "errors": "0",
        "timestamp": report["generated"],
    })
    for outcome in outcomes:
        case = ET.SubElement(suite, "testcase", {
            "classname": outcome["host"],
            "name": f"{outcome['host']}/{outcome['service']}",
        })
        text = outcome_line(outcome)
        if outcome["state"] in FAILING_STATES:
            failure = ET.SubElement(case, "failure", {"type": outcome["state"], "message": outcome["reason"] or outcome["state"]})
            failure.text = text
        elif outcome["state"] == "waiting_approval":
            ET.SubElement(case, "skipped", {"message": f"waiting approval {outcome['approval_id']}".strip()})
        out = ET.SubElement(case, "system-out")
        out.text = json.dumps(outcome, sort_keys=True)
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _write(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


class CallbackModule(CallbackBase):
    """Prints and writes the remediation report at the end of a run."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sentinel.remediation.remediation_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self._unreachable: dict[str, bool | str] = {}
        self._failed: dict[str, str] = {}

    def v2_runner_on_unreachable(self, result):
        self._unreachable[result._host.get_name()] = True

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        host = result._host.get_name()
        res = result._result if isinstance(result._result, Mapping) else {}
        task = result._task.get_name() if result._task else "?"
        gone = _HOST_GONE.search(str(res.get("module_stderr") or ""))
        if gone:
            self._unreachable[host] = f"host unreachable: {gone.group(0)} (during task '{task}')"
            return
        message = " ".join(str(res.get("msg") or "task failed").split())[:300]
        self._failed.setdefault(host, f"task '{task}' failed: {message}")

    def v2_playbook_on_stats(self, stats):
        unreachable = dict(self._unreachable)
        for host, count in (getattr(stats, "dark", None) or {}).items():
            if count and not unreachable.get(host):
                unreachable[host] = True
        report = build_report(getattr(stats, "custom", None) or {}, unreachable, self.get_option("stats_key"),
                              self._failed)
        self.report = report
        if report["outcomes"]:
            self._display.banner("SENTINEL REMEDIATION REPORT")
            for outcome in report["outcomes"]:
                color = "green" if outcome["state"] in ("healthy", "healed") else (
                    "yellow" if outcome["state"] == "waiting_approval" else "red")
                self._display.display(outcome_line(outcome), color=color)
            totals = ", ".join(f"{k}={v}" for k, v in report["totals"].items() if v)
            llm = report["llm"]
            self._display.display(
                f"totals: {totals} | llm calls={llm['calls']} prompt_tokens={llm['prompt_tokens']} "
                f"completion_tokens={llm['completion_tokens']}")
        for option, render in (("json_path", lambda r: json.dumps(r, indent=2, sort_keys=True).encode()),
                               ("junit_path", junit_xml)):
            path = self.get_option(option)
            if not path:
                continue
            try:
                _write(path, render(report))
            except OSError as exc:
                self._display.warning(f"sentinel.remediation.remediation_report: cannot write {path}: {exc}")
