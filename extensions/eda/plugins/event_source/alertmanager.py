# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-rulebook event source: Prometheus Alertmanager webhooks, one event per alert.

Alertmanager groups alerts into one webhook POST (payload version 4); rules want one
alert at a time, with the host and the service already worked out. Each alert becomes

    {"alert": <the alert: status, labels, annotations, startsAt, fingerprint...>,
     "sentinel": {"host": ..., "service": ..., "alertname": ..., "status": "firing"|"resolved",
                  "refused": why or ""},
     "receiver": ..., "group_key": ..., "external_url": ..., "duplicates": N}

(copies of one alert in one payload, the same host, service, status and refusal, make one
event; ``duplicates`` counts the others)

host: the first of the labels `host`, `hostname` (set by the alert rule: explicit), then
`instance` without its port (also `[v6]:port`); service: the label `service` (a systemd
unit name loses its `.service`). Nothing else stands for a service: an alert without one
names no service (``sentinel.refused`` says so, the rulebook logs it and heals nothing),
never "every service" (the scrape `job` is the exporter's name, not the broken service).
Other labels: the source's ``host_labels`` / ``service_labels``.

The labels are the monitored side's text, and what a rulebook hands on from ``sentinel``
becomes a variable of a playbook run (ansible-runner's extra vars file, which ansible-core
trusts as templates) or a job's ``--limit`` (a host pattern). So ``sentinel.host`` and
``sentinel.service`` are plain names only (letters, digits, ``.``, ``_``, ``-``; ``@`` in a
service), never ``all``: anything else (``{{ ... }}``, ``web*``, ``a,b``, ``!x``, a space, a
look-alike letter) is refused, the label named in ``sentinel.refused``, and the field left
empty, so a rule that forgets to test ``refused`` still has nothing to act on.
``sentinel.alertname`` is the ``alertname`` label with every other character replaced by
``_``, at most 80 characters: a word for logs and messages, never a template. Rulebooks name it by its collection name,
`sentinel.remediation.alertmanager` (ansible-rulebook finds it under
extensions/eda/plugins/event_source/ of the installed collection, as `ansible-galaxy
collection list` locates it), so no `-S` source directory is needed.

`GET /healthz` answers 200 with a small JSON status (no token needed: liveness probes of
EDA Controller or Kubernetes carry none, and it tells nothing about the alerts).

Arguments: host (default 127.0.0.1), port (required), token (bearer token that clients
must send; required when listening beyond loopback unless allow_unauthenticated is true;
empty: the environment variable named by token_env, SENTINEL_ALERT_TOKEN, if set),
host_labels, service_labels, max_body (bytes, default 1 MiB).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import ipaddress
import os
import re
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web

DOCUMENTATION = r"""
short_description: Receive Prometheus Alertmanager webhooks, one event per alert.
description:
  - Listens for Alertmanager webhook POSTs (any path) and puts one event per alert on the
    queue, with C(sentinel.host) and C(sentinel.service) worked out from the labels.
options:
  host:
    description: Address to listen on.
    type: str
    default: 127.0.0.1
  port:
    description: TCP port to listen on.
    type: int
    required: true
  token:
    description:
      - Bearer token that the client must send (Authorization header).
      - Required when O(host) is not a loopback address, unless O(allow_unauthenticated) is true.
      - Empty or unset, the value of the environment variable O(token_env) is used when it is set.
    type: str
  token_env:
    description: Environment variable that holds the token when O(token) is empty (unset or empty: no token).
    type: str
    default: SENTINEL_ALERT_TOKEN
  host_labels:
    description: Alert labels that name the host, first non-empty wins (C(instance) loses its port).
    type: list
    elements: str
    default: [host, hostname, instance]
  service_labels:
    description:
      - Alert labels that name the service, first non-empty wins (a trailing C(.service) is dropped).
      - An alert with none of them names no service and is refused, never read as every service.
    type: list
    elements: str
    default: [service]
  allow_unauthenticated:
    description: Accept alerts without a token on a non-loopback address (not recommended).
    type: bool
    default: false
  max_body:
    description: Largest accepted request body in bytes.
    type: int
    default: 1048576
"""

EXAMPLES = r"""
- name: Heal what Alertmanager reports
  hosts: all
  sources:
    - alertmanager:
        host: 127.0.0.1
        port: 9095
"""

logger = logging.getLogger(__name__)

_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<name>[^:]+))(?::\d+)?$")


