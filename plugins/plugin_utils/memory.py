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
from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_MAX_EPISODES = 50
APPROVALS = ("none", "auto", "approved", "rejected", "pending")
# Bounds on what an episode keeps, so a cache entry stays small.
_MAX_TEXT = 500
_MAX_COMMANDS = 20


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
    return {
        "command": _text(command),
        "source": _text(entry.get("source") or "unknown", 40),
        "verdict": _text(entry.get("verdict") or "", 20),
        "rc": _rc(entry.get("rc")),
    }


def normalise_episode(episode: Any) -> dict | None:
    """The episode with known keys only and bounded texts, or ``None`` when unusable."""
    if not isinstance(episode, Mapping):
        return None
    signature = episode.get("signature")
    if not signature or not isinstance(signature, str):
        return None
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
        raise EpisodeError("an episode needs a mapping with a non-empty 'signature'")
    episodes = normalise_memory(memory)
    episodes.append(record)
    return episodes[-limit:]


def _memories(memories: Any) -> Iterable[list[dict]]:
    """Accept one host's list, a list of per-host lists, or a mapping host -> list."""
    if isinstance(memories, Mapping):
        return [normalise_memory(v) for v in memories.values()]
    if isinstance(memories, (list, tuple)):
        if any(isinstance(item, Mapping) and "signature" in item for item in memories):
            return [normalise_memory(memories)]
        return [normalise_memory(item) for item in memories]
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
        if not commands or key in seen_plans:
            continue
        seen_plans.add(key)
        entry = {
            "commands": commands,
            "diagnosis": episode["diagnosis"],
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
            if command["rc"] not in (0, None) and text not in healed_commands and text not in failed:
                failed.append(text)
    return {
        "signature": signature,
        "episodes": len(episodes),
        "failed_commands": failed,
        "successes": successes,
        "demoted": demoted,
    }


def lookup(memories: Any, signature: str) -> dict:
    """What the fleet's memory knows about ``signature``.

    Returns ``{"signature", "episodes", "failed_commands", "successes", "demoted"}``:

    - ``failed_commands``: command texts that exited non-zero in some episode of the
      signature and never belonged to a successful one (oldest first, unique);
    - ``successes``: the plans that healed it, newest first, unique by commands, each
      ``{"commands": [text...], "diagnosis", "host", "finished", "sources", "facts"}``;
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
