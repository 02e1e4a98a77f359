"""A dependent's database refuses it while the database itself is healthy: a table's grants moved
to a group role its login role is not a member of (``permission denied for table visits``), or its
database closed to new connections. On a real lab host (the lab faults
app_table_grants_moved_to_group_role and postgres_database_closed_by_rehearsal).

The host's evidence module, asked what was refused, reads it from the server's catalogs; each
fact is checked against what the server itself says, queried inside the container apart from the
code under test. The engine, from the app's own error lines alone, asks for it and puts it in the
model's request. Nothing is changed by either."""
from __future__ import annotations

import time

import pytest

from host_module import run_host_module
from test_degraded_cause import sql
from test_do_no_harm import HOST, definition, intents
from test_missing_objects import app_fault, first_app_request
from workflow_support import require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

_KEYS = ("units", "processes", "user", "ports", "runtime_paths", "logs", "log_paths")


def _postgres_args(**extra) -> dict:
    return {**{k: v for k, v in definition("postgresql").items() if k in _KEYS}, "service": "postgresql", **extra}


@pytest.fixture
def grants_moved(lab):
    lab.wait_health(HOST, ["postgres", "app"], timeout=60)
    lab.inject(HOST, "app_table_grants_moved_to_group_role")
    yield
    lab.reset(HOST)   # the tables' new owner and roles stay after the fix: a fresh host for the next test
    lab.wait_health(HOST, ["postgres", "app"], timeout=90)


@pytest.fixture
def database_closed(lab):
    yield from app_fault(lab, "postgres_database_closed_by_rehearsal")


def _server(lab, query: str, database: str = "postgres") -> str:
    return lab.exec(HOST, ["runuser", "-u", "postgres", "--", "psql", "-X", "-tA", "-d", database, "-c", query],
                    check=True).stdout.strip()


def test_who_may_use_a_refused_table_and_the_login_roles_memberships_reach_the_request(lab, tmp_path, grants_moved):
    require_docker()
    # the app has been refused at least once, so the server's log holds the refusal with its user@database
    for _attempt in range(30):
        if "permission denied for table visits" in lab.exec(
                HOST, "tail -n 50 /var/log/postgresql/postgresql-15-main.log").stdout:
            break
        time.sleep(1)
    view = run_host_module(lab.container(HOST), "evidence", _postgres_args(
        access={"privileges": [{"kind": "table", "name": "visits"}, {"kind": "table", "name": "x; DROP TABLE visits"}]},
        log_lines=50))["evidence"]["access"]
    assert "error" not in view, view
    visits = [o for o in view["objects"] if o["name"] == "visits"]
    assert len(visits) == 1 and visits[0]["database"] == "sentinelapp", view
    assert visits[0]["owner"] == sql(lab, "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'visits'")
    # who holds what, as the server's own privilege check says
    for grant in visits[0]["grants"]:
        for privilege in grant["privileges"]:
            assert sql(lab, f"SELECT has_table_privilege('{grant['holder']}', 'visits', '{privilege}')") == "t"
    holders = {g["holder"] for g in visits[0]["grants"]}
    assert "app_rw" in holders and "sentinelapp" not in holders
    assert view["holders"]["app_rw"] == sorted(filter(None, _server(
        lab, "SELECT pg_get_userbyid(member) FROM pg_auth_members WHERE roleid = 'app_rw'::regrole").splitlines()))
    # what each role may do beyond its grants, as pg_roles says (the policy refuses a grant of a role with powers)
    for role in ("app_rw", "sentinelapp"):
        expected = [w for w, flag in zip(("BYPASSRLS", "CREATEDB", "CREATEROLE", "REPLICATION", "SUPERUSER"), _server(
            lab, f"SELECT rolbypassrls, rolcreatedb, rolcreaterole, rolreplication, rolsuper FROM pg_roles "
                 f"WHERE rolname = '{role}'").split("|")) if flag.strip() == "t"]
        assert view["attributes"][role] == expected, (role, view["attributes"])
    assert "sentinelapp@sentinelapp" in view["logins"]
    login = next(r for r in view["roles"] if r["name"] == "sentinelapp")
    assert login["member_of"] == sorted(filter(None, _server(
        lab, "SELECT pg_get_userbyid(roleid) FROM pg_auth_members WHERE member = 'sentinelapp'::regrole").splitlines()))
    assert sql(lab, "SELECT has_table_privilege('sentinelapp', 'visits', 'SELECT')") == "f"   # nothing changed

    # the engine, from the app's own error lines alone, asks for it and puts it in the request
    work, request = first_app_request(lab, tmp_path)
    assert "### dependency_access" in request, request[:4000]
    assert "permission denied for table visits" in request
    assert "table sentinelapp.public.visits: owner app_owner; privileges held by:" in request
    assert "app_rw " in request.split("### dependency_access", 1)[1]
    assert "- members of role app_rw: none; powers: none" in request
    assert "- login role sentinelapp: can log in; member of: no role" in request
    assert intents(work, "postgresql") == []
    assert sql(lab, "SELECT has_table_privilege('sentinelapp', 'visits', 'SELECT')") == "f"


def test_the_host_reads_a_closed_databases_connection_settings(lab, database_closed):
    require_docker()
    view = run_host_module(lab.container(HOST), "evidence", _postgres_args(
        access={"connections": [{"kind": "database", "name": "sentinelapp"}], "roles": ["sentinelapp"]}))
    view = view["evidence"]["access"]
    assert "error" not in view, view
    db = next(d for d in view["databases"] if d["name"] == "sentinelapp")
    said = _server(lab, "SELECT datallowconn, datconnlimit FROM pg_database WHERE datname = 'sentinelapp'").split("|")
    assert (db["allow_connections"], db["connlimit"]) == (said[0] == "t", int(said[1])) == (False, int(said[1]))
    assert view["max_connections"] == int(_server(lab, "SHOW max_connections"))
    role = next(r for r in view["roles"] if r["name"] == "sentinelapp")
    assert role["connlimit"] == int(_server(lab, "SELECT rolconnlimit FROM pg_roles WHERE rolname = 'sentinelapp'"))
    assert _server(lab, "SELECT datallowconn FROM pg_database WHERE datname = 'sentinelapp'") == "f"
