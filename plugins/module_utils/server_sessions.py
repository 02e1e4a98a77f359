# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A database server's client sessions and who blocks whom, read with its own client (read only).

A service whose checks time out while it runs is waiting on something; when it waits on a
database, the database's own view of its sessions says on what: a session that holds a lock
every other one queues behind (often one left ``idle in transaction``), or every connection
slot taken. Its checks pass all the same (it answers ``SELECT 1`` at once), so only this
view shows the cause.

``read(defn)`` returns ``{"server", "max_connections", "reserved", "client_sessions",
"sessions": [...], "left_out"}`` or ``{"server", "error"}``, or None for a server whose kind
has no view here (``VIEWS``: PostgreSQL, by the stem of its processes or units). Each
session: ``pid``, ``user``, ``database``, ``application``, ``client``, ``state``, ``wait``,
``transaction_s`` and ``state_s`` (seconds, -1 unknown), ``blocked_by`` (PIDs) and
``blocks`` (how many sessions wait on it), ``query`` (redacted, bounded). The blockers come
first. Runs on targets: standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import os
import pwd
import re
import subprocess

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

MAX_SESSIONS = 20   # sessions returned (the blockers and their waiters first)
QUERY_CHARS = 200   # characters of a session's statement
_SEP = "\x1f"

