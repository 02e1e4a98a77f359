# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tool rules for the services the collection heals: web servers, databases, Redis,
containers, TLS and local health checks. See ``_tools`` for the conventions."""
from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from . import _rules as judge
from .. import service_cli
from ._options import spec_from_table
from ._destinations import writable_by_others
from ._paths import canonical, normalise
from ._table import by_table
from ._rules import Check, q, signal_name
from ._tools import count_bounds, option_values, parse, parse_judged, value

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]", "ip6-localhost", "0.0.0.0"}


# `ALTER ROLE app [IN DATABASE db] RESET search_path`: one named setting of one role (or of a role
# in one database) back to the server's default. Not RESET ALL, not SET (a value nobody saw), not
# the role's attributes.
_SQL_NAME = r'(?:[A-Za-z_][A-Za-z0-9_$]{0,62}|"[A-Za-z_][A-Za-z0-9_$]{0,62}")'
_ROLE_SETTING_RESET = re.compile(r"(?i)^ALTER\s+(?:ROLE|USER)\s+%s(?:\s+IN\s+DATABASE\s+%s)?\s+RESET\s+"
                                 r"(?!ALL$)[A-Za-z_][A-Za-z0-9_]{0,62}(?:\.[A-Za-z_][A-Za-z0-9_]{0,62})?$"
                                 % (_SQL_NAME, _SQL_NAME))

# A role's validity window moved (its password expired, an app cut off at midnight): no password,
# privilege, membership or login attribute changes, one time literal (read with literals removed),
# alone in its statement.
_ROLE_VALIDITY = re.compile(r"(?i)^ALTER\s+(?:ROLE|USER)\s+%s\s+(?:WITH\s+)?VALID\s+UNTIL\s+''$"
                            % _SQL_NAME)


# Access given back to one database role (a human approves each): membership of one role in one
# other (`GRANT app_rw TO app`, optionally WITH INHERIT TRUE), or data privileges on named tables
# or sequences, or on all of them in one schema. Names are plain identifiers, or double-quoted
# ones that hold a plain identifier; read on the statement with comments and literals removed.
_ROLE_NAME = r'(?:[A-Za-z_][A-Za-z0-9_]{0,62}|"[A-Za-z_][A-Za-z0-9_]{0,62}")'
_OBJECT = r"%s(?:\.%s)?" % (_ROLE_NAME, _ROLE_NAME)
_MEMBERSHIP_GRANT = re.compile(r"(?ai)^GRANT\s+(%s)\s+TO\s+(%s)(\s+WITH\s+INHERIT\s+TRUE)?$" % (_ROLE_NAME, _ROLE_NAME))
_DATA_PRIVILEGE = r"(?:SELECT|INSERT|UPDATE|DELETE|USAGE|REFERENCES)"
_PRIVILEGE_GRANT = re.compile(
    r"(?ai)^GRANT\s+(%s(?:\s*,\s*%s)*)\s+ON\s+(?:(?:(TABLE|SEQUENCE)\s+)?(%s(?:\s*,\s*%s)*)|ALL\s+(TABLES|SEQUENCES)\s+"
    r"IN\s+SCHEMA\s+(%s))\s+TO\s+(%s)$" % (_DATA_PRIVILEGE, _DATA_PRIVILEGE, _OBJECT, _OBJECT, _ROLE_NAME, _ROLE_NAME))
# Words that stand for many roles or for whoever runs the statement, and the object kinds a
# bare name after ON would otherwise be read as (`ON DATABASE app`, `ON SCHEMA public`).
_NOT_A_ROLE = {"public", "current_user", "current_role", "session_user", "user", "group", "all", "none", "role",
               "with", "granted", "admin", "inherit", "set", "option"}
_NOT_AN_OBJECT = {"database", "schema", "function", "procedure", "routine", "language", "large", "foreign",
                  "domain", "type", "tablespace", "parameter", "all", "table", "sequence", "tables", "sequences"}
# The server's own superuser (the account initdb names it after) and the catalog schemas.
_SUPERUSER_ROLES = {"postgres"}
_CATALOG_SCHEMAS = {"pg_catalog", "information_schema", "pg_toast"}
# Attributes that make a role more than a holder of data privileges (CREATE ROLE keywords).
_POWERFUL_ATTRIBUTES = ("SUPERUSER", "CREATEROLE", "BYPASSRLS", "REPLICATION", "CREATEDB")


def _unquoted(name: str) -> str:
    """A role or object name as the server resolves it: quotes kept the case, plain names fold."""
    return name[1:-1] if name.startswith('"') else name.lower()


def _role_refusal(chk: Check, name: str, side: str) -> str | None:
    """Why ``name`` may not be a side of an approved grant, or None."""
    role = _unquoted(name)
    if role.lower() in _NOT_A_ROLE:
        return f"{q(name)} is not one named role (PUBLIC, CURRENT_USER and the like stand for many or for whoever runs it)"
    if role.lower().startswith("pg_"):
        return f"{q(name)} is a predefined role; its powers reach server files, programs or every table"
    if role.lower() in _SUPERUSER_ROLES:
        return f"{q(name)} is the server's superuser role"
    if side == "granted":
        held = next((v for k, v in chk.scope.role_attributes.items() if k == role), set())
        powers = sorted(a for a in _POWERFUL_ATTRIBUTES if a in held or "ROL" + a in held)
        if powers:
            return f"the host's evidence shows {q(role)} with {', '.join(powers)}; membership would hand that on"
    return None


def _grant(chk: Check, statement: str, alone: bool) -> bool:
    """Judge a GRANT; True when it is one of the approved forms (approval asked), False when refused."""
    membership = _MEMBERSHIP_GRANT.match(statement)
    privileges = None if membership else _PRIVILEGE_GRANT.match(statement)
    if not membership and not privileges:
        chk.reject("of the database grants, only one role's membership of one other role (`GRANT GROUP_ROLE TO "
                   "ROLE`) or data privileges (SELECT, INSERT, UPDATE, DELETE, USAGE, REFERENCES) on named tables or "
                   "sequences, or on all of them in one schema, to one role, with no ADMIN, GRANT OPTION or GRANTED "
                   "BY, are approved; every other change of roles or grants is refused")
        return False
    if not alone:
        chk.reject("a GRANT is approved only alone in its SQL, so the approver sees exactly the access it gives")
        return False
    if membership:
        granted, grantee = membership.group(1), membership.group(2)
        for name, side in ((granted, "granted"), (grantee, "grantee")):
            why = _role_refusal(chk, name, side)
            if why:
                chk.reject(f"granting database roles: {why}; refused")
                return False
        if _unquoted(granted) == _unquoted(grantee):
            chk.reject("a role granted to itself; refused")
            return False
        chk.effect(f"gives database role {_unquoted(grantee)} membership of role {_unquoted(granted)}")
        chk.approve(f"`GRANT {_unquoted(granted)} TO {_unquoted(grantee)}` gives role {_unquoted(grantee)} every "
                    f"privilege role {_unquoted(granted)} holds; a human must check that {_unquoted(granted)} has no "
                    "SUPERUSER, CREATEROLE or BYPASSRLS attribute (`\\du`) and that it is the access the role lost; "
                    "a human should confirm")
        return True
    privs, kind, objects, every, schema, grantee = privileges.groups()
    why = _role_refusal(chk, grantee, "grantee")
    if why:
        chk.reject(f"granting database privileges: {why}; refused")
        return False
    names = [schema] if schema else [o.strip() for o in objects.split(",")]
    for name in names:
        parts = [_unquoted(part) for part in re.findall(_ROLE_NAME, name)]
        if parts[-1].lower() in _NOT_AN_OBJECT or parts[0].lower() in _CATALOG_SCHEMAS or \
                any(p.lower().startswith("pg_") for p in parts):
            chk.reject(f"granting database privileges: {q(name)} is not an application's table, sequence or schema "
                       "(database, schema, function and catalog privileges are refused)")
            return False
    privs = ", ".join(p.strip().upper() for p in privs.split(","))
    if schema:
        what = f"all {every.lower()} in schema {_unquoted(schema)}"
    else:
        shown = [".".join(_unquoted(part) for part in re.findall(_ROLE_NAME, name)) for name in names]
        what = f"{(kind or 'table').lower()} " + ", ".join(shown)
    chk.effect(f"gives database role {_unquoted(grantee)} {privs} on {what}")
    chk.approve(f"`GRANT {privs}` gives role {_unquoted(grantee)} access to {what}, which may have been taken "
                "away on purpose; a human should confirm")
    return True


def _service_in_scope(chk: Check, names: set[str]) -> bool:
    """Without an incident any service counts; with one, the tool's service must be in it."""
    scope = chk.scope
    if not scope.explicit:
        return True
    found = {n.lower() for n in scope.processes} | {u.lower() for u in scope.unit_bases} | {scope.service.lower()}
    return bool(found & names)


def _local_host(chk: Check, host: str, tool: str) -> bool:
    if host in _LOCAL_HOSTS or host.startswith("/") or re.fullmatch(r"127(?:\.[0-9]{1,3}){3}", host):
        if host.startswith("/"):
            judge.path(chk, host, "meta")
        return True
    chk.reject(f"`{tool}` may only talk to this host's own service (localhost); {q(host)} is elsewhere")
    return False


# ---------------------------------------------------------------- web servers

_NGINX = spec_from_table({"-?|-h": None, "-v": None, "-V": None, "-t": None, "-T": None, "-q": None,
                          "-s": "word", "-c": "text", "-p": "text", "-e": "text", "-g": "text"}, permute=False)


