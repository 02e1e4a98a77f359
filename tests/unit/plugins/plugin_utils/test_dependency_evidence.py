# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dependency judged by what its dependent reports (dependency_evidence)."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_evidence as rules

POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
            "ports": [5432], "runtime_paths": ["/var/run/postgresql"]}
REDIS = {"name": "redis-server", "units": ["redis-server.service"], "processes": ["redis-server"], "ports": [6379]}
AUTH = ('GET http://127.0.0.1:8080/health answered 503: {"database": "connection to server at \\"127.0.0.1\\", '
        'port 5432 failed: FATAL:  password authentication failed for user \\"sentinelapp\\""}')


def test_an_error_naming_the_dependencys_port_makes_it_a_suspect():
    assert rules.naming(AUTH, {}, POSTGRES) == [(AUTH, "port 5432")]


def test_an_error_naming_only_the_dependencys_kind_makes_it_a_suspect():
    error = 'GET /health answered 503: {"database": "could not open file \\"base/16384/2619\\": No such file"}'
    assert rules.naming_lines(error, {}, POSTGRES) == [error]
    # the same words say nothing of a cache
    assert rules.naming_lines(error, {}, REDIS) == []


def test_the_dependents_own_log_error_lines_count_and_its_other_lines_do_not():
    evidence = {"journal": "10:00 sentinel-app[7]: listening on 127.0.0.1:8080\n"
                           "10:01 sentinel-app[7]: GET /: canceling statement due to lock timeout (database)\n",
                "paths": {"/var/run/postgresql": "directory"}}
    lines = rules.naming_lines("GET /health answered 503", evidence, POSTGRES)
    assert lines == ["10:01 sentinel-app[7]: GET /: canceling statement due to lock timeout (database)"]


def test_an_error_of_the_dependents_own_making_names_no_dependency():
    error = "GET http://127.0.0.1:8080/health answered 503: cannot write in /var/lib/sentinel-app: No space left"
    assert rules.naming_lines(error, {}, POSTGRES) == []


def test_the_dependencys_lines_on_the_same_failure_are_found_by_the_dependents_words():
    terms = rules.search_terms([AUTH])
    assert "sentinelapp" in terms and "password authentication failed for user" in terms
    dep_evidence = {"logs": {"/var/log/postgresql/postgresql-15-main.log": "\n".join([
        "2026-01-01 10:00:00 UTC [81] LOG:  checkpoint starting: time",
        '2026-01-01 10:00:01 UTC [90] sentinelapp@sentinelapp FATAL:  password authentication failed for user '
        '"sentinelapp"',
        '2026-01-01 10:00:01 UTC [90] sentinelapp@sentinelapp DETAIL:  User "sentinelapp" has no password assigned.',
        "2026-01-01 10:00:02 UTC [81] LOG:  checkpoint complete"])}}
    found = rules.relevant_lines(dep_evidence, terms)
    assert [(source, times) for source, _line, times in found] == [("postgresql-15-main.log", 1)] * 2
    assert "FATAL:  password authentication failed" in found[0][1] and "no password" in found[1][1]


def test_a_line_repeated_with_only_its_time_and_pid_changed_is_kept_once_with_its_count():
    log = "\n".join(f'2026-01-01 10:00:0{n} UTC [{500 + n}] FATAL:  could not open file "base/16384/2619"'
                    for n in range(5))
    found = rules.relevant_lines({"journal": log + "\n2026-01-01 10:00:09 UTC [1] LOG:  checkpoint"},
                                 rules.search_terms(['database: could not open file "base/16384/2619"']))
    assert found == [("journal", '2026-01-01 10:00:04 UTC [504] FATAL:  could not open file "base/16384/2619"', 5)]
    assert rules.section("app", "db", found).endswith("(x5)")


def test_the_suspect_note_says_what_named_it_and_nothing_a_redactor_reads_as_a_secret():
    note = rules.suspect_note("sentinel-app", ["5432", "database", "5432"])
    assert note == "SUSPECT all the same, sentinel-app's errors name it (5432, database)"
    assert "pass:" not in note


def test_a_section_is_bounded_and_cut_at_line_ends():
    relevant = [("postgresql.log", "x" * 250 + f" line {n}", 1) for n in range(12)]
    text = rules.section("sentinel-app", "postgresql", relevant, budget=900)
    assert len(text) <= 900 and text.startswith("postgresql's own lines on sentinel-app's failure")
    assert all(line.endswith(tuple(f"line {n}" for n in range(12))) for line in text.splitlines()[1:])
    assert "hold no line" in rules.section("sentinel-app", "postgresql", [])


def test_no_term_finds_nothing_rather_than_everything():
    assert rules.relevant_lines({"journal": "a\nb"}, []) == []


# ---------------------------------------------------------------- objects a database cannot find


def test_the_names_of_objects_a_database_says_do_not_exist_are_taken_from_the_dependents_own_lines():
    evidence = {"logs": {"/var/log/app.log": 'health: database: relation "visits" does not exist LINE 1: SELECT'},
                "config_test": 'psycopg2.errors.UndefinedTable: relation "public.orders" does not exist',
                "processes": 'relation "from_a_command_line" does not exist'}   # not the dependent's words
    assert rules.missing_objects("GET /health returned 503", evidence) == ["orders", "public", "visits"]
    assert rules.missing_objects("ERROR:  function refresh_totals(integer) does not exist", None) == ["refresh_totals"]
    assert rules.missing_objects("ERROR: schema 'reporting' does not exist", None) == ["reporting"]
    assert rules.missing_objects("the file /etc/app.conf does not exist", None) == []
    assert rules.missing_objects("\n".join(f'relation "t{i}" does not exist' for i in range(20)), None) \
        == [f"t{i}" for i in range(8)]


def test_where_objects_are_reads_as_lines_naming_each_name_and_every_setting_that_resolves_names():
    view = {"server": "postgresql", "names": ["gone", "visits"],
            "found": [{"database": "app", "schema": "public", "name": "visits", "kind": "table", "owner": "app"},
                      {"database": "app", "schema": "archive", "name": "visits", "kind": "view", "owner": "dba"}],
            "search_path": {"value": '"$user", public', "source": "default"},
            "name_settings": [{"role": "app", "database": "", "settings": "search_path=reporting"},
                              {"role": "", "database": "app", "settings": "work_mem=64MB"}],
            "databases_left_out": 2}
    text = rules.render_objects("sentinel-app", "postgresql", view)
    assert text.splitlines() == [
        "postgresql: where objects named gone, visits are (the names sentinel-app's errors say do not exist), "
        "read now in every database that takes connections:",
        "- gone: in no database",
        "- visits: table app.public.visits (owner app)",
        "- visits: view app.archive.visits (owner dba)",
        "- (2 more database(s) not read)",
        'Unqualified names resolve by search_path: "$user", public (server\'s, source default), unless a setting '
        "below changes it for a role or database:",
        "- role app, every database: search_path=reporting (ALTER ROLE/DATABASE ... SET; no time is kept)",
        "- every role, database app: work_mem=64MB (ALTER ROLE/DATABASE ... SET; no time is kept)"]
    assert rules.render_objects("a", "postgresql", {"names": ["x"], "error": "psql exited 2: no server"}) == (
        "postgresql: where objects named x are (the names a's errors say do not exist), read now in every database "
        "that takes connections: could not be read: psql exited 2: no server")
