# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A database server's view of what it refused a client: only plain names are sent, the login
role comes from the server's own log prefix, and every list is bounded."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils import server_sessions

SEP = "\x1f"
PG = {"name": "postgresql", "processes": ["postgres"]}


def test_only_postgresql_with_something_refused_is_read():
    assert server_sessions.access({"name": "redis", "processes": ["redis-server"]},
                                  {"privileges": [{"kind": "table", "name": "t"}]}) is None
    assert server_sessions.access(PG, {}) is None
    assert server_sessions.access(PG, {"roles": ["app"]}) is None


def test_the_login_comes_from_log_lines_that_state_a_refusal_only():
    log = ("2026-01-01 10:00:00 UTC [7] app@appdb LOG:  connection authorized\n"
           "2026-01-01 10:00:01 UTC [7] app@appdb ERROR:  permission denied for table visits\n"
           "2026-01-01 10:00:02 UTC [8] other@x FATAL:  database \"x\" is not currently accepting connections\n"
           "2026-01-01 10:00:03 UTC [9] bob@appdb ERROR:  syntax error at or near \"SELEC\"\n")
    assert server_sessions.logins_in_log(log) == [("app", "appdb"), ("other", "x")]


def test_names_that_are_not_plain_identifiers_are_never_sent_and_rows_are_parsed(monkeypatch):
    calls = []

    def fake(defn, database, timeout, commands=(), script="", variables=None):
        calls.append((database, dict(variables or {})))
        if script.startswith("SELECT 'object'"):
            return [SEP.join(["object", "public", "visits", "table", "app_owner",
                              "app_owner=SELECT,app_owner=UPDATE,app_rw=SELECT,PUBLIC=SELECT"])], ""
        return [SEP.join(["settings", "100", "3", "5"]),
                SEP.join(["database", "appdb", "t", "-1", "2", "app", "PUBLIC=CONNECT,PUBLIC=TEMPORARY"]),
                SEP.join(["role", "app", "t", "-1", "t", "2", "web,readers"]),
                SEP.join(["members", "app_rw", "reporting"])], ""

    monkeypatch.setattr(server_sessions, "_run_psql", fake)
    want = {"privileges": [{"kind": "table", "name": "visits"}, {"kind": "table", "name": "x'; DROP TABLE y; --"}],
            "roles": ["bad role"]}
    log = "10:00 [7] app@appdb ERROR:  permission denied for table visits"
    view = server_sessions.access(PG, want, log)
    assert calls[0] == ("appdb", {"relations": "visits", "schemas": "", "functions": ""})
    assert calls[1][0] == "postgres"
    assert calls[1][1] == {"roles": "app", "databases": "appdb", "holders": "app_owner,app_rw"}
    obj = view["objects"][0]
    assert obj["owner"] == "app_owner" and obj["grants"] == [
        {"holder": "PUBLIC", "privileges": ["SELECT"]}, {"holder": "app_owner", "privileges": ["SELECT", "UPDATE"]},
        {"holder": "app_rw", "privileges": ["SELECT"]}]
    assert view["holders"] == {"app_rw": ["reporting"]}
    assert view["roles"] == [{"name": "app", "can_login": True, "connlimit": -1, "inherit": True, "connections": 2,
                              "member_of": ["readers", "web"]}]
    assert view["databases"][0]["allow_connections"] is True and view["max_connections"] == 100
    assert view["logins"] == ["app@appdb"] and view["roles_missing"] == []


def test_without_a_login_database_every_database_that_takes_connections_is_read(monkeypatch):
    seen = []

    def fake(defn, database, timeout, commands=(), script="", variables=None):
        seen.append(database)
        if commands:
            return [SEP.join(["database", "a", "2"]), SEP.join(["database", "b", "2"])], ""
        return [], "psql printed nothing"

    monkeypatch.setattr(server_sessions, "_run_psql", fake)
    view = server_sessions.access(PG, {"privileges": [{"kind": "schema", "name": "app"}]})
    assert seen == ["postgres", "a", "b", "postgres"]
    assert view["objects"] == [] and "error" not in view