def nginx(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _NGINX, args)
    if parsed.operands:
        chk.reject(f"nginx takes options only; {q(parsed.operands[0])} is not one")
        return
    if parsed.has("-g"):
        chk.reject("`nginx -g` injects configuration directives (which can load modules and run code); fix the "
                   "configuration file instead")
        return
    if parsed.has("-p"):
        chk.reject("`nginx -p` points nginx at another prefix with its own configuration; use the system one")
        return
    chk.become = not parsed.has("-v", "-V", "-h") or parsed.has("-t", "-T", "-s")
    conf = parsed.last("-c")
    if conf is not None:
        found = judge.path(chk, conf, "config")
        if found is None:
            return
        where = chk.scope.locate(found) if chk.scope.explicit else None
        if not (where == "config" or not chk.scope.explicit and (found + "/").startswith("/etc/nginx/")):
            chk.reject(f"`nginx -c {found}`: a configuration outside nginx's own (/etc/nginx) can load modules "
                       "and run code as root; test the system configuration")
            return
    errlog = parsed.last("-e")
    if errlog is not None and errlog != "stderr":
        judge.path(chk, errlog, "create", what="writes its error log to")
    signal = parsed.last("-s")
    in_scope = _service_in_scope(chk, {"nginx"})
    if signal is not None:
        if by_table(chk, "nginx", ["-s", signal], in_scope, "nginx", unit="nginx") is None:
            chk.reject(f"{q(signal)} is not an `nginx -s` signal (reload, reopen, quit, stop)")
        return
    if parsed.has("-t", "-T"):
        by_table(chk, "nginx", ["-T" if parsed.has("-T") else "-t"], in_scope, "nginx", unit="nginx")
        return
    if parsed.has("-v", "-V", "-h"):
        chk.effect("prints the nginx version")
        return
    chk.effect("starts nginx outside the init system")
    chk.approve("`nginx` alone starts a second nginx outside the init system; use `service nginx start`, or "
                "have a human confirm")


_APACHE_VERBS = {"start": "start", "restart": "restart", "graceful": "reload", "stop": "stop",
                 "graceful-stop": "stop", "configtest": "test", "status": "read", "fullstatus": "read"}
_APACHE_FLAGS = {"-t": "test", "-S": "test", "-M": "test", "-l": "test", "-L": "test", "-v": "read", "-V": "read",
                 "-h": "read", "-T": None}


def apachectl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    unit = "httpd" if chk.tool == "httpd" else "apache2"
    action = None
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word in _APACHE_VERBS and action is None and chk.tool != "httpd":
            action = _APACHE_VERBS[word]
            continue
        if word == "-k" and i < len(args) and args[i] in _APACHE_VERBS:
            action = _APACHE_VERBS[args[i]]
            i += 1
            continue
        if word in _APACHE_FLAGS:
            action = action or _APACHE_FLAGS[word]
            continue
        if word == "-D" and i < len(args):
            define = args[i]
            i += 1
            if not re.fullmatch(r"DUMP_[A-Z_]{1,20}|[A-Z][A-Z0-9_]{0,30}", define):
                chk.reject(f"{q(define)} is not a define this policy knows")
                return
            action = action or ("test" if define.startswith("DUMP_") else None)
            continue
        if word == "-e" and i < len(args):
            i += 1
            continue
        if word == "-f" and i < len(args):
            found = judge.path(chk, args[i], "config")
            i += 1
            if found is None:
                return
            if not (found + "/").startswith(("/etc/apache2/", "/etc/httpd/")) and chk.scope.locate(found) != "config":
                chk.reject(f"`-f {found}`: a configuration outside Apache's own can load modules and run code")
                return
            continue
        if word in ("-C", "-c"):
            chk.reject(f"`{chk.tool} {word}` injects configuration directives; fix the configuration file instead")
            return
        chk.reject(f"{q(word)} is not a `{chk.tool}` action or option this policy allows "
                   "(configtest, -t, -S, -M, graceful, restart, start, status)")
        return
    if action is None:
        chk.reject(f"`{chk.tool}` needs an action such as `configtest` or `graceful`")
        return
    chk.become = True
    if action == "test":
        chk.effect("tests the Apache configuration")
    elif action == "read":
        chk.effect("reads Apache's state")
    else:
        judge.unit(chk, unit, action, shown_verb=f"{chk.tool} {action}")


