# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failure signatures: one stable fingerprint per kind of failure, whatever the host.

Computed on the controller and, for a remembered fix sent with the health check, on the
target (service_health): standard library only.

Hosts with the same fault share a signature (so they share one plan and one memory
record) even when their PIDs, timestamps, host names and counters differ; different
faults of the same service get different signatures because the signature also
holds a few *key facts* drawn from the evidence: the config test's error line, which
process holds the service's port, missing paths, permission and disk-full errors.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping

from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import (
    SERVICE_PORTS,
    evidence_texts,
    listeners,
)
from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import (
    CAUSE, describe, extract_facts, killed_at_timeout)

_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAYS = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_SUBS: tuple[tuple[re.Pattern[str], str], ...] = (
    # syslog header "Jan  2 10:11:12 host prog[123]:" (the host is the token after the time)
    (re.compile(r"\b" + _MONTHS + r"\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s+\S+\s+"), ""),
    # ISO 8601 / RFC 3339 and nginx "2024/01/02 10:11:12"
    (re.compile(r"\b\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), ""),
    (re.compile(r"\b(?:" + _DAYS + r",?\s+)?\d{1,2}\s+" + _MONTHS + r"\s+\d{4}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?"), ""),
    (re.compile(r"\b" + _DAYS + r"\s+" + _MONTHS + r"\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}(?:\s+\w{2,5})?\s+\d{4}"), ""),
    # redis "1234:M 02 Jan 2024 10:11:12.345" leaves "1234:M " behind: role-tagged pid
    (re.compile(r"\b\d+:[MSCX]\b"), "<pid>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"), ""),
    # PIDs in their usual dresses
    (re.compile(r"\b(pid[=: ]\s*)\d+", re.IGNORECASE), r"\1<pid>"),
    (re.compile(r"\b((?:process|PID|pid)\s+)\d+"), r"\1<pid>"),
    (re.compile(r"\[\d+\]"), "[<pid>]"),
    (re.compile(r"\b\d+#\d+:"), "<pid>:"),
    # UUIDs, container ids, hashes
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,64}\b", re.IGNORECASE), "<id>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE), "<hex>"),
    # IP addresses (a host's own address differs per host); a port after one is kept
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b"), "<ip>"),
    (re.compile(r"\[[0-9a-f:]*:[0-9a-f:]*\](?=:\d)", re.IGNORECASE), "<ip>"),
    # host names: dotted names that are not paths or file names
    (re.compile(r"(?<![/\w.-])(?:[a-z0-9-]+\.){2,}[a-z]{2,24}\b(?![/\w-])", re.IGNORECASE), "<host>"),
    # counters, sizes, durations: long numbers not after ':' (ports, line numbers stay)
    (re.compile(r"(?<![:\w.])(?!0[0-7]{3}\b)\d{4,}(?:\.\d+)?\b"), "<n>"),
)

_KEY_LINE = re.compile(
    r"\[(?:emerg|crit|alert)\]|syntax|test failed|configuration file .* test"
    r"|No such file|Permission denied|No space left|not found|Address already in use"
    r"|Can't open|Failed opening|Bad directive|fatal|FATAL", re.IGNORECASE)
_QUOTED_PATH = re.compile(r"[\"'](/[^\"'\s]+)[\"']")
_PATH_AT = re.compile(r"(?<![\w.])(/(?:[\w.+@-]+/)*[\w.+@-]+)")


# The variables that hold a host's names, which a signature must not depend on.
HOSTNAME_VARS = ("inventory_hostname", "inventory_hostname_short", "ansible_host", "ansible_hostname",
                 "ansible_fqdn", "ansible_nodename")


def hostnames_of(host_vars: Mapping) -> list[str]:
    """The names a host goes by (its inventory name, address, facts), each once; values that
    are still templates are left out."""
    names = [host_vars.get(name) for name in HOSTNAME_VARS]
    return [h for h in dict.fromkeys(names) if isinstance(h, str) and h and "{{" not in h]


