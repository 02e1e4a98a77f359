# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dependency judged by what its dependent reports, and its evidence in the dependent's request.

A database whose port answers can still refuse its app's logins, fail its queries on a
missing file or hold them on a lock: its own checks pass, the app's errors say otherwise.
A dependency is a *suspect* of a dependent's failure when the dependent's own error or
error lines (its health error, config test, journal and log lines that read as errors)
name it: its endpoint (a port it listens on, a socket or runtime path of it), its name
(the service, its units, its processes), or the word a client uses for what it is (a
database, a cache; ``KIND_WORDS``). The terms of those lines (their quoted words and
their message phrases) then pick the dependency's own log and journal lines that speak
of the same failure, which go, bounded and cut at line ends, into the dependent's request.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import evidence_texts

# What clients call a server of a kind, found by the stem of its name or processes: an app
# logs "database: ..." about its PostgreSQL, "cache ..." about its Redis.
KIND_WORDS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("postgres", "mysql", "mariadb", "mongo", "pgbouncer", "cockroach"), ("database", "sql", "psycopg", "jdbc")),
    (("redis", "memcache", "valkey", "keydb"), ("cache", "redis")),
    (("rabbitmq", "kafka", "nats", "mosquitto", "activemq"), ("broker", "queue", "amqp")),
    (("nginx", "apache", "httpd", "haproxy", "envoy"), ("upstream", "proxy")),
    (("slapd", "ldap"), ("ldap", "directory")),
)
# A line that reads as an error (what a client logs when its server fails it).
_ERROR_LINE = re.compile(r"\b(?:error|fatal|fail(?:ed|ure)?|refused|denied|reject\w*|timeout|timed out|could not"
                         r"|cannot|can't|unable|certificate|unreachable|reset|too many|exhausted)\b", re.IGNORECASE)
# A quoted value (a user, a database, a file): overlapping matches, so one closing quote can
# open the next.
_QUOTED = re.compile(r"""(?<=["'`])([^"'`\s]{3,120})(?=["'`])""")
_PHRASE_SPLIT = re.compile(r"""["'`:;,()\[\]{}]|\\"|\s-\s""")
_WORD = re.compile(r"[A-Za-z]{2,}")
# Phrases too common to tell one failure from another.
_COMMON_PHRASES = frozenset(("health check failed", "connection to server at", "no such file or directory",
                             "status unavailable", "storage ok"))
# Quoted words that are the names of a message's fields, not values of this failure.
_KEYS_NOT_VALUES = frozenset(w for _stems, words in KIND_WORDS for w in words) | {"status", "error", "storage", "ok",
                                                                                  "unavailable", "message", "detail"}
# A log line's time and process id, which change between repeats of one line.
_VOLATILE = re.compile(r"\d+")
SECTION_BUDGET = 1000   # characters of one dependency's evidence in the dependent's request
LINES_MAX = 12          # lines of one dependency's logs kept


_DEPENDENT_SECTIONS = ("config_test", "journal", "logs", "log", "status")


def _dependent_texts(evidence: Mapping | None) -> list[str]:
    """The texts of the dependent's own words in its evidence: its config test, status, journal and logs."""
    return [text for key, text in evidence_texts(evidence if isinstance(evidence, Mapping) else None).items()
            if key.split(".", 1)[0].split("[", 1)[0] in _DEPENDENT_SECTIONS]


def _dependent_lines(error: str, evidence: Mapping | None) -> list[str]:
    """The dependent's own error lines: its health error (every line), and the lines of its
    config test, journal and logs that read as errors, newest last."""
    lines = [line.strip() for line in str(error or "").splitlines() if line.strip()]
    for text in _dependent_texts(evidence):
        for line in text.splitlines():
            line = line.strip()
            if line and _ERROR_LINE.search(line) and line not in lines:
                lines.append(line)
    return lines


