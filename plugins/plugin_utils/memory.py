# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Episodic memory: what the workflow remembers about each remediation attempt.

Each host keeps a bounded list of *episodes* (newest last) in the fact
``sentinel_memory``; the fact cache (jsonfile, Redis...) stores it between runs and
across controllers. An episode records one attempt at one failure signature:

``{"signature", "service", "host", "error", "diagnosis", "commands": [{"command",
"source", "verdict", "rc"}], "success", "attempts", "started", "finished",
"approval"}``

Everything here is tolerant: a memory that is not a list, an episode that is not a
mapping or a command entry without a text is dropped, never raised on, because a
damaged cache must not stop a run.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import SERVICE_PORTS
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import normalise_error

DEFAULT_MAX_EPISODES = 50
APPROVALS = ("none", "auto", "approved", "rejected", "pending")
# Bounds on what an episode keeps, so a cache entry stays small.
_MAX_TEXT = 500
_MAX_COMMANDS = 20
_MAX_SIGNATURE = 300


class EpisodeError(ValueError):
    """Bad arguments to a memory function (never raised for bad stored data)."""


def _text(value: Any, limit: int = _MAX_TEXT) -> str:
    if value is None:
        return ""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rc(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def normalise_command(entry: Any) -> dict | None:
    """A command record ``{command, source, verdict, rc}`` or ``None`` when unusable."""
    if isinstance(entry, str):
        entry = {"command": entry}
    if not isinstance(entry, Mapping):
        return None
    command = entry.get("command")
    if not command and isinstance(entry.get("argv"), (list, tuple)):
        command = " ".join(str(a) for a in entry["argv"])
    if not command or not isinstance(command, str):
        return None
    record = {
        "command": _text(command),
        "source": _text(entry.get("source") or "unknown", 40),
        "verdict": _text(entry.get("verdict") or "", 20),
        "rc": _rc(entry.get("rc")),
    }
    if entry.get("read_only") is True:
        record["read_only"] = True  # a diagnosis: its exit code is an answer, not a failed fix
    if entry.get("cut") is True or len(command) > _MAX_TEXT:
        record["cut"] = True  # kept for the record, never replayed: a cut command is another command
    return record


def normalise_episode(episode: Any) -> dict | None:
    """The episode with known keys only and bounded texts, or ``None`` when unusable."""
    if not isinstance(episode, Mapping):
        return None
    signature = episode.get("signature")
    if not signature or not isinstance(signature, str) or len(signature) > _MAX_SIGNATURE:
        return None  # a signature is "service:digest"; a longer one was never written by a run
    commands = episode.get("commands") or []
    if not isinstance(commands, (list, tuple)):
        commands = []
    approval = str(episode.get("approval") or "none")
    try:
        attempts = max(int(episode.get("attempts") or 1), 1)
    except (TypeError, ValueError):
        attempts = 1
    return {
        "signature": str(signature),
        "service": _text(episode.get("service"), 80),
        "host": _text(episode.get("host"), 255),
        "error": _text(episode.get("error")),
        "diagnosis": _text(episode.get("diagnosis")),
        "commands": [c for c in (normalise_command(e) for e in commands[:_MAX_COMMANDS]) if c],
        "success": bool(episode.get("success")),
        "attempts": attempts,
        "started": _text(episode.get("started"), 40),
        "finished": _text(episode.get("finished"), 40),
        "approval": approval if approval in APPROVALS else "none",
        "facts": [_text(f, 200) for f in (episode.get("facts") or [])[:20] if isinstance(f, str)]
        if isinstance(episode.get("facts"), (list, tuple)) else [],
    }


def normalise_memory(memory: Any) -> list[dict]:
    """A host's memory as a list of valid episodes (anything else becomes ``[]``)."""
    if not isinstance(memory, (list, tuple)):
        return []
    return [e for e in (normalise_episode(item) for item in memory) if e]


def append_episode(memory: Any, episode: Mapping, max_episodes: int = DEFAULT_MAX_EPISODES) -> list[dict]:
    """``memory`` plus ``episode`` (newest last), keeping the newest ``max_episodes``."""
    try:
        limit = int(max_episodes)
    except (TypeError, ValueError) as exc:
        raise EpisodeError(f"max_episodes must be an integer, got {max_episodes!r}") from exc
    if limit < 1:
        raise EpisodeError(f"max_episodes must be at least 1, got {limit}")
    record = normalise_episode(episode)
    if record is None:
        raise EpisodeError(f"an episode needs a mapping with a non-empty 'signature' of at most {_MAX_SIGNATURE} characters")
    episodes = normalise_memory(memory)
    episodes.append(record)
    return episodes[-limit:]


def in_scope(episode: Mapping, host: str = "") -> bool:
    """Whether an episode may speak for what it claims: the service it names is the one its
    signature (``service:digest``) names, and, read from ``host``'s memory, it names ``host``.
    An episode kept in one host's memory for another host, or under one service for another's
    failure, was not written by a run there: it must not ban or offer a command for them."""
    claimed = _service_of("", str(episode.get("service") or ""))
    if claimed and claimed != _service_of(str(episode.get("signature") or "").split(":", 1)[0]):
        return False
    return not host or not episode.get("host") or episode.get("host") == host


def host_memory(memory: Any, host: str) -> list[dict]:
    """``host``'s memory with only the episodes that may speak for it (``in_scope``)."""
    return [e for e in normalise_memory(memory) if in_scope(e, host)]


def _memories(memories: Any) -> Iterable[list[dict]]:
    """Accept one host's list, a list of per-host lists, or a mapping host -> list."""
    if isinstance(memories, Mapping):
        return [host_memory(v, str(k)) for k, v in memories.items()]
    if isinstance(memories, (list, tuple)):
        if any(isinstance(item, Mapping) and "signature" in item for item in memories):
            return [host_memory(memories, "")]
        return [host_memory(item, "") for item in memories]
    return []


def _plan_of(episode: Mapping) -> tuple[str, ...]:
    return tuple(c["command"] for c in episode["commands"])


def _summarise(signature: str, episodes: list[dict]) -> dict:
    episodes = sorted(episodes, key=lambda e: e["finished"] or e["started"])
    # The last outcome of each plan for this signature: a fix that healed once and then ran
    # without healing is demoted (not offered) until it heals again.
    last_outcome: dict[tuple[str, ...], bool] = {}
    for episode in episodes:
        plan = _plan_of(episode)
        if plan:
            last_outcome[plan] = episode["success"]
    healed_commands: set[str] = set()
    successes: list[dict] = []
    demoted: list[dict] = []
    seen_plans: set[tuple[str, ...]] = set()
    for episode in reversed(episodes):
        if not episode["success"]:
            continue
        commands = [c["command"] for c in episode["commands"] if c["rc"] in (0, None)]
        healed_commands.update(commands)
        key = tuple(commands)
        if not commands or key in seen_plans or any(c.get("cut") for c in episode["commands"]):
            continue
        seen_plans.add(key)
        entry = {
            "commands": commands,
            "diagnosis": episode["diagnosis"],
            "error": episode["error"],
            "host": episode["host"],
            "finished": episode["finished"],
            "sources": sorted({c["source"] for c in episode["commands"]}),
            "facts": episode.get("facts", []),
        }
        (successes if last_outcome.get(_plan_of(episode), True) else demoted).append(entry)

    failed: list[str] = []
    for episode in episodes:
        for command in episode["commands"]:
            text = command["command"]
            if command["rc"] not in (0, None) and not command.get("read_only") and text not in healed_commands \
                    and text not in failed:
                failed.append(text)
    return {
        "signature": signature,
        "service": episodes[-1]["service"] if episodes else "",
        "episodes": len(episodes),
        "failed_commands": failed,
        "successes": successes,
        "demoted": demoted,
    }


def lookup(memories: Any, signature: str) -> dict:
    """What the fleet's memory knows about ``signature``.

    Returns ``{"signature", "service", "episodes", "failed_commands", "successes", "demoted"}``:

    - ``failed_commands``: command texts that exited non-zero in some episode of the
      signature and never belonged to a successful one (oldest first, unique);
    - ``successes``: the plans that healed it, newest first, unique by commands, each
      ``{"commands": [text...], "diagnosis", "error", "host", "finished", "sources", "facts"}``;
      only the commands that exited 0 are kept;
    - ``demoted``: plans that healed it once but whose latest run for it did not heal:
      they are not offered again until they heal again.
    """
    if not signature or not isinstance(signature, str):
        raise EpisodeError(f"signature must be a non-empty string, got {signature!r}")
    episodes = [e for memory in _memories(memories) for e in memory if e["signature"] == signature]
    return _summarise(signature, episodes)


def index(memories: Any) -> dict[str, dict]:
    """``lookup`` for every signature at once: one pass over the fleet's memory, so each
    planning step reads one entry instead of every host's episodes."""
    by_signature: dict[str, list[dict]] = {}
    for memory in _memories(memories):
        for episode in memory:
            by_signature.setdefault(episode["signature"], []).append(episode)
    return {signature: _summarise(signature, episodes) for signature, episodes in by_signature.items()}


# ---------------------------------------------------------------------------- recall
#
# Similar-incident recall: a fix that healed a failure of the same service whose key facts
# have the same shape once host-specific values are abstracted (paths keep their role and
# name pattern, ports other than the service's own, PIDs, numbers, units and host names
# become placeholders). It is offered to the model, or shown as a hint; never run as is.

RECALL_THRESHOLD = 0.6  # weighted share of abstract facts two incidents must have in common
RECALL_LIMIT = 3        # incidents offered per planning step
RECALL_POOL = 40        # candidates the recall index keeps per service
_CAUSE_WEIGHT = 2.0     # a cause fact counts twice as much as a context fact
_CONTEXT_PREFIXES = ("status:", "path ", "error:")
_FHS_ROLES = (("/etc/", "config"), ("/var/lib/", "data"), ("/srv/", "data"), ("/var/cache/", "cache"),
              ("/var/spool/", "data"), ("/run/", "runtime"), ("/var/run/", "runtime"), ("/var/log/", "log"),
              ("/tmp/", "tmp"), ("/var/tmp/", "tmp"), ("/usr/", "system"), ("/bin/", "system"),
              ("/sbin/", "system"), ("/lib/", "system"), ("/opt/", "app"), ("/home/", "home"), ("/var/www/", "web"))
_SERVICE_ROLES = (("config_paths", "config"), ("data_paths", "data"), ("runtime_paths", "runtime"),
                  ("pid_files", "runtime"), ("log_paths", "log"), ("logs", "log"), ("paths", "path"))
_PATH_CHARS = r"[\w.+@%=~-]"
_VALUES = re.compile(
    r"(?P<path>(?<![\w.~/-])/" + _PATH_CHARS + r"+(?:/" + _PATH_CHARS + r"+)*/?)"
    r"|(?P<unit>(?<![\w./-])[\w@-]+(?:\.[\w@-]+)*\.(?:service|socket|timer|mount|target|path)\b)"
    r"|(?P<port>(?:(?<=\bport )|(?<=<ip>:)|(?<=\*:)|(?<=\]:))\d{1,5}\b)"
    r"|(?P<number>(?<![\w<#.{:/-])(?!0[0-7]{3}\b)\d+(?:\.\d+)?(?![\w>}]))"
    r"|(?P<lineno>(?<=\w:)\d+\b)")


def _service_of(signature: str, service: str = "") -> str:
    name = (service or signature.split(":", 1)[0] or "").strip().lower()
    return name[:-len(".service")] if name.endswith(".service") else name


def _own_ports(service: str, service_def: Mapping | None) -> set[str]:
    ports = {str(p) for p in SERVICE_PORTS.get(service, ())}
    for port in (service_def or {}).get("ports") or []:
        ports.add(str(port))
    return ports


def _service_dirs(service_def: Mapping | None) -> list[tuple[str, str]]:
    dirs = []
    for key, role in _SERVICE_ROLES:
        values = (service_def or {}).get(key) or []
        for value in [values] if isinstance(values, str) else values:
            if isinstance(value, str) and value.startswith("/"):
                dirs.append((value.rstrip("/") or "/", role))
    return sorted(dirs, key=lambda d: len(d[0]), reverse=True)


def path_role(path: str, service_def: Mapping | None = None) -> str:
    """What a path is for this service: ``own-<role>`` under (or equal to) one of the
    definition's config/data/runtime/log paths, else the filesystem hierarchy's role
    (``config`` under /etc, ``data`` under /var/lib or /srv, ...) or ``other``."""
    for directory, role in _service_dirs(service_def):
        if path == directory or path.startswith(directory.rstrip("/") + "/"):
            return f"own-{role}"
    for prefix, role in _FHS_ROLES:
        if path.startswith(prefix) or path == prefix.rstrip("/"):
            return role
    return "other"


def _name_pattern(path: str) -> str:
    """The basename's pattern: its extensions kept, the name and digits abstracted
    (``zz-broken.conf`` -> ``*.conf``, ``error.log.1`` -> ``*.log.#``)."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    parts = re.sub(r"\d+", "#", base).split(".")
    return "*." + ".".join(parts[1:]) if len(parts) > 1 and parts[0] else "*" if len(parts) == 1 else "." + base


def fact_shape(fact: str, service: str, service_def: Mapping | None = None) -> tuple[str, list[tuple[str, str]]]:
    """``(shape, values)``: the fact with its host-specific values abstracted, and those
    values in order as ``(kind, value)`` (kind ``path``, ``unit``, ``port``, ``number``,
    ``lineno``). The service's own ports and file modes stay literal."""
    own = _own_ports(_service_of("", service), service_def)
    values: list[tuple[str, str]] = []

    def swap(match: re.Match) -> str:
        kind = match.lastgroup or "number"
        value = match.group(0)
        if kind == "path":
            value = value.rstrip(".") if len(value.rstrip(".")) > 1 else value
            tail = match.group(0)[len(value):]
            values.append(("path", value))
            return f"<path:{path_role(value, service_def)}:{_name_pattern(value)}>" + tail
        if kind == "port" and value in own:
            return value
        values.append((kind, value))
        return f"<{kind}>"

    return _VALUES.sub(swap, str(fact)), values


def _weight(shape: str) -> float:
    if shape.startswith(_CONTEXT_PREFIXES) or (shape.startswith("pid file ") and shape.endswith(" missing")):
        return 1.0
    return _CAUSE_WEIGHT


def _shapes(facts: Iterable[str], error: str, service: str, service_def: Mapping | None) -> list[tuple[str, str]]:
    """(shape, fact) pairs of an incident: its key facts and its health error."""
    pairs = [(fact_shape(f, service, service_def)[0], f) for f in facts if isinstance(f, str) and f.strip()]
    if error and error.strip():
        text = "error: " + normalise_error(error)
        pairs.append((fact_shape(text, service, service_def)[0], text))
    return pairs


def similarity(facts: Iterable[str], error: str, other_facts: Iterable[str], other_error: str, service: str,
               service_def: Mapping | None = None) -> float:
    """How close two incidents of ``service`` are, 0..1: the weighted share of their
    abstract facts (and health errors) they have in common, cause facts (a config test
    message, a missing or denied path, a port held by another program, a full disk...)
    counting twice. 0 when they share no cause fact: a different error class is never
    similar, however much context (status, probed paths) they share."""
    return _score({pair[0] for pair in _shapes(facts, error, service, service_def)},
                  {pair[0] for pair in _shapes(other_facts, other_error, service, service_def)})


def _score(mine: set[str], theirs: set[str]) -> float:
    common = mine & theirs
    if not any(_weight(s) > 1.0 for s in common):
        return 0.0
    union = sum(_weight(s) for s in mine | theirs)
    return round(sum(_weight(s) for s in common) / union, 3) if union else 0.0


def _path_mapping(old: str, new: str) -> tuple[str, str] | None:
    """The differing directory prefixes of two paths that end alike
    (``/srv/a/x``, ``/srv/b/x`` -> ``/srv/a``, ``/srv/b``), else None."""
    old_parts, new_parts = old.rstrip("/").split("/"), new.rstrip("/").split("/")
    same = 0
    while same < min(len(old_parts), len(new_parts)) - 1 and old_parts[-1 - same] == new_parts[-1 - same]:
        same += 1
    if same == 0:
        return None
    old_prefix, new_prefix = "/".join(old_parts[:-same]), "/".join(new_parts[:-same])
    if not old_prefix.strip("/") or not new_prefix.strip("/"):
        return None
    return old_prefix, new_prefix


def value_mapping(facts: Iterable[str], error: str, other_facts: Iterable[str], other_error: str, service: str,
                  service_def: Mapping | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """``(mapping, unmapped)`` from the other incident's values to this one's.

    Facts are paired by shape when the shape occurs once on each side; their values are
    paired in order. A path, port or unit that differs maps when it maps to one value
    only; a path that ends like its counterpart also maps its differing directory
    prefix. ``unmapped``: values that differ but cannot be mapped (numbers, line numbers,
    a value with two counterparts), each with a short reason.
    """
    mine: dict[str, list[str]] = {}
    theirs: dict[str, list[str]] = {}
    for shape, fact in _shapes(facts, error, service, service_def):
        mine.setdefault(shape, []).append(fact)
    for shape, fact in _shapes(other_facts, other_error, service, service_def):
        theirs.setdefault(shape, []).append(fact)
    candidates: dict[str, set[str]] = {}
    kinds: dict[str, str] = {}
    for shape in sorted(set(mine) & set(theirs)):
        if len(mine[shape]) != 1 or len(theirs[shape]) != 1:
            continue
        mine_values = fact_shape(mine[shape][0], service, service_def)[1]
        their_values = fact_shape(theirs[shape][0], service, service_def)[1]
        for (kind, old), (_same_kind, new) in zip(their_values, mine_values):
            candidates.setdefault(old, set()).add(new)
            kinds[old] = kind
    mapping: dict[str, str] = {}
    unmapped: dict[str, str] = {}
    for old, news in candidates.items():
        if news == {old}:
            continue
        if len(news) > 1:
            unmapped[old] = "differs here, and not in one way: " + ", ".join(sorted(news))
        elif kinds[old] in ("path", "port", "unit"):
            mapping[old] = next(iter(news))
        else:
            unmapped[old] = f"a {kinds[old]} that is {next(iter(news))} here; check what it stands for"
    for old, new in list(mapping.items()):
        if kinds[old] == "path":
            prefixes = _path_mapping(old, new)
            if prefixes and prefixes[0] not in mapping and prefixes[0] not in unmapped:
                mapping[prefixes[0]] = prefixes[1]
    return mapping, unmapped


def _value_pattern(value: str) -> re.Pattern[str]:
    if value.startswith("/"):
        # A path, or a path under it, or a name derived from it (x.conf -> x.conf.disabled).
        return re.compile(r"(?<![\w.~/-])" + re.escape(value) + r"(?![\w~-])")
    return re.compile(r"(?<![\w.{:/-])" + re.escape(value) + r"(?![\w}-])")


def adapt_command(command: str, mapping: Mapping[str, str], unmapped: Mapping[str, str] = ()) -> dict:
    """``{"command", "original", "changed", "note"}``: ``command`` with the mapped values
    replaced (longest first, each position once), or as it was with a note naming a
    value that differs here and could not be mapped."""
    text = str(command)
    spans: list[tuple[int, int, str]] = []
    for old in sorted(mapping, key=len, reverse=True):
        for match in _value_pattern(old).finditer(text):
            if any(start < match.end() and match.start() < end for start, end, _new in spans):
                continue
            spans.append((match.start(), match.end(), mapping[old]))
    adapted = text
    for start, end, new in sorted(spans, reverse=True):
        adapted = adapted[:start] + new + adapted[end:]
    notes = [f"{old}: {why}" for old, why in sorted((unmapped or {}).items())
             if _value_pattern(old).search(text)]
    return {"command": adapted, "original": text, "changed": adapted != text,
            "note": ("kept as it was there: " + "; ".join(notes)) if notes else ""}


def _candidate(signature: str, summary: Mapping, success: Mapping) -> dict:
    return {"signature": signature, "service": _service_of(signature, str(summary.get("service") or "")),
            "host": str(success.get("host") or ""), "error": str(success.get("error") or ""),
            "facts": [f for f in success.get("facts") or [] if isinstance(f, str)],
            "commands": [c for c in success.get("commands") or [] if isinstance(c, str)],
            "diagnosis": str(success.get("diagnosis") or ""), "finished": str(success.get("finished") or "")}


def recall_index(index_: Mapping[str, Mapping], pool: int = RECALL_POOL) -> dict[str, list[dict]]:
    """The candidates for recall, by service: from ``index`` (one pass over its
    signatures), each remembered plan that healed and was not demoted since, newest
    first, one per abstract incident and plan (hosts with the same fault at other paths
    count once), at most ``pool`` per service, so recall costs the same whatever the
    size of the fleet."""
    by_service: dict[str, list[dict]] = {}
    for signature, summary in (index_ or {}).items():
        if not isinstance(summary, Mapping):
            continue
        for success in summary.get("successes") or []:
            if isinstance(success, Mapping) and success.get("commands"):
                item = _candidate(str(signature), summary, success)
                by_service.setdefault(item["service"], []).append(item)
    out = {}
    for service, items in by_service.items():
        items.sort(key=lambda c: c["finished"], reverse=True)
        kept, seen = [], set()
        for item in items:
            key = (tuple(sorted(pair[0] for pair in _shapes(item["facts"], item["error"], service, None))),
                   tuple(fact_shape(c, service)[0] for c in item["commands"]))
            if key in seen:
                continue
            seen.add(key)
            kept.append(item)
            if len(kept) >= pool:
                break
        out[service] = kept
    return out


def similar_incidents(candidates: Mapping[str, Sequence[Mapping]] | Sequence[Mapping], *, service: str,
                      signature: str, error: str, facts: Sequence[str], service_def: Mapping | None = None,
                      host: str = "", failed_commands: Iterable[str] = (), limit: int = RECALL_LIMIT,
                      threshold: float = RECALL_THRESHOLD) -> list[dict]:
    """Remembered fixes of similar (not identical) incidents of ``service``, best first.

    ``candidates``: ``recall_index(...)`` (or one service's list of it). An incident is
    offered when it is of the same service, its signature differs from ``signature`` (an
    identical one is memory's exact fix) and ``similarity`` reaches ``threshold``; its
    commands come adapted to this incident's values (``adapt_command``). A plan holding a
    command known to fail on this failure is not offered. At most ``limit``; each
    ``{"signature", "host", "similarity", "facts", "error", "diagnosis", "finished",
    "commands": [{"command", "original", "changed", "note"}], "mapping", "facts_here"}``.
    """
    if limit < 1:
        raise EpisodeError(f"limit must be at least 1, got {limit}")
    name = _service_of("", service)
    pool = (candidates.get(name) or []) if isinstance(candidates, Mapping) else (candidates or [])
    bad = {" ".join(str(c).split()) for c in failed_commands or ()}
    mine = {pair[0] for pair in _shapes(facts, error, name, service_def)}
    scored = []
    for item in pool:
        if not isinstance(item, Mapping) or item.get("signature") == signature:
            continue
        if _service_of(str(item.get("signature") or ""), str(item.get("service") or "")) != name:
            continue
        score = _score(mine, {pair[0] for pair in _shapes(item.get("facts") or [], str(item.get("error") or ""),
                                                          name, service_def)})
        if score < threshold:
            continue
        mapping, unmapped = value_mapping(facts, error, item.get("facts") or [], str(item.get("error") or ""),
                                          name, service_def)
        if host and item.get("host") and item["host"] != host and item["host"] not in mapping:
            mapping[str(item["host"])] = host
        commands = [adapt_command(c, mapping, unmapped) for c in item.get("commands") or []]
        if not commands or any(" ".join(c["command"].split()) in bad for c in commands):
            continue
        scored.append({"signature": item.get("signature"), "host": item.get("host") or "", "similarity": score,
                       "facts": list(item.get("facts") or []), "error": item.get("error") or "",
                       "diagnosis": item.get("diagnosis") or "", "finished": item.get("finished") or "",
                       "commands": commands, "mapping": mapping, "facts_here": list(facts)})
    scored.sort(key=lambda r: (-r["similarity"], -_stamp(r["finished"])))
    return scored[:limit]


def _stamp(finished: str) -> float:
    digits = re.sub(r"\D", "", finished or "")
    return float(digits or 0)


def _valid_cache_payload(raw: str) -> bool:
    """True when ``raw`` is what ansible's jsonfile cache can load: a JSON object,
    possibly wrapping a serialised object under ``__payload__`` (ansible-core 2.19+)."""
    try:
        data = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    payload = data.get("__payload__") if len(data) == 1 else None
    if isinstance(payload, str):
        try:
            return isinstance(json.loads(payload), dict)
        except ValueError:
            return False
    return True


def corrupt_cache_files(directory: str) -> list[str]:
    """Files of a jsonfile fact cache directory that ansible could not load.

    ansible-core stops the whole run on such a file (it deletes it and raises), so the
    workflow moves these aside before its hosts' variables are read. A missing
    directory has no corrupt files.
    """
    if not directory or not os.path.isdir(directory):
        return []
    found = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.startswith(".") or ".corrupt" in name or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                raw = handle.read()
        except (OSError, UnicodeDecodeError):
            found.append(path)
            continue
        if not _valid_cache_payload(raw):
            found.append(path)
    return found
