# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A degraded service's cause in a service it depends on.

A service whose checks time out while it runs is ``degraded`` (slow, alive): restarting it
drops what it is busy with and fixes nothing when what it waits on is elsewhere. Its
dependencies' own views say where: a database session that holds a lock every other session
queues behind (the blocker, often ``idle in transaction``), every connection slot taken, or
lock waits and pool exhaustion their logs or the dependent's own error lines speak of. Such a
cause is something a targeted action can end (one session, one client) without touching the
service or the database: the incident is planned, under ``do_no_harm``. Without one, a
degraded service stays reported and escalated, nothing planned.

Pure functions over the evidence module's ``sessions`` view (``module_utils/server_sessions``)
and the dependent's evidence. The texts are written to read the same across two looks at one
fault (numbers aside), since the failure's signature reads them.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import evidence_texts

CAUSE_PREFIX = "cause in "
# What a client or a server logs when a pool is full or a lock is waited on too long.
_TEXT_CAUSES = (
    ("every connection slot is taken", re.compile(
        r"too many (?:clients|connections)|remaining connection slots are reserved|connection limit exceeded"
        r"|max_connections|(?:connection )?pool (?:is )?(?:exhausted|full|limit)|QueuePool limit|"
        r"timed out waiting for a connection|no more connections", re.IGNORECASE)),
    ("sessions wait on a lock", re.compile(
        r"lock timeout|canceling statement due to lock|could not obtain lock|lock wait timeout exceeded|"
        r"deadlock detected|still waiting for \w+Lock", re.IGNORECASE)),
)
SECTIONS_FOR_TEXT = ("dependency_evidence", "journal", "logs", "status")


def _age(seconds: int) -> str:
    if seconds < 0:
        return "an unknown time"
    if seconds < 120:
        return f"{seconds} s"
    return f"{seconds // 60} min"


def _who(session: Mapping) -> str:
    parts = [f"user {session.get('user') or '?'}", f"database {session.get('database') or '?'}"]
    if session.get("application"):
        parts.append(f"application {session['application']}")
    parts.append(f"client {session.get('client') or '?'}")
    return ", ".join(parts)


def blockers(view: Mapping | None) -> list[Mapping]:
    """The sessions of ``view`` that other sessions wait on, most waiters first."""
    if not isinstance(view, Mapping):
        return []
    return [s for s in view.get("sessions") or [] if isinstance(s, Mapping) and int(s.get("blocks") or 0) > 0]


BLOCKER_FACTS = ("pid", "state", "state_s", "transaction_s", "blocks", "identity")


def blocker_facts(view: Mapping | None) -> list[dict]:
    """The blockers of ``view`` as the engine checks them (no statement text): PID, state, how
    long in it and in the transaction, how many wait, and when its backend and transaction
    started (``identity``: the host checks it again before ending the session)."""
    if not isinstance(view, Mapping) or view.get("error"):
        return []
    return [{key: session.get(key) for key in BLOCKER_FACTS} for session in blockers(view)]


def session_causes(name: str, view: Mapping | None) -> list[str]:
    """The causes the session view of dependency ``name`` shows, one line each."""
    if not isinstance(view, Mapping) or view.get("error"):
        return []
    out = []
    for session in blockers(view):
        state = str(session.get("state") or "?")
        held = (f"{state} for {_age(int(session.get('state_s', -1)))}"
                + (f", its transaction open for {_age(int(session.get('transaction_s', -1)))}"
                   if int(session.get("transaction_s", -1)) >= 0 else ""))
        out.append(f"{CAUSE_PREFIX}{name}: session PID {session.get('pid')} ({_who(session)}) blocks "
                   f"{session.get('blocks')} other session(s) that wait on its lock; it is {held}; its last "
                   f"statement: {str(session.get('query') or '?')[:160]}")
    limit, reserved = int(view.get("max_connections") or -1), int(view.get("reserved") or 0)
    used = int(view.get("client_sessions") or -1)
    if limit > 0 and used >= limit - max(reserved, 0):
        out.append(f"{CAUSE_PREFIX}{name}: every connection slot is taken ({used} client sessions, "
                   f"max_connections {limit}, {reserved} reserved for superusers)")
    return out


def text_causes(name_of: Mapping[str, str], evidence: Mapping | None, error: str = "") -> list[str]:
    """Causes named in words: a full pool or a lock waited on, in the dependencies' own lines
    (``dependency_evidence``) or the dependent's error lines. ``name_of``: dependency name ->
    itself (the dependencies to name; the first when a line does not say which)."""
    if not name_of:
        return []
    texts = {"error": error or ""}
    for key, text in evidence_texts(evidence if isinstance(evidence, Mapping) else None).items():
        if key.split(".", 1)[0].split("[", 1)[0] in SECTIONS_FOR_TEXT:
            texts[key] = text
    out = []
    for key, text in texts.items():
        owner = next((dep for dep in name_of if key.startswith(f"dependency_evidence.{dep}")), next(iter(name_of)))
        for line in text.splitlines():
            for what, pattern in _TEXT_CAUSES:
                if pattern.search(line):
                    found = f"{CAUSE_PREFIX}{owner}: {what}, as its lines say: {' '.join(line.split())[:200]}"
                    if not any(o.startswith(f"{CAUSE_PREFIX}{owner}: {what}") for o in out):
                        out.append(found)
    return out


