# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
""""Restore the last known-good version": a plan source ahead of memory and the model.

The host compares a failing service's configuration with the baseline it recorded while the
service was healthy (``module_utils/known_good.py``); what drifted arrives in the evidence
(``known_good.drift``: path, change, redacted diff, the staged known-good copy, the digest the
bad version is kept under). When the drift explains the failure, the first attempt copies
the known-good version back (``cp -p``, the policy judges it like any command) and restarts
the service. Drift the failure names (its path or file name in the health error, the config
test's output, the status, the journal or the logs) goes first, alone; when the failure names
none, the last healthy state is the first fix: every drifted file of the service's
configuration (declared config, unit file, drop-ins, environment files) goes back, whatever
the failure says. A file that is NEW since the last healthy pass is taken out (``rm -f``): its
bytes were kept in the host's content store when the evidence was gathered (``aside``), and
the attempt's snapshot puts it back byte-identically if the service does not heal. A unit file
or drop-in changed makes ``systemctl daemon-reload`` part of the plan, before the restart.

A drift that expresses a HOLD is the owner's, never undone ahead of a human, and while one is
there nothing is restored: added lines that stop the service from starting or running (systemd
``Condition*=``/``Assert*=``/``ExecCondition=`` lines, an ``ExecStartPre=``/``ExecStart=`` that
can only refuse: ``false``, ``test``, ``exit N``), a file saying not to start or touch the
service (a freeze marker), or a file a unit condition names (in the drift or in the status).

A restore never runs ahead when it would take out a setting about security: a line the drift
added (now in the file, not in the known-good version) that speaks of TLS, certificates,
verification, authentication, keys, secrets or who may do what. Such a drift is often a
deliberate tightening (a team turned on certificate verification, and the failure is that the
certificate has expired); going back to known-good would heal the service by weakening it. A
diff that cannot be read whole (binary, cut) is treated the same way. Those drifts stay in the
evidence for the model and the human. Except for a file its package replaced
(``replaced_by_package``: dpkg says it is now the package's default, or its known-good bytes now
sit beside it as ``.dpkg-old``/``.ucf-old``/``.rpmsave``): nobody chose its new lines, so going
back is not undoing a tightening (a key, a certificate or an access-rule file excepted).

What the service runs as and runs is restored the same way (``known_good.runs_as`` in the
evidence): a group its own account was in at the last healthy pass and has lost is added back
(``gpasswd -a USER GROUP``), and a program its unit runs, or one of its directories, gets back
the recorded owner (``chown U:G PATH``) and mode (``chmod MODE PATH``). That drift explains the
failure when the failure names the path (or a path owned by the lost group), or says access
was denied (``Permission denied``, systemd's ``203/EXEC``). A privileged group (the policy's
``privileged_groups``) is never put in a plan: it is left in the evidence for a human. A
membership gained, an account or path gone, are not restored (nothing exact to put back).
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.sentinel.remediation.plugins.module_utils import operator_notes

from .stale_state import stale_files

SOURCE = "known_good"
_RC = re.compile(r"^rc (\d+)$", re.M)
_TEXT_KEYS = ("config_test", "config_context", "status", "journal", "logs", "named_paths")
# How a failure says the service was refused access (not "Operation not permitted": systemd in a
# container logs it for every start).
_DENIED = re.compile(r"permission denied|\bEACCES\b|203/EXEC", re.I)
_OWNED_BY = re.compile(r"\bowner\W+[^:\s\"']+:(?P<group>[^,\s\"']+)")
_RESTORE_COMMANDS = 3
# What a configuration line about security speaks of (words, not values): TLS and certificates,
# verification, authentication and credentials, and access rules.
_SECURITY = re.compile(
    r"(?<![a-z])(ssl\w*|tls\w*|https|verif\w*|cert\w*|ca_?file|ca_?path|rootcert|crl\w*|cipher\w*|key\w*|"
    r"auth\w*|passw\w*|secret\w*|token\w*|credential\w*|scram\w*|md5|gss\w*|hba|trust\w*|"
    r"permi\w*|allow\w*|deny\w*|reject\w*|acl\w*|requir\w*|secur\w*|protect\w*|privat\w*|sandbox\w*|umask|"
    r"chroot|user\w*|group\w*|owner\w*|login\w*|sudo\w*)(?![a-z])", re.I)


_COMMENT = re.compile(r"^\s*[#;]|\s#.*$")


def _setting(line: str) -> str:
    """An added line without its comment (a whole comment line, or ``# ...`` after a blank): a
    setting's words, not a note's (``port = 5433  # (change requires restart)``)."""
    return "" if re.match(r"^\s*[#;]", line) else _COMMENT.sub("", line)


def takes_out_security(item: Mapping, drift: Iterable[Mapping] = ()) -> bool:
    """Whether going back to known-good on the drifted file ``item`` would take out a security
    setting (``weakens_security`` on its diff), except for a new file that is a byte-for-byte
    copy of a known-good file still unchanged (``copy_of``): every line of it stays in effect;
    and for a file a package replaced (``replaced_by_package``, judged with the rest of the
    ``drift``): its new lines are the package's, not a person's tightening."""
    if item.get("change") == "new" and str(item.get("copy_of") or "").startswith("/"):
        return False
    if replaced_by_package(item, drift):
        return False
    return weakens_security(str(item.get("diff") or ""))


# Where a package manager keeps the host's version of a configuration file it replaced with the
# package's (dpkg's --force-confnew and "install the package maintainer's version", ucf, rpm).
_KEPT_BY_PACKAGER = (".dpkg-old", ".dpkg-bak", ".ucf-old", ".rpmsave")
# known_good.package_default_line's words for a file that IS its package's default now.
_PACKAGE_DEFAULT = re.compile(r": the package's default \([^()]*, as installed\)$")


def _kept_by_packager(item: Mapping, drift: Iterable[Mapping]) -> bool:
    """Whether the new file ``item`` is where a package manager kept the host's version of a file
    it replaced (``replaced_by_package``): nothing to go back on, it IS the known-good version."""
    path = str(item.get("path") or "")
    base = next((path[:-len(s)] for s in _KEPT_BY_PACKAGER if path.endswith(s)), "")
    return item.get("change") == "new" and bool(base) and any(
        isinstance(other, Mapping) and other.get("path") == base and replaced_by_package(other, drift)
        for other in drift)


def replaced_by_package(item: Mapping, drift: Iterable[Mapping] = ()) -> bool:
    """Whether the modified file ``item`` is the host's configuration replaced by its package's
    version: dpkg says the file now IS the package's default while the known-good version was
    not, or the known-good bytes now sit beside it where a package manager keeps the version it
    replaced (``app.conf.dpkg-old``, ``.ucf-old``, ``.rpmsave``: a new file of the drift whose
    content is the known-good one). No person chose the new lines, so going back to the version
    the service ran healthy with takes out nobody's setting. Never for a file whose very name
    speaks of security (a key, a certificate, ``pg_hba.conf``): access rules and keys put back to
    a default may be a team's deliberate act, and stay a human's call."""
    if item.get("change") != "modified" or not item.get("restore"):
        return False
    name = os.path.basename(str(item.get("path") or ""))
    if _SECURITY.search(name.replace("_", " ").replace("-", " ")):
        return False
    if _PACKAGE_DEFAULT.search(str(item.get("package") or "")):
        return True
    path, good = str(item.get("path") or ""), str(item.get("known_good") or "")
    if not path or not re.fullmatch(r"[0-9a-f]{64}", good):
        return False
    return any(isinstance(other, Mapping) and other.get("change") == "new"
               and other.get("path") in {path + suffix for suffix in _KEPT_BY_PACKAGER}
               and good in (other.get("now"), other.get("aside")) for other in drift)


def weakens_security(diff: str) -> bool:
    """Whether going back to known-good would take out a security setting the drift added (or
    the diff cannot be read whole to tell). Comments are not settings."""
    text = str(diff or "")
    if not text or text.startswith("binary") or "(diff cut at" in text or "not kept" in text \
            or "comment or blank lines left out)" in text:
        return True
    # A file whose very name speaks of security (pg_hba.conf, a TLS snippet, a key): every line is.
    named = [os.path.basename(line.split()[-1]) for line in text.splitlines() if line.startswith(("+++ ", "--- "))]
    if any(_SECURITY.search(name.replace("_", " ").replace("-", " ")) for name in named if "/" not in name):
        return True
    return any(_SECURITY.search(_setting(line[1:])) for line in text.splitlines()
               if line.startswith("+") and not line.startswith("+++"))


# A line that stops a unit from starting or running: a condition or assertion, or a start step that
# can only refuse.
_HOLD_LINE = re.compile(r"^\s*(?:Condition\w+|Assert\w+|ExecCondition)\s*=", re.I)
_REFUSAL = re.compile(r"^\s*Exec(?:StartPre|Start)\s*=\s*[-@:+!|]*\s*(?:\S*/)?(?:false|test|\[)(?:\s|$)"
                      r"|^\s*Exec(?:StartPre|Start)\s*=.*\bexit\s+[1-9]", re.I)
# A marker an owner leaves: "do not start", "frozen"...
_MARKER = re.compile(r"\b(?:do\s+not|don't|never)\s+(?:start|restart|run|touch|remove|delete)\b|\bfrozen\b|\bfreeze\b", re.I)
_CONDITION_PATH = re.compile(r"\b(?:Condition|Assert)\w*\s*=\s*\|?\s*!?\s*(/[^\s'\"`]+)")
_UNIT_DIRS = ("/etc/systemd/", "/lib/systemd/", "/usr/lib/systemd/", "/run/systemd/")


def _added(diff: Any) -> list[str]:
    return [line[1:] for line in str(diff or "").splitlines() if line.startswith("+") and not line.startswith("+++")]


def _drift_items(evidence: Mapping) -> list[Mapping]:
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    items = known.get("drift") if isinstance(known, Mapping) else None
    return [d for d in items or [] if isinstance(d, Mapping)]


def holds(error: str, evidence: Mapping) -> dict[str, str]:
    """``{path: why}``: the drifted files that express a hold (the owner's, never undone ahead of
    a human): added lines that stop the service from starting or running, a "do not start" or
    freeze marker, or a file a unit condition names (in the drift's added lines, the status or
    the journal)."""
    items = _drift_items(evidence)
    named = set()
    for item in items:
        named.update(m.group(1) for line in _added(item.get("diff")) for m in _CONDITION_PATH.finditer(line))
    named.update(m.group(1) for m in _CONDITION_PATH.finditer(_texts(error, evidence)))
    out = {}
    for item in items:
        path = str(item.get("path") or "")
        added = _added(item.get("diff"))
        stops = next((line.strip() for line in added if _HOLD_LINE.match(line) or _REFUSAL.match(line)), "")
        marker = next((line.strip() for line in added if _MARKER.search(line)), "")
        if stops:
            out[path] = f"adds `{stops[:120]}`: a line that stops the service from starting"
        elif path in named:
            out[path] = "a unit condition names it"
        elif marker:
            out[path] = f"says `{marker[:120]}`"
    return out


HOLD_NOTE = ("the owner's hold, not a fault: leave it in place, do not start around it; escalate naming the file "
             "and its owner")
# A hold whose condition waits on a file the evidence shows as stale state (stale_state.py: every
# process the file names is gone). The hold means "not while my writer runs"; its file outlived
# the writer. The hold stays; whether the run it guarded ended is the writer's own record's to say.
STALE_HOLD_NOTE = ("the owner's hold: leave this file in place and do not start around it. The file its condition "
                   "waits on ({paths}) is stale state: every process it names is gone. Moving that file aside within "
                   "its directory (kept, not deleted) lets the hold do what it was written for, and is not undoing "
                   "it, when the writer's own record (writer_records) says its run ended; when that record is "
                   "missing or says the run failed or is still going, escalate naming the file and its owner")


def _hold_note(path: str, evidence: Mapping, stale: Mapping[str, str]) -> str:
    item = next((d for d in _drift_items(evidence) if d.get("path") == path), {})
    waits_on = sorted({m.group(1) for line in _added(item.get("diff")) for m in _CONDITION_PATH.finditer(line)
                       if m.group(1) in stale})
    return STALE_HOLD_NOTE.format(paths=", ".join(waits_on)) if waits_on else HOLD_NOTE


def mark_holds(error: str, evidence: Any) -> dict[str, str]:
    """Put the drift's holds (``holds``) in the evidence's ``known_good.holds`` for the model and
    the human, each with its note (``HOLD_NOTE``, or ``STALE_HOLD_NOTE`` for a hold whose condition
    waits on a file the evidence shows as stale state); the holds found."""
    found = holds(error, evidence) if isinstance(evidence, Mapping) else {}
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    if found and isinstance(known, dict):
        stale = stale_files(evidence)
        known["holds"] = [{"path": path, "why": why, "note": _hold_note(path, evidence, stale)}
                          for path, why in sorted(found.items())]
    return found


SECURITY_NOTE = ("not restored ahead: going back would undo a security setting, key or credential this change put in "
                 "place (often deliberate: a rotation, a tightening); a human's call: restore only with approval, "
                 "saying why, or escalate")


def mark_security(evidence: Any) -> list[str]:
    """Mark, in the evidence's drift, each modified or new file whose known-good version is not
    put back ahead of a human because going back would take out a security setting, a key or a
    credential (``takes_out_security``): its ``security`` note tells the model and the human why
    the staged restore is not a plain fix. The paths marked."""
    drift = _drift_items(evidence) if isinstance(evidence, Mapping) else []
    marked = []
    for item in drift:
        if isinstance(item, dict) and item.get("change") in ("modified", "new") \
                and (item.get("restore") or item.get("aside")) and takes_out_security(item, drift) \
                and not _kept_by_packager(item, drift):
            item["security"] = SECURITY_NOTE
            marked.append(str(item.get("path")))
    return marked


def is_unit_file(path: str) -> bool:
    """Whether ``path`` is a systemd unit file or drop-in (a change needs ``daemon-reload``)."""
    return path.startswith(_UNIT_DIRS)


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


def restorable(item: Mapping, drift: Iterable[Mapping] = ()) -> bool:
    """Whether one drifted file can go back to known-good exactly: a modified or missing file
    with a staged known-good copy, or a new file whose bytes the host kept (``aside``) with a
    diff read whole; and going back takes out no security setting the file now has
    (``takes_out_security``, judged with the rest of the ``drift``)."""
    path, change = str(item.get("path") or ""), item.get("change")
    if not path.startswith("/"):
        return False
    if change in ("modified", "missing"):
        ok = bool(item.get("restore"))
    elif change == "new":
        ok = bool(re.fullmatch(r"[0-9a-f]{64}", str(item.get("aside") or "")))
    else:
        return False
    # Never ahead of a human: the drift may be a deliberate tightening.
    return ok and not (change in ("modified", "new") and takes_out_security(item, drift))


def explained(error: str, evidence: Mapping) -> list[dict]:
    """The drifted files to put back first: the ones the failure names, else every restorable
    drifted file of the configuration (the last healthy state is the first fix); none while a
    drift expresses a hold (``holds``)."""
    if holds(error, evidence):
        return []
    texts = _texts(error, evidence)
    named, unnamed = [], []
    drift = _drift_items(evidence)
    for item in drift:
        if not restorable(item, drift):
            continue
        path = str(item["path"])
        if path in texts or re.search(r"(?<![\w.-])" + re.escape(os.path.basename(path)) + r"(?![\w-])", texts):
            named.append(dict(item))
        else:
            unnamed.append(dict(item))
    return named or unnamed


def runs_as_explained(error: str, evidence: Mapping, privileged: Sequence[str] = ()) -> tuple[list[dict], list[str]]:
    """``(items, left)``: the drift in what the service runs as and runs that the failure is
    explained by, each with its ``commands`` putting back the recorded values; ``left``: the
    privileged memberships lost that only a human may give back."""
    known = evidence.get("known_good") if isinstance(evidence, Mapping) else None
    items = (known or {}).get("runs_as") if isinstance(known, Mapping) else None
    texts = _texts(error, evidence)
    denied = bool(_DENIED.search(texts))
    owned_groups = {m.group("group") for m in _OWNED_BY.finditer(texts)}
    out, left = [], []
    for item in items or []:
        if not isinstance(item, Mapping):
            continue
        if item.get("change") == "groups" and item.get("account"):
            user = str(item["account"])
            lost = [str(g) for g in item.get("lost") or []]
            left.extend(f"{user} in {g}" for g in lost if g in privileged)
            lost = [g for g in lost if g not in privileged]
            if lost and (denied or owned_groups & set(lost)):
                out.append(dict(item, restoring=lost, commands=[_argv("gpasswd", "-a", user, g) for g in lost]))
        elif item.get("change") == "attributes" and str(item.get("path") or "").startswith("/"):
            path = str(item["path"])
            named = path in texts or re.search(r"(?<![\w.-])" + re.escape(os.path.basename(path)) + r"(?![\w-])", texts)
            commands = ([_argv("chown", item["owner"], path)] if item.get("owner") else []) \
                + ([_argv("chmod", item["mode"], path)] if item.get("mode") else [])
            if commands and (named or denied):
                out.append(dict(item, commands=commands))
    return out, left


def _runs_as_text(items: list[Mapping], left: list[str]) -> list[str]:
    lines = []
    for item in items:
        if item.get("account"):
            lines.append(f"{item['account']} lost its membership of {', '.join(item.get('restoring') or [])} since the last "
                         f"healthy pass (known-good groups: {' '.join(item.get('known_good') or [])}); put it back")
        else:
            lines.append(f"{item['path']} ({item.get('role')}) is {item.get('now')} now, {item.get('known_good')} at "
                         "the last healthy pass; put it back")
    lines.extend(f"not restored, a human decides: {what} (a privileged group)" for what in left)
    return lines


def _argv(*words: Any) -> str:
    """A command from words, each one argument whatever it holds: the paths, owners, modes and
    group names come from the host (a file name the service's user chose), and a space or a
    quote in one must not become another argument of a command run as root."""
    return " ".join(shlex.quote(str(word)) for word in words)


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
        did = ("is new since the last healthy pass; took it out" if item.get("change") == "new"
               else f"drifted from its last known-good version ({item.get('change')}); restored it")
        lines.append(f"{item['path']} {did}"
                     + (f"; the bad version is kept aside on the host (content store, sha256 {aside})" if aside else "")
                     + (f"; {item['package']}" if item.get("package") else ""))
        if item.get("diff"):
            lines.append(str(item["diff"]))
    if recorded:
        lines.append(f"(baseline recorded at epoch {recorded} on a healthy pass)")
    return "\n".join(lines)


def plan(service: str, error: str, evidence: Mapping, definition: Mapping, tried: bool,
         privileged: Sequence[str] = ()) -> dict | None:
    """A planner-shaped plan restoring the explained drift, or None (nothing explained, or a
    restore already tried in this incident). ``privileged``: the policy's privileged groups."""
    if tried or not isinstance(evidence, Mapping):
        return None
    if operator_notes.hold_line(evidence.get("operator_notes"))[1]:
        return None  # the owner's note keeps hands off the service: going back is theirs to say too
    items = explained(error, evidence)
    running, left = runs_as_explained(error, evidence, privileged)
    restoring = [c for r in running for c in r["commands"]][:_RESTORE_COMMANDS]
    if not items and not restoring:
        return None
    commands = [{"command": _argv("rm", "-f", item["path"]) if item.get("change") == "new"
                 else _argv("cp", "-p", item["restore"], item["path"]), "source": SOURCE} for item in items]
    if evidence.get("init") == "systemd" and any(is_unit_file(str(item["path"])) for item in items):
        commands.append({"command": "systemctl daemon-reload", "source": SOURCE})
    commands.extend({"command": c, "source": SOURCE} for c in restoring)
    commands.append({"command": restart_command(service, definition, evidence), "source": SOURCE})
    recorded = (evidence.get("known_good") or {}).get("recorded")
    diagnosis = "\n".join(_runs_as_text(running, left) + ([report_text(items, recorded)] if items else []))
    what = [f"{len(items)} drifted file(s) put back as they were at the last healthy pass"] if items else []
    what += ["what it runs as and runs put back as recorded while healthy"] if restoring else []
    return {"source": SOURCE, "commands": commands, "diagnosis": diagnosis,
            "msg": f"Plan for {service} from its known-good baseline: {', '.join(what)}, then a restart (ahead of "
                   "memory and the model)",
            "restored": [{"path": i["path"], "change": i.get("change", ""), "aside": i.get("aside", ""),
                          "diff": i.get("diff", "")} for i in items]
            + [{"path": i.get("path") or "", "account": i.get("account") or "", "commands": i["commands"],
                "known_good": i.get("known_good"), "now": i.get("now")} for i in running]}


def journal_record(run: str, service: str, attempt: int, planned: Mapping) -> dict:
    """The journal's line for a known-good restore: each file, where its bad version is kept, the diff."""
    return {"kind": "known_good", "run": run, "service": service, "attempt": attempt,
            "restored": [dict(r) for r in planned.get("restored") or []]}
