"""Objects a database cannot find, in the wording of each server that says so: PostgreSQL's,
MySQL's and MariaDB's, SQLite's. The objects view stays PostgreSQL's; the evidence says which
wording was recognised."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_evidence as rules


@pytest.mark.parametrize("error, said", [
    ("ERROR 1146 (42S02): Table 'shop.orders' doesn't exist",
     [{"name": "shop.orders", "kind": "table", "server": "mysql"}]),
    ("pymysql.err.ProgrammingError: (1146, \"Table 'shop.orders' doesn't exist\")",
     [{"name": "shop.orders", "kind": "table", "server": "mysql"}]),
    ("ERROR 1049 (42000): Unknown database 'shop'", [{"name": "shop", "kind": "database", "server": "mysql"}]),
    ("sqlite3.OperationalError: no such table: visits", [{"name": "visits", "kind": "table", "server": "sqlite"}]),
    ("Error: SQLITE_ERROR: no such view: main.totals", [{"name": "main.totals", "kind": "view", "server": "sqlite"}]),
    ('ERROR:  relation "public.visits" does not exist',
     [{"name": "public.visits", "kind": "relation", "server": "postgresql"}]),
    # not an object a database cannot find
    ("Unknown column 'x' in 'field list'", []),
    ("no such file or directory: /etc/app.conf", []),
    ("the table is fine; the file /etc/app.conf does not exist", []),
])
def test_the_wording_of_each_server_is_recognised(error: str, said: list) -> None:
    assert rules.missing_object_mentions(error, None) == said


def test_only_postgresqls_names_go_to_its_objects_view_and_each_wording_is_said() -> None:
    error = ("ERROR 1146 (42S02): Table 'shop.orders' doesn't exist\n"
             "sqlite3.OperationalError: no such table: cache_entries\n"
             'ERROR:  relation "visits" does not exist')
    assert rules.missing_objects(error, None) == ["visits"]
    text = rules.render_missing("app", rules.missing_object_mentions(error, None))
    assert text.splitlines() == [
        "app's errors say, in MySQL/MariaDB's wording, that these do not exist: table shop.orders",
        "app's errors say, in SQLite's wording, that these do not exist: table cache_entries",
        "app's errors say, in PostgreSQL's wording, that these do not exist: relation visits"]


def test_the_dependents_own_logs_count_and_the_list_is_bounded() -> None:
    evidence = {"logs": {"/var/log/app.log": "\n".join(f"no such table: t{i}" for i in range(20))},
                "processes": "Table 'x.from_a_command_line' doesn't exist"}   # not the dependent's words
    said = rules.missing_object_mentions("GET /health returned 500", evidence)
    assert [m["name"] for m in said] == [f"t{i}" for i in range(8)]
