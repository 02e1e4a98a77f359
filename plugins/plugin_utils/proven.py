# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan already proven on this fleet needs no canary (canary.py).

The canary exists for plans nobody has seen heal this failure. A plan is proven for a failure
signature when the fleet's memory (every host's ``sentinel_memory`` at the start of the run)
shows it healed that signature on at least as many hosts as the canary has, with the very
commands and the very verdicts the policy gives them now, and no host's latest run of it for
that signature failed to heal:

- the same commands: a plan that differs in any command (another command, another value) is
  another plan, and canaries;
- the same verdicts: a policy that judges a command otherwise now (another rule, another
  autonomy setting) makes the plan unproven, since what was proven ran under other rules;
- the latest run per host: a host where the plan healed once and then did not heal stops it
  from being proven anywhere (memory demotes it on that host; the rollout must not skip the
  canary for it elsewhere).

Pure functions over episodes as ``memory.normalise_memory`` returns them.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory as memory_mod


def plan_key(commands: Iterable[Mapping]) -> list[list[str]]:
    """A plan as memory keeps it: each command's text and its verdict, in order."""
    return [[str(c.get("command") or ""), str(c.get("verdict") or "")] for c in commands]


def index(memories: Sequence) -> dict[str, dict[str, dict]]:
    """By signature, then by plan (its ``plan_key`` as JSON-safe text), each memory's latest run
    of that plan: ``{"healed": bool, "finished": str, "host": str}``; over every host's memory
    (a list of per-host episode lists).

    A memory is one host's fact cache entry, and it is one witness: the runs are counted by the
    memory they were read from, never by the host an episode names (a writer of one entry could
    otherwise name five hosts and skip the canary); any failed run of the plan in a memory,
    newer than its last heal there, keeps it unproven whatever another entry claims."""
    out: dict[str, dict[str, dict]] = {}
    for witness, memory in enumerate(memories):
        for episode in memory_mod.normalise_memory(memory):
            if not episode["commands"]:
                continue
            plan = _text(plan_key(episode["commands"]))
            when = episode["finished"] or episode["started"]
            runs = out.setdefault(episode["signature"], {}).setdefault(plan, {})
            named = episode["host"] or "?"
            for key in (witness, "host:" + named):  # the memory's own run, and the latest run any memory names
                if key not in runs or when >= runs[key]["finished"]:
                    runs[key] = {"healed": bool(episode["success"]), "finished": when, "host": named}
    return out


def proven_hosts(proven_index: Mapping, signature: str, commands: Iterable[Mapping]) -> list[str]:
    """The hosts whose memories show this plan (``commands`` with their current verdicts) healed
    ``signature``, one per memory, by its latest run there; none when any memory's latest run of
    it, or the latest run named for any host, did not heal."""
    runs = (proven_index.get(signature) or {}).get(_text(plan_key(commands))) or {}
    if not runs or not all(r.get("healed") for r in runs.values()):
        return []
    return sorted(str(r.get("host") or "?") for key, r in runs.items() if not str(key).startswith("host:"))


def _text(key: list[list[str]]) -> str:
    return "\n".join("\t".join(pair) for pair in key)