def render_sessions(name: str, view: Mapping | None) -> str:
    """The session view of dependency ``name`` for the dependent's request: the blockers, the
    waiters grouped by what they wait on, the others counted; compact (a prompt item)."""
    if not isinstance(view, Mapping):
        return ""
    server = view.get("server") or "server"
    if view.get("error"):
        return f"{name} ({server}) sessions could not be read: {str(view['error'])[:300]}"
    sessions = [s for s in view.get("sessions") or [] if isinstance(s, Mapping)]
    lines = [f"{name} ({server}) client sessions: {view.get('client_sessions')} of max_connections "
             f"{view.get('max_connections')} ({view.get('reserved')} reserved for superusers)"]
    for session in blockers(view):
        lines.append(f"BLOCKER PID {session.get('pid')} ({_who(session)}): {session.get('state') or '?'} "
                     f"for {_age(int(session.get('state_s', -1)))}, transaction open "
                     f"{_age(int(session.get('transaction_s', -1)))}, blocks {session.get('blocks')}; "
                     f"last statement: {str(session.get('query') or '?')[:160]}")
    waiting: dict = {}
    for session in sessions:
        if session.get("blocked_by"):
            key = (tuple(session["blocked_by"]), session.get("wait") or "", session.get("user") or "",
                   str(session.get("query") or "")[:80])
            entry = waiting.setdefault(key, [0, -1])
            entry[0] += 1
            entry[1] = max(entry[1], int(session.get("state_s", -1)))
    for (by, wait, user, query), (count, longest) in waiting.items():
        lines.append(f"waiting: {count} session(s) of user {user or '?'} on {wait or 'a lock'} behind PID "
                     f"{', '.join(str(p) for p in by)}, the longest for {_age(longest)}: {query}")
    others: dict = {}
    for session in sessions:
        if not session.get("blocked_by") and not int(session.get("blocks") or 0):
            state = str(session.get("state") or "unknown")
            others[state] = others.get(state, 0) + 1
    if others:
        lines.append("others: " + ", ".join(f"{count} {state}" for state, count in sorted(others.items())))
    if view.get("left_out"):
        lines.append(f"{view['left_out']} more session(s) left out (read pg_stat_activity for them)")
    return "\n".join(lines)


def kinds(dependency: str, causes: Sequence[str]) -> str:
    """What kind of cause ``causes`` name in ``dependency``, in words that stay the same across
    looks at one fault (for its ``dependencies`` state, which the failure's signature reads)."""
    found = []
    for line in causes:
        if not line.startswith(f"{CAUSE_PREFIX}{dependency}: "):
            continue
        said = line[len(f"{CAUSE_PREFIX}{dependency}: "):]
        if said.startswith("session PID"):
            state = re.search(r"; it is (.+?) for ", said)
            kind = "a session holds a lock other sessions wait on" + (f" ({state.group(1)})" if state else "")
        else:
            kind = said.split(",", 1)[0]
        if kind not in found:
            found.append(kind)
    return "; ".join(found)


# Checks that ask the service something and read its answer (a process or a listening socket
# says nothing of whether it serves).
_ASKING_CHECKS = ("command", "http")


def waits_inside(name: str, checks: Sequence | None) -> list[str]:
    """A cause inside the degraded service itself: a check that asks it something is answered
    while another gets no answer in time. The service serves; one kind of request waits in it
    (writes paused, a table locked, a queue full), which a targeted command may lift without
    ending what it is busy with. [] when every asking check waits (then it is just slow) or
    none failed by timing out."""
    rows = [c for c in checks or () if isinstance(c, Mapping)]
    answered = [c for c in rows if c.get("ok") and c.get("type") in _ASKING_CHECKS]
    waiting = [c for c in rows if not c.get("ok") and c.get("timed_out")]
    if not answered or not waiting:
        return []
    return [f"{CAUSE_PREFIX}{name}: it answers ({str(answered[0].get('detail') or answered[0].get('type'))[:160]}) "
            f"while another request gets no answer ({str(waiting[0].get('detail') or waiting[0].get('type'))[:160]}): "
            "one kind of request waits inside the service (paused, locked or queued); it is not down"]


def degraded_note(name: str, causes: Sequence[str]) -> str:
    """The evidence's ``degraded`` entry: what the state is, and the causes found (one a line)."""
    head = (f"{name} is degraded, not down: its checks time out while its processes run (slow, alive); "
            "it waits on something")
    if not causes:
        return head + "; its dependencies' views show no cause"
    return "\n".join([head] + list(causes))


def causes_in(evidence: Mapping | None) -> list[str]:
    """The dependency causes a ``degraded`` entry of ``evidence`` names."""
    note = evidence.get("degraded") if isinstance(evidence, Mapping) else None
    return [line for line in str(note or "").splitlines() if line.startswith(CAUSE_PREFIX)]