def _stems(definition: Mapping) -> set[str]:
    names = [str(definition.get("name") or "")] + [str(u) for u in definition.get("units") or []] \
        + [str(p) for p in definition.get("processes") or []]
    stems = set()
    for name in names:
        stem = re.split(r"[@.]", name, maxsplit=1)[0].lower()
        stem = re.sub(r"-server$|d$", "", stem) if len(stem) > 5 else stem
        if len(stem) >= 4:
            stems.add(stem)
    return stems


def dependency_terms(definition: Mapping) -> tuple[list[re.Pattern], list[str]]:
    """How a dependent's line names ``definition``: patterns of its endpoint and name, and
    the words of its kind."""
    patterns = []
    for port in definition.get("ports") or []:
        patterns.append(re.compile(r"(?:[:.]|\bport\s+)%d\b" % int(port), re.IGNORECASE))
    for path in definition.get("runtime_paths") or []:
        path = str(path).rstrip("/")
        if len(path) > 5:
            patterns.append(re.compile(re.escape(path) + r"(?![\w-])"))
    stems = _stems(definition)
    for stem in stems:
        patterns.append(re.compile(r"\b" + re.escape(stem), re.IGNORECASE))
    words: list[str] = []
    for kind_stems, kind_words in KIND_WORDS:
        if any(stem.startswith(k) or k.startswith(stem) for stem in stems for k in kind_stems):
            words.extend(kind_words)
    return patterns, words


def _named_by(line: str, patterns: Sequence[re.Pattern], kind: re.Pattern | None) -> str:
    for pattern in list(patterns) + ([kind] if kind is not None else []):
        found = pattern.search(line)
        if found:
            return found.group(0).strip(":. ")
    return ""


def naming_lines(error: str, evidence: Mapping | None, definition: Mapping) -> list[str]:
    """The dependent's error lines that name the dependency ``definition`` (its endpoint,
    its name, or its kind); empty when none does."""
    return [line for line, _by in naming(error, evidence, definition)]


