# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a dependent's database refused it (permission, connections), read from its own words,
and the dependency's section that never shows a header alone."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_evidence as rules


def test_a_permission_refusal_names_the_kind_and_the_object_and_a_qualified_name_its_last_part():
    evidence = {"logs": {"/var/log/app/app.log": "10:00 app[1]: health: database: permission denied for table visits\n"
                                                 "10:01 app[1]: ERROR: permission denied for schema Reporting\n"}}
    want = rules.access_refusals('query failed: permission denied for sequence "public.orders_id_seq"', evidence)
    assert want["privileges"] == [{"kind": "sequence", "name": "orders_id_seq"}, {"kind": "table", "name": "visits"},
                                  {"kind": "schema", "name": "Reporting"}]
    assert want["connections"] == []


def test_connection_refusals_name_the_database_or_the_role_and_the_clients_login_when_it_says_it():
    error = ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "shop" is not currently '
             'accepting connections')
    assert rules.access_refusals(error, {})["connections"] == [{"kind": "database", "name": "shop"}]
    error = 'FATAL:  too many connections for role "report_user" (host=db user=report_user dbname=sales)'
    want = rules.access_refusals(error, None)
    assert want["connections"] == [{"kind": "role", "name": "report_user"}]
    assert want["roles"] == ["report_user"] and want["databases"] == ["sales"]
    assert rules.access_refusals('FATAL: too many connections for database "x1"', {})["connections"] == [
        {"kind": "database", "name": "x1"}]


def test_other_failures_ask_for_nothing():
    assert rules.access_refusals("open /var/lib/app: permission denied", {}) == {}
    assert rules.access_refusals('password authentication failed for user "app"', {}) == {}
    assert rules.access_refusals("", None) == {}


def test_the_access_view_reads_as_owner_holders_members_and_login_roles():
    want = {"privileges": [{"kind": "table", "name": "visits"}, {"kind": "table", "name": "gone"}], "connections": []}
    view = {"server": "postgresql", "logins": ["app@appdb"],
            "objects": [{"database": "appdb", "schema": "public", "name": "visits", "kind": "table",
                         "owner": "app_owner", "grants": [{"holder": "app_owner", "privileges": ["SELECT", "UPDATE"]},
                                                          {"holder": "app_rw", "privileges": ["SELECT"]}]}],
            "holders": {"app_owner": [], "app_rw": ["reporting"]},
            "roles": [{"name": "app", "can_login": True, "connlimit": -1, "inherit": True, "connections": 2,
                       "member_of": []}], "roles_missing": ["ghost"],
            "databases": [{"name": "appdb", "allow_connections": False, "connlimit": 5, "connections": 0,
                           "owner": "app", "grants": [{"holder": "PUBLIC", "privileges": ["CONNECT"]}]}],
            "max_connections": 100, "reserved": 3, "client_sessions": 4}
    text = rules.render_access("app", "db", want, view)
    lines = text.splitlines()
    assert lines[0] == "db: what app was refused (permission denied for table visits; permission denied for table " \
                       "gone), read now, read only:"
    assert "- table appdb.public.visits: owner app_owner; privileges held by: app_owner SELECT,UPDATE; app_rw SELECT" \
        in lines
    assert "- table gone: found in no database read" in lines
    assert "- members of role app_owner: none" in lines and "- members of role app_rw: reporting" in lines
    assert "- login role app: can log in; member of: no role; connections 2 (no limit)" in lines
    assert "- role ghost: does not exist" in lines
    assert any(line.startswith("- database appdb: datallowconn false, datconnlimit 5 (limit 5), connections now 0")
               for line in lines)
    assert "- server: max_connections 100, reserved for superusers 3, client connections now 4" in lines
    assert "app@appdb" in text
    assert rules.render_access("app", "db", want, {"error": "psql is not on this host"}).endswith(
        "could not be read: psql is not on this host")


def test_a_section_with_no_line_says_which_logs_were_read_and_never_shows_its_header_alone():
    dep = {"logs": {"/var/log/postgresql/postgresql-15-main.log": "10:00 LOG:  checkpoint starting\n"},
           "journal": ""}
    read = rules.sources_read(dep)
    assert read == ["postgresql-15-main.log"]
    text = rules.section("app", "postgresql", [], read=read)
    assert text == "postgresql's logs hold no line on app's error (read: postgresql-15-main.log)"
    assert "no log or journal of it could be read" in rules.section("app", "postgresql", [])
    # a first line longer than the budget is cut, not dropped under its header
    long = [("pg.log", "x" * 290, 1)]
    text = rules.section("app", "postgresql", long, budget=120)
    assert text.splitlines()[0].endswith("(newest last):") and len(text.splitlines()) == 2
    assert len(text) <= 140
    # lines that are empty once formatted do not count as lines
    assert "hold no line" in rules.section("app", "postgresql", [("", "", 1)][:0])