HOST_LABELS = ("host", "hostname", "instance")
SERVICE_LABELS = ("service",)
# The names that may leave this source (playbooks/remediate_alert.yml checks the same): no
# template, pattern or list character can be written with them. \Z, not $: "web1\n" is no name.
_PLAIN_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")
_PLAIN_SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")
# Plain names that are not one inventory host: the pattern for every host, and the controller itself.
_EVERY_HOST = {"all", "localhost"}
_NOT_WORD = re.compile(r"[^A-Za-z0-9_.:@-]")


def alert_host(labels: dict[str, Any], keys: Sequence[str] = HOST_LABELS) -> str:
    """The host an alert is about: the first label of ``keys`` that is set, without a port."""
    for key in keys:
        value = str(labels.get(key) or "").strip()
        if not value:
            continue
        match = _PORT.match(value)
        if match:
            return match.group("v6") or match.group("name")
        return value  # a bare IPv6 address or something unusual: keep it whole
    return ""


def alert_service(labels: dict[str, Any], keys: Sequence[str] = SERVICE_LABELS) -> str:
    """The service an alert names: the first label of ``keys`` that is set (``nginx.service``
    is ``nginx``); ``""`` when it names none."""
    for key in keys:
        value = str(labels.get(key) or "").strip()
        if value.endswith(".service") and len(value) > len(".service"):
            value = value[:-len(".service")]
        if value:
            return value
    return ""


def _shown(value: str) -> str:
    """A label's value for a message: plain characters kept, the rest as ``_``, cut short."""
    return _NOT_WORD.sub("_", value)[:60]


def alert_name(labels: dict[str, Any]) -> str:
    """The alert's name as one plain word (other characters ``_``, at most 80)."""
    return _NOT_WORD.sub("_", str(labels.get("alertname") or ""))[:80]


def name_problem(host: str, service: str, host_keys: Sequence[str] = HOST_LABELS,
                 service_keys: Sequence[str] = SERVICE_LABELS) -> str:
    """Why the host or service an alert names is not a plain name (``""``: both are, or empty)."""
    problems = []
    if host and (not _PLAIN_HOST.match(host) or host.lower() in _EVERY_HOST):
        problems.append(f"the host label ({', '.join(host_keys)}) is {_shown(host)!r}, not one plain host name "
                        "(letters, digits, '.', '_', '-'; no pattern, list or template; not all or localhost)")
    if service and not _PLAIN_SERVICE.match(service):
        problems.append(f"the service label ({', '.join(service_keys)}) is {_shown(service)!r}, not one plain "
                        "service name (letters, digits, '.', '_', '@', '-'; at most 64)")
    if not problems:
        return ""
    return "; ".join(problems) + ": nothing is remediated"


def refusal(host: str, service: str, host_keys: Sequence[str] = HOST_LABELS,
            service_keys: Sequence[str] = SERVICE_LABELS) -> str:
    """Why an alert cannot be acted on (``""``: it can): it must name a host and a service,
    each a plain name."""
    bad = name_problem(host, service, host_keys, service_keys)
    if bad:
        return bad
    missing = []
    if not host:
        missing.append(f"host (labels {', '.join(host_keys)})")
    if not service:
        missing.append(f"service (labels {', '.join(service_keys)})")
    if not missing:
        return ""
    return ("the alert names no " + " and no ".join(missing)
            + ": nothing is remediated (give the alert rule the label, e.g. labels: {service: nginx})")


