# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evidence read as text: the evidence flattened to ``{key: text}``, the listening sockets
it shows and the ports services normally hold.

The base both the fact extractor (failure_facts) and the signature (signature) read from, so
neither imports the other backwards. Runs on hosts: standard library only.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

# Ports a service normally listens on; the owner of these ports is a key fact.
SERVICE_PORTS: dict[str, tuple[int, ...]] = {
    "nginx": (80, 443),
    "apache2": (80, 443),
    "httpd": (80, 443),
    "redis": (6379,),
    "redis-server": (6379,),
    "ssh": (22,),
    "sshd": (22,),
    "postgresql": (5432,),
    "mysql": (3306,),
}

_SS_LINE = re.compile(
    r"^\s*(?:tcp\s+|udp\s+)?LISTEN\s+\d+\s+\d+\s+(?P<local>\S+):(?P<port>\d+)\s+\S+"
    r"(?:\s+users:\(\((?P<users>.*)\)\))?", re.IGNORECASE)
_SS_USER = re.compile(r"\"(?P<name>[^\"]+)\",pid=(?P<pid>\d+)")
# The evidence module's listener lines: "0.0.0.0:80 held by python3 (pid 90), nginx (pid 5, 6)"
# or "0.0.0.0:80 listening as user nobody (holder not visible; that user runs python3 (pid 90))".
_HELD_LINE = re.compile(
    r"^\s*(?P<local>\S+):(?P<port>\d+)\s+(?:held by (?P<held>.+)|listening as user \S+ \(holder not visible; "
    r"that user runs (?P<likely>.+)\))\s*$")
_HOLDER = re.compile(r"(?P<name>[\w.:@/+-]+) \(pid (?P<pids>[\d, .]+)\)")


def evidence_texts(evidence: Mapping | str | None) -> dict[str, str]:
    """Flatten evidence into ``{key: text}`` (nested keys joined with dots)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value) -> None:
        if value is None:
            return
        if isinstance(value, Mapping):
            for key in sorted(value, key=str):
                walk(f"{prefix}.{key}" if prefix else str(key), value[key])
        elif isinstance(value, (list, tuple)):
            if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
                out[prefix or "text"] = "\n".join(str(v) for v in value)
            else:
                for index, item in enumerate(value):
                    walk(f"{prefix}[{index}]", item)
        else:
            out[prefix or "text"] = str(value)

    walk("", evidence if not isinstance(evidence, (str, bytes)) else {"text": evidence})
    return out


def listeners(evidence: Mapping | str | None) -> list[dict]:
    """Listening sockets found in ``ss -ltnp`` output anywhere in the evidence.

    Each item: ``{"port": int, "address": str, "process": str | None, "pid": int | None}``.
    """
    found: list[dict] = []
    seen = set()
    for text in evidence_texts(evidence).values():
        for line in text.splitlines():
            held = _HELD_LINE.match(line)
            if held:
                holders = held.group("held") or held.group("likely") or ""
                for holder in _HOLDER.finditer(holders):
                    for pid in re.findall(r"\d+", holder.group("pids")):
                        item = {"port": int(held.group("port")), "address": held.group("local"),
                                "process": holder.group("name"), "pid": int(pid),
                                "likely": held.group("likely") is not None}
                        key = (item["port"], item["address"], item["process"], item["pid"])
                        if key not in seen:
                            seen.add(key)
                            found.append(item)
                continue
            match = _SS_LINE.match(line)
            if not match:
                continue
            users = list(_SS_USER.finditer(match.group("users") or ""))
            entry_users = users or [None]
            for user in entry_users:
                item = {
                    "port": int(match.group("port")),
                    "address": match.group("local"),
                    "process": user.group("name") if user else None,
                    "pid": int(user.group("pid")) if user else None,
                    "likely": False,
                }
                key = (item["port"], item["address"], item["process"], item["pid"])
                if key not in seen:
                    seen.add(key)
                    found.append(item)
    return found
