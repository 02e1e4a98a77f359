# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Holds: services the heal action leaves alone (budget spent, flapping) until a human clears
them. They live in the incident journal (``<artifacts>/journal/<host>.jsonl``) as ``held``
records; clearing appends a ``cleared`` record, as ``remediate_clear_holds`` does."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

_SAFE = re.compile(r"[^A-Za-z0-9_.@-]")


class HoldError(LookupError):
    """No such hold, or the journal cannot be written."""


def _records(path: Path) -> list[dict]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line
        if isinstance(record, dict):
            out.append(record)
    return out


def current(journal_dir: Path) -> list[dict]:
    """Every hold not cleared since: ``{host, service, reason, since}``."""
    holds = []
    for path in sorted(journal_dir.glob("*.jsonl")):
        open_holds: dict[str, dict] = {}
        for record in _records(path):
            service = str(record.get("service") or "")
            if record.get("kind") == "held" and service not in open_holds:
                open_holds[service] = {"host": str(record.get("host") or path.stem), "service": service,
                                       "reason": str(record.get("reason") or ""), "since": record.get("ts")}
            elif record.get("kind") == "cleared":
                open_holds.pop(service, None)
        holds.extend(open_holds.values())
    return holds


def clear(journal_dir: Path, host: str, service: str, by: str) -> dict:
    """Append the ``cleared`` record of ``host``'s hold on ``service``; the hold it cleared."""
    found = next((h for h in current(journal_dir) if h["host"] == host and h["service"] == service), None)
    if found is None:
        raise HoldError(f"{host} holds no {service}: nothing to clear (`holds list` shows the holds)")
    path = journal_dir / (_SAFE.sub("_", host) + ".jsonl")
    line = json.dumps({"ts": time.time(), "kind": "cleared", "host": host, "service": service, "by": by},
                      sort_keys=True) + "\n"
    try:
        with open(path, "rb") as handle:  # a torn last line is closed first, never glued to this record
            handle.seek(max(path.stat().st_size - 1, 0))
            if handle.read(1) not in (b"", b"\n"):
                line = "\n" + line
    except OSError:
        pass
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise HoldError(f"cannot write the incident journal {path}: {exc}") from exc
    return found
