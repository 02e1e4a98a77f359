"""Prometheus metrics of the driver's passes: a textfile after each pass, an endpoint for `watch`.

Both are the collection's (``metric_families`` and ``counter_families`` in
plugins/plugin_utils/report.py, the same a playbook run writes for node_exporter): the last
pass's gauges and the counters ``sentinel_remediation_*_total`` over passes, every label set
created at 0. The textfile's counters continue across processes (each `run` adds to the
file's values); the endpoint's count the passes of this process. Served with
``prometheus_client``, bound to 127.0.0.1 unless told otherwise.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from . import report as reporting

PRODUCER = "driver"


def write_textfile(report: Mapping, path: str | os.PathLike, producer: str = PRODUCER) -> Path:
    """The report's metrics, written atomically (node_exporter never reads half a file);
    a directory gets the producer's own file, ``sentinel_remediation_<producer>.prom``."""
    return Path(reporting.write_metrics_textfile(report, str(path), producer))


def create_series(path: str | os.PathLike, hosts: Iterable[str], services: Iterable[str],
                  producer: str = PRODUCER) -> Path:
    """Before a pass: the counters of these hosts and services created at 0 (the file's last
    gauges kept), so that a scrape during the pass sees them before the pass's first event."""
    known = [reporting.normalise_outcome(h, {"service": s, "state": "healthy"}) for h in hosts for s in services]
    return Path(reporting.write_metrics_textfile(reporting.finish_report({"outcomes": known}), str(path), producer,
                                                 count=False))


class PassCollector:
    """A prometheus_client collector: the last pass's gauges and the counters over all passes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Mapping | None = None
        self._passes = 0
        self._counters: dict[str, dict] = {}

    def observe(self, report: Mapping) -> None:
        with self._lock:
            self._last = report
            self._passes += 1
            self._counters = {fam["name"]: {"type": "counter", "help": fam["help"],
                                            "samples": {reporting.label_key(labels): value
                                                        for labels, value in fam["samples"]}}
                              for fam in reporting.counter_families(report, self._counters)}

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            last, passes, counters = self._last, self._passes, dict(self._counters)
        if last is not None:
            for fam in reporting.metric_families(last):
                names = sorted({k for labels, _value in fam["samples"] for k in labels})
                gauge = GaugeMetricFamily(fam["name"], fam["help"], labels=names)
                for labels, value in fam["samples"]:
                    gauge.add_metric([str(labels.get(n, "")) for n in names], float(value))
                yield gauge
        for name, fam in sorted(counters.items()):
            names = sorted({k for key in fam["samples"] for k, _v in key})
            counter = CounterMetricFamily(name[:-len("_total")], fam["help"], labels=names)
            for key, value in sorted(fam["samples"].items()):
                labels = dict(key)
                counter.add_metric([labels.get(n, "") for n in names], float(value))
            yield counter
        counter = CounterMetricFamily(reporting.METRIC_PREFIX + "driver_passes", "Passes run by this driver process.")
        counter.add_metric([], passes)
        yield counter


def serve(collector: PassCollector, port: int, address: str = "127.0.0.1"):
    """Start the /metrics endpoint in a thread; returns (server, thread) to shut it down."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return start_http_server(port, addr=address, registry=registry)