def naming(error: str, evidence: Mapping | None, definition: Mapping) -> list[tuple[str, str]]:
    """``(line, what of the dependency it names)`` for each of the dependent's error lines that name it."""
    patterns, words = dependency_terms(definition)
    kind = re.compile(r"\b(?:%s)\b" % "|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None
    found = []
    for line in _dependent_lines(error, evidence):
        by = _named_by(line, patterns, kind)
        if by:
            found.append((line[:600], by))
    return found


# A database's words for an object it cannot find, by the server that words it so. PostgreSQL:
# `relation "visits" does not exist`, `schema "app" does not exist`, `function f(integer) does not
# exist`, the name maybe qualified (`"public.visits"`) or in the message's own quotes. MySQL and
# MariaDB: `Table 'app.visits' doesn't exist`, `Unknown database 'app'`. SQLite: `no such table:
# visits` (a view, an index, a function, a trigger alike).
_NAME = r"[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)?"
_MISSING_OBJECT = re.compile(
    r"\b(?P<kind>relation|table|view|schema|function|sequence)\s+[\"']?(?P<name>" + _NAME + r")"
    r"(?:\([^)]*\))?[\"']?\s+does not exist", re.IGNORECASE)
_MISSING_BY_SERVER = (
    ("postgresql", _MISSING_OBJECT),
    ("mysql", re.compile(r"\b(?P<kind>table)\s+[`'\"](?P<name>" + _NAME + r")[`'\"]\s+doesn'?t exist", re.IGNORECASE)),
    ("mysql", re.compile(r"\bunknown\s+(?P<kind>database)\s+[`'\"](?P<name>" + _NAME + r")[`'\"]", re.IGNORECASE)),
    ("sqlite", re.compile(r"\bno such (?P<kind>table|view|index|function|trigger):\s*(?P<name>" + _NAME + r")",
                          re.IGNORECASE)),
)
SERVER_WORDING = {"postgresql": "PostgreSQL", "mysql": "MySQL/MariaDB", "sqlite": "SQLite"}
_MAX_NAMES = 8


def missing_object_mentions(error: str, evidence: Mapping | None) -> list[dict[str, str]]:
    """Each database object the dependent's error lines say does not exist, once, with the kind
    of object and the server whose wording said it (``postgresql``, ``mysql`` for MySQL and
    MariaDB, ``sqlite``): ``[{"name", "kind", "server"}]``, at most eight."""
    found: list[dict[str, str]] = []
    for text in [str(error or "")] + _dependent_texts(evidence):
        hits = sorted(((m.start(), server, m) for server, pattern in _MISSING_BY_SERVER
                       for m in pattern.finditer(text)), key=lambda h: h[0])
        for _start, server, match in hits:
            item = {"name": match.group("name"), "kind": match.group("kind").lower(), "server": server}
            if item not in found:
                found.append(item)
    return found[:_MAX_NAMES]


def missing_objects(error: str, evidence: Mapping | None) -> list[str]:
    """The names of the database objects the dependent's error lines say do not exist in
    PostgreSQL's wording (the server whose objects view the evidence module reads): each part
    of a qualified name, the last first, at most eight."""
    names: list[str] = []
    for item in missing_object_mentions(error, evidence):
        if item["server"] != "postgresql":
            continue
        for part in reversed(item["name"].split(".")):
            if part not in names:
                names.append(part)
    return names[:_MAX_NAMES]


def render_missing(dependent: str, mentions: list[dict[str, str]]) -> str:
    """One line per server wording recognised: which objects the dependent's errors say do not exist."""
    lines = []
    for server in dict.fromkeys(m["server"] for m in mentions):
        said = ", ".join(f"{m['kind']} {m['name']}" for m in mentions if m["server"] == server)
        lines.append(f"{dependent}'s errors say, in {SERVER_WORDING.get(server, server)}'s wording, that these do "
                     f"not exist: {said}")
    return "\n".join(lines)


def render_objects(dependent: str, dependency: str, view: Mapping) -> str:
    """The dependency's ``objects`` view (the evidence module's) as lines for the request: where
    objects of the names the dependent's errors say do not exist are, and what decides how
    sessions resolve unqualified names."""
    names = [str(n) for n in view.get("names") or []]
    head = (f"{dependency}: where objects named {', '.join(names)} are (the names {dependent}'s errors say do not "
            f"exist), read now in every database that takes connections")
    if view.get("error"):
        return f"{head}: could not be read: {view['error']}"
    lines = [head + ":"]
    found = [f for f in view.get("found") or [] if isinstance(f, Mapping)]
    for name in names:
        here = [f for f in found if name in (f.get("name"), f.get("schema") if f.get("kind") == "schema" else None)]
        if not here:
            lines.append(f"- {name}: in no database")
        for f in here:
            where = ".".join(str(p) for p in (f.get("database"), f.get("schema"), f.get("name")) if p)
            lines.append(f"- {name}: {f.get('kind')} {where} (owner {f.get('owner')})")
    if view.get("databases_left_out"):
        lines.append(f"- ({view['databases_left_out']} more database(s) not read)")
    for database, why in sorted((view.get("unread") or {}).items()):
        lines.append(f"- database {database} could not be read: {why}")
    path = view.get("search_path") if isinstance(view.get("search_path"), Mapping) else {}
    if path:
        lines.append(f"Unqualified names resolve by search_path: {path.get('value')} (server's, source "
                     f"{path.get('source')}), unless a setting below changes it for a role or database:")
    settings = [v for v in view.get("name_settings") or [] if isinstance(v, Mapping)]
    for v in settings:
        role = f"role {v['role']}" if v.get("role") else "every role"
        database = f"database {v['database']}" if v.get("database") else "every database"
        lines.append(f"- {role}, {database}: {v.get('settings')} (ALTER ROLE/DATABASE ... SET; no time is kept)")
    if path and not settings:
        lines.append("- no role or database setting (ALTER ROLE/DATABASE ... SET) is in effect")
    return "\n".join(lines)


# A database's words for a client it refused (PostgreSQL's): `permission denied for table visits`,
# `database "app" is not currently accepting connections`, `too many connections for role "app"`.
_PERMISSION_DENIED = re.compile(
    r"\bpermission denied for (?P<kind>table|relation|view|sequence|schema|function|database)\s+"
    r"[\"']?(?:[A-Za-z_][\w$]*\.)?(?P<name>[A-Za-z_][\w$]*)", re.IGNORECASE)
_NOT_ACCEPTING = re.compile(r"\bdatabase\s+[\"'](?P<name>[^\"'\s]{1,63})[\"']\s+is not currently accepting connections",
                            re.IGNORECASE)
_TOO_MANY = re.compile(r"\btoo many connections for (?P<kind>role|database)\s+[\"'](?P<name>[^\"'\s]{1,63})[\"']",
                       re.IGNORECASE)
# The login role and database a client's own error names (libpq's and most drivers' words).
_CLIENT_LOGIN = (re.compile(r"\bfor user\s+[\"'](?P<role>[^\"'\s]{1,63})[\"']", re.IGNORECASE),
                 re.compile(r"\buser=(?P<role>[A-Za-z_][\w$]{0,62})\b"),
                 re.compile(r"\bdbname=(?P<database>[A-Za-z_][\w$]{0,62})\b"))


def access_refusals(error: str, evidence: Mapping | None) -> dict:
    """What the dependent's errors say its database refused it, in PostgreSQL's wording:
    ``{"privileges": [{kind, name}], "connections": [{kind, name}], "roles", "databases"}``
    (the login role and database its own errors name), each bounded; {} when nothing was refused."""
    want: dict = {"privileges": [], "connections": [], "roles": [], "databases": []}
    for text in [str(error or "")] + _dependent_texts(evidence):
        for match in _PERMISSION_DENIED.finditer(text):
            item = {"kind": match.group("kind").lower(), "name": match.group("name")}
            if item not in want["privileges"]:
                want["privileges"].append(item)
        for match in _NOT_ACCEPTING.finditer(text):
            item = {"kind": "database", "name": match.group("name")}
            if item not in want["connections"]:
                want["connections"].append(item)
        for match in _TOO_MANY.finditer(text):
            item = {"kind": match.group("kind").lower(), "name": match.group("name")}
            if item not in want["connections"]:
                want["connections"].append(item)
        if _PERMISSION_DENIED.search(text) or _NOT_ACCEPTING.search(text) or _TOO_MANY.search(text):
            for pattern in _CLIENT_LOGIN:
                for match in pattern.finditer(text):
                    key, value = next((k, v) for k, v in match.groupdict().items() if v)
                    bucket = want["roles" if key == "role" else "databases"]
                    if value not in bucket:
                        bucket.append(value)
    if not want["privileges"] and not want["connections"]:
        return {}
    return {key: values[:_MAX_NAMES] for key, values in want.items()}


def _held(grants: Sequence) -> str:
    return "; ".join(f"{g.get('holder')} {','.join(g.get('privileges') or [])}" for g in grants
                     if isinstance(g, Mapping)) or "nobody"


def _limit(connlimit) -> str:
    """A connection limit as PostgreSQL means it (-1: none)."""
    return "no limit" if connlimit == -1 else f"limit {connlimit}"


def render_access(dependent: str, dependency: str, want: Mapping, view: Mapping) -> str:
    """The dependency's ``access`` view (the evidence module's) as lines for the request: who may
    use what the dependent was refused, the login role it uses and its roles, and the
    connection settings of the databases and roles its errors name."""
    refused = [f"permission denied for {p['kind']} {p['name']}" for p in want.get("privileges") or []] + \
        [f"connections refused to {c['kind']} {c['name']}" for c in want.get("connections") or []]
    head = f"{dependency}: what {dependent} was refused ({'; '.join(refused)}), read now, read only"
    if view.get("error"):
        return f"{head}: could not be read: {view['error']}"
    lines = [head + ":"]
    objects = [o for o in view.get("objects") or [] if isinstance(o, Mapping)]
    for p in want.get("privileges") or []:
        if p.get("kind") == "database":
            continue
        here = [o for o in objects if p["name"] in (o.get("name"), o.get("schema") if o.get("kind") == "schema" else None)]
        if not here:
            lines.append(f"- {p['kind']} {p['name']}: found in no database read")
        for o in here:
            where = ".".join(str(x) for x in (o.get("database"), o.get("schema"), o.get("name")) if x)
            lines.append(f"- {o.get('kind')} {where}: owner {o.get('owner')}; privileges held by: "
                         f"{_held(o.get('grants') or [])}")
    holders = view.get("holders") if isinstance(view.get("holders"), Mapping) else {}
    powers = view.get("attributes") if isinstance(view.get("attributes"), Mapping) else {}
    for role, members in sorted(holders.items()):
        held = f"; powers: {', '.join(powers[role]) or 'none'}" if role in powers else ""
        lines.append(f"- members of role {role}: {', '.join(members) if members else 'none'}{held}")
    logins = [str(x) for x in view.get("logins") or []]
    if logins:
        lines.append(f"- the server's log names the refused login as user@database: {', '.join(logins)}")
    for role in view.get("roles") or []:
        if not isinstance(role, Mapping):
            continue
        limit = _limit(role.get("connlimit"))
        lines.append(f"- login role {role.get('name')}: {'can' if role.get('can_login') else 'cannot'} log in; "
                     f"member of: {', '.join(role.get('member_of') or []) or 'no role'}"
                     f"{'' if role.get('inherit', True) else ' (NOINHERIT)'}; connections {role.get('connections')} "
                     f"({limit})")
    for name in view.get("roles_missing") or []:
        lines.append(f"- role {name}: does not exist")
    for db in view.get("databases") or []:
        if not isinstance(db, Mapping):
            continue
        limit = _limit(db.get("connlimit"))
        lines.append(f"- database {db.get('name')}: datallowconn {'true' if db.get('allow_connections') else 'false'}, "
                     f"datconnlimit {db.get('connlimit')} ({limit}), connections now "
                     f"{db.get('connections')}; owner {db.get('owner')}; CONNECT etc. held by: "
                     f"{_held(db.get('grants') or [])}")
    if "max_connections" in view:
        lines.append(f"- server: max_connections {view.get('max_connections')}, reserved for superusers "
                     f"{view.get('reserved')}, client connections now {view.get('client_sessions')}")
    for database, why in sorted((view.get("unread") or {}).items()):
        lines.append(f"- database {database} could not be read: {why}")
    return "\n".join(lines)


def search_terms(lines: Iterable[str]) -> list[str]:
    """What to look for in the dependency's own logs: the quoted words of the dependent's
    lines (a user, a database, a file the server named) and their message phrases (three
    words or more: "password authentication failed for user"), longest first."""
    terms: list[str] = []
    for line in lines:
        line = line.replace('\\"', '"')  # JSON inside a message: its escaped quotes are quotes
        for quoted in _QUOTED.findall(line):
            quoted = quoted.strip()
            if len(quoted) >= 3 and any(c.isalpha() for c in quoted) and ": " not in quoted \
                    and quoted.lower() not in _KEYS_NOT_VALUES and quoted not in terms:
                terms.append(quoted)
        for chunk in _PHRASE_SPLIT.split(line):
            words = _WORD.findall(chunk)
            phrase = " ".join(words).lower()
            if len(words) >= 3 and phrase not in _COMMON_PHRASES and phrase not in terms:
                terms.append(phrase)
    return sorted(terms, key=len, reverse=True)[:16]


def _matches(line: str, terms: Sequence[str]) -> bool:
    flat = " ".join(_WORD.findall(line)).lower()
    return any(t in line or (" " in t and t in flat) for t in terms)


def relevant_lines(dependency_evidence: Mapping | None, terms: Sequence[str]) -> list[tuple[str, str, int]]:
    """The dependency's log, journal and status lines that speak of the dependent's failure
    (name one of ``terms``), as ``(source, line, times)``: a line repeated with only its
    time and process changed is kept once (its newest), with how many times it came;
    newest last, at most ``LINES_MAX``."""
    if not terms:
        return []
    found: dict[str, list] = {}
    for key, text in evidence_texts(dependency_evidence if isinstance(dependency_evidence, Mapping) else None).items():
        head = key.split(".", 1)[0].split("[", 1)[0]
        if head not in ("journal", "logs", "log", "status", "config_test", "recent_changes", "named_paths"):
            continue
        source = key.rsplit("/", 1)[-1] if "/" in key else key
        for line in text.splitlines():
            line = line.strip()
            if not line or not _matches(line, terms):
                continue
            same = _VOLATILE.sub("#", line)
            if same in found:
                entry = found.pop(same)
                entry[1], entry[2] = line, entry[2] + 1
                found[same] = entry  # moved to the end: its newest time
            else:
                found[same] = [source, line, 1]
    return [tuple(entry) for entry in found.values()][-LINES_MAX:]


def suspect_note(dependent: str, named_by: Sequence[str]) -> str:
    """What the dependent's ``dependencies`` entry says of a suspect whose checks pass."""
    said = ", ".join(dict.fromkeys(b for b in named_by if b))[:120]
    return f"SUSPECT all the same, {dependent}'s errors name it" + (f" ({said})" if said else "")


def sources_read(dependency_evidence: Mapping | None) -> list[str]:
    """The logs and journal of the dependency's evidence (what :func:`relevant_lines` searched)."""
    found = []
    for key, text in evidence_texts(dependency_evidence if isinstance(dependency_evidence, Mapping) else None).items():
        head = key.split(".", 1)[0].split("[", 1)[0]
        if head in ("journal", "logs", "log") and str(text).strip():
            source = key.rsplit("/", 1)[-1] if "/" in key else key
            if source not in found:
                found.append(source)
    return found


def section(dependent: str, name: str, relevant: Sequence[tuple[str, str, int]], budget: int = SECTION_BUDGET,
            read: Sequence[str] = ()) -> str:
    """The dependency's own lines on the dependent's failure, for the dependent's request,
    within ``budget`` characters and cut at line ends only (the first line cut inside when it
    alone is longer). The header never stands alone: with no line, the text says so and
    which of the dependency's logs were read (``read``)."""
    lines = [f"[{source}] {line[:300]}" + (f" (x{times})" if times > 1 else "") for source, line, times in relevant]
    lines = [line for line in lines if line.strip()]
    if not lines:
        where = f" (read: {', '.join(read)})" if read else " (no log or journal of it could be read)"
        return f"{name}'s logs hold no line on {dependent}'s error{where}"
    text = f"{name}'s own lines on {dependent}'s failure (newest last):"
    kept = 0
    for line in lines:
        if len(text) + len(line) + 1 > budget:
            if kept == 0:
                text += "\n" + line[:max(40, budget - len(text) - 20)] + " [...cut]"
                kept = 1
            break
        text += "\n" + line
        kept += 1
    return text


def waiting_reason(name: str, dependencies: Mapping[str, str], error: str) -> str:
    """Why a dependent's incident waits instead of acting: the dependencies it needs are
    failing and were not healed in this pass (``dependencies``: name -> state)."""
    listed = ", ".join(f"{dep} ({state})" for dep, state in dependencies.items())
    return (f"waits on {listed}: {name} needs {'them' if len(dependencies) > 1 else 'it'} and is looked at again once "
            f"{'they heal' if len(dependencies) > 1 else 'it heals'}; nothing was run for {name} "
            f"(it failed with: {error[:300]})")
