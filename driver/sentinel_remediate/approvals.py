"""Plans waiting for a human: list, show, approve (runs resume.yml for exactly that plan), reject.

The role writes each gated plan to ``<remediate_artifacts_dir>/pending/<id>.json``
(``{id, host, target, service, signature, attempt, error, diagnosis, commands, plan_hash,
requested, evidence_time, llm, format, mac}``, authenticated by the controller's key; each command is a policy verdict ``{command, verdict, reasons, argv,
become, display, pids, effects, source}``). Commands are shown with the policy's ``display``
(the whole argv, escaped, never cut) and never raw: a plan may hold text an LLM wrote. Whether
a command runs as root is the policy's ``become``, shown next to it.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import report as reporting


def printable(text: object) -> str:
    """The report's printable form (control characters shown, not obeyed), loaded on first use."""
    return reporting.printable(text)


ID_RE = re.compile(r"^[A-Za-z0-9_-]{4,64}$")


class ApprovalError(LookupError):
    """Unknown, ambiguous or malformed approval id."""


def pending_dir(approvals_dir: Path) -> Path:
    return approvals_dir / "pending"


def load_pending(approvals_dir: Path) -> list[dict]:
    """Every pending plan, oldest request first; unreadable files are listed as such."""
    plans = []
    directory = pending_dir(approvals_dir)
    if not directory.is_dir():
        return plans
    for path in sorted(directory.glob("*.json")):
        try:
            raw = path.read_bytes()
            plan = json.loads(raw.decode("utf-8"))
            if not isinstance(plan, Mapping):
                raise ValueError("not a JSON object")
            plan = dict(plan)
        except (OSError, ValueError) as exc:
            plan = {"id": path.stem, "error": f"unreadable plan file: {exc}", "commands": []}
        else:
            # What the approver is shown: approving passes it on, and a file changed since is refused.
            plan["_digest"] = hashlib.sha256(raw).hexdigest()
        plan.setdefault("id", path.stem)
        plan["_path"] = str(path)
        plans.append(plan)
    return sorted(plans, key=lambda p: (str(p.get("requested", "")), str(p["id"])))


def find_pending(approvals_dir: Path, plan_id: str) -> dict:
    if not ID_RE.match(plan_id or ""):
        raise ApprovalError(f"bad approval id {plan_id!r}: letters, digits, '-' and '_' only")
    plans = load_pending(approvals_dir)
    matches = [p for p in plans if p["id"] == plan_id] or [p for p in plans if str(p["id"]).startswith(plan_id)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        known = ", ".join(str(p["id"]) for p in plans) or "none"
        raise ApprovalError(f"no pending plan {plan_id!r} in {pending_dir(approvals_dir)} (pending: {known})")
    raise ApprovalError(f"{plan_id!r} matches several plans: {', '.join(str(p['id']) for p in matches)}")


def _command_rows(plan: Mapping[str, Any]) -> list[dict]:
    rows = []
    for c in plan.get("commands") or []:
        if not isinstance(c, Mapping):
            continue
        reasons = c.get("reasons") or []
        effects = c.get("effects") or []
        argv = c.get("argv") if isinstance(c.get("argv"), list) else []
        rows.append({
            "display": printable(c.get("display") or c.get("command") or ""),
            "verdict": printable(c.get("verdict") or "?"),
            "source": printable(c.get("source") or "?"),
            "reasons": [printable(r) for r in (reasons if isinstance(reasons, list) else [reasons])],
            "effects": [printable(e) for e in (effects if isinstance(effects, list) else [effects])],
            # Plans written before the policy decided `become` carried a leading sudo instead.
            "root": bool(c.get("become", argv[:1] == ["sudo"])),
        })
    return rows


def render_list(plans: list[dict]) -> str:
    if not plans:
        return "no plan waits for approval\n"
    lines = []
    for p in plans:
        rows = _command_rows(p)
        gated = sum(1 for r in rows if r["verdict"] == "approval")
        lines.append(f"{printable(p['id'])}  {printable(p.get('host', '?'))}  {printable(p.get('service', '?'))}  "
                     f"{len(rows)} command(s), {gated} need approval  requested {printable(p.get('requested', '?'))}")
        for r in rows:
            why = f"  ({'; '.join(r['reasons'])})" if r["reasons"] and r["verdict"] != "allow" else ""
            lines.append(f"    [{r['verdict']}] {r['display']}{why}")
    return "\n".join(lines) + "\n"


def render_show(plan: Mapping[str, Any]) -> str:
    lines = [
        f"plan       {printable(plan.get('id'))}",
        f"host       {printable(plan.get('host', '?'))}",
        f"service    {printable(plan.get('service', '?'))}",
        f"requested  {printable(plan.get('requested', '?'))} (attempt {printable(plan.get('attempt', '?'))})",
        f"signature  {printable(plan.get('signature', ''))}",
        f"error      {printable(plan.get('error', ''))}",
        f"diagnosis  {printable(plan.get('diagnosis', ''))}",
        *([f"planned on {printable(plan['planned_on'])} (the same failure signature); this host's own evidence:"]
          if plan.get("planned_on") else ["this host's own evidence:"] if plan.get("host_diagnosis") else []),
        *[f"  cause    {printable(cause)}" for cause in plan.get("host_diagnosis") or []],
        f"for        {printable(plan.get('target', '?'))}, evidence of {printable(plan.get('evidence_time', '?'))}",
        f"file hash  {printable(plan.get('_digest', ''))} (approving runs this file only if it is unchanged)",
    ]
    for path, notes in sorted((plan.get("ownership") or {}).items()):
        # what the host says about who manages a file the plan changes: whose intent approving overrides
        lines.append(f"owned      {printable(path)}: {printable(notes)}")
    for path, said in sorted((plan.get("writer_records") or {}).items()):
        # how the writer of a guard or marker the plan removes ended, in its own last lines
        lines.append(f"writer     {printable(path)}: its writer's last record:")
        lines.extend(f"           {printable(line)}" for line in str(said).splitlines()[:40])
    lines += [
        "commands (as the policy displays them; approving runs exactly these, as argv, without a shell):",
    ]
    if plan.get("error") and not plan.get("commands"):
        lines.append(f"  {printable(plan['error'])}")
    for n, r in enumerate(_command_rows(plan), 1):
        who = "as root" if r["root"] else "without root"
        lines.append(f"  {n}. [{r['verdict']}] {r['display']}   (from {r['source']}, {who})")
        for reason in r["reasons"]:
            lines.append(f"       - {reason}")
        for effect in r["effects"]:
            lines.append(f"       effect: {effect}")
    lines.append(f"approve: sentinel-remediate approvals approve {printable(plan.get('id'))}")
    lines.append(f"reject:  sentinel-remediate approvals reject {printable(plan.get('id'))}")
    return "\n".join(lines) + "\n"


def public(plan: Mapping[str, Any]) -> dict:
    """The plan as JSON output (without the driver's bookkeeping)."""
    return {k: v for k, v in plan.items() if not k.startswith("_")}