def normalise_error(text: str | None, hostnames: Iterable[str] = ()) -> str:
    """Error text without timestamps, PIDs, host names, ids and counters.

    Ports and line numbers after ``:`` and paths are kept, case is kept (only
    whitespace is collapsed); ``hostnames`` are removed wherever they appear.
    """
    if not text:
        return ""
    result = str(text)
    for name in sorted({h for h in hostnames if h and len(str(h)) > 2}, key=len, reverse=True):
        result = re.sub(r"(?<![\w.-])" + re.escape(str(name)) + r"(?![\w-])", "<host>", result,
                        flags=re.IGNORECASE)
    for pattern, replacement in _SUBS:
        result = pattern.sub(replacement, result)
    return re.sub(r"\s+", " ", result).strip(" :-")


def _ports_of_interest(service: str, error: str) -> set[int]:
    ports = set(SERVICE_PORTS.get(service, ()))
    for match in re.finditer(r"(?:(?<=:)|\bport\s+)(\d{2,5})\b", error or "", re.IGNORECASE):
        port = int(match.group(1))
        if 0 < port < 65536:
            ports.add(port)
    return ports


# Evidence sections that show settings on disk (environment files, what includes match), not
# what failed: a setting that breaks the start is named by the message it causes (the journal,
# the config test), which the signature already reads. The same holds for the small files of
# the data directories (their times and PIDs differ on every host) and the list of environment files.
_SETTINGS_SECTIONS = frozenset(("environment", "includes", "known_good", "data_markers", "environment_files"))


def key_facts(service: str, error: str | None, evidence: Mapping | str | None,
              hostnames: Iterable[str] = ()) -> list[str]:
    """The few facts from the evidence that tell one fault from another (sorted)."""
    service = _service_name(service)
    facts: set[str] = set()
    texts = evidence_texts(evidence)
    hostnames = tuple(hostnames)

    for owner in listeners(evidence):
        if owner["port"] in _ports_of_interest(service, error or ""):
            facts.add(f"port {owner['port']} held by {owner['process'] or 'unknown'}")

    for key, text in texts.items():
        if key.split(".", 1)[0] in _SETTINGS_SECTIONS:
            continue
        lines = text.splitlines()
        # Logs keep history; only their recent end says what is wrong now.
        if "log" in key.lower():
            lines = lines[-30:]
        for line in lines:
            if not _KEY_LINE.search(line):
                continue
            lowered = line.lower()
            if "no space left" in lowered:
                facts.add("disk full")
            paths = _QUOTED_PATH.findall(line) or _PATH_AT.findall(line)
            if "no such file" in lowered or "not found" in lowered or "can't open" in lowered:
                for path in paths[:2]:
                    facts.add(f"missing {path}")
            if "permission denied" in lowered:
                for path in paths[:2]:
                    facts.add(f"denied {path}")
            if "address already in use" in lowered:
                facts.add("address in use")
            if key.lower().startswith("config") or "[emerg]" in lowered or "syntax" in lowered:
                if "test is successful" not in lowered and "syntax is ok" not in lowered:
                    facts.add("config: " + normalise_error(line, hostnames))
    if isinstance(evidence, Mapping):
        facts.update(_structured_facts(evidence, hostnames))
    return sorted(facts)


def _structured_facts(evidence: Mapping, hostnames: tuple) -> set[str]:
    """Facts from the evidence module's sections: status, PID files, paths."""
    facts: set[str] = set()
    status = evidence.get("status")
    if isinstance(status, str) and status.strip():
        facts.add("status: " + normalise_error(status, hostnames)[:200])
    pid_files = evidence.get("pid_files")
    if isinstance(pid_files, Mapping):
        for path, state in pid_files.items():
            text = str(state).lower()
            kind = ("stale" if "stale" in text or "not running" in text else
                    "missing" if text.startswith("missing") else
                    "not a pid" if "not a pid" in text else
                    "running" if "running" in text else "unreadable")
            facts.add(f"pid file {path} {kind}")
    # A dependent's failure is told apart by what its dependencies' own checks say (the same 503
    # of an app is another fault when its database is down than when it refuses the app's login).
    dependencies = evidence.get("dependencies")
    if isinstance(dependencies, Mapping):
        for name, state in dependencies.items():
            said = _NUMBER.sub("#", normalise_error(str(state), hostnames))
            facts.add(f"dependency {name}: " + said[:200])
    paths = evidence.get("paths")
    if isinstance(paths, Mapping):
        for path, state in paths.items():
            state_text = json.dumps(state, sort_keys=True) if not isinstance(state, str) else state
            lowered = state_text.lower()
            if "missing" in lowered or "no such" in lowered or '"exists": false' in lowered:
                facts.add(f"missing {path}")
                continue
            # Type, owner and mode are stable across hosts; free space and usage are not,
            # except that a full filesystem is a fact.
            facts.add(f"path {path}: " + normalise_error(state_text.split(";")[0], hostnames)[:120])
            usage = re.search(r"(\d+)% used", state_text)
            if usage and int(usage.group(1)) >= 98:
                facts.add(f"filesystem of {path} full")
    return facts


