# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The incident journal: what was about to run and what came of it, durable on the controller.

Before the commands of an attempt go to a host, their intent (host, service, attempt, each
argv with its verdict and privilege, who approved) is appended and fsynced; after, the
results. A run killed in between leaves an intent without a result: the next run finds it
(``interrupted``), verifies first, and counts that plan as having run (its outcome unknown),
so it is never re-run blindly.

One JSON object per line, one file per inventory host (``<dir>/<host>.jsonl``), opened with
O_APPEND and fsynced after each record, so concurrent writers never interleave a line and
nothing acknowledged is lost on a crash. Each record carries ``sum``, a SHA-256 prefix of
its other fields: a reader skips a line that does not parse or whose sum does not match
(torn, or garbage written into the file). A writer that finds the file ending in the middle
of a line (a writer killed mid-record, a full disk) first copies that torn tail to
``<host>.jsonl.torn`` and ends the line, so the next record is never glued to it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

MAX_READ_BYTES = 4 * 1024 * 1024  # the tail of a journal read on each run
_SAFE = re.compile(r"[^A-Za-z0-9_.@-]")


class JournalError(OSError):
    """The journal could not be written (the message names the file)."""


class Journal:
    """One host's journal file."""

    def __init__(self, directory: str, host: str):
        self.path = os.path.join(directory, _SAFE.sub("_", host) + ".jsonl")
        self.directory = directory

    def append(self, record: Mapping[str, Any]) -> None:
        body = {"ts": time.time(), **record}
        body.pop("sum", None)
        line = json.dumps(dict(body, sum=checksum(body)), sort_keys=True, default=str) + "\n"
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                data = self._after_torn_tail(fd) + line.encode("utf-8")
                if os.write(fd, data) != len(data):
                    raise OSError("short write")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise JournalError(f"cannot write the incident journal {self.path}: {exc}") from exc

    def _after_torn_tail(self, fd: int) -> bytes:
        """``b"\\n"`` when the file ends inside a line, after keeping that torn tail aside."""
        size = os.fstat(fd).st_size
        if not size or os.pread(fd, 1, size - 1) == b"\n":
            return b""
        start = max(size - MAX_READ_BYTES, 0)
        tail = os.pread(fd, size - start, start)
        cut = tail.rfind(b"\n") + 1
        torn = tail[cut:]
        aside = os.open(self.path + ".torn", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(aside, json.dumps({"offset": start + cut, "kept": time.time(),
                                        "bytes": torn.decode("utf-8", "replace")}).encode("utf-8") + b"\n")
        finally:
            os.close(aside)
        return b"\n"

    def records(self) -> list[dict]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(size - MAX_READ_BYTES, 0))
                raw = handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise JournalError(f"cannot read the incident journal {self.path}: {exc}") from exc
        return parse_lines(raw)