# The settings and the sessions, in one read; every value a plain column. The reader's own
# session is left out; only client backends count (not the server's own workers).
_PG_SETTINGS = ("SELECT current_setting('max_connections'), current_setting('superuser_reserved_connections'), "
                "count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
_PG_SESSIONS = (
    "SELECT pid, coalesce(usename, ''), coalesce(datname, ''), coalesce(application_name, ''), "
    "coalesce(host(client_addr), 'local'), coalesce(state, ''), "
    "coalesce(wait_event_type || ':' || wait_event, ''), "
    "coalesce(floor(extract(epoch FROM now() - xact_start))::bigint, -1), "
    "coalesce(floor(extract(epoch FROM now() - state_change))::bigint, -1), "
    "array_to_string(pg_blocking_pids(pid), ','), "
    "coalesce(extract(epoch FROM backend_start)::text, '') || '/' || coalesce(extract(epoch FROM xact_start)::text, ''), "
    "left(regexp_replace(coalesce(query, ''), '[[:space:]]+', ' ', 'g'), %d) "
    "FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
    "ORDER BY xact_start NULLS LAST LIMIT 200" % (QUERY_CHARS * 2))
# The states of a session that holds its transaction open while it runs nothing (PostgreSQL's own
# ``idle_in_transaction_session_timeout`` ends such a session).
IDLE_IN_TRANSACTION = ("idle in transaction", "idle in transaction (aborted)")


def _stems(defn: dict) -> list:
    names = [str(defn.get("name") or "")] + [str(u) for u in defn.get("units") or []] \
        + [str(p) for p in defn.get("processes") or []]
    return [re.split(r"[@.\-_]", n.lower(), maxsplit=1)[0] for n in names if n]


def server_kind(defn: dict):
    """The kind of server ``defn`` is, when it has a session view here, else None."""
    for kind, stems in VIEWS_BY_STEM:
        if any(stem.startswith(s) for stem in _stems(defn) for s in stems):
            return kind
    return None


def _socket_dir(defn: dict, port) -> str:
    for path in defn.get("runtime_paths") or []:
        if port and os.path.exists(os.path.join(path, ".s.PGSQL.%s" % port)):
            return path
    return ""


def _as_user(defn: dict, argv: list) -> list:
    """``argv`` as the server's own user when this runs as root (its peer authentication)."""
    user = defn.get("user")
    runuser = host_probe.find_tool("runuser")
    if os.geteuid() != 0 or not user or not runuser:
        return argv
    try:
        pwd.getpwnam(user)
    except KeyError:
        return argv
    return [runuser, "-u", user, "--"] + argv


def _int(text: str, default: int = -1) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _postgresql(defn: dict, timeout: int) -> dict:
    out, sessions = _postgresql_sessions(defn, timeout)
    return out if "error" in out else _ranked(out, sessions)


def _run_psql(defn: dict, database: str, timeout: int, commands=(), script: str = "", variables=None):
    """``(lines, error)``: what psql printed (one row a line, columns split by ``_SEP``) against
    ``database`` of the server ``defn`` describes, as the server's own user, read only and
    bounded in time; ``error`` names why it could not (then ``lines`` is empty). ``script`` goes
    on standard input, where psql interpolates ``variables`` (``:'name'``, quoted as literals)."""
    psql = host_probe.find_tool("psql")
    if not psql:
        return [], "psql is not on this host"
    ports = defn.get("ports") or []
    port = str(ports[0]) if ports else ""
    argv = [psql, "-X", "-q", "-A", "-t", "-F", _SEP, "-v", "ON_ERROR_STOP=1", "-d", database]
    where = _socket_dir(defn, port)
    if where:
        argv += ["-h", where]
    if port:
        argv += ["-p", port]
    for name, value in sorted((variables or {}).items()):
        argv += ["-v", "%s=%s" % (name, value)]
    for command in commands:
        argv += ["-c", command]
    if script:
        argv += ["-f", "-"]
    env = dict(os.environ, PGCONNECT_TIMEOUT="3", PGAPPNAME="sentinel-evidence",
               PGOPTIONS="-c statement_timeout=%d -c lock_timeout=1000 -c default_transaction_read_only=on"
               % (max(1, timeout) * 1000))
    try:
        proc = subprocess.run(_as_user(defn, argv), input=script.encode("utf-8"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=max(1, timeout) + 2, env=env, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], "psql could not run: %s" % exc
    if proc.returncode != 0:
        said = " ".join(proc.stderr.decode("utf-8", "replace").split())[:300]
        return [], redact_text("psql exited %d: %s" % (proc.returncode, said or "no message"))
    lines = [line for line in proc.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines, ("psql printed nothing" if not lines else "")


def _postgresql_sessions(defn: dict, timeout: int):
    """``(out, sessions)``: the server's settings (or its ``error``) and every client session,
    each with how many sessions wait on it (``blocks``), unranked and uncut."""
    out = {"server": "postgresql"}
    lines, error = _run_psql(defn, "postgres", timeout, commands=(_PG_SETTINGS, _PG_SESSIONS))
    if error:
        out["error"] = error
        return out, []
    settings = lines[0].split(_SEP)
    out.update(max_connections=_int(settings[0]), reserved=_int(settings[1] if len(settings) > 1 else ""),
               client_sessions=_int(settings[2] if len(settings) > 2 else ""))
    sessions = []
    for line in lines[1:]:
        cols = line.split(_SEP)
        if len(cols) < 12:
            continue
        sessions.append({
            "pid": _int(cols[0]), "user": cols[1], "database": cols[2], "application": cols[3][:60],
            "client": cols[4], "state": cols[5], "wait": cols[6], "transaction_s": _int(cols[7]),
            "state_s": _int(cols[8]), "blocked_by": [_int(p) for p in cols[9].split(",") if p.strip()],
            "identity": cols[10], "query": redact_text(_SEP.join(cols[11:]))[:QUERY_CHARS]})
    return out, _count_blocks(sessions)


def _count_blocks(sessions: list) -> list:
    """``sessions``, each with how many of them wait on it (``blocks``)."""
    blocks = {}
    for session in sessions:
        for pid in session["blocked_by"]:
            blocks[pid] = blocks.get(pid, 0) + 1
    for session in sessions:
        session["blocks"] = blocks.get(session["pid"], 0)
    return sessions


def _ranked(out: dict, sessions: list) -> dict:
    """The sessions that block others first (most waiters first), then those waiting, then the
    longest in a transaction; at most MAX_SESSIONS, with how many were left out."""
    _count_blocks(sessions)
    sessions.sort(key=lambda s: (-s["blocks"], not s["blocked_by"], -s["transaction_s"]))
    out["sessions"] = sessions[:MAX_SESSIONS]
    out["left_out"] = max(0, len(sessions) - MAX_SESSIONS)
    return out


# kind -> the stems of its processes or units, and how its view is read
VIEWS_BY_STEM = (("postgresql", ("postgres",)),)
VIEWS = {"postgresql": _postgresql}
# kind -> the server's own client, the tool its view is read with and a plan ends a session with
VIEW_TOOLS = {"postgresql": "psql"}


def view_tools(defn: dict) -> list:
    """The clients of the session views that concern ``defn``'s incidents: its own server's, and
    each dependency's (a dependent waiting on a database is told to end the blocking session
    with the server's own function, so the planner must be told whether that client is here)."""
    kinds = [server_kind(defn)] + [server_kind({"name": str(dep)}) for dep in defn.get("depends_on") or []]
    return [VIEW_TOOLS[kind] for kind in dict.fromkeys(kinds) if kind in VIEW_TOOLS]


def idle_session_problem(defn: dict, expected: dict, approved: bool = False, timeout: int = 5):
    """Why the command that ends the database session ``expected`` names must not run now, or
    None when it is still that session (``expected["identity"]``: when its backend and its
    transaction started, as the evidence's view read them: a PID, reused once its session ends,
    is not enough) and, for a command the autonomy table let run alone (``expected`` has
    ``min_idle``; a human did not ``approve`` it), still idle in that transaction for at least
    ``min_idle`` seconds and still blocking another session. Read from the server's own view
    again, just before the command runs."""
    pid = int(expected.get("pid") or 0)
    if server_kind(defn) != "postgresql":
        return "backend PID %d: %s has no session view here to check it against" % (pid, defn.get("name"))
    out, sessions = _postgresql_sessions(defn, min(int(timeout), 10))
    if "error" in out:
        return "backend PID %d cannot be checked against the server's sessions now (%s)" % (pid, out["error"])
    now = next((s for s in sessions if s["pid"] == pid), None)
    if now is None:
        return "backend PID %d is no longer a session of %s (it ended since the evidence was read)" % (pid, defn.get("name"))
    if now["identity"] != str(expected.get("identity") or ""):
        return ("backend PID %d is not the session the evidence showed: its backend or its transaction started "
                "since (a new session or a new transaction)" % pid)
    if approved or expected.get("min_idle") is None:
        return None
    if now["state"] not in IDLE_IN_TRANSACTION:
        return "backend PID %d is no longer idle in its transaction (now %s)" % (pid, now["state"] or "unknown")
    if now["state_s"] < int(expected.get("min_idle") or 0):
        return "backend PID %d has been idle for %d s, under the policy's %d s" % (
            pid, now["state_s"], int(expected.get("min_idle") or 0))
    if now["blocks"] < 1:
        return "backend PID %d no longer blocks any session" % pid
    return None


# Where objects of these names are, in each database that takes connections (read with a
# session of the server's own account: every schema is visible to it).
OBJECT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")
MAX_DATABASES = 8
# Every row of the first read says what it is in its first column (a role may be named anything).
_PG_DATABASES = ("SELECT 'database', datname, count(*) OVER () FROM pg_database WHERE datallowconn AND NOT datistemplate "
                 "ORDER BY datname LIMIT %d" % MAX_DATABASES)
# What decides how a session resolves unqualified names: the server's search_path, and what
# ALTER ROLE / ALTER DATABASE ... SET changed for some roles or databases (PostgreSQL keeps no
# time of the change).
_PG_NAME_SETTINGS = ("SELECT 'setting', coalesce(r.rolname, ''), coalesce(d.datname, ''), "
                     "array_to_string(s.setconfig, ', ') "
                     "FROM pg_db_role_setting s LEFT JOIN pg_roles r ON r.oid = s.setrole "
                     "LEFT JOIN pg_database d ON d.oid = s.setdatabase ORDER BY 2, 3 LIMIT 40")
_PG_SEARCH_PATH = "SELECT 'search_path', boot_val, source FROM pg_settings WHERE name = 'search_path'"
_PG_OBJECTS = """SELECT n.nspname, c.relname, CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
       WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' WHEN 'S' THEN 'sequence' ELSE c.relkind::text END,
       pg_get_userbyid(c.relowner)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relname = ANY (string_to_array(:'names', ',')) AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
UNION ALL
SELECT n.nspname, '', 'schema', pg_get_userbyid(n.nspowner) FROM pg_namespace n
 WHERE n.nspname = ANY (string_to_array(:'names', ','))
UNION ALL
SELECT n.nspname, p.proname, 'function', pg_get_userbyid(p.proowner)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname = ANY (string_to_array(:'names', ',')) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
 ORDER BY 1, 2 LIMIT 20;
"""


def _postgresql_objects(defn: dict, names: list, timeout: int) -> dict:
    out = {"server": "postgresql", "names": names, "found": [], "name_settings": []}
    lines, error = _run_psql(defn, "postgres", timeout, commands=(_PG_DATABASES, _PG_SEARCH_PATH, _PG_NAME_SETTINGS))
    if error:
        out["error"] = error
        return out
    databases, total = [], 0
    for line in lines:
        cols = line.split(_SEP)
        if cols[0] == "database" and len(cols) == 3:
            databases.append(cols[1])
            total = _int(cols[2], 0)
        elif cols[0] == "search_path" and len(cols) == 3:
            out["search_path"] = {"value": cols[1], "source": cols[2]}
        elif cols[0] == "setting" and len(cols) == 4:
            out["name_settings"].append({"role": cols[1], "database": cols[2], "settings": redact_text(cols[3])[:300]})
    out["databases_left_out"] = max(0, total - len(databases))
    for database in databases:
        rows, error = _run_psql(defn, database, timeout, script=_PG_OBJECTS, variables={"names": ",".join(names)})
        if error and error != "psql printed nothing":
            out.setdefault("unread", {})[database] = error
            continue
        for row in rows:
            cols = row.split(_SEP)
            if len(cols) == 4:
                out["found"].append({"database": database, "schema": cols[0], "name": cols[1], "kind": cols[2],
                                     "owner": cols[3]})
    return out


def objects(defn: dict, names, timeout: int = 5):
    """Where the database objects ``names`` are (the names a dependent's errors say do not
    exist), and what decides how sessions resolve names: ``{"server", "names", "found": [{database,
    schema, name, kind, owner}], "search_path": {value, source}, "name_settings": [{role, database,
    settings}], "databases_left_out"}`` or with ``error``; None for a server with no such view, or
    no name that is a plain identifier."""
    names = sorted({str(n) for n in names or () if OBJECT_NAME.match(str(n))})[:8]
    if not names or server_kind(defn) != "postgresql":
        return None
    return _postgresql_objects(defn, names, min(int(timeout), 10))


def read(defn: dict, timeout: int = 5):
    """The session view of the server ``defn`` describes (module docstring), or None."""
    kind = server_kind(defn)
    if kind is None:
        return None
    return VIEWS[kind](defn, min(int(timeout), 10))


# Who may do what to an object a client was refused, and whether a database or role takes
# connections: read when a dependent's errors say "permission denied for table visits",
# "database app is not currently accepting connections" or "too many connections for role app".
ACCESS_KINDS = ("table", "relation", "view", "sequence", "schema", "function", "database")
MAX_GRANTS = 12     # privilege holders of one object, members of one role
MAX_ROLES = 6       # login roles and roles whose members are read
# The holders of an ACL (the owner's default rights when none was granted), as "holder=privilege" items.
_ACL = ("(SELECT coalesce(string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END"
        " || '=' || a.privilege_type, ','), '') FROM aclexplode(coalesce(%s, acldefault(%s, %s))) a)")
_PG_ACCESS_OBJECTS = """SELECT 'object', n.nspname, c.relname,
       CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' ELSE 'table' END,
       pg_get_userbyid(c.relowner), %s
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relname = ANY (string_to_array(:'relations', ',')) AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT 'object', n.nspname, '', 'schema', pg_get_userbyid(n.nspowner), %s FROM pg_namespace n
 WHERE n.nspname = ANY (string_to_array(:'schemas', ','))
UNION ALL
SELECT 'object', n.nspname, p.proname, 'function', pg_get_userbyid(p.proowner), %s
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname = ANY (string_to_array(:'functions', ',')) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
 ORDER BY 2, 3 LIMIT 20;
""" % (_ACL % ("c.relacl", "CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::\"char\"", "c.relowner"),
       _ACL % ("n.nspacl", "'n'::\"char\"", "n.nspowner"), _ACL % ("p.proacl", "'f'::\"char\"", "p.proowner"))
_PG_ACCESS_CLUSTER = """SELECT 'settings', current_setting('max_connections'), current_setting('superuser_reserved_connections'),
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend');
SELECT 'database', d.datname, d.datallowconn, d.datconnlimit,
       (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = d.datname AND a.backend_type = 'client backend'),
       pg_get_userbyid(d.datdba), %s
  FROM pg_database d WHERE d.datname = ANY (string_to_array(:'databases', ',')) ORDER BY 2 LIMIT 8;
SELECT 'role', r.rolname, r.rolcanlogin, r.rolconnlimit, r.rolinherit,
       (SELECT count(*) FROM pg_stat_activity a WHERE a.usename = r.rolname AND a.backend_type = 'client backend'),
       coalesce((SELECT string_agg(pg_get_userbyid(m.roleid), ',') FROM pg_auth_members m WHERE m.member = r.oid), '')
  FROM pg_roles r WHERE r.rolname = ANY (string_to_array(:'roles', ',')) ORDER BY 2 LIMIT 8;
SELECT 'members', r.rolname,
       coalesce((SELECT string_agg(pg_get_userbyid(m.member), ',') FROM pg_auth_members m WHERE m.roleid = r.oid), '')
  FROM pg_roles r WHERE r.rolname = ANY (string_to_array(:'holders', ',')) ORDER BY 2 LIMIT 8;
SELECT 'powers', r.rolname, concat_ws(',', CASE WHEN r.rolsuper THEN 'SUPERUSER' END,
       CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END, CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END,
       CASE WHEN r.rolreplication THEN 'REPLICATION' END, CASE WHEN r.rolcreatedb THEN 'CREATEDB' END)
  FROM pg_roles r WHERE r.rolname = ANY (string_to_array(:'roles' || ',' || :'holders', ',')) ORDER BY 2 LIMIT 16;
""" % (_ACL % ("d.datacl", "'d'::\"char\"", "d.datdba"))
# A server log line's "user@database" prefix (log_line_prefix %u@%d) on a line that states a refusal.
_LOG_LOGIN = re.compile(r"(?:^|[\s\]])([A-Za-z_][A-Za-z0-9_$]{0,62})@([A-Za-z_][A-Za-z0-9_$]{0,62})\s+(?:ERROR|FATAL)\b")
_REFUSAL_WORDS = re.compile(r"permission denied for|not currently accepting connections|too many connections for",
                            re.IGNORECASE)


def _plain(names, limit: int) -> list:
    return sorted({str(n) for n in names or () if OBJECT_NAME.match(str(n))})[:limit]


def _grants(acl: str) -> list:
    """``"holder=PRIVILEGE,..."`` as ``[{"holder", "privileges"}]`` (each holder once), bounded."""
    held: dict = {}
    for item in acl.split(","):
        holder, _sep, privilege = item.rpartition("=")
        if holder:
            held.setdefault(redact_text(holder)[:64], []).append(privilege)
    return [{"holder": h, "privileges": sorted(set(p))} for h, p in sorted(held.items())][:MAX_GRANTS]


def _names(text: str, limit: int = MAX_GRANTS) -> list:
    return [redact_text(n)[:64] for n in sorted(set(filter(None, text.split(","))))][:limit]


def logins_in_log(text: str) -> list:
    """``[(role, database)]`` of the server's log lines that state a refusal, as their
    ``user@database`` prefix names them (newest last, each once)."""
    found = []
    for line in str(text or "").splitlines():
        if not _REFUSAL_WORDS.search(line):
            continue
        for match in _LOG_LOGIN.finditer(line):
            if match.groups() not in found:
                found.append(match.groups())
    return found[-MAX_ROLES:]


def _postgresql_access(defn: dict, want: dict, log_text: str, timeout: int) -> dict:
    privileges = [p for p in want.get("privileges") or [] if isinstance(p, dict)]
    objects = {kind: _plain([p.get("name") for p in privileges if p.get("kind") in kinds], 8)
               for kind, kinds in (("relations", ("table", "relation", "view", "sequence")), ("schemas", ("schema",)),
                                   ("functions", ("function",)))}
    connections = [c for c in want.get("connections") or [] if isinstance(c, dict)]
    logins = logins_in_log(log_text)
    roles = _plain(list(want.get("roles") or []) + [r for r, _d in logins]
                   + [c.get("name") for c in connections if c.get("kind") == "role"], MAX_ROLES)
    databases = _plain(list(want.get("databases") or []) + [d for _r, d in logins]
                       + [c.get("name") for c in connections if c.get("kind") == "database"]
                       + [p.get("name") for p in privileges if p.get("kind") == "database"], MAX_DATABASES)
    out = {"server": "postgresql", "objects": [], "roles": [], "databases": [], "holders": {},
           "logins": ["%s@%s" % pair for pair in logins]}
    if any(objects.values()):
        read_in = [d for _r, d in logins] or []
        if not read_in:
            lines, error = _run_psql(defn, "postgres", timeout, commands=(_PG_DATABASES,))
            if error:
                out["error"] = error
                return out
            read_in = [line.split(_SEP)[1] for line in lines if line.split(_SEP)[0] == "database"]
        for database in _plain(read_in, MAX_DATABASES):
            rows, error = _run_psql(defn, database, timeout, script=_PG_ACCESS_OBJECTS,
                                    variables={k: ",".join(v) for k, v in objects.items()})
            if error and error != "psql printed nothing":
                out.setdefault("unread", {})[database] = error
                continue
            for row in rows:
                cols = row.split(_SEP)
                if len(cols) == 6 and cols[0] == "object":
                    out["objects"].append({"database": database, "schema": cols[1], "name": cols[2], "kind": cols[3],
                                           "owner": redact_text(cols[4])[:64], "grants": _grants(cols[5])})
    holders = _plain({g["holder"] for o in out["objects"] for g in o["grants"]} - {"PUBLIC"}, MAX_ROLES)
    lines, error = _run_psql(defn, "postgres", timeout, script=_PG_ACCESS_CLUSTER, variables={
        "roles": ",".join(roles), "databases": ",".join(databases), "holders": ",".join(holders)})
    if error and error != "psql printed nothing":
        out["error"] = error
        return out
    for line in lines:
        cols = line.split(_SEP)
        if cols[0] == "settings" and len(cols) == 4:
            out.update(max_connections=_int(cols[1]), reserved=_int(cols[2]), client_sessions=_int(cols[3]))
        elif cols[0] == "database" and len(cols) == 7:
            out["databases"].append({"name": cols[1], "allow_connections": cols[2] == "t", "connlimit": _int(cols[3]),
                                     "connections": _int(cols[4]), "owner": redact_text(cols[5])[:64],
                                     "grants": _grants(cols[6])})
        elif cols[0] == "role" and len(cols) == 7:
            out["roles"].append({"name": cols[1], "can_login": cols[2] == "t", "connlimit": _int(cols[3]),
                                 "inherit": cols[4] == "t", "connections": _int(cols[5]), "member_of": _names(cols[6])})
        elif cols[0] == "members" and len(cols) == 3:
            out["holders"][cols[1]] = _names(cols[2])
        elif cols[0] == "powers" and len(cols) == 3:
            # what each role may do beyond its grants (none: []): a grant of a role with powers
            # is refused by the policy, so the approver never sees one
            out.setdefault("attributes", {})[cols[1]] = _names(cols[2])
    out["roles_missing"] = [r for r in roles if r not in {x["name"] for x in out["roles"]}]
    return out


def access(defn: dict, want: dict, log_text: str = "", timeout: int = 5):
    """Who may use what a client was refused, read only as the server's user: ``want`` holds
    ``privileges`` ([{kind, name}]: "permission denied for KIND NAME"), ``connections``
    ([{kind: database|role, name}]: a database closed to connections, too many connections),
    ``roles`` and ``databases`` (the client's login role and database, when its error names
    them). ``log_text``: the server's own log lines; the ``user@database`` prefix of those that
    state a refusal names the login role and database too. Returns ``{"server", "objects":
    [{database, schema, name, kind, owner, grants: [{holder, privileges}]}], "holders": {role:
    [members]}, "roles": [{name, can_login, connlimit, inherit, connections, member_of}],
    "roles_missing", "databases": [{name, allow_connections, connlimit, connections, owner,
    grants}], "logins", "max_connections", "reserved", "client_sessions"}`` (or with ``error``);
    None for a server with no such view or nothing to read. Names that are not plain
    identifiers are never sent."""
    want = want if isinstance(want, dict) else {}
    if server_kind(defn) != "postgresql" or not any(want.get(k) for k in ("privileges", "connections")):
        return None
    return _postgresql_access(defn, want, log_text, min(int(timeout), 10))