def a2config(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    kinds = {"site": ("sites-available", "sites-enabled"), "mod": ("mods-available", "mods-enabled"),
             "conf": ("conf-available", "conf-enabled")}
    enable = chk.tool.startswith("a2en")
    kind = chk.tool[4:] if enable else chk.tool[5:]
    if kind not in kinds:
        chk.reject(f"`{chk.tool}` is not an Apache helper this policy knows")
        return
    names = [a for a in args if a not in ("-q", "--quiet")]
    if not names or any(n.startswith("-") for n in names):
        chk.reject(f"use `{chk.tool} NAME` (options other than -q purge or force; not allowed)")
        return
    chk.become = True
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
            chk.reject(f"{q(name)} is not an Apache {kind} name")
            return
        link = f"/etc/apache2/{kinds[kind][1]}/{name}{'.load' if kind == 'mod' else '.conf'}"
        judge.path(chk, link, "create" if enable else "delete", what="enables" if enable else "disables")


_SSHD = spec_from_table({
    "-t": None, "-T": None, "-G": None, "-q": None, "-4": None, "-6": None, "-V": None, "-C": "text", "-f": "text",
    **dict.fromkeys(("-d", "-D", "-e", "-i", "-o", "-h", "-p", "-E", "-c", "-k", "-u", "-b", "-g", "-r"),
                    {"type": "text", "deny": "that `sshd` option starts a daemon, changes its keys, port or log, or "
                                             "overrides its configuration; test with `sshd -t`"}),
})


def sshd(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _SSHD, args)
    if parsed.operands:
        chk.reject("`sshd` takes options only")
        return
    conf = parsed.last("-f")
    if conf is not None:
        found = judge.path(chk, conf, "config")
        if found is None:
            return
        if not (found + "/").startswith("/etc/ssh/"):
            chk.reject("`sshd -f` outside /etc/ssh: test the system configuration")
            return
    if parsed.has("-C") and not parsed.has("-T", "-G"):
        chk.reject("`sshd -C` only goes with `-T`")
        return
    action = next((flag for flag in ("-T", "-G", "-t", "-V") if parsed.has(flag)), None)
    chk.become = True
    if action is None or by_table(chk, "sshd", [action], _service_in_scope(chk, {"ssh", "sshd"}), "sshd",
                                  unit="ssh") is None:
        chk.reject("`sshd` without -t or -T starts a second SSH daemon; start the service instead "
                   "(`service ssh start`)")


# ---------------------------------------------------------------- Redis

_REDIS_OPTS = spec_from_table({
    "-h": "word", "-p": "int", "-s": "text", "-n": "int", "--raw": None, "--no-raw": None, "--csv": None,
    "--json": None, "--quoted-json": None, "-3": None, "--resp2": None, "--resp3": None, "-t": "word", "-c": None,
    "-e": None, "--no-auth-warning": None, "--verbose": None, "-r": "int", "-i": "word", "-d": "text", "-D": "text",
    "--scan": None, "--pattern": "text", "--count": "int", "--quoted-pattern": "text", "--bigkeys": None,
    "--memkeys": None, "--memkeys-samples": "int", "--keystats": None, "--hotkeys": None, "--top": "int",
    "--intrinsic-latency": "int", "--latency-dist": None, "--quoted-input": None, "--show-pushes": "word",
    "--version": None, "-v": None, "--help": None, "--insecure": None, "--tls": None, "--sni": "word",
    "--cacert": "path:cert", "--cacertdir": "path:meta",
    **dict.fromkeys(("-a", "--pass", "--user", "--askpass", "-u", "--cert", "--key", "--key-file-pass"),
                    {"type": "text", "deny": "credentials or keys on the command line leak into process lists and "
                                             "logs; the policy does not send them"}),
    "--askpass": {"deny": "`redis-cli --askpass` waits for a password nobody will type"},
    **dict.fromkeys(("--rdb", "--functions-rdb"),
                    {"type": "text", "deny": "`redis-cli --rdb` copies the whole dataset to a file"}),
    **dict.fromkeys(("--pipe", "--pipe-timeout", "--eval", "--ldb", "--ldb-sync-mode", "--replica", "--stat",
                     "--latency", "--latency-history", "--lru-test", "--cluster", "-x", "-X", "--mode"),
                    {"deny": "that `redis-cli` mode runs scripts, streams without end or reads input; not allowed"}),
}, permute=False, bundle=False)
_REDIS_SECRET_CONFIG = ("requirepass", "masterauth", "masteruser", "tls-key-file-pass", "tls-client-key-file-pass",
                        "sentinel-pass", "sentinel-user")
_REDIS_DANGEROUS_SET = {"dir", "dbfilename", "logfile", "requirepass", "masterauth", "masteruser", "aclfile",
                        "rename-command", "include", "loadmodule", "unixsocket", "unixsocketperm",
                        "enable-protected-configs", "enable-debug-command", "enable-module-command", "appendfilename",
                        "appenddirname", "pidfile", "bind", "protected-mode", "replicaof", "slaveof",
                        "tls-key-file", "tls-cert-file", "tls-ca-cert-file", "syslog-ident", "notify-keyspace-events"}
_REDIS_READ = {"ping", "info", "dbsize", "time", "lastsave", "role", "echo", "lolwut", "exists", "type", "ttl", "pttl",
               "scan", "strlen", "llen", "scard", "zcard", "hlen", "xlen", "hexists", "sismember", "readonly"}
_REDIS_READ_PAIRS = {("memory", w) for w in ("stats", "doctor", "malloc-stats", "usage", "help")} | {
    ("latency", w) for w in ("doctor", "latest", "history", "graph", "help", "histogram")} | {
    ("slowlog", w) for w in ("get", "len", "help")} | {("client", w) for w in ("list", "info", "getname", "id")} | {
    ("cluster", w) for w in ("info", "nodes", "slots", "shards", "myid", "myshardid", "countkeysinslot", "keyslot")} | {
    ("command", w) for w in ("count", "info", "docs", "list", "getkeys")} | {("module", "list")} | {
    ("acl", w) for w in ("whoami", "cat", "users", "log")} | {
    ("object", w) for w in ("encoding", "freq", "idletime", "refcount")} | {
    ("config", "help"), ("function", "list"), ("function", "stats"), ("script", "exists")}
_REDIS_DATA_READ = {"get", "mget", "hget", "hgetall", "hmget", "hkeys", "hvals", "lrange", "lindex", "smembers",
                    "srandmember", "zrange", "zrangebyscore", "zrevrange", "zscore", "getrange", "xrange", "xrevrange",
                    "dump", "randomkey", "sscan", "hscan", "zscan", "getex"}
_REDIS_DATA_WRITE = {"del", "unlink", "expire", "pexpire", "persist", "set", "setex", "psetex", "setnx", "mset",
                     "hset", "hdel", "lpush", "rpush", "lpop", "rpop", "sadd", "srem", "zadd", "zrem", "incr", "decr",
                     "incrby", "decrby", "rename", "renamenx", "getdel", "lrem", "ltrim", "copy", "move", "append"}
_REDIS_REFUSED = {"flushall", "flushdb", "debug", "module", "eval", "evalsha", "eval_ro", "evalsha_ro", "script",
                  "function", "fcall", "fcall_ro", "replicaof", "slaveof", "migrate", "monitor", "sync", "psync",
                  "acl", "failover", "restore", "restore-asking", "swapdb", "auth", "hello", "sentinel", "keys",
                  "subscribe", "psubscribe", "ssubscribe", "blpop", "brpop", "bzpopmin", "bzpopmax", "xread",
                  "xreadgroup", "wait", "waitaof", "multi", "exec", "pfdebug", "pfselftest", "quit", "reset"}


def redis_cli(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _REDIS_OPTS, args)
    if chk.rejected:
        return
    option_values(chk, _REDIS_OPTS, parsed)
    host = parsed.last("-h")
    if host is not None and not _local_host(chk, host, "redis-cli"):
        return
    socket = parsed.last("-s")
    if socket is not None:
        judge.path(chk, socket, "meta")
    repeat = parsed.last("-r")
    if repeat is not None and (int(repeat) > 20 or int(repeat) < 0):
        chk.reject("`redis-cli -r` repeats the command too often (at most 20, never -1)")
        return
    words = parsed.operands
    if parsed.has("--scan", "--bigkeys", "--memkeys", "--keystats", "--hotkeys", "--intrinsic-latency",
                  "--latency-dist", "--version", "-v", "--help"):
        if parsed.has("--intrinsic-latency") and int(parsed.last("--intrinsic-latency") or "0") > 30:
            chk.reject("`--intrinsic-latency` above 30 seconds runs too long")
        if parsed.has("--latency-dist"):
            chk.reject("`redis-cli --latency-dist` never ends")
        chk.effect("reads Redis statistics")
        return
    if not words:
        chk.reject("`redis-cli` needs a command (e.g. `redis-cli ping`); its prompt has nobody to answer")
        return
    for word in words:
        value(chk, "text", word, "`redis-cli`")
    head = words[0].lower()
    pair = (head, words[1].lower() if len(words) > 1 else "")
    in_scope = _service_in_scope(chk, {"redis", "redis-server"})
    if pair == ("client", "kill") and {w.lower() for w in words[2::2]} & {"type", "user", "maxage", "laddr"}:
        chk.effect("disconnects every Redis client of a kind")
        chk.approve("`client kill` by type, user, age or local address disconnects many clients; a human should confirm")
        return
    if by_table(chk, "redis-cli", words, in_scope, "Redis") is not None:
        return
    if head == "config" and pair[1] == "get":
        if len(words) < 3:
            chk.reject("`config get` needs a parameter name")
            return
        for param in words[2:]:
            secret = [k for k in _REDIS_SECRET_CONFIG if fnmatch.fnmatchcase(k, param.lower())]
            if secret or re.search(r"pass|auth|secret|token", param, re.IGNORECASE):
                chk.reject(f"`config get {param}` would print Redis passwords ({', '.join(secret) or param}); "
                           "they are never read by a command here")
                return
        chk.effect("reads Redis settings " + " ".join(words[2:]))
        return
    if head in _REDIS_READ or pair in _REDIS_READ_PAIRS:
        chk.effect(f"reads Redis state ({head})")
        return
    if head in _REDIS_REFUSED:
        reason = {"flushall": "deletes every key", "flushdb": "deletes every key of a database",
                  "keys": "blocks Redis while it scans every key; use `redis-cli --scan --pattern P`",
                  "monitor": "streams every command (passwords included) without end",
                  "auth": "sends a password on the command line"}.get(
                      head, "can write files, run code, change replication, block or flood the server")
        chk.reject(f"`redis-cli {head}` {reason}")
        return
    if head == "config" and pair[1] == "set":
        if len(words) < 4:
            chk.reject("`config set` needs a parameter and a value")
            return
        params = words[2::2]
        for param in params:
            if param.lower() in _REDIS_DANGEROUS_SET:
                chk.reject(f"`config set {param}` can make Redis write files where it should not, load code or "
                           "change its passwords (a classic way into a host); refused")
                return
        chk.effect("changes Redis settings " + ", ".join(params))
        chk.approve(f"`config set {' '.join(params)}` changes the running Redis; a human should confirm")
        return
    if pair in {("config", "resetstat"), ("slowlog", "reset"), ("latency", "reset"), ("memory", "purge")}:
        chk.effect(f"resets Redis statistics ({pair[0]} {pair[1]})")
        if not in_scope:
            chk.approve("Redis is not part of this incident; a human should confirm")
        return
    if head in ("bgsave", "bgrewriteaof"):
        chk.effect("writes a Redis snapshot" if head == "bgsave" else "rewrites the Redis append-only file")
        if not in_scope:
            chk.approve("Redis is not part of this incident; a human should confirm")
        return
    if head == "save" or pair == ("config", "rewrite"):
        chk.effect("writes the Redis snapshot (blocking)" if head == "save" else "rewrites redis.conf")
        chk.approve(f"`redis-cli {' '.join(words[:2])}` blocks Redis or rewrites its configuration; "
                    "a human should confirm")
        return
    if head == "shutdown":
        if len(words) > 1 and words[1].lower() in ("nosave", "now", "force"):
            chk.reject("`shutdown nosave/now/force` stops Redis and loses the data since the last snapshot")
            return
        chk.effect("stops Redis")
        chk.approve("`redis-cli shutdown` stops Redis; a human should confirm")
        return
    if head == "client" and pair[1] in ("kill", "pause", "unpause", "no-evict", "no-touch"):
        chk.effect(f"client {pair[1]}")
        chk.approve(f"`client {pair[1]}` disconnects or pauses clients; a human should confirm")
        return
    if head in _REDIS_DATA_READ:
        chk.effect("reads application data from Redis")
        chk.approve(f"`redis-cli {head}` reads application data (it may hold sessions or tokens); a human should "
                    "confirm")
        return
    if head in _REDIS_DATA_WRITE:
        chk.effect("changes application data in Redis")
        chk.approve(f"`redis-cli {head}` changes application data; a human should confirm")
        return
    chk.reject(f"`redis-cli {words[0][:40]}` is not a Redis command this policy knows")


# ---------------------------------------------------------------- PostgreSQL and MySQL

_SAFE_FUNCTIONS = {
    "count", "sum", "min", "max", "avg", "now", "current_timestamp", "version", "pg_is_in_recovery",
    "current_setting", "pg_database_size", "pg_relation_size", "pg_total_relation_size", "pg_table_size",
    "pg_indexes_size", "pg_size_pretty", "pg_postmaster_start_time", "pg_last_xact_replay_timestamp",
    "pg_current_wal_lsn", "pg_last_wal_receive_lsn", "pg_last_wal_replay_lsn", "pg_wal_lsn_diff", "coalesce", "age",
    "extract", "date_trunc", "to_char", "round", "length", "left", "right", "substr", "substring", "lower", "upper",
    "inet_server_addr", "inet_server_port", "pg_backend_pid", "pg_blocking_pids", "array_agg", "string_agg",
    "greatest", "least", "nullif", "pg_get_userbyid", "pg_encoding_to_char", "concat", "abs", "floor", "ceil",
    "clock_timestamp", "statement_timestamp", "pg_current_xact_id", "txid_current", "pg_conf_load_time", "format",
    "pg_stat_get_activity", "datname", "cast", "in", "exists", "any", "all", "interval", "count_big", "ifnull",
    "database", "user", "current_user", "session_user", "uptime", "unix_timestamp", "pg_wal_replay_paused",
    "pg_get_wal_replay_pause_state", "pg_size_bytes", "trim", "split_part", "values",
    "char_length", "date", "timestamp", "numeric", "bigint", "int", "integer", "text", "varchar", "float",
}
# What holds a database account's credentials: the password catalogs, the subscriptions' connection
# strings (with their passwords), and the statement that prints an account's definition with its
# authentication string (`SHOW CREATE USER`: `IDENTIFIED WITH ... AS '<hash>'`).
# Judged on the statement with its identifier quotes taken away (`mysql`.`user`, "pg_authid"), and
# any view over the same rows counts (information_schema.user_mapping_options, _pg_user_mappings;
# MySQL's replica connection table keeps the replication password in clear, mysql.servers the
# FEDERATED servers' passwords, mysql.password_history old hashes).
_SECRET_TABLES = re.compile(r"\b(?:pg_shadow|pg_authid|\w*user_mappings?\w*|mysql\s*\.\s*user|"
                            r"mysql\s*\.\s*global_priv|authentication_string|rolpassword|passwd|pg_subscription|"
                            r"subconninfo|show\s+create\s+user|\w*master_info|mysql\s*\.\s*servers|"
                            r"\w*password_history|user_password)\b", re.IGNORECASE)
# With `mysql` as the default database, the same tables by their bare names.
_MYSQL_DB_SECRET_TABLES = re.compile(r"(?i)\b(?:FROM|JOIN|TABLE|UPDATE|INTO|DESCRIBE|DESC)\s+(?:user|global_priv|servers)\b")
# PostgreSQL's large objects are application data (files, blobs) kept in a catalog table.
_DATA_CATALOGS = re.compile(r"(?i)\bpg_largeobject\b")
_CODE_FUNCTIONS = re.compile(r"\b(?:pg_read_file|pg_read_binary_file|pg_ls_dir|pg_stat_file|pg_ls_logdir|"
                             r"pg_ls_waldir|pg_ls_tmpdir|pg_ls_archive_statusdir|lo_import|lo_export|lo_get|lo_put|"
                             r"pg_file_write|pg_file_rename|pg_file_unlink|dblink\w*|load_file|sys_exec|sys_eval|"
                             r"pg_execute_server_program|set_config)\s*\(", re.IGNORECASE)
_MAINTENANCE = {"VACUUM", "ANALYZE", "ANALYSE", "REINDEX", "CLUSTER", "CHECKPOINT", "OPTIMIZE", "REPAIR", "CHECK",
                "FLUSH", "KILL", "START", "STOP", "RESET", "PURGE", "REFRESH", "LOCK", "NOTIFY", "LISTEN", "UNLISTEN",
                "DISCARD", "CHECKSUM"}
_RUNS_CODE = {"LOAD", "SOURCE", "SYSTEM", "DO", "CALL", "EXECUTE", "PREPARE", "HANDLER", "INSTALL", "UNINSTALL",
              "IMPORT"}
_BENIGN = {"BEGIN", "COMMIT", "ROLLBACK", "END", "START TRANSACTION"}
_PSQL_META_OK = re.compile(r"^\\(?:l\+?|list|du\+?|dg\+?|dt\+?|dn\+?|db\+?|dx\+?|d\+?|di\+?|dv\+?|conninfo|x|timing|"
                           r"encoding|drds|dp|z)(?:\s+[A-Za-z0-9_.*]+)?\s*$")


def _strip_sql(sql: str, dialect: str) -> str | None:
    """SQL without comments and string literals, as the server reads it; None when it holds code
    the policy cannot see (PostgreSQL dollar-quoted bodies, MySQL `/*! ... */` executable comments).

    Where the server and this reading could disagree, this reading shows more, never less:
    a backslash does not extend a string here, so anything a server would keep inside one
    stays visible.
    """
    if re.search(r"\$[A-Za-z_0-9]*\$", sql) or dialect == "mysql" and "/*!" in sql:
        return None
    comments = r"--[^\n]*|/\*.*?\*/|#[^\n]*" if dialect == "mysql" else r"--[^\n]*|/\*.*?\*/"
    out = re.sub(comments, " ", sql, flags=re.DOTALL)
    out = re.sub(r"'(?:[^']|'')*'", "''", out)
    out = re.sub(r"`[^`]*`", "x", out)
    return out


# `SELECT f(12345)`: one server function on one literal backend PID (or none), alone in its query.
_ONE_CALL = re.compile(r"^SELECT\s+(?:PG_CATALOG\.)?([A-Z_][A-Z0-9_]*)\s*\(\s*([0-9]{1,10})?\s*\)\s*"
                       r"(?:AS\s+[A-Z_][A-Z0-9_]*\s*)?$")


def _session_functions(chk: Check, statement: str, upper: str) -> set[str]:
    """Judge the server functions of the psql table (``pg_cancel_backend``, ``pg_terminate_backend``,
    ``pg_reload_conf``...) a query calls; returns their names (judged here). Called on one literal
    PID (or with no argument), alone in the query, a function gets its table class; a query that
    picks the PIDs itself (`... FROM pg_stat_activity WHERE ...`) acts on every session it selects
    and needs a human at least."""
    rows = service_cli.merged(chk.policy.get("service_subcommands")).get("psql", {})
    names = {c.lower() for c in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", statement)} & set(rows)
    if not names:
        return set()
    in_scope = _service_in_scope(chk, _POSTGRES_NAMES)
    one = _ONE_CALL.match(upper)
    for name in sorted(names):
        if one and one.group(1).lower() == name:
            pid = one.group(2)
            entry = by_table(chk, "psql", [name], in_scope, "PostgreSQL", unit="postgresql")
            if entry is not None and pid is not None:
                chk.effect(f"{name} on backend PID {pid}")
            continue
        cls, does = rows[name]
        if cls == "refuse":
            chk.reject(f"`{name}` {does}; refused")
            continue
        chk.effect(f"{does}, for every session the query selects")
        chk.approve(f"`{name}` inside a query acts on every session (or row) the query selects, not on one "
                    "named backend; a human should confirm")
    return names


# Server settings whose value is a program the server runs or a library it loads.
_CODE_SETTINGS = re.compile(r"(?i)\b[a-z_]*(?:_command|preload_libraries|library_path|plugin_dir|plugin_load(?:_add)?)\b")


def sql(chk: Check, text: str, dialect: str, database: str | None = None) -> None:
    """Judge SQL given with psql -c / mysql -e (``database``: the client's default database)."""
    if re.search(r"(?i)\b(?:SET|RESET)\b", text) and _CODE_SETTINGS.search(text):
        chk.reject("that statement sets a server setting that names a program to run or a library to load; refused")
        return
    plain = re.sub(r"[`\"]", "", text)
    if _SECRET_TABLES.search(plain) or dialect == "mysql" and (database or "").strip("`").lower() == "mysql" \
            and _MYSQL_DB_SECRET_TABLES.search(plain):
        chk.reject("that query reads password hashes or credentials of database users; never run here")
        return
    if _DATA_CATALOGS.search(plain):
        chk.approve("that query reads large objects, application data kept in the catalog; a human should confirm")
    if _CODE_FUNCTIONS.search(text):
        chk.reject("that query reads or writes server files, runs programs or opens other connections; refused")
        return
    stripped = _strip_sql(text, dialect)
    if stripped is None:
        chk.reject("dollar-quoted bodies (`$$ ... $$`) and executable comments (`/*! ... */`) hold code the "
                   "policy cannot judge")
        return
    statements = [s.strip() for s in stripped.split(";") if s.strip()]
    if not statements:
        chk.reject("the SQL is empty")
        return
    for statement in statements:
        if statement.startswith("\\"):
            if dialect == "postgres" and _PSQL_META_OK.match(statement):
                chk.effect("reads the database catalog")
                continue
            chk.reject(f"the client command {q(statement.split()[0])} runs shell commands or touches files; only "
                       "catalog listings (\\l, \\du, \\dt, \\conninfo) are allowed")
            return
        if dialect == "postgres" and "\\" in statement:
            chk.reject("a backslash inside a statement starts a psql meta-command (`\\g |cmd`, `\\!`) that runs "
                       "shell commands or writes files; send plain SQL")
            return
        upper = statement.upper()
        words = upper.split()
        head = words[0]
        if " INTO OUTFILE" in upper or " INTO DUMPFILE" in upper or head in _RUNS_CODE:
            chk.reject(f"`{head}` runs code, loads files or writes files on the server; refused")
            return
        if head == "COPY":
            if re.search(r"\bPROGRAM\b|\b(?:TO|FROM)\s+''", upper):
                chk.reject("`COPY ... PROGRAM` or to/from a server file runs programs or touches files; refused")
                return
            chk.effect("exports table data")
            chk.approve("`COPY` exports application data; a human should confirm")
            continue
        if head in ("CREATE", "ALTER") and re.search(r"\b(?:FUNCTION|PROCEDURE|TRIGGER|EXTENSION|LANGUAGE|EVENT|"
                                                     r"RULE|SERVER|PUBLICATION|SUBSCRIPTION)\b", " ".join(words[:6])):
            chk.reject(f"`{head} {words[1] if len(words) > 1 else ''}` defines code or connections the server "
                       "runs; refused")
            return
        if head in ("DROP", "DELETE", "TRUNCATE") or head == "ALTER" and "DROP" in words[:3] and "TABLE" not in words:
            chk.reject(f"`{head}` deletes data or schema; never run by a command here")
            return
        if dialect == "postgres" and _ROLE_SETTING_RESET.match(statement.rstrip()):
            # A role's own default for one setting, taken back to the server's: no password, privilege,
            # membership or login attribute changes; still another service's state a human confirms.
            chk.effect("changes a database role's setting")
            chk.approve("`ALTER ROLE ... RESET` takes a role's own default for a setting back to the server's; a "
                        "human should confirm")
            continue
        if dialect == "postgres" and _ROLE_VALIDITY.match(statement.rstrip()):
            # When the role's password stops being accepted: its expiry moved, nothing else. Whether the
            # expiry was meant (a rotation) is a person's call: approval, never alone.
            chk.effect("changes a database role's validity")
            chk.approve("`ALTER ROLE ... VALID UNTIL` moves when a role's password stops being accepted; a human "
                        "who knows whether the expiry was meant should confirm")
            continue
        if dialect == "postgres" and head == "GRANT":
            if not _grant(chk, statement, len(statements) == 1):
                return
            continue
        if head in ("GRANT", "REVOKE") or {"GRANT", "REVOKE"} & set(re.findall(r"[A-Z0-9_$]+", upper)) or re.search(
                r"\b(?:USER|ROLE|GROUP|AUTHORIZATION)\b", " ".join(words[:3])) and head in (
                "CREATE", "ALTER", "RENAME", "SET") or "PASSWORD" in words:
            chk.reject("changing database users, roles, grants or passwords is never run by a command here")
            return
        if head in ("SELECT", "SHOW", "TABLE", "VALUES", "EXPLAIN", "WITH", "DESCRIBE", "DESC"):
            if head == "EXPLAIN" and "ANALYZE" in words[:3] or head == "WITH" and re.search(
                    r"\b(?:INSERT|UPDATE|DELETE)\b", upper):
                chk.approve("that query runs the statement it explains or modifies rows; a human should confirm")
                continue
            if re.search(r"\bFOR\s+(?:UPDATE|SHARE)\b|\bINTO\s+[A-Z_]", upper) and head != "SHOW":
                chk.approve("that query locks rows or creates a table; a human should confirm")
                continue
            calls = {c.lower() for c in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", statement)}
            if dialect == "postgres":
                calls -= _session_functions(chk, statement, upper)
            unknown = sorted(calls - _SAFE_FUNCTIONS)
            chk.effect("reads database state")
            if unknown:
                chk.approve(f"the query calls {', '.join(unknown[:4])}, which the policy cannot judge (functions "
                            "can change state); a human should confirm")
            elif head == "SELECT" and not re.search(r"\bFROM\b", upper) or head in ("SHOW", "DESCRIBE", "DESC") \
                    or re.search(r"\bFROM\s+(?:PG_CATALOG\.)?PG_[A-Z_]+|INFORMATION_SCHEMA|PERFORMANCE_SCHEMA|"
                                 r"SYS\.", upper):
                pass
            else:
                chk.approve("that query reads application tables (they may hold personal data or tokens); a human "
                            "should confirm")
            continue
        if head in _BENIGN or head == "SET" and dialect == "postgres" and "GLOBAL" not in words:
            continue
        if head in _MAINTENANCE or head == "SET" or head == "ALTER" and words[1:2] == ["SYSTEM"]:
            chk.effect(f"runs {head} on the database")
            chk.approve(f"`{head}` changes the database server's state; a human should confirm")
            continue
        if head in ("INSERT", "UPDATE", "REPLACE", "CREATE", "ALTER", "COMMENT", "RENAME", "MERGE", "UPSERT"):
            chk.effect("changes database contents")
            chk.approve(f"`{head}` changes data or schema; a human should confirm")
            continue
        chk.reject(f"{q(head)} is not an SQL statement this policy knows")
        return


_PSQL = spec_from_table({
    "-c|--command": "text", "-d|--dbname": "word", "-h|--host": "word", "-p|--port": "int", "-U|--username": "word",
    "-w|--no-password": None, "-X|--no-psqlrc": None, "-A|--no-align": None, "-t|--tuples-only": None,
    "-q|--quiet": None, "-x|--expanded": None, "-l|--list": None, "-P|--pset": "text",
    "-F|--field-separator": "text", "-R|--record-separator": "text", "--csv": None, "-H|--html": None,
    "-0|--record-separator-zero": None, "-z|--field-separator-zero": None, "-e|--echo-queries": None,
    "-E|--echo-hidden": None, "-a|--echo-all": None, "-b|--echo-errors": None, "-1|--single-transaction": None,
    "-T|--table-attr": "text", "-V|--version": None, "-n|--no-readline": None,
    **dict.fromkeys(("-f|--file", "-o|--output", "-L|--log-file", "-v|--set|--variable"),
                    {"type": "text", "deny": "`psql` script files, output files and variables are not allowed; "
                                             "give the query with -c"}),
    "-W|--password": {"deny": "`psql -W` waits for a password nobody will type"},
    "-s|--single-step": {"deny": "`psql -s` asks before each statement; nobody will answer"},
    "-S|--single-line": None,
})


def psql(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _PSQL, args)
    if chk.rejected:
        return
    option_values(chk, _PSQL, parsed)
    host = parsed.last("-h")
    if host is not None and not _local_host(chk, host, "psql"):
        return
    if not count_bounds(chk, parsed.operands, 0, 2, "database or user name"):
        return
    if not _plain_database_names(chk, list(parsed.operands) + parsed.values("-d")):
        return
    for item in parsed.operands:
        value(chk, "word", item, "a database name")
    commands = parsed.values("-c")
    if not commands and not parsed.has("-l", "-V"):
        chk.reject("`psql` without -c waits for input; give the query with -c")
        return
    if parsed.has("-l"):
        chk.effect("lists databases")
    if len(commands) > 1 and any(re.search(r"(?i)\bGRANT\b", text) for text in commands):
        chk.reject("a GRANT is approved only alone in its SQL (one -c), so the approver sees exactly the access "
                   "it gives")
        return
    for text in commands:
        sql(chk, text, "postgres")


def _plain_database_names(chk: Check, names: list[str]) -> bool:
    """libpq reads a database name that holds `=` or starts with a URI scheme as a whole
    connection string, wherever it is given (operand or `-d`): it can name another host
    (`host=`, `hostaddr=`, `postgresql://HOST`), a service file entry (`service=`), a password
    or key file (`passfile=`, `sslkey=`) or session options. Only plain names pass."""
    for name in names:
        if "=" in name or "://" in name or re.match(r"(?i)postgres(?:ql)?:", name):
            chk.reject(f"{q(name)} is a connection string (it can name another host, a service entry, password or "
                       "key files); give a plain database name and `-h localhost -U USER`")
            return False
    return True


_PG_ISREADY = spec_from_table({"-d|--dbname": "word", "-h|--host": "word", "-p|--port": "int", "-t|--timeout": "int",
                               "-U|--username": "word", "-q|--quiet": None, "-V|--version": None})


def pg_isready(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _PG_ISREADY, args)
    option_values(chk, _PG_ISREADY, parsed)
    host = parsed.last("-h")
    if host is not None and not _local_host(chk, host, "pg_isready"):
        return
    if not _plain_database_names(chk, parsed.values("-d")):
        return
    count_bounds(chk, parsed.operands, 0, 0)
    chk.effect("checks whether PostgreSQL accepts connections")


_POSTGRES_NAMES = {"postgresql", "postgres"}


def pg_ctlcluster(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if "--" in args:
        chk.reject("`pg_ctlcluster ... -- OPTIONS` passes options straight to pg_ctl; not allowed")
        return
    rest = []
    i = 0
    mode = None
    while i < len(args):
        word = args[i]
        i += 1
        if word in ("-m", "--mode") and i < len(args):
            mode = args[i]
            i += 1
        elif word.startswith("--mode="):
            mode = word.partition("=")[2]
        elif word in ("--force",):
            chk.approve("`pg_ctlcluster --force` escalates to an immediate shutdown; a human should confirm")
        elif word.startswith("-"):
            chk.reject(f"{q(word)} is not a `pg_ctlcluster` option this policy allows")
            return
        else:
            rest.append(word)
    if len(rest) != 3 or not re.fullmatch(r"[0-9]{1,2}(?:\.[0-9])?", rest[0]) or \
            not re.fullmatch(r"[a-z0-9_-]{1,32}", rest[1]):
        chk.reject("use `pg_ctlcluster VERSION CLUSTER start|restart|reload|status|stop`")
        return
    version, cluster, action = rest
    if mode is not None and mode not in ("smart", "fast", "immediate", "s", "f", "i"):
        chk.reject(f"{q(mode)} is not a shutdown mode")
        return
    if mode in ("immediate", "i"):
        chk.approve("an immediate shutdown skips the checkpoint (recovery on the next start); a human should confirm")
    unit = f"postgresql@{version}-{cluster}"
    chk.become = True
    if by_table(chk, "pg_ctlcluster", [action], _service_in_scope(chk, _POSTGRES_NAMES), "PostgreSQL",
                unit=unit) is None:
        chk.reject(f"{q(action)} is not a `pg_ctlcluster` action this policy allows")


_PG_CTL = spec_from_table({
    "-D|--pgdata": "text", "-m|--mode": "word", "-t|--timeout": "int", "-w|--wait": None, "-W|--no-wait": None,
    "-s|--silent": None, "-c|--core-files": None, "-l|--log": "path:create",
    **dict.fromkeys(("-o|--options", "-p"), {
        "type": "text", "deny": "`pg_ctl -o/-p` passes options to the server or names its binary (settings that "
                                "run programs or load libraries); refused"}),
}, permute=True)


def pg_ctl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _PG_CTL, args)
    if chk.rejected:
        return
    option_values(chk, _PG_CTL, parsed)
    words = list(parsed.operands)
    data = parsed.last("-D")
    actions = ("status", "start", "stop", "restart", "reload", "promote", "kill", "init", "initdb", "logrotate")
    action = next((w for w in words if w in actions), None)
    if action is None or data is None:
        chk.reject("use `pg_ctl status -D DATADIR`")
        return
    if judge.path(chk, data, "meta") is None:
        return
    if by_table(chk, "pg_ctl", [action], _service_in_scope(chk, _POSTGRES_NAMES), "PostgreSQL") is None:
        chk.reject(f"`pg_ctl {action}` is not an action this policy allows (status, reload, logrotate; start, "
                   "stop, restart and promote with approval)")


_MYSQL_COMMON = {
    "-u|--user": "word", "-h|--host": "word", "-P|--port": "int", "-S|--socket": "path:meta", "--protocol": "word",
    "-s|--silent": None, "-v|--verbose": None, "-V|--version": None, "-E|--vertical": None,
    "--connect-timeout": "int", "--no-defaults": None, "--ssl-mode": "word", "--ssl": None, "--skip-ssl": None,
    "--defaults-file|--defaults-extra-file": {"type": "path:meta", "approval": "the client would log in with the "
                                                                               "credentials in that file; a human "
                                                                               "should confirm"},
    "-p|--password": {"type": "?text", "deny": "passwords on the command line (or a prompt nobody answers) are not "
                                               "allowed; the client logs in as root through the socket"},
    "--print-defaults": {"deny": "`--print-defaults` prints stored passwords"},
}
_MYSQLADMIN = spec_from_table({**_MYSQL_COMMON, "-f|--force": None, "-w|--wait": "?int", "-c|--count": "int",
                               "-i|--sleep": "int", "-r|--relative": None, "--shutdown-timeout": "int"})
_MYSQLADMIN_READ = {"ping", "status", "extended-status", "processlist", "variables", "version", "debug"}
_MYSQLADMIN_FLUSH = {"flush-hosts", "flush-logs", "flush-status", "flush-tables", "flush-threads", "refresh",
                     "flush-error-log", "flush-general-log", "flush-slow-log", "flush-engine-log", "flush-binary-log",
                     "flush-relay-log"}


def _loaded_from_shared_place(chk: Check, text: str, what: str) -> bool:
    """Refuse a file a client running as root takes as its own options or definitions when it lies
    where other accounts can write (temporary directories, runtime, log and data areas, homes):
    whatever it says, the client does as root. True when refused."""
    found, _reason = normalise(text)
    if found is None or not writable_by_others(chk, canonical(found)):
        return False
    chk.reject(f"{q(text)} lies where other accounts can write, and {what} as root; keep it with the "
               "service's configuration")
    return True


def _option_file_loaded(chk: Check, parsed: Any) -> bool:
    """A MySQL option file is more options: `plugin-dir` with `default-auth` loads a library into the
    client, `init-command` runs a statement, whatever the command line could say."""
    return not any(_loaded_from_shared_place(chk, text, "the client would take its options (a plugin to load, "
                                                        "an init command) from it")
                   for text in parsed.values("--defaults-file"))


def mysqladmin(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _MYSQLADMIN, args)
    if chk.rejected:
        return
    option_values(chk, _MYSQLADMIN, parsed)
    if not _option_file_loaded(chk, parsed):
        return
    host = parsed.last("-h")
    if host is not None and not _local_host(chk, host, chk.tool):
        return
    if parsed.has("-i") and not parsed.has("-c"):
        chk.reject("`mysqladmin -i` without `-c` repeats without end")
        return
    if not parsed.operands:
        chk.reject("`mysqladmin` needs a command such as `ping` or `status`")
        return
    chk.become = True
    in_scope = _service_in_scope(chk, {"mysql", "mysqld", "mariadb", "mariadbd"})
    words = [w.lower() for w in parsed.operands]
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word in _MYSQLADMIN_READ:
            chk.effect(f"reads MySQL state ({word})")
        elif word in _MYSQLADMIN_FLUSH:
            chk.effect(f"runs {word}")
            if not in_scope:
                chk.approve("MySQL is not part of this incident; a human should confirm")
        elif word in ("flush-privileges", "reload", "start-replica", "stop-replica", "start-slave", "stop-slave"):
            chk.effect(f"runs {word}")
            chk.approve(f"`mysqladmin {word}` changes privileges or replication; a human should confirm")
        elif word == "kill":
            ids = words[i].split(",") if i < len(words) else []
            i += 1
            if not ids or not all(x.isdigit() for x in ids):
                chk.reject("`mysqladmin kill` needs thread ids")
                return
            chk.effect(f"ends MySQL threads {', '.join(ids)}")
            chk.approve("`mysqladmin kill` ends client sessions; a human should confirm")
        elif word == "shutdown":
            chk.effect("stops MySQL")
            chk.approve("`mysqladmin shutdown` stops MySQL; a human should confirm")
        elif word in ("create", "drop", "password", "old-password"):
            chk.reject(f"`mysqladmin {word}` creates or drops databases or changes passwords; never run here")
            return
        else:
            chk.reject(f"{q(word)} is not a `mysqladmin` command this policy knows")
            return


_MYSQL = spec_from_table({**_MYSQL_COMMON, "-e|--execute": "text", "-D|--database": "word", "-B|--batch": None,
                          "-N|--skip-column-names": None, "-t|--table": None, "-r|--raw": None, "-X|--xml": None,
                          "-H|--html": None, "--skip-pager": None, "-A|--no-auto-rehash": None,
                          "--tee": {"type": "text", "deny": "`--tee` writes a file"},
                          "--pager": {"type": "?text", "deny": "`--pager` runs a program"},
                          "--init-command": {"type": "text", "deny": "`--init-command` runs more SQL"},
                          "--local-infile": {"type": "?word", "deny": "`--local-infile` lets the server read files"},
                          "--plugin-dir": {"type": "text", "deny": "plugins load code"}})


def mysql(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _MYSQL, args)
    if chk.rejected:
        return
    option_values(chk, _MYSQL, parsed)
    if not _option_file_loaded(chk, parsed):
        return
    host = parsed.last("-h")
    if host is not None and not _local_host(chk, host, chk.tool):
        return
    statements = parsed.values("-e")
    if not statements:
        chk.reject(f"`{chk.tool}` without -e waits for input; give the query with -e")
        return
    if not count_bounds(chk, parsed.operands, 0, 1, "database name"):
        return
    chk.become = True
    database = parsed.last("-D") or (parsed.operands[0] if parsed.operands else None)
    for text in statements:
        sql(chk, text, "mysql", database)


def mysqld(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    allowed = {"--validate-config", "--verbose", "--help", "--version", "-V"}
    if not args or not set(args) <= allowed or not ({"--validate-config", "--help", "--version", "-V"} & set(args)):
        chk.reject(f"`{chk.tool}` is allowed only to check its configuration (`{chk.tool} --validate-config`); "
                   "start the server through the init system")
        return
    chk.become = True
    chk.effect("checks the MySQL configuration")


# ---------------------------------------------------------------- containers

_CONTAINER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_DOCKER_GLOBAL = spec_from_table({
    "-D|--debug": None, "-l|--log-level": "word",
    **dict.fromkeys(("-H|--host", "-c|--context", "--config", "--tls", "--tlsverify", "--tlscacert", "--tlscert",
                     "--tlskey"), {"type": "text", "deny": "that option points the client at another daemon or "
                                                           "other credentials; not from here"}),
}, permute=False)
_DOCKER_SUB = {
    "ps": spec_from_table({"-a|--all": None, "-q|--quiet": None, "-n|--last": "int", "-l|--latest": None,
                           "-s|--size": None, "--no-trunc": None, "--format": "text", "-f|--filter": "text"}),
    "inspect": spec_from_table({"-f|--format": "text", "-s|--size": None, "--type": "word"}),
    "logs": spec_from_table({"-n|--tail": "word", "--since": "timestamp", "--until": "timestamp",
                             "-t|--timestamps": None, "--details": None,
                             "-f|--follow": {"deny": "`logs --follow` never ends; use `--tail 100`"}}),
    "stats": spec_from_table({"--no-stream": None, "--no-trunc": None, "--format": "text", "-a|--all": None}),
    "top": spec_from_table({}), "port": spec_from_table({}), "diff": spec_from_table({}),
    "images": spec_from_table({"-a|--all": None, "-q|--quiet": None, "--format": "text", "-f|--filter": "text",
                               "--digests": None, "--no-trunc": None}),
    "info": spec_from_table({"-f|--format": "text"}), "version": spec_from_table({"-f|--format": "text"}),
    "events": spec_from_table({"--since": "timestamp", "--until": "timestamp", "-f|--filter": "text",
                               "--format": "text"}),
    "restart": spec_from_table({"-t|--time|--timeout": "int", "-s|--signal": "word"}),
    "start": spec_from_table({"-a|--attach": {"deny": "`start --attach` streams without end"},
                              "-i|--interactive": {"deny": "`start -i` waits for input"}}),
    "stop": spec_from_table({"-t|--time|--timeout": "int", "-s|--signal": "word"}),
    "kill": spec_from_table({"-s|--signal": "word"}),
    "pause": spec_from_table({}), "unpause": spec_from_table({}),
}
_DOCKER_REFUSED = {"exec": "runs a program inside the container", "run": "starts a new container from an image",
                   "cp": "copies files in or out of a container", "rm": "deletes containers",
                   "rmi": "deletes images", "commit": "writes an image", "export": "copies a whole file system out",
                   "save": "copies images out", "load": "loads images", "import": "loads images",
                   "build": "builds images", "pull": "downloads images", "push": "uploads images",
                   "login": "stores credentials", "logout": "changes credentials", "attach": "attaches to a terminal",
                   "create": "creates containers", "update": "changes container limits", "rename": "renames",
                   "system": "prunes or reads daemon-wide state", "volume": "manages volumes",
                   "network": "manages networks", "plugin": "installs plugins", "swarm": "manages the cluster",
                   "service": "manages the cluster", "stack": "manages the cluster",
                   "secret": "reads or writes secrets", "config": "manages configs", "context": "switches daemons",
                   "trust": "changes signing keys", "buildx": "builds images", "manifest": "pushes manifests",
                   "container": "(use the short forms: ps, logs, inspect, restart)",
                   "image": "(use `images`)", "wait": "waits without end"}


_DOCKER_MANAGEMENT = {
    **{("container", s): s for s in ("inspect", "logs", "stats", "top", "port", "diff", "restart", "start", "stop",
                                     "kill", "pause", "unpause")},
    ("container", "ls"): "ps", ("container", "list"): "ps", ("container", "ps"): "ps",
    ("image", "ls"): "images", ("image", "list"): "images", ("image", "inspect"): "inspect",
}


# A `docker inspect` format is a Go template the client runs over the whole record. Objects of a
# container, image or service record that hold its environment (`Env`) within them:
_ENV_HOLDERS = frozenset({"Config", "ContainerConfig", "Spec", "TaskTemplate", "ContainerSpec"})
_TEMPLATE_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|`[^`]*`|'(?:[^'\\]|\\.)*'|/\*.*?\*/", re.S)
# A variable (`$`, `$name`) or a dot, each with the fields it selects (`$.Config`, `.State.Status`).
_TEMPLATE_OPERAND = re.compile(r"(\$[A-Za-z0-9_]*|(?<![A-Za-z0-9_)\]])\.(?![A-Za-z_]))?"
                               r"((?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


def _template_actions(fmt: str) -> list[str] | None:
    """The bodies of the `{{ ... }}` actions of a Go template, or None when it cannot be read whole."""
    actions = []
    at = 0
    while True:
        start = fmt.find("{{", at)
        if start < 0:
            return actions
        i = start + 2
        while True:
            literal = _TEMPLATE_LITERAL.match(fmt, i)
            if literal:
                i = literal.end()
            elif i >= len(fmt):
                return None
            elif fmt.startswith("}}", i):
                break
            else:
                i += 1
        actions.append(fmt[start + 2:i])
        at = i + 2


def _template_reach(fmt: str) -> str | None:
    """What of the record a format prints that holds the environment, or None.

    What an action prints, compares or passes on is judged whatever surrounds it (trim markers,
    pipes, parentheses, functions): the record itself (an empty format, `json`, `.` or `$`), the
    environment (`Env`) or an object holding it (`.Config`). A variable the template binds holds
    only what its own, judged, pipeline gave it.
    """
    if fmt.strip() in ("", "json"):
        return "the whole record"
    actions = _template_actions(fmt)
    if actions is None:
        return "a format the policy cannot read whole"
    for body in actions:
        body = _TEMPLATE_LITERAL.sub(" ", body.strip().removeprefix("-").removesuffix("-"))
        for found in _TEMPLATE_OPERAND.finditer(body):
            root, chain = found.group(1), found.group(2)
            if not root and not chain:
                continue
            fields = [f for f in chain.split(".") if f]
            if root in (".", "$") and not fields:
                return f"`{root}` (the whole record)"
            if "Env" in fields or fields and fields[-1] in _ENV_HOLDERS:
                return f"`{(root or '') + chain}`"
    return None


def docker(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _DOCKER_GLOBAL, args)
    if chk.rejected:
        return
    if not parsed.operands:
        chk.reject(f"`{chk.tool}` needs a command such as `ps` or `logs`")
        return
    sub, rest = parsed.operands[0], parsed.operands[1:]
    # Management commands name the same operations (`docker container ls` is `docker ps`).
    if sub in ("container", "image") and rest:
        sub, rest = _DOCKER_MANAGEMENT.get((sub, rest[0]), f"{sub} {rest[0]}"), rest[1:]
    if sub in ("compose",) and chk.tool != "docker-compose":
        compose(chk, rest, spec)
        return
    if sub in ("system",) and rest[:1] == ["df"]:
        chk.become = True
        chk.effect("reads container disk usage")
        return
    if sub in _DOCKER_REFUSED or sub not in _DOCKER_SUB:
        chk.reject(f"`{chk.tool} {sub[:30]}` {_DOCKER_REFUSED.get(sub, 'is not a command this policy knows')}; "
                   "not run by a command here")
        return
    sub_parsed = parse(chk, _DOCKER_SUB[sub], rest)
    if chk.rejected:
        return
    option_values(chk, _DOCKER_SUB[sub], sub_parsed)
    names = sub_parsed.operands
    for name in names:
        if not _CONTAINER.match(name):
            chk.reject(f"{q(name)} is not a container name or id")
            return
    chk.become = True
    if sub in ("ps", "images", "info", "version"):
        chk.effect(f"reads container state ({sub})")
        return
    if sub == "events" and not sub_parsed.has("--until"):
        chk.reject(f"`{chk.tool} events` without `--until` never ends")
        return
    if sub == "stats" and not sub_parsed.has("--no-stream"):
        chk.reject(f"`{chk.tool} stats` without `--no-stream` never ends")
        return
    if sub == "inspect":
        fmt = sub_parsed.last("-f")
        reach = "no `--format` (the whole record)" if fmt is None else _template_reach(fmt)
        if reach is None and re.search(r"Mounts.*Source.*secret", fmt or ""):
            reach = "the sources of its secret mounts"
        if reach is not None:
            chk.reject(f"`{chk.tool} inspect` with {reach} prints the container's environment (passwords and tokens "
                       "live there); print named fields, e.g. `--format '{{.State.Status}}'`")
            return
    if sub in ("inspect", "logs", "top", "port", "diff", "stats", "events"):
        if sub not in ("stats", "events") and not names:
            chk.reject(f"`{chk.tool} {sub}` needs a container name")
            return
        chk.effect(f"reads container state ({sub} {' '.join(names[:3])})".rstrip())
        return
    if not names:
        chk.reject(f"`{chk.tool} {sub}` needs a container name")
        return
    signal = sub_parsed.last("-s")
    if signal is not None:
        name = signal_name(signal)
        if name is None:
            chk.reject(f"{q(signal)} is not a signal")
            return
        if name not in judge.GENTLE_SIGNALS:
            judge.judge_signal(chk, name, in_scope=None, what="the container's processes")
    for name in names:
        in_scope = chk.scope.explicit and name in chk.scope.containers
        chk.effect(f"{sub}s container {name}")
        if sub in ("restart", "start"):
            if not in_scope:
                chk.approve(f"`{chk.tool} {sub} {name}`: the container is not part of this incident (or no incident "
                            "was named); a human should confirm")
        else:
            chk.approve(f"`{chk.tool} {sub} {name}` stops or freezes a container; a human should confirm")


_COMPOSE_LOGS = spec_from_table({
    "-n|--tail": "word", "--since": "timestamp", "--until": "timestamp", "-t|--timestamps": None,
    "--no-color": None, "--no-log-prefix": None, "--index": "int",
    "-f|--follow": {"type": "?word", "deny": "`compose logs --follow` never ends; use `--tail 100`"},
})


_COMPOSE_GLOBAL = spec_from_table({"-f|--file": "path:read", "-p|--project-name": "word",
                                   "--project-directory": "path:read"}, permute=False)


def compose(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse_judged(chk, _COMPOSE_GLOBAL, args)
    if parsed is None:
        return
    if not parsed.operands:
        chk.reject("compose needs a command such as `ps`")
        return
    sub, rest = parsed.operands[0], parsed.operands[1:]
    creates = "`compose up` would create the containers it defines (privileged, host mounts, any image)"
    if sub == "up" and any(_loaded_from_shared_place(chk, text, creates)
                           for text in parsed.values("-f", "--project-directory")):
        return
    chk.become = True
    if sub in ("ps", "top", "images", "ls"):
        chk.effect(f"reads compose state ({sub})")
        return
    if sub == "logs":
        # Read as the compose client reads its flags: `-ft` and `--follow=true` follow too.
        parsed = parse(chk, _COMPOSE_LOGS, rest)
        option_values(chk, _COMPOSE_LOGS, parsed)
        for name in parsed.operands:
            if not _CONTAINER.match(name):
                chk.reject(f"{q(name)} is not a service name")
        if not chk.rejected:
            chk.effect("reads compose logs")
        return
    if sub in ("restart", "start"):
        for name in (w for w in rest if not w.startswith("-")):
            if not _CONTAINER.match(name):
                chk.reject(f"{q(name)} is not a service name")
                return
        chk.effect(f"{sub}s compose services")
        chk.approve(f"`compose {sub}` acts on containers the policy cannot map to this incident; a human should "
                    "confirm")
        return
    if sub in ("stop", "up", "pause", "unpause", "kill"):
        chk.effect(f"{sub}s compose services")
        chk.approve(f"`compose {sub}` creates, stops or replaces containers; a human should confirm")
        return
    chk.reject(f"`compose {sub[:30]}` deletes, runs, builds or downloads; not run by a command here")


# ---------------------------------------------------------------- TLS and local checks

_X509 = spec_from_table({
    "-in": "text", "-noout": None, "-text": None, "-enddate": None, "-startdate": None, "-dates": None,
    "-subject": None, "-issuer": None, "-serial": None, "-fingerprint": None, "-sha256": None, "-sha1": None,
    "-md5": None, "-ext": "text", "-nameopt": "text", "-inform": "word", "-checkend": "int", "-purpose": None,
    "-email": None, "-ocsp_uri": None, "-pubkey": None, "-modulus": None, "-hash": None, "-subject_hash": None,
    "-issuer_hash": None, "-alias": None, "-certopt": "text", "-ocspid": None, "-noout_": None,
    **dict.fromkeys(("-out", "-signkey", "-key", "-CAkey", "-CA", "-req", "-passin", "-passout", "-extfile",
                     "-set_serial", "-days", "-x509toreq"),
                    {"type": "text", "deny": "that `openssl x509` option signs, reads private keys or writes files"}),
}, bundle=False)
_VERIFY = spec_from_table({"-CAfile": "text", "-CApath": "text", "-untrusted": "text", "-purpose": "word",
                           "-verbose": None, "-show_chain": None, "-crl_check": None, "-no-CAfile": None,
                           "-no-CApath": None, "-partial_chain": None, "-x509_strict": None}, bundle=False)
_S_CLIENT = spec_from_table({"-connect": "word", "-servername": "word", "-showcerts": None, "-brief": None,
                             "-verify_return_error": None, "-CAfile": "text", "-tls1_2": None, "-tls1_3": None,
                             "-starttls": "word", "-no_ign_eof": None, "-verify": "int", "-status": None,
                             "-alpn": "word", "-quiet": None}, bundle=False)


def openssl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    if not args:
        chk.reject("`openssl` needs a command such as `x509`")
        return
    sub, rest = args[0], args[1:]
    if sub in ("version",):
        chk.effect("prints the OpenSSL version")
        return
    if sub in ("x509", "req", "crl"):
        parsed = parse(chk, _X509, rest)
        if chk.rejected:
            return
        source = parsed.last("-in")
        if source is None:
            chk.reject(f"`openssl {sub}` needs `-in FILE` (it would wait for input)")
            return
        if not parsed.has("-noout") and not parsed.has("-text"):
            chk.reject(f"add `-noout` to `openssl {sub}` (without it, it prints the encoded certificate)")
            return
        if sub in ("req",) and not parsed.has("-noout"):
            chk.reject("add `-noout`")
            return
        judge.path(chk, source, "cert")
        return
    if sub == "verify":
        parsed = parse(chk, _VERIFY, rest)
        for name in ("-CAfile", "-untrusted"):
            for item in parsed.values(name):
                judge.path(chk, item, "cert")
        for item in parsed.values("-CApath"):
            judge.path(chk, item, "meta")
        if not parsed.operands:
            chk.reject("`openssl verify` needs a certificate file")
        for item in parsed.operands:
            judge.path(chk, item, "cert")
        return
    if sub == "s_client":
        parsed = parse(chk, _S_CLIENT, rest)
        target = parsed.last("-connect")
        if target is None:
            chk.reject("`openssl s_client` needs `-connect localhost:PORT`")
            return
        host = target.rsplit(":", 1)[0]
        if not _local_host(chk, host, "openssl s_client"):
            return
        for item in parsed.values("-CAfile"):
            judge.path(chk, item, "cert")
        chk.effect(f"reads the TLS certificate served on {target}")
        return
    if sub in ("ciphers", "list", "help"):
        chk.effect("lists OpenSSL capabilities")
        return
    chk.reject(f"`openssl {sub[:30]}` reads private keys, signs, encrypts or writes files; only x509, req, crl, "
               "verify, s_client and version are allowed")


_URL = re.compile(r"^(?P<scheme>https?)://(?P<host>localhost|127(?:\.[0-9]{1,3}){3}|\[::1\]|0\.0\.0\.0|"
                  r"ip6-localhost)(?::(?P<port>[0-9]{1,5}))?(?P<path>/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$")
_SECRET_HEADER = re.compile(r"^\s*(?:authorization|proxy-authorization|cookie|x-api-key|x-auth-token|"
                            r"x-vault-token|[a-z-]*(?:token|secret|key|auth)[a-z-]*)\s*:", re.IGNORECASE)
_CURL = spec_from_table({
    "-s|--silent": None, "-S|--show-error": None, "-f|--fail": None, "--fail-with-body": None, "-I|--head": None,
    "-i|--include": None, "-v|--verbose": None, "-k|--insecure": None, "-L|--location": None, "--max-redirs": "int",
    "-m|--max-time": "word", "--connect-timeout": "word", "-o|--output": "text", "-w|--write-out": "text",
    "-X|--request": "word", "-H|--header": "text", "-A|--user-agent": "text", "--retry": "int",
    "--retry-delay": "int", "--retry-connrefused": None, "--compressed": None, "-4|--ipv4": None, "-6|--ipv6": None,
    "--http1.1": None, "--http2": None, "-g|--globoff": None, "--noproxy": "text", "--cacert": "path:cert",
    "-e|--referer": "text", "--no-progress-meter": None, "-sS": None,
    **dict.fromkeys(("-d|--data|--data-raw|--data-binary|--data-urlencode|--json", "-F|--form", "-T|--upload-file",
                     "-u|--user", "-K|--config", "-x|--proxy", "--unix-socket", "--abstract-unix-socket",
                     "--resolve", "--connect-to", "-b|--cookie", "-c|--cookie-jar", "-E|--cert", "--key",
                     "--oauth2-bearer", "-D|--dump-header", "--trace", "--trace-ascii", "--libcurl", "--proxy-user",
                     "-U"), {"type": "text", "deny": "that `curl` option sends data or credentials, reaches another "
                                                     "host or socket, or writes files; only plain local checks run"}),
    **dict.fromkeys(("-O|--remote-name", "-n|--netrc", "--netrc-optional", "-J|--remote-header-name", "-G|--get",
                     "-q|--disable"), {"deny": "that `curl` option writes files, reads stored credentials or "
                                               "changes how the URL is built"}),
}, permute=True)


def _urls(chk: Check, urls: list[str], globoff: bool) -> bool:
    if not count_bounds(chk, urls, 1, 4, "URL"):
        return False
    for url in urls:
        if not globoff and re.search(r"[\[\]{}]", url):
            chk.reject(f"{q(url)}: brackets and braces make the client request many URLs; write one URL")
            return False
        found = _URL.match(url)
        if not found:
            chk.reject(f"{q(url)} is not a plain http(s) URL of this host (localhost, 127.0.0.1, [::1]); "
                       "remediation commands do not talk to other hosts")
            return False
        _other_services_api(chk, url, found)
    return True


def _other_services_api(chk: Check, url: str, found: re.Match) -> None:
    """A request to a port of this host that is not one of the incident's own (the service
    definition's ``ports``) reads another program's HTTP API: a container engine's, a key-value
    store's, a secrets manager's may answer with credentials or whole configurations, and what a
    response holds cannot be judged before it comes. A human confirms such a read. Without
    declared ports the service's own are unknown, and the request is judged as before."""
    scope = chk.scope
    ports = getattr(scope, "ports", None) if getattr(scope, "explicit", False) else None
    if not ports:
        return
    port = int(found.group("port") or (443 if found.group("scheme") == "https" else 80))
    if port not in ports:
        chk.approve(f"{q(url)} reads the HTTP API on port {port}, not one of {scope.service}'s ports "
                    f"({', '.join(str(p) for p in sorted(ports))}): another program's API may answer with its "
                    "credentials or configuration; a human should confirm")


def curl(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _CURL, args)
    if chk.rejected:
        return
    option_values(chk, _CURL, parsed)
    for name, text in parsed.options:
        # curl reads a value written `@FILE` from that file (`-H @FILE`, `-w @FILE`): a read to judge.
        if text is not None and text.startswith("@"):
            if text == "@-" or judge.path(chk, text[1:], "read", what=f"sends or prints (`curl {name}`)") is None:
                chk.reject(f"`curl {name} {text[:60]}` reads its value from a file or from the input; name the value")
                return
    output = parsed.last("-o")
    if output is not None and output not in ("/dev/null", "-"):
        chk.reject("`curl -o` may only write to /dev/null (the body is read from the output otherwise)")
        return
    method = (parsed.last("-X") or "GET").upper()
    if method not in ("GET", "HEAD", "OPTIONS"):
        chk.reject(f"`curl -X {method}` changes state on the server; only GET and HEAD run here")
        return
    for header in parsed.values("-H"):
        if _SECRET_HEADER.match(header):
            chk.reject("that header sends credentials or tokens; not from a remediation command")
            return
    if _urls(chk, parsed.operands, parsed.has("-g")):
        chk.effect("requests " + ", ".join(parsed.operands))


_WGET = spec_from_table({
    "-q|--quiet": None, "-O|--output-document": "text", "-n": "word", "--spider": None, "-S|--server-response": None,
    "-T|--timeout": "int", "-t|--tries": "int", "--no-check-certificate": None, "--max-redirect": "int",
    "--header": "text", "-4|--inet4-only": None, "-6|--inet6-only": None,
    "--no-proxy": None, "-U|--user-agent": "text", "--no-verbose": None,
    **dict.fromkeys(("-e|--execute", "-i|--input-file", "-P|--directory-prefix", "--post-data", "--post-file",
                     "--body-data", "--body-file", "--method", "--user", "--password", "--http-user",
                     "--http-password", "--load-cookies", "--save-cookies", "-o|--output-file", "-a|--append-output",
                     "--config", "--use-askpass"),
                    {"type": "text", "deny": "that `wget` option runs wgetrc commands, sends data or credentials, or "
                                             "writes files; only plain local checks run"}),
    **dict.fromkeys(("-r|--recursive", "-m|--mirror", "-N|--timestamping", "-c|--continue", "-x|--force-directories",
                     "-b|--background", "--ask-password", "-p|--page-requisites"),
                    {"deny": "that `wget` option downloads many files or runs in the background"}),
})


def wget(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    parsed = parse(chk, _WGET, args)
    if chk.rejected:
        return
    output = parsed.last("-O")
    if not parsed.has("--spider") and output not in ("-", "/dev/null"):
        chk.reject("`wget` must not save files: use `-O -` (or `--spider`)")
        return
    for header in parsed.values("--header"):
        if _SECRET_HEADER.match(header):
            chk.reject("that header sends credentials or tokens")
            return
    if _urls(chk, parsed.operands, False):
        chk.effect("requests " + ", ".join(parsed.operands))


def netcat(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    words = []
    scan = False
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if re.fullmatch(r"-[zvnu46]+", word):
            scan = scan or "z" in word
            continue
        if word in ("-w", "-W", "-i") and i < len(args) and args[i].isdigit():
            i += 1
            continue
        if word.startswith("-"):
            chk.reject(f"`{chk.tool} {word}` listens, runs programs or sends data; only port checks (`-z`) run here")
            return
        words.append(word)
    if not scan:
        chk.reject(f"`{chk.tool}` is allowed only as a port check: `{chk.tool} -z localhost PORT`")
        return
    if len(words) != 2 or not re.fullmatch(r"[0-9]{1,5}(?:-[0-9]{1,5})?", words[1]):
        chk.reject(f"use `{chk.tool} -z HOST PORT`")
        return
    if _local_host(chk, words[0], chk.tool):
        chk.effect(f"checks whether port {words[1]} accepts connections")


def certbot(chk: Check, args: list[str], spec: Mapping[str, Any]) -> None:
    words = [a for a in args if not a.startswith("-")]
    verb = words[0] if words else ""
    chk.become = True
    if verb == "certificates" and all(a in ("certificates", "--cert-name") or not a.startswith("-") for a in args):
        chk.effect("lists certificates and their expiry")
        return
    if verb == "renew" and all(a in ("renew", "--dry-run", "--no-random-sleep-on-renew", "-q", "--quiet",
                                     "--non-interactive", "--cert-name") or not a.startswith("-") for a in args):
        chk.effect("renews certificates" + (" (dry run)" if "--dry-run" in args else ""))
        chk.approve("`certbot renew` contacts the CA and may reload services; a human should confirm")
        return
    chk.reject("`certbot` other than `certificates` or `renew` changes accounts, keys or web server configs; "
               "a human does that")


RULES = {
    "nginx": nginx, "apachectl": apachectl, "a2config": a2config, "sshd": sshd, "redis_cli": redis_cli,
    "psql": psql, "pg_isready": pg_isready, "pg_ctlcluster": pg_ctlcluster, "pg_ctl": pg_ctl,
    "mysqladmin": mysqladmin, "mysql": mysql, "mysqld": mysqld, "docker": docker, "compose": compose,
    "openssl": openssl, "curl": curl, "wget": wget, "netcat": netcat, "certbot": certbot,
}
