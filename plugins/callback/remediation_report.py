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
short_description: Summarise a remediation run per host and service, as text, JSON, JUnit XML, HTML and metrics
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
  - Optionally writes the same report as JSON, as JUnit XML (one test case per host
    and service; escalated, failed and unreachable ones are failures), as one self-contained
    HTML page (per host and service the attempts, commands, verdicts, rc and output tails),
    for CI and AWX, and the run's Prometheus metrics as a file for node_exporter's textfile
    collector (also set by the role's C(remediate_metrics_textfile)). Files are written
    atomically (a temporary file renamed).
  - Lists the escalation notifications the role sent (and the failed ones, as warnings).
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
  html_path:
    description: Write the report as one self-contained HTML page to this file (directories are created).
    type: path
    env:
      - name: SENTINEL_REPORT_HTML
      - name: ANSIBLE_CALLBACK_REMEDIATION_REPORT_HTML_PATH
    ini:
      - section: callback_remediation_report
        key: html_path
  metrics_path:
    description:
      - Write the run's Prometheus metrics (text format) to this file, for node_exporter's textfile
        collector (its directory, a name ending in C(.prom)). Wins over the role's C(remediate_metrics_textfile).
      - An existing directory (or a path ending in C(/)) gets the file C(sentinel_remediation_<producer>.prom).
      - The counters (C(sentinel_remediation_*_total)) continue the values in the file, so each run adds to them.
    type: path
    env:
      - name: SENTINEL_REPORT_METRICS
      - name: ANSIBLE_CALLBACK_REMEDIATION_REPORT_METRICS_PATH
    ini:
      - section: callback_remediation_report
        key: metrics_path
  metrics_producer:
    description:
      - The C(producer) label of every metric sample, and the file's name when O(metrics_path) is a directory.
      - Two writers of one textfile directory (this callback and C(sentinel-remediate), two schedules...)
        need different names, or node_exporter sees the same series twice.
    type: str
    default: playbook
    env:
      - name: SENTINEL_REPORT_METRICS_PRODUCER
    ini:
      - section: callback_remediation_report
        key: metrics_producer
  stats_key:
    description: The M(ansible.builtin.set_stats) key holding the outcome lists.
    type: str
    default: sentinel_remediation
    ini:
      - section: callback_remediation_report
        key: stats_key
"""

import gc
import os
import re
import sys
import time
from collections.abc import Mapping

from ansible import context
from ansible.plugins.callback import CallbackBase

from ansible_collections.sentinel.remediation.plugins.plugin_utils import report as _report
from ansible_collections.sentinel.remediation.plugins.plugin_utils.report import outcome_line

# What the docker daemon answers when the container under a connection is gone: the docker
# connection turns it into a failed task (module_stderr), not into an unreachable host.
_HOST_GONE = re.compile(r"Error response from daemon: (Container \S+ is (not running|paused|restarting)|No such container)")


def build_report(custom: Mapping, unreachable: Mapping | None = None, stats_key: str = "sentinel_remediation",
                 failed: Mapping | None = None, errors=(), warnings=()) -> dict:
    """The report from ``stats.custom`` (host -> {stats_key: [outcome...]}), unreachable hosts
    (host -> true or a reason), hosts that failed a task (host -> reason) and run errors."""
    per_host = {host: (custom[host] or {}).get(stats_key) if isinstance(custom[host], Mapping) else None
                for host in (custom or {}) if host != "_run"}
    notifications = [n for host in (custom or {}) if host != "_run" and isinstance(custom[host], Mapping)
                     for n in (custom[host].get(f"{stats_key}_notifications") or [])]
    return _report.build_report(per_host, unreachable or {}, failed, errors, warnings, notifications)


def run_settings(custom: Mapping, stats_key: str = "sentinel_remediation") -> dict:
    """What the role asked of the callback for the whole run (``remediate_metrics_textfile``)."""
    run = (custom or {}).get("_run")
    settings = run.get(f"{stats_key}_settings") if isinstance(run, Mapping) else None
    return dict(settings) if isinstance(settings, Mapping) else {}


def cache_errors() -> list[dict]:
    """Fact cache writes that failed in this run (the memory of those hosts was not saved)."""
    cache = sys.modules.get("ansible_collections.sentinel.remediation.plugins.cache.jsonfile")
    failures = getattr(cache, "WRITE_FAILURES", None) or []
    seen, out = set(), []
    for failure in failures:
        if failure.get("host") in seen:
            continue
        seen.add(failure.get("host"))
        out.append({"host": failure.get("host"),
                    "error": f"memory not saved: the fact cache could not write {failure.get('file')}: "
                             f"{failure.get('error')}"})
    return out


def junit_xml(report: dict) -> bytes:
    """JUnit XML with one test case per host/service."""
    return _report.render_junit(report).encode("utf-8")


def _write(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def _preload_the_heal_action() -> None:
    """Parse what the heal action needs in the controller's main process (plugin_utils/preload).

    Ansible forks a worker per host and task, and each worker imports the action plugin it
    runs, parses its argument specs and the bundled runbooks: about 0.3-0.5 s of CPU per host.
    Done once here, before any worker forks, every worker finds them in memory. Only a
    speed-up: nothing depends on it."""
    try:
        from ansible_collections.sentinel.remediation.plugins.plugin_utils.preload import warm

        warm()
    except Exception:  # pylint: disable=broad-except
        pass  # the workers parse what they need themselves; the action reports any problem


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
        self._warnings: list[dict] = []
        self._started = time.time()

    def v2_playbook_on_start(self, playbook):
        self._started = time.time()
        _preload_the_heal_action()

    def v2_playbook_on_task_start(self, task, is_conditional):
        # The workers of this task fork from this process next. Objects that exist now move to
        # the collector's permanent generation, so neither a worker's garbage collection nor
        # this process's writes to (and so copies) the memory pages they share: about 2 s of
        # controller CPU in a 30-host run (BENCHMARKS.md). Frozen objects are not collected
        # until the play ends (v2_playbook_on_stats); a playbook run is one process.
        gc.freeze()

    def v2_runner_on_ok(self, result):
        # The collection's own warnings (an oversized memory cut...) belong in the report.
        res = result._result if isinstance(result._result, Mapping) else {}
        for warning in res.get("warnings") or []:
            if str(warning).startswith("sentinel.remediation."):
                self._warnings.append({"host": result._host.get_name(), "warning": str(warning)})

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
        gc.unfreeze()
        unreachable = dict(self._unreachable)
        for host, count in (getattr(stats, "dark", None) or {}).items():
            if count and not unreachable.get(host):
                unreachable[host] = True
        custom = getattr(stats, "custom", None) or {}
        report = build_report(custom, unreachable, self.get_option("stats_key"),
                              self._failed, cache_errors(), self._warnings)
        report["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._started))
        report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # ansible-playbook --check: a dry run, and every rendering of the report says so.
        report["dry_run"] = bool((getattr(context, "CLIARGS", None) or {}).get("check"))
        self.report = report
        if report["outcomes"]:
            self._display.banner("SENTINEL REMEDIATION REPORT")
            if report["dry_run"]:
                self._display.display("DRY RUN (--check): plans and verdicts only; no command was run on any host",
                                      color="yellow")
            for outcome in report["outcomes"]:
                color = "green" if outcome["state"] in ("healthy", "healed") else (
                    "yellow" if outcome["state"] in ("waiting_approval", "dry_run", "busy", "waiting") else "red")
                self._display.display(outcome_line(outcome), color=color)
            for error in report["errors"]:
                self._display.display(f"ERROR {error['host']}: {error['error']}", color="red")
            for warning in report["warnings"]:
                self._display.display(f"WARNING {warning['host']}: {warning['warning']}", color="yellow")
            for note in report["notifications"]:
                if note["status"] == "failed":
                    self._display.display(f"NOTIFICATION FAILED {note['channel']} {note['host']} {note['service']}: "
                                          f"{note['error']}", color="red")
            self._display.display(_report.totals_line(report))
        metrics = self.get_option("metrics_path") or run_settings(custom, self.get_option("stats_key")).get(
            "metrics_textfile")
        for option, render in (("json_path", lambda r: _report.render_json(r).encode("utf-8")),
                               ("junit_path", junit_xml),
                               ("html_path", lambda r: _report.render_html(r).encode("utf-8"))):
            path = self.get_option(option)
            if not path:
                continue
            try:
                _write(path, render(report))
            except OSError as exc:
                self._display.warning(f"sentinel.remediation.remediation_report: cannot write {path}: {exc}")
        if metrics:
            try:
                _report.write_metrics_textfile(report, metrics, self.get_option("metrics_producer") or "playbook")
            except OSError as exc:
                self._display.warning(f"sentinel.remediation.remediation_report: cannot write {metrics}: {exc}")