def checksum(body: Mapping[str, Any]) -> str:
    """The ``sum`` of a record: a SHA-256 prefix of its canonical JSON without ``sum``."""
    canonical = json.dumps({k: v for k, v in body.items() if k != "sum"}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def parse_lines(raw: str) -> list[dict]:
    """The journal's sound records: lines that parse as an object and whose ``sum`` matches
    (records written before sums existed have none and are taken as they are)."""
    out = []
    for line in raw.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a torn line (killed mid-write) or the cut start of the tail
        if not isinstance(item, dict):
            continue
        if "sum" in item and item["sum"] != checksum(item):
            continue  # garbage that happens to parse: never taken for a record
        out.append(item)
    return out


def intent(run: str, service: str, attempt: int, commands: Sequence[Mapping], approval: str,
           source: str, signature: str, error: str = "", diagnosis: str = "") -> dict:
    return {"kind": "intent", "run": run, "service": service, "attempt": attempt, "source": source,
            "signature": signature, "approval": approval, "error": error, "diagnosis": diagnosis,
            "commands": [{"command": c.get("command"), "argv": c.get("argv"), "verdict": c.get("verdict"),
                          "become": bool(c.get("become"))} for c in commands]}


def result(run: str, service: str, attempt: int, results: Sequence[Mapping], healthy: bool | None,
           error: str) -> dict:
    return {"kind": "result", "run": run, "service": service, "attempt": attempt, "healthy": healthy,
            "error": error, "results": [_result_entry(r) for r in results]}


def _result_entry(result: Mapping) -> dict:
    """One command's result as the journal keeps it: rc, skipped, and whether it ran confined
    and under which rules (and what the confinement refused, if anything)."""
    entry = {"rc": result.get("rc"), "skipped": bool(result.get("skipped"))}
    if "confined" in result:
        entry.update(confined=bool(result.get("confined")), confinement=str(result.get("confinement") or ""))
    if result.get("denied"):
        entry["denied"] = str(result["denied"])
    return entry


def conditional(run: str, fixes: Mapping[str, Sequence[Mapping]]) -> dict:
    """The remembered fixes sent with a health check, each to run only where the host finds
    the failure it healed: ``{service: [{"signature", "commands"}]}``. Until a ``resolved``
    record (nothing ran) or the attempt's own intent and result follow, any of them may have run."""
    return {"kind": "conditional", "run": run,
            "services": {service: [{"signature": fix.get("signature"),
                                    "commands": [{"command": c.get("command"), "argv": c.get("argv"),
                                                  "verdict": c.get("verdict"), "become": bool(c.get("become"))}
                                                 for c in fix.get("commands") or []]}
                                   for fix in items]
                         for service, items in fixes.items()}}


def resolved(run: str, services: Sequence[str]) -> dict:
    """The services of a ``conditional`` record for which no fix ran."""
    return {"kind": "resolved", "run": run, "services": list(services)}


def conditional_intent(record: Mapping, service: str, fixes: Sequence[Mapping]) -> dict:
    """A ``conditional`` record read as the intent of attempt 1: every command it may have run."""
    commands = [c for fix in fixes if isinstance(fix, Mapping) for c in fix.get("commands") or []
                if isinstance(c, Mapping)]
    return {"kind": "intent", "conditional": True, "run": record.get("run"), "service": service, "attempt": 1,
            "source": "memory", "signature": "", "approval": "none", "commands": commands}


def interrupted(records: Sequence[Mapping], service: str) -> dict | None:
    """The last intent for ``service`` that has no result after it (a run killed mid-attempt),
    unless a later record closed the incident."""
    pending = None
    for record in records:
        kind = record.get("kind")
        if kind == "conditional":
            fixes = record.get("services") if isinstance(record.get("services"), Mapping) else {}
            if fixes.get(service):
                pending = conditional_intent(record, service, fixes[service])
            continue
        if kind == "resolved":
            if pending is not None and pending.get("run") == record.get("run") and \
                    service in (record.get("services") or ()):
                pending = None
            continue
        if record.get("service") != service:
            continue
        if kind == "intent":
            pending = record
        elif kind == "closed" and pending is not None:
            pending = None
        elif kind == "result" and pending is not None and \
                (record.get("run"), record.get("attempt")) == (pending.get("run"), pending.get("attempt")):
            pending = None
    return pending


def unrecorded_success(records: Sequence[Mapping], service: str) -> tuple[dict, dict] | None:
    """``(intent, result)`` of a plan that healed ``service`` (verified healthy) in a run that
    ended before it wrote the episode and closed the incident (a controller killed between
    the verification and the memory write), or None. A later intent or a close ends it."""
    intents: dict = {}
    found = None
    for record in records:
        if record.get("service") != service:
            continue
        kind = record.get("kind")
        if kind == "intent":
            intents[(record.get("run"), record.get("attempt"))] = record
            found = None
        elif kind == "result":
            start = intents.get((record.get("run"), record.get("attempt")))
            found = (dict(start), dict(record)) if record.get("healthy") is True and start else None
        elif kind == "closed":
            found = None
    return found
