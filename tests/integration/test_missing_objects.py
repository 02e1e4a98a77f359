"""A dependent's database cannot find one of its objects while the database itself is healthy
(a role's search_path changed, a table moved to another schema): the request shows where objects
of that name are and what decides how sessions resolve names. On a real lab host: a DBA's
``ALTER ROLE sentinelapp SET search_path = reporting`` (the lab fault app_role_search_path_wrong).

Each layer on its own: the host's evidence module, asked for the names, reads them from the
server's catalogs (every database); the engine, from the app's own error lines alone, asks for
them and puts them in the model's request. Nothing is changed by either: the role's setting is
still there afterwards, read inside the container."""
from __future__ import annotations

import pytest

from host_module import run_host_module
from llm_server import LLMServer
from test_degraded_cause import asked, sql
from test_do_no_harm import HOST, definition, intents
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

SETTING = ("SELECT array_to_string(setconfig, ',') FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
           "WHERE r.rolname = 'sentinelapp'")


def app_fault(lab, fault: str):
    """A fixture's body: ``fault`` injected on a healthy host for the test, then fixed and the app
    restarted (it keeps its failed connections otherwise) until PostgreSQL and the app are healthy."""
    lab.wait_health(HOST, ["postgres", "app"], timeout=60)
    lab.inject(HOST, fault)
    yield
    lab.fix(HOST, fault)
    lab.exec(HOST, "service sentinel-app restart")
    lab.wait_health(HOST, ["postgres", "app"], timeout=60)


@pytest.fixture
def search_path_changed(lab):
    yield from app_fault(lab, "app_role_search_path_wrong")


def test_the_host_reads_where_a_missing_object_is_and_what_resolves_names(lab, search_path_changed):
    require_docker()
    postgres = definition("postgresql")
    view = run_host_module(lab.container(HOST), "evidence", {
        **{k: v for k, v in postgres.items() if k in ("units", "processes", "user", "ports", "runtime_paths")},
        "service": "postgresql", "objects": ["visits", "no_such_thing", "bad name; DROP TABLE visits"]})["evidence"]
    where = view["objects"]
    assert where["server"] == "postgresql" and "error" not in where, where
    assert where["names"] == ["no_such_thing", "visits"]   # a name that is not an identifier is never sent
    assert {"database": "sentinelapp", "schema": "public", "name": "visits", "kind": "table",
            "owner": "sentinelapp"} in where["found"], where
    assert not [f for f in where["found"] if f["name"] == "no_such_thing"]
    assert {"role": "sentinelapp", "database": "", "settings": "search_path=reporting"} in where["name_settings"]
    assert sql(lab, SETTING) == "search_path=reporting"    # read only
    assert sql(lab, "SELECT count(*) FROM visits") .isdigit()


def first_app_request(lab, tmp_path) -> tuple[Workspace, str]:
    """One run on the failing app (the model escalates after one read): the workspace and the
    first request the model was sent for it, from the app's own error lines alone."""
    assert not lab.health(HOST, ["app"])["app"].healthy
    escalate = {"plan": {"diagnosis": "looking", "commands": ["service sentinel-app status"],
                         "rationale": "read", "escalate": True}}
    services = [definition("postgresql"), definition("sentinel-app")]
    with LLMServer(rules=[{"match": r"Service: sentinel-app\b", "reply": escalate}]) as server:
        work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"), llm_url=server.url)
        run = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "llm", "remediate_services": services})
        requests = asked(server)
    assert requests, run.stdout[-3000:]
    return work, requests[0]


def test_the_request_shows_where_the_table_is_and_the_roles_search_path(lab, tmp_path, search_path_changed):
    require_docker()
    work, request = first_app_request(lab, tmp_path)
    assert "### dependency_objects" in request, request[:4000]
    # which server's wording the app's errors used, said in the request
    assert "### missing_objects" in request
    assert "sentinel-app's errors say, in PostgreSQL's wording, that these do not exist: relation visits" in request
    assert "visits: table sentinelapp.public.visits (owner sentinelapp)" in request
    assert "role sentinelapp, every database: search_path=reporting" in request
    assert intents(work, "postgresql") == []
    assert sql(lab, SETTING) == "search_path=reporting"    # nothing changed it
