# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
""""Restore the last known-good version": a plan source ahead of memory and the model.

The host compares a failing service's configuration with the baseline it recorded while the
service was healthy (``module_utils/known_good.py``); what drifted arrives in the evidence
(``known_good.drift``: path, change, redacted diff, the staged known-good copy, the digest the
bad version is kept under). When the drift explains the failure, the first attempt copies
the known-good version back (``cp -p``, the policy judges it like any command) and restarts
the service. Drift explains the failure when the failure names the drifted file (its path or
file name in the health error, the config test's output, the status, the journal or the
logs), or the service's config test fails and the file is part of its configuration.

A restore never runs ahead when it would take out a setting about security: a line the drift
added (now in the file, not in the known-good version) that speaks of TLS, certificates,
verification, authentication, keys, secrets or who may do what. Such a drift is often a
deliberate tightening (a team turned on certificate verification, and the failure is that the
certificate has expired); going back to known-good would heal the service by weakening it. A
diff that cannot be read whole (binary, cut) is treated the same way. Those drifts stay in the
evidence for the model and the human.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

SOURCE = "known_good"
_RC = re.compile(r"^rc (\d+)$", re.M)
_TEXT_KEYS = ("config_test", "config_context", "status", "journal", "logs", "named_paths")
# What a configuration line about security speaks of (words, not values): TLS and certificates,
# verification, authentication and credentials, and access rules.
_SECURITY = re.compile(
    r"(?<![a-z])(ssl\w*|tls\w*|https|verif\w*|cert\w*|ca_?file|ca_?path|rootcert|crl\w*|cipher\w*|key\w*|"
    r"auth\w*|passw\w*|secret\w*|token\w*|credential\w*|scram\w*|md5|gss\w*|hba|trust\w*|"
    r"permi\w*|allow\w*|deny\w*|acl\w*|requir\w*|secur\w*|protect\w*|privat\w*|sandbox\w*|umask|"
    r"chroot|user\w*|group\w*|owner\w*|login\w*|sudo\w*)(?![a-z])", re.I)


def weakens_security(diff: str) -> bool:
    """Whether going back to known-good would take out a security setting the drift added (or
    the diff cannot be read whole to tell)."""
    text = str(diff or "")
    if not text or text.startswith("binary") or "(diff cut at" in text or "not kept" in text:
        return True
    return any(_SECURITY.search(line[1:]) for line in text.splitlines()
               if line.startswith("+") and not line.startswith("+++"))


def _texts(error: str, evidence: Mapping) -> str:
    parts = [error or ""]
    for key in _TEXT_KEYS:
        value = evidence.get(key)
        if isinstance(value, Mapping):
            parts.extend(f"{k} {v}" for k, v in value.items())
        elif value:
            parts.append(str(value))
    return "\n".join(parts)


def config_test_failed(evidence: Mapping) -> bool:
    """Whether the evidence's config test ran and exited non-zero."""
    found = _RC.search(str(evidence.get("config_test") or ""))
    return bool(found and found.group(1) != "0")


def explained(error: str, evidence: Mapping) -> list[dict]:
    """The drifted files the failure is explained by, each with a staged known-good copy."""
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    drift = [d for d in (known or {}).get("drift") or [] if isinstance(d, Mapping)] if isinstance(known, Mapping) else []
    texts = _texts(error, evidence)
    failed_test = config_test_failed(evidence)
    named, unnamed = [], []
    for item in drift:
        path = str(item.get("path") or "")
        if item.get("change") not in ("modified", "missing") or not item.get("restore") or not path.startswith("/"):
            continue
        if item.get("change") == "modified" and weakens_security(item.get("diff")):
            continue  # never ahead of a human: the drift may be a deliberate tightening
        if path in texts or re.search(r"(?<![\w.-])" + re.escape(os.path.basename(path)) + r"(?![\w-])", texts):
            named.append(dict(item))
        else:
            unnamed.append(dict(item))
    # The files the failure names; only when it names none does a failed config test stand for
    # every drifted file of the configuration.
    return named or (unnamed if failed_test else [])


def restart_command(service: str, definition: Mapping, evidence: Mapping) -> str:
    units = [str(u) for u in definition.get("units") or []]
    if evidence.get("init") == "systemd":
        return f"systemctl restart {units[0] if units else service}"
    name = units[0][:-len(".service")] if units and units[0].endswith(".service") else service
    return f"service {name} restart"


def report_text(items: list[Mapping], recorded: Any = None) -> str:
    """What the human is told: each restored file, where its bad version is kept, and the diff."""
    lines = []
    for item in items:
        aside = item.get("aside")
        lines.append(f"{item['path']} drifted from its last known-good version ({item.get('change')}); restored it"
                     + (f"; the bad version is kept aside on the host (content store, sha256 {aside})" if aside else "")
                     + (f"; {item['package']}" if item.get("package") else ""))
        if item.get("diff"):
            lines.append(str(item["diff"]))
    if recorded:
        lines.append(f"(baseline recorded at epoch {recorded} on a healthy pass)")
    return "\n".join(lines)


def plan(service: str, error: str, evidence: Mapping, definition: Mapping, tried: bool) -> dict | None:
    """A planner-shaped plan restoring the explained drift, or None (nothing explained, or a
    restore already tried in this incident)."""
    if tried or not isinstance(evidence, Mapping):
        return None
    items = explained(error, evidence)
    if not items:
        return None
    commands = [{"command": f"cp -p {item['restore']} {item['path']}", "source": SOURCE} for item in items]
    commands.append({"command": restart_command(service, definition, evidence), "source": SOURCE})
    recorded = (evidence.get("known_good") or {}).get("recorded")
    return {"source": SOURCE, "commands": commands, "diagnosis": report_text(items, recorded),
            "msg": f"Plan for {service} from its known-good baseline: {len(items)} drifted file(s) the failure "
                   "names restored, then a restart (ahead of memory and the model)",
            "restored": [{"path": i["path"], "aside": i.get("aside", ""), "diff": i.get("diff", "")} for i in items]}


def journal_record(run: str, service: str, attempt: int, planned: Mapping) -> dict:
    """The journal's line for a known-good restore: each file, where its bad version is kept, the diff."""
    return {"kind": "known_good", "run": run, "service": service, "attempt": attempt,
            "restored": [dict(r) for r in planned.get("restored") or []]}