def _service_name(service: str | None) -> str:
    name = (service or "").strip().lower()
    return name[:-len(".service")] if name.endswith(".service") else name


def signature_prefix(service: str | None) -> str:
    """How every signature of ``service``'s failures begins (``"nginx:"``)."""
    return f"{_service_name(service) or 'unknown'}:"


def signature_basis(service: str, error: str | None, evidence: Mapping | str | None,
                    hostnames: Iterable[str] = ()) -> dict:
    """What the signature is made of, for reports and debugging."""
    hostnames = tuple(hostnames)
    return {
        "service": _service_name(service),
        "error": normalise_error(error, hostnames),
        "facts": key_facts(service, error, evidence, hostnames),
        "causes": cause_facts(service, error, evidence, hostnames),
    }


def cause_facts(service: str, error: str | None, evidence: Mapping | str | None,
                hostnames: Iterable[str] = ()) -> list[str]:
    """The typed causes the evidence shows (failure_facts: a config error and its message, a
    log error line, a missing path, a stopped process...), host values normalised: two
    failures that look alike from outside ("postgresql is not running") but have different
    causes get different signatures, so hosts never share a plan across causes."""
    if not isinstance(evidence, Mapping):
        return []
    found = extract_facts(service, error, evidence)
    hostnames = tuple(hostnames)
    out = set()
    for fact in found.facts:
        if fact["class"] != CAUSE:
            continue
        # Log lines carry times, PIDs and counters: every number and month name goes.
        text = _NUMBER.sub("#", normalise_error(describe(fact), hostnames))
        out.add(_MONTH.sub("Mon", text)[:200])
    return sorted(out)


_NUMBER = re.compile(r"\d+")
_MONTH = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b")


def failure_signature(service: str, error: str | None, evidence: Mapping | str | None,
                      hostnames: Iterable[str] = ()) -> str:
    """``"<service>:<16 hex>"``: a stable fingerprint of this failure.

    ``hostnames`` (optional) are names of the host that may appear in the text
    (inventory name, FQDN...) and are removed before hashing.
    """
    basis = signature_basis(service, error, evidence, hostnames)
    digest = hashlib.sha256(json.dumps(basis, sort_keys=True).encode("utf-8")).hexdigest()
    return f"{signature_prefix(basis['service'])}{digest[:16]}"


# Evidence sections that are one command's output on the host. A command killed at its timeout
# (a loaded host) says nothing of the failure, and the same command a minute later finishes.
COMMAND_SECTIONS = ("config_test", "status", "journal", "unit")


def unfinished_sections(evidence) -> list:
    """The command sections of ``evidence`` whose command was killed at its timeout, in
    ``COMMAND_SECTIONS`` order."""
    if not isinstance(evidence, Mapping):
        return []
    return [key for key in COMMAND_SECTIONS if isinstance(evidence.get(key), str) and killed_at_timeout(evidence[key])]


def settled_signature(service: str, error: str | None, evidence: Mapping | str | None, left_out: Iterable[str],
                      hostnames: Iterable[str] = ()) -> str:
    """``failure_signature`` without the evidence sections ``left_out``."""
    left_out = set(left_out)
    if isinstance(evidence, Mapping):
        evidence = {key: value for key, value in evidence.items() if key not in left_out}
    return failure_signature(service, error, evidence, hostnames)


def settled_signatures(service: str, error: str | None, evidence: Mapping | str | None,
                       hostnames: Iterable[str] = ()) -> dict:
    """``settled_signature`` for each combination of the command sections (key: the left-out
    names joined by commas, in ``COMMAND_SECTIONS`` order; "" leaves none out): what the plan's
    record keeps, since which sections the resume's look will lose is not known yet
    (approval.incident_change)."""
    return {",".join(left_out): settled_signature(service, error, evidence, left_out, hostnames)
            for count in range(len(COMMAND_SECTIONS) + 1)
            for left_out in itertools.combinations(COMMAND_SECTIONS, count)}