def events_from_payload(payload: Any, host_keys: Sequence[str] = HOST_LABELS,
                        service_keys: Sequence[str] = SERVICE_LABELS) -> list[dict[str, Any]]:
    """One event per alert of an Alertmanager webhook payload; ValueError if it is not one.

    Alerts that come to the same thing (host, service, status and refusal) make one event, the
    first, with ``duplicates`` counting the rest: each event is a job, and a payload of
    thousands of copies of one alert (well under the size limit) would otherwise queue
    thousands of runs for one host and service."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload: no `alerts` list")
    events = []
    seen: dict[tuple, dict] = {}
    for alert in payload["alerts"]:
        if not isinstance(alert, dict):
            continue
        labels = alert.get("labels") if isinstance(alert.get("labels"), dict) else {}
        host, service = alert_host(labels, host_keys), alert_service(labels, service_keys)
        refused = refusal(host, service, host_keys, service_keys)
        if name_problem(host, service, host_keys, service_keys):
            host, service = "", ""   # nothing of a refused name is handed on
        status = str(alert.get("status") or payload.get("status") or "")
        key = (host, service, status, refused)
        if key in seen:
            seen[key]["duplicates"] += 1
            continue
        seen[key] = {
            "alert": alert,
            "sentinel": {
                "host": host,
                "service": service,
                "alertname": alert_name(labels),
                "status": status,
                "refused": refused,
            },
            "receiver": payload.get("receiver", ""),
            "group_key": payload.get("groupKey", ""),
            "external_url": payload.get("externalURL", ""),
            "duplicates": 0,
        }
        events.append(seen[key])
    return events


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _make_app(queue: asyncio.Queue, token: str | None, max_body: int, host_keys: Sequence[str] = HOST_LABELS,
              service_keys: Sequence[str] = SERVICE_LABELS) -> web.Application:
    started = time.monotonic()
    counts = {"alerts": 0, "requests": 0}

    async def health(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "uptime_seconds": round(time.monotonic() - started, 1),
                                  "webhooks": counts["requests"], "alerts": counts["alerts"]})

    async def receive(request: web.Request) -> web.Response:
        if token:
            sent = request.headers.get("Authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
                return web.json_response({"error": "unauthorized"}, status=401)
        try:
            payload = json.loads(await request.read())
            events = events_from_payload(payload, host_keys, service_keys)
        except (ValueError, UnicodeDecodeError) as exc:
            return web.json_response({"error": str(exc)[:200]}, status=400)
        for event in events:
            if event["sentinel"]["refused"] and event["sentinel"]["status"] == "firing":
                logger.warning("alertmanager: alert %s refused: %s",
                               event["sentinel"]["alertname"] or "?", event["sentinel"]["refused"])
            await queue.put(event)
        counts["requests"] += 1
        counts["alerts"] += len(events)
        logger.info("alertmanager: %d alert(s) received on %s", len(events), request.path)
        return web.json_response({"accepted": len(events)}, status=202)

    app = web.Application(client_max_size=max_body)
    app.router.add_get("/healthz", health)
    app.router.add_post("/{tail:.*}", receive)
    return app


def _labels_arg(args: dict[str, Any], name: str, default: Sequence[str]) -> tuple[str, ...]:
    value = args.get(name)
    if value is None or value == "":
        return tuple(default)
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"alertmanager: `{name}` must be a list of label names, got {value!r}")
    return tuple(value)


async def main(queue: asyncio.Queue, args: dict[str, Any]) -> None:
    if "port" not in args:
        raise ValueError("alertmanager: the `port` argument is required")
    host = str(args.get("host") or "127.0.0.1")
    # The token may come from the environment: ansible-rulebook's --env-vars aborts when
    # the variable is unset, so an optional secret cannot go through it.
    token = args.get("token") or os.environ.get(str(args.get("token_env") or "SENTINEL_ALERT_TOKEN")) or None
    host_keys = _labels_arg(args, "host_labels", HOST_LABELS)
    service_keys = _labels_arg(args, "service_labels", SERVICE_LABELS)
    if not token and not _is_loopback(host) and not args.get("allow_unauthenticated", False):
        raise ValueError(f"alertmanager: listening on {host} needs a `token` (or allow_unauthenticated: true); "
                         "without one anyone who reaches the port can start remediations")
    app = _make_app(queue, token, int(args.get("max_body", 1024 * 1024)), host_keys, service_keys)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, int(args["port"]))
    await site.start()
    logger.info("alertmanager: listening on %s:%s", args.get("host", "127.0.0.1"), args["port"])
    try:
        await asyncio.Future()  # serve until ansible-rulebook cancels this source
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    # Manual check: python alertmanager.py 9095, then POST a payload and watch the events.
    import sys

    class _Printer:
        async def put(self, event: dict) -> None:
            print(json.dumps(event), flush=True)

    asyncio.run(main(_Printer(), {"port": int(sys.argv[1]) if len(sys.argv) > 1 else 9095}))  # type: ignore[arg-type]
