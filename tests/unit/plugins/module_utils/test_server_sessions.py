# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A database server's session view: which servers have one, and the blockers first."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils import server_sessions


def test_a_postgresql_is_known_by_its_processes_or_units_and_others_have_no_view():
    assert server_sessions.server_kind({"name": "db", "processes": ["postgres"]}) == "postgresql"
    assert server_sessions.server_kind({"name": "pg", "units": ["postgresql@15-main.service"]}) == "postgresql"
    assert server_sessions.server_kind({"name": "redis-server", "processes": ["redis-server"]}) is None
    assert server_sessions.read({"name": "nginx", "processes": ["nginx"]}) is None


def test_the_sessions_that_block_others_come_first_with_how_many_wait_on_them():
    def session(pid, blocked_by=(), transaction=10):
        return {"pid": pid, "blocked_by": list(blocked_by), "transaction_s": transaction}
    sessions = [session(1, transaction=900), session(2, [7]), session(3, [7]), session(7, transaction=50),
                session(8, [2])]
    view = server_sessions._ranked({"server": "postgresql"}, sessions)  # pylint: disable=protected-access
    assert [(s["pid"], s["blocks"]) for s in view["sessions"]] == [(7, 2), (2, 1), (3, 0), (8, 0), (1, 0)]
    assert view["left_out"] == 0


def test_a_server_without_its_client_says_so(monkeypatch):
    monkeypatch.setattr(server_sessions.host_probe, "find_tool", lambda name: None)
    assert server_sessions.read({"name": "db", "processes": ["postgres"]}) == {
        "server": "postgresql", "error": "psql is not on this host"}


def _definition(name, **extra):
    return dict(dict(name=name, units=[], processes=[], depends_on=[], config_test=[], checks=[]), **extra)


def test_the_planner_is_told_whether_the_client_that_ends_a_session_is_there_for_the_server_and_its_dependents():
    # A dependent waiting on a database is told to end the blocking session with the server's own
    # function: the host's tool report must say whether that client is installed (the model read
    # "use only the tools listed as present" and could not send it when psql was not listed).
    from ansible_collections.sentinel.remediation.plugins.module_utils.service_spec import tool_candidates

    app = _definition("sentinel-app", processes=["sentinel-app"], depends_on=["postgresql"])
    database = _definition("postgresql", units=["postgresql@15-main.service"], processes=["postgres"])
    web = _definition("nginx", processes=["nginx"], depends_on=["sentinel-app"])
    assert server_sessions.view_tools(app) == ["psql"]
    assert server_sessions.view_tools(database) == ["psql"]
    assert server_sessions.view_tools(web) == []
    assert "psql" in tool_candidates(app) and "psql" in tool_candidates(database)
    assert "psql" not in tool_candidates(web)
