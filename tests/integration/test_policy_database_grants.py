# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A database role's own access given back with approval, on real PostgreSQL in a lab host.

The lab fault `app_table_grants_moved_to_group_role`: the app's tables now belong to an owner
role and their privileges to a group role the app's login role (sentinelapp) is not in; the
app's queries fail with "permission denied". For the incident of sentinel-app:

- the spellings meant to widen the grant or sneak another change past it are refused, and the
  server's roles, memberships and table privileges are the same after they were judged;
- with the host's role attributes in the evidence, a granted role holding CREATEROLE is refused;
- `GRANT app_rw TO sentinelapp` needs approval; approved, its argv runs as it is, psql as
  sentinelapp (the app's own connection settings) reads and writes the table again, the app's
  health check passes, and the only catalog change is that one membership.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, scope_from_service

pytestmark = pytest.mark.lab

HOST = "lab01"
FAULT = "app_table_grants_moved_to_group_role"
REPO = Path(__file__).resolve().parents[2]
PREFIX = "sentinel-grants"
# What a role holds: every role with its attributes, every membership, the table's owner and ACL.
CATALOG = ("SELECT string_agg(x, ' | ' ORDER BY x) FROM ("
           "SELECT rolname || ':' || rolsuper || rolcreaterole || rolbypassrls AS x FROM pg_roles "
           "UNION ALL SELECT 'member ' || m.rolname || ' of ' || r.rolname FROM pg_auth_members a "
           "JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member "
           "UNION ALL SELECT 'table ' || relname || ' ' || pg_get_userbyid(relowner) || ' ' || "
           "coalesce(relacl::text, '') FROM pg_class WHERE relname LIKE 'visits%') s")
REFUSED = [
    "GRANT app_rw TO sentinelapp WITH ADMIN OPTION",
    "GRANT app_owner TO sentinelapp WITH SET TRUE",
    "GRANT app_rw TO sentinelapp GRANTED BY app_owner",
    "GRANT app_rw, app_owner TO sentinelapp",
    "GRANT app_rw TO PUBLIC",
    "GRANT app_rw TO CURRENT_USER",
    "GRANT pg_read_server_files TO sentinelapp",
    'GRANT /* x */ "postgres" TO sentinelapp',
    "GRANT app_rw TO sentinelapp; ALTER ROLE sentinelapp SUPERUSER",
    "SET ROLE app_owner; GRANT app_rw TO sentinelapp",
    "GRANT ALL PRIVILEGES ON visits TO sentinelapp",
    "GRANT SELECT ON visits TO sentinelapp WITH GRANT OPTION",
    "GRANT TRUNCATE ON visits TO sentinelapp",
    "ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO sentinelapp",
    "ALTER GROUP app_rw ADD USER sentinelapp",
    "CREATE ROLE helper LOGIN IN ROLE postgres",
    "REVOKE app_rw FROM sentinelapp",
    "DO $$BEGIN GRANT app_owner TO sentinelapp; END$$",
]


def _definition() -> dict:
    data = yaml.safe_load((REPO / "inventories/lab/group_vars/lab_sysv.yml").read_text(encoding="utf-8"))
    return next(dict(s) for s in data["remediate_services"] if s["name"] == "sentinel-app")


@pytest.fixture(scope="module")
def grants_lab(lab_factory):
    """One SysV host of its own, with the fault injected (the host is removed with the session)."""
    lab = lab_factory(PREFIX, 1)
    lab.wait_health(HOST, ["postgres", "app"], timeout=90)
    lab.inject(HOST, FAULT)
    return lab


def _superuser_sql(lab, statement: str) -> str:
    return lab.exec(HOST, ["runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-tA", "-d", "sentinelapp", "-c",
                           statement], timeout=30, check=True).stdout.strip()


def _as_app(lab, statement: str):
    """psql as the app's login role, with the app's own connection settings (its app.conf dsn)."""
    return lab.exec(HOST, "psql \"$(sed -n 's/^dsn = //p' /etc/sentinel-app/app.conf)\" -X -q -tA -c "
                          f"\"{statement}\"", timeout=30)


def _psql(statement: str) -> str:
    return f"runuser -u postgres -- psql -X -q -d sentinelapp -c '{statement}'"


def test_refused_spellings_are_refused_and_change_nothing_and_the_approved_membership_restores_access(grants_lab):
    lab = grants_lab
    scope = scope_from_service(_definition())
    denied = _as_app(lab, "SELECT count(*) FROM visits")
    assert not denied.ok and "permission denied" in denied.output(), denied.output()
    before = _superuser_sql(lab, CATALOG)
    assert "member sentinelapp of app_rw" not in before, before

    for statement in REFUSED:
        verdict = classify(_psql(statement), scope=scope)
        assert verdict["verdict"] == "reject", (statement, verdict["reasons"])
        assert verdict["argv"] is None, statement
    # The host's role attributes in the evidence: a group role that may create roles is refused.
    _superuser_sql(lab, "CREATE ROLE s41_admin NOLOGIN CREATEROLE")
    try:
        attributes = _superuser_sql(lab, "SELECT string_agg(rolname || '=' || CASE WHEN rolcreaterole THEN "
                                         "'CREATEROLE' ELSE 'NOCREATEROLE' END, ' ') FROM pg_roles "
                                         "WHERE rolname IN ('s41_admin', 'app_rw')")
        evidence = {"role_attributes": dict(item.split("=") for item in attributes.split())}
        with_roles = scope_from_service(_definition(), [], evidence)
        assert classify(_psql("GRANT s41_admin TO sentinelapp"), scope=with_roles)["verdict"] == "reject"
        assert classify(_psql("GRANT app_rw TO sentinelapp"), scope=with_roles)["verdict"] == "approval"
    finally:
        _superuser_sql(lab, "DROP ROLE s41_admin")
    assert _superuser_sql(lab, CATALOG) == before

    verdict = classify(_psql("GRANT app_rw TO sentinelapp"), scope=scope)
    assert verdict["verdict"] == "approval", verdict["reasons"]
    assert "gives database role sentinelapp membership of role app_rw" in verdict["effects"]
    # approved: the argv the approver saw runs as it is
    ran = lab.exec(HOST, verdict["argv"], user="root" if verdict["become"] else "sentinel", timeout=60)
    assert ran.ok, ran.output()

    read = _as_app(lab, "SELECT count(*) FROM visits")
    assert read.ok and read.stdout.strip().isdigit(), read.output()
    wrote = _as_app(lab, "INSERT INTO visits DEFAULT VALUES RETURNING id")
    assert wrote.ok and wrote.stdout.strip().isdigit(), wrote.output()
    # Only the membership changed: no attribute, owner or table privilege.
    after = _superuser_sql(lab, CATALOG)
    assert sorted(after.split(" | ")) == sorted(before.split(" | ") + ["member sentinelapp of app_rw"]), after
    lab.wait_health(HOST, ["app"], timeout=60)
