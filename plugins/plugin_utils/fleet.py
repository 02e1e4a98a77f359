# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet plans made for one host, made right for another.

Hosts with the same failure signature share one plan, planned from a representative
host's evidence. A command holding a value that is only true on that host (the PID that
holds port 80) must not run elsewhere as is: ``localize`` maps such values to this host's
own (from its evidence), fills any ``{placeholder}`` left in the command from this host's
evidence, and refuses a command it cannot make right. ``generalize`` does the reverse for
memory: remembered commands keep ``{port_owner_pid:N}`` instead of a PID that will not
mean the same thing next time. The policy classifies the result again afterwards.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import (
    PlaceholderError,
    resolve_placeholders,
)

PLACEHOLDER = re.compile(r"\{[a-z_]+(?::[^{}\s]+)?\}")  # {port_owner_pid:80}: a value the evidence fills


def host_values(evidence, service: str, ports: Iterable[int]) -> dict[str, str]:
    """Host-specific values the evidence fixes: ``{"{port_owner_pid:80}": "310"}``."""
    values = {}
    for port in ports or ():
        placeholder = f"{{port_owner_pid:{int(port)}}}"
        try:
            values[placeholder] = resolve_placeholders(placeholder, evidence, service)
        except (PlaceholderError, ValueError, TypeError):
            continue
    return values


def _word(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.{:/-])" + re.escape(value) + r"(?![\w.}/-])")


def localize(commands: Sequence[Mapping], from_evidence, to_evidence, service: str,
             ports: Iterable[int] = ()) -> list[dict]:
    """``commands`` (verdict dicts or texts) rewritten for the host of ``to_evidence``.

    Returns dicts with the same keys; a changed command gets ``localized_from`` (the
    original text); one that cannot be made right gets ``verdict`` ``reject``, ``argv``
    None and a reason. Callers classify the commands again with the policy.
    """
    ports = list(ports or ())
    return localize_values(commands, host_values(from_evidence, service, ports), to_evidence, service, ports)


def localize_values(commands: Sequence[Mapping], theirs: Mapping[str, str], to_evidence, service: str,
                    ports: Iterable[int] = ()) -> list[dict]:
    """``localize`` with the planned host's values already taken (``host_values``)."""
    mine = host_values(to_evidence, service, list(ports or ()))
    out = []
    for entry in commands or []:
        item = dict(entry) if isinstance(entry, Mapping) else {"command": str(entry)}
        original = text = str(item.get("command") or "")
        problem = None
        for placeholder, value in theirs.items():
            if mine.get(placeholder) == value or not _word(value).search(text):
                continue
            if placeholder not in mine:
                problem = f"{value} is {placeholder} on the planned host; this host has none"
                break
            text = _word(value).sub(mine[placeholder], text)
        if problem is None and PLACEHOLDER.search(text):
            try:
                text = resolve_placeholders(text, to_evidence, service)
            except PlaceholderError as exc:
                problem = f"cannot fill a placeholder from this host's evidence: {exc}"
        if problem is not None:
            item.update({"verdict": "reject", "argv": None,
                         "reasons": list(item.get("reasons") or []) + [problem]})
        elif text != original:
            item.update({"command": text, "localized_from": original})
        out.append(item)
    return out


def generalize(commands: Sequence[Mapping], evidence, service: str, ports: Iterable[int] = ()) -> list[dict]:
    """Commands with this host's specific values replaced by their placeholders."""
    values = host_values(evidence, service, ports)
    out = []
    for entry in commands or []:
        item = dict(entry) if isinstance(entry, Mapping) else {"command": str(entry)}
        text = str(item.get("command") or "")
        for placeholder, value in values.items():
            text = _word(value).sub(placeholder, text)
        item["command"] = text
        out.append(item)
    return out
