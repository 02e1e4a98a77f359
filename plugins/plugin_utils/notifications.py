# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who is told about what: escalation notices routed per reason, and what came of sending them.

The role sends the notices with the collections SREs already use (community.general.slack,
community.general.mail, ansible.builtin.uri for a webhook and PagerDuty's Events API v2);
this module only decides which outcome goes to which channel, words the messages, and
turns the send results into report records and warnings. A failed send is a warning and
a record in the report, never a failed heal.
"""
from __future__ import annotations

import re

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sentinel.remediation.plugins.plugin_utils.report import (
    ESCALATION_KINDS,
    escalation_of,
    printable,
)

CHANNELS = ("webhook", "slack", "pagerduty", "mail")
ROUTE_KEYS = ESCALATION_KINDS + ("waiting_approval",)
ALL = "all"
_MESSAGE_MAX = 3000


class NotificationError(ValueError):
    """Bad notification settings (an unknown reason or channel, a channel not configured)."""


def check_routes(routes: Any, configured: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every route key with the channels it goes to (``all`` expanded to the configured ones).

    ``routes`` maps an escalation kind (or ``waiting_approval``, or ``default`` for the kinds
    not named) to a list of channels; a kind left out goes to ``default`` when given, else to
    every configured channel (escalations) or to none (waiting_approval)."""
    if not isinstance(routes, Mapping):
        raise NotificationError(f"remediate_notify_routes must be a mapping of reason -> [channels], got {routes!r}")
    webhook = configured.get("webhook")
    if isinstance(webhook, str) and webhook and not re.match(r"^https?://[^\s/]+", webhook):
        raise NotificationError(f"remediate_webhook_url must be an http(s) URL, got remediate_webhook_url={webhook}")
    ready = [c for c in CHANNELS if configured.get(c)]
    unknown = sorted(str(k) for k in routes if k not in ROUTE_KEYS and k != "default")
    if unknown:
        raise NotificationError(f"remediate_notify_routes: unknown reason(s) {', '.join(unknown)} "
                                f"(known: {', '.join(ROUTE_KEYS)}, default)")

    def expand(key: str, value: Any) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise NotificationError(f"remediate_notify_routes.{key} must be a list of channels, got {value!r}")
        out: list[str] = []
        for channel in value:
            channel = str(channel)
            if channel == ALL:
                out += [c for c in ready if c not in out]
            elif channel not in CHANNELS:
                raise NotificationError(f"remediate_notify_routes.{key}: unknown channel {channel!r} "
                                        f"(known: {', '.join(CHANNELS)}, all)")
            elif not configured.get(channel):
                raise NotificationError(f"remediate_notify_routes.{key} names {channel}, which is not configured "
                                        f"({_SETTING[channel]} is empty)")
            elif channel not in out:
                out.append(channel)
        return out

    fallback = expand("default", routes["default"]) if "default" in routes else None
    result = {}
    for key in ROUTE_KEYS:
        if key in routes:
            result[key] = expand(key, routes[key])
        elif fallback is not None:
            result[key] = list(fallback)
        else:
            result[key] = list(ready) if key != "waiting_approval" else []
    return result


_SETTING = {"webhook": "remediate_webhook_url", "slack": "remediate_notify_slack.token",
            "pagerduty": "remediate_notify_pagerduty.routing_key", "mail": "remediate_notify_mail.to"}


def route_key(outcome: Mapping) -> str:
    """The key an outcome is routed by: its escalation kind, ``waiting_approval``, or ``""``."""
    if outcome.get("repeat_notice"):
        return ""  # notified before, unchanged: the heal action reminds only after notify_remind
    if outcome.get("state") == "waiting_approval":
        return "waiting_approval"
    if outcome.get("state") == "degraded":
        return "needs_human"  # slow, not down: reported for a human, never restarted
    return escalation_of(outcome)


def _as_slack_text(text: str) -> str:
    """Slack reads ``<...>`` in a message as a link, a mention (``<!channel>``, ``<@U1>``) or a
    command, and ``&`` as the start of an entity; community.general.slack sends the text as it
    is. Escaped as Slack documents, host text stays text: a diagnosis cannot page a channel or
    put a link in front of the approver."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int = _MESSAGE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _message(host: str, outcome: Mapping, kind: str) -> tuple[str, str]:
    service = outcome.get("service") or "?"
    if kind == "waiting_approval":
        title = f"sentinel.remediation: {service} on {host} waits for approval ({outcome.get('approval_id') or '?'})"
    else:
        title = f"sentinel.remediation could not heal {service} on {host} ({kind})"
    lines = [title]
    for label, value in (("reason", outcome.get("reason")), ("diagnosis", outcome.get("diagnosis")),
                         ("decided by", outcome.get("approved_by"))):
        if value:
            lines.append(f"{label}: {value}")
    tried = [c.get("command", "") for c in outcome.get("commands") or [] if isinstance(c, Mapping)
             and c.get("rc") is not None]
    if tried:
        lines.append("commands tried: " + "; ".join(str(t) for t in tried))
    planned = [c.get("command", "") for c in outcome.get("planned") or [] if isinstance(c, Mapping)]
    if planned and kind == "waiting_approval":
        lines.append("plan: " + "; ".join(str(p) for p in planned))
        lines.append(f"approve: sentinel-remediate approvals approve {outcome.get('approval_id') or 'ID'}")
    refused = [r.get("command", "") for r in outcome.get("refused") or [] if isinstance(r, Mapping)]
    if refused:
        lines.append("refused by the policy: " + "; ".join(str(r) for r in refused))
    if outcome.get("llm_error"):
        lines.append(f"llm error: {outcome.get('llm_error')}")
    return printable(title), _clip("\n".join(printable(line) for line in lines))


def notices(host: str, outcomes: Sequence[Mapping], routes: Mapping[str, Sequence[str]],
            now: str = "", receiver: str = "sentinel") -> dict:
    """The notices of one host: ``{notices: [...], webhook: <Alertmanager-style body or None>}``.

    A notice is ``{channel, host, service, kind, state, severity, title, text, dedup_key,
    details}``; the webhook gets one body per host holding every outcome routed to it."""
    out: list[dict] = []
    alerts: list[dict] = []
    for outcome in outcomes or []:
        if not isinstance(outcome, Mapping):
            continue
        kind = route_key(outcome)
        if not kind:
            continue
        title, text = _message(host, outcome, kind)
        service = str(outcome.get("service") or "?")
        severity = "warning" if kind == "waiting_approval" else "critical"
        details = {"host": host, "service": service, "state": str(outcome.get("state")), "reason": kind,
                   "description": printable(outcome.get("reason") or ""),
                   "diagnosis": printable(outcome.get("diagnosis") or ""),
                   "signature": str(outcome.get("signature") or ""),
                   "approval_id": str(outcome.get("approval_id") or ""),
                   "approved_by": printable(outcome.get("approved_by") or ""),
                   "commands_tried": "; ".join(str(c.get("command", "")) for c in outcome.get("commands") or []
                                               if isinstance(c, Mapping) and c.get("rc") is not None)}
        for channel in routes.get(kind) or []:
            out.append({"channel": channel, "host": host, "service": service, "kind": kind,
                        "state": details["state"], "severity": severity,
                        "title": _as_slack_text(title) if channel == "slack" else title,
                        "text": _as_slack_text(text) if channel == "slack" else text,
                        "dedup_key": f"sentinel/{host}/{service}/{details['signature'] or kind}",
                        "details": details})
            if channel == "webhook":
                name = "SentinelRemediationApprovalNeeded" if kind == "waiting_approval" else \
                    "SentinelRemediationEscalated"
                alerts.append({"status": "firing",
                               "labels": {"alertname": name, "instance": host, "service": service,
                                          "severity": severity, "signature": details["signature"], "reason": kind},
                               "annotations": {"summary": title, "description": details["description"],
                                               "diagnosis": details["diagnosis"],
                                               "approved_by": details["approved_by"],
                                               "commands_tried": details["commands_tried"]},
                               "startsAt": now})
    webhook = None
    if alerts:
        webhook = {"receiver": receiver, "status": "firing",
                   "commonLabels": {"alertname": alerts[0]["labels"]["alertname"], "instance": host},
                   "alerts": alerts}
    return {"notices": out, "webhook": webhook}


def _failure(result: Any) -> str:
    """Why a registered send result failed ("" when it was sent)."""
    if not isinstance(result, Mapping):
        return "no result"
    if result.get("failed"):
        return " ".join(str(result.get("msg") or "failed").split())[:300]
    status = result.get("status")
    if isinstance(status, int) and not 200 <= status < 300:
        return f"HTTP {status}: " + " ".join(str(result.get("msg") or "").split())[:300]
    return ""


def summarise(notice_list: Sequence[Mapping], results: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """Report records ``{host, service, kind, channel, status: sent|failed|skipped, error}`` and
    warnings for the failed ones, from the registered results of each channel's task (a loop's
    results carry their notice as ``item``; the webhook's single result covers all its notices)."""
    by_channel: dict[str, list[Mapping]] = {}
    for channel, value in (results or {}).items():
        if isinstance(value, Mapping) and isinstance(value.get("results"), list):
            by_channel[channel] = [r for r in value["results"] if isinstance(r, Mapping)]
        elif isinstance(value, Mapping):
            by_channel[channel] = [value]
        elif isinstance(value, list):
            by_channel[channel] = [r for r in value if isinstance(r, Mapping)]
    records: list[dict] = []
    warnings: list[str] = []
    for notice in notice_list or []:
        channel = notice.get("channel")
        got = by_channel.get(channel) or []
        if channel == "webhook":
            result = got[0] if got else None
        else:
            result = next((r for r in got if isinstance(r.get("item"), Mapping)
                           and r["item"].get("dedup_key") == notice.get("dedup_key")
                           and r["item"].get("channel") == channel), None)
        if isinstance(result, Mapping) and result.get("skipped"):
            status, error = "skipped", str(result.get("skip_reason") or "skipped")
        else:
            error = _failure(result)
            status = "failed" if error else "sent"
        records.append({"host": notice.get("host"), "service": notice.get("service"), "kind": notice.get("kind"),
                        "channel": channel, "status": status, "error": printable(error) if status == "failed" else ""})
        if status == "failed":
            warnings.append(f"sentinel.remediation.notifications: the {channel} notification for "
                            f"{notice.get('service')} on {notice.get('host')} ({notice.get('kind')}) failed: "
                            f"{printable(error)}")
    return records, warnings
