"""Prometheus metrics of the driver's passes: a textfile after each pass, an endpoint for `watch`.

The last pass's gauges are the collection's (``metric_families`` in plugins/plugin_utils/report.py,
the same a playbook run writes for node_exporter); the endpoint adds counters over the
passes of this process (``sentinel_remediation_driver_*_total``). Served with ``prometheus_client``, bound to 127.0.0.1
unless told otherwise.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

from . import report as reporting


def write_textfile(report: Mapping, path: str | os.PathLike) -> Path:
    """The report's metrics, written atomically (node_exporter never reads half a file)."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    tmp.write_text(reporting.render_prometheus(report), encoding="utf-8")
    os.chmod(tmp, 0o644)
    tmp.replace(target)
    return target


class PassCollector:
    """A prometheus_client collector: the last pass's gauges and counters over all passes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Mapping | None = None
        self._passes = 0
        self._outcomes: dict[tuple[str, str], int] = {}
        self._escalations: dict[tuple[str, str], int] = {}
        self._attempts: dict[str, int] = {}
        self._llm = {"calls": 0, "prompt": 0, "completion": 0}

    def observe(self, report: Mapping) -> None:
        with self._lock:
            self._last = report
            self._passes += 1
            for o in report.get("outcomes") or []:
                key = (o["service"], o["state"])
                self._outcomes[key] = self._outcomes.get(key, 0) + 1
                if o["state"] == "escalated":
                    ek = (o["service"], o.get("escalation") or "needs_human")
                    self._escalations[ek] = self._escalations.get(ek, 0) + 1
                self._attempts[o["service"]] = self._attempts.get(o["service"], 0) + int(o.get("attempts") or 0)
            llm = report.get("llm") or {}
            self._llm["calls"] += int(llm.get("calls") or 0)
            self._llm["prompt"] += int(llm.get("prompt_tokens") or 0)
            self._llm["completion"] += int(llm.get("completion_tokens") or 0)

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            last, passes = self._last, self._passes
            outcomes, escalations = dict(self._outcomes), dict(self._escalations)
            attempts, llm = dict(self._attempts), dict(self._llm)
        if last is not None:
            for fam in reporting.metric_families(last):
                names = sorted({k for labels, _value in fam["samples"] for k in labels})
                gauge = GaugeMetricFamily(fam["name"], fam["help"], labels=names)
                for labels, value in fam["samples"]:
                    gauge.add_metric([str(labels.get(n, "")) for n in names], float(value))
                yield gauge
        prefix = reporting.METRIC_PREFIX + "driver_"
        counter = CounterMetricFamily(prefix + "passes", "Passes run by this driver process.")
        counter.add_metric([], passes)
        yield counter
        counter = CounterMetricFamily(prefix + "outcomes", "Host/service outcomes over all passes, by service and state.",
                                      labels=["service", "state"])
        for (service, state), value in sorted(outcomes.items()):
            counter.add_metric([service, state], value)
        yield counter
        counter = CounterMetricFamily(prefix + "escalations", "Escalations over all passes, by service and reason.",
                                      labels=["service", "reason"])
        for (service, reason), value in sorted(escalations.items()):
            counter.add_metric([service, reason], value)
        yield counter
        counter = CounterMetricFamily(prefix + "attempts", "Remediation attempts over all passes, by service.",
                                      labels=["service"])
        for service, value in sorted(attempts.items()):
            counter.add_metric([service], value)
        yield counter
        counter = CounterMetricFamily(prefix + "llm_calls", "LLM calls over all passes.")
        counter.add_metric([], llm["calls"])
        yield counter
        counter = CounterMetricFamily(prefix + "llm_tokens", "LLM tokens over all passes, by kind.", labels=["kind"])
        counter.add_metric(["prompt"], llm["prompt"])
        counter.add_metric(["completion"], llm["completion"])
        yield counter


def serve(collector: PassCollector, port: int, address: str = "127.0.0.1"):
    """Start the /metrics endpoint in a thread; returns (server, thread) to shut it down."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return start_http_server(port, addr=address, registry=registry)
