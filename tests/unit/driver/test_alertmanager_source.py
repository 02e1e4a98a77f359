"""The Alertmanager event source of extensions/eda: payload parsing and the HTTP endpoint."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[3] / "extensions" / "eda" / "plugins" / "event_source" / "alertmanager.py"
spec = importlib.util.spec_from_file_location("sentinel_alertmanager_source", SOURCE)
alertmanager = importlib.util.module_from_spec(spec)
spec.loader.exec_module(alertmanager)


@pytest.mark.parametrize(("labels", "host"), [
    ({"instance": "lab01:9100"}, "lab01"),
    ({"instance": "web1.example.com"}, "web1.example.com"),
    ({"instance": "[2001:db8::1]:9100"}, "2001:db8::1"),
    ({"instance": "", "host": "db2"}, "db2"),
    ({"instance": "10.0.0.7:9100", "host": "db2"}, "db2"),   # a label the alert rule set wins over the target
    ({"hostname": "db3"}, "db3"),
    ({}, ""),
])
def test_alert_host(labels: dict, host: str) -> None:
    assert alertmanager.alert_host(labels) == host


def test_one_event_per_alert() -> None:
    payload = {"version": "4", "status": "firing", "receiver": "r", "groupKey": "g", "alerts": [
        {"status": "firing", "labels": {"instance": "lab01:9113", "service": "nginx", "job": "x"}},
        {"status": "resolved", "labels": {"instance": "lab02:9121", "job": "redis"}},
        "junk",
    ]}
    events = alertmanager.events_from_payload(payload)
    assert [{k: e["sentinel"][k] for k in ("host", "service", "status")} for e in events] == [
        {"host": "lab01", "service": "nginx", "status": "firing"},
        {"host": "lab02", "service": "", "status": "resolved"},   # `job` is the exporter, not a service
    ]
    assert events[0]["sentinel"]["refused"] == ""
    assert events[1]["sentinel"]["refused"].startswith("the alert names no service (labels service)")
    assert events[0]["receiver"] == "r" and events[0]["alert"]["labels"]["job"] == "x"


@pytest.mark.parametrize("payload", [[], {"alerts": "x"}, {"status": "firing"}])
def test_not_a_payload(payload) -> None:
    with pytest.raises(ValueError, match="not an Alertmanager webhook payload"):
        alertmanager.events_from_payload(payload)


def test_http_endpoint_queues_events_and_checks_the_token() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def post(body: bytes, token: str | None = None) -> int:
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/hook", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    async def scenario() -> list:
        queue: asyncio.Queue = asyncio.Queue()
        task = asyncio.create_task(alertmanager.main(queue, {"port": port, "token": "s3cret"}))
        loop = asyncio.get_running_loop()
        for dummy in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        good = json.dumps({"alerts": [{"status": "firing", "labels": {"instance": "lab01:1", "service": "nginx"}}]})
        codes = [await loop.run_in_executor(None, post, good.encode(), "s3cret"),
                 await loop.run_in_executor(None, post, good.encode(), "wrong"),
                 await loop.run_in_executor(None, post, b"{not json", "s3cret")]
        task.cancel()
        events = [queue.get_nowait() for dummy in range(queue.qsize())]
        return [codes, events]

    codes, events = asyncio.run(scenario())
    assert codes == [202, 401, 400]
    assert [e["sentinel"]["host"] for e in events] == ["lab01"]


def test_healthz_answers_without_a_token_and_counts_alerts() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def call(method: str, path: str, body: bytes | None = None, token: str | None = None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, {}

    async def scenario() -> list:
        queue: asyncio.Queue = asyncio.Queue()
        task = asyncio.create_task(alertmanager.main(queue, {"port": port, "token": "s3cret"}))
        loop = asyncio.get_running_loop()
        for dummy in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        good = json.dumps({"alerts": [{"status": "firing", "labels": {"instance": "a:1", "service": "nginx"}},
                                      {"status": "firing", "labels": {"instance": "b:1", "service": "redis"}}]})
        before = await loop.run_in_executor(None, call, "GET", "/healthz")
        posted = await loop.run_in_executor(None, call, "POST", "/alerts", good.encode(), "s3cret")
        after = await loop.run_in_executor(None, call, "GET", "/healthz")
        task.cancel()
        return [before, posted, after, queue.qsize()]

    before, posted, after, queued = asyncio.run(scenario())
    assert before[0] == 200 and before[1]["status"] == "ok" and before[1]["alerts"] == 0
    assert posted[0] == 202 and queued == 2
    assert after[0] == 200 and (after[1]["webhooks"], after[1]["alerts"]) == (1, 2)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_a_non_loopback_listener_needs_a_token(host: str) -> None:
    with pytest.raises(ValueError, match="needs a `token`"):
        asyncio.run(alertmanager.main(asyncio.Queue(), {"host": host, "port": 1}))


@pytest.mark.parametrize(("labels", "keys", "service"), [
    ({"service": "nginx"}, ("service",), "nginx"),
    ({"service": "nginx.service"}, ("service",), "nginx"),     # a systemd unit name
    ({"job": "node", "alertname": "HostDown"}, ("service",), ""),
    ({"name": "redis-server.service"}, ("service", "name"), "redis-server"),
])
def test_alert_service_comes_only_from_the_service_labels(labels: dict, keys: tuple, service: str) -> None:
    assert alertmanager.alert_service(labels, keys) == service


def test_an_alert_without_host_or_service_says_why_it_is_refused() -> None:
    why = alertmanager.refusal("", "")
    assert why.startswith("the alert names no host (labels host, hostname, instance) and no service (labels service)")
    assert alertmanager.refusal("lab01", "nginx") == ""


@pytest.mark.parametrize(("value", "keys"), [("", ("service",)), (None, ("service",)),
                                             (["service", "name"], ("service", "name")),
                                             ("service,name", ("service", "name"))])
def test_label_arguments(value, keys: tuple) -> None:
    assert alertmanager._labels_arg({"service_labels": value}, "service_labels", ("service",)) == keys


def test_a_bad_label_argument_is_a_clear_error() -> None:
    for bad in ([3], [""], {"a": 1}):
        with pytest.raises(ValueError, match="`service_labels` must be a list of label names"):
            alertmanager._labels_arg({"service_labels": bad}, "service_labels", ("service",))
