# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A database role's own access given back (s41): one role's membership of one other role, or
data privileges on named tables and sequences, wait for a human and never run alone; the host's
evidence of role attributes refuses a granted role with powers beyond data; the prompt's refused
line names the exception without growing. The corpora (postgresql.yml) hold the spellings."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy, policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.prompt import build_messages, estimate_tokens
from fault_samples import sample

APP = {"name": "sentinel-app", "units": ["sentinel-app.service"], "processes": ["sentinel-app"], "user": "app",
       "depends_on": ["postgresql"]}


def _classify(command: str, evidence: dict | None = None) -> dict:
    scope = policy.scope_from_service(APP, [], evidence or {})
    [verdict] = policy.classify_many([command], policy.load_policy(None), scope=scope)
    return verdict


def test_a_membership_grant_waits_for_a_human_who_is_told_to_check_the_granted_roles_attributes():
    verdict = _classify("sudo -u postgres psql -d app -c 'GRANT app_rw TO app'")
    assert verdict["verdict"] == "approval", verdict["reasons"]
    assert "gives database role app membership of role app_rw" in verdict["effects"]
    text = " ".join(verdict["reasons"])
    assert all(word in text for word in ("SUPERUSER", "CREATEROLE", "BYPASSRLS")), text


def test_table_privileges_name_what_they_give_in_the_effects():
    verdict = _classify("sudo -u postgres psql -d app -c 'GRANT SELECT, update ON public.orders TO \"app\"'")
    assert verdict["verdict"] == "approval", verdict["reasons"]
    assert "gives database role app SELECT, UPDATE on table public.orders" in verdict["effects"]


@pytest.mark.parametrize("attributes", [["SUPERUSER"], "Create role, Cannot login", ["LOGIN", "BYPASSRLS"],
                                        ["REPLICATION"]])
def test_the_hosts_role_attributes_refuse_a_granted_role_with_powers(attributes) -> None:
    evidence = {"role_attributes": {"app_rw": attributes, "app": ["LOGIN"]}}
    verdict = _classify("sudo -u postgres psql -d app -c 'GRANT app_rw TO app'", evidence)
    assert verdict["verdict"] == "reject", verdict["reasons"]
    assert "app_rw" in " ".join(verdict["reasons"])


def test_a_granted_role_the_evidence_shows_without_powers_still_waits_for_a_human():
    evidence = {"role_attributes": {"app_rw": ["NOLOGIN", "NOSUPERUSER", "INHERIT"]}}
    assert _classify("sudo -u postgres psql -d app -c 'GRANT app_rw TO app'", evidence)["verdict"] == "approval"


@pytest.mark.parametrize("command", [
    "sudo -u postgres psql -d app -c 'GRANT app_rw TO app'",
    "sudo -u postgres psql -d app -c 'GRANT SELECT ON ALL TABLES IN SCHEMA public TO app'",
])
def test_no_autonomy_table_lets_a_grant_run_without_a_human(command) -> None:
    verdict = _classify(command)
    everything = {name: "auto" for name in autonomy.CLASSES}
    [out] = autonomy.apply([verdict], everything, evidence={}, definition=APP)
    assert out["verdict"] == "approval", out


@pytest.mark.parametrize("command", [
    "sudo -u postgres psql -c 'REVOKE app_rw FROM app'",
    "sudo -u postgres psql -c 'ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO app'",
    "sudo -u postgres psql -c 'ALTER GROUP app_rw ADD USER app'",
    "sudo -u postgres psql -c 'SET SESSION AUTHORIZATION app_owner'",
    "sudo -u postgres psql -c 'GRANT app_rw TO app' -c 'SELECT 1'",
])
def test_other_role_changes_stay_refused(command) -> None:
    assert _classify(command)["verdict"] == "reject"


def _typical(scope_lines: list[str]) -> int:
    case = sample("nginx_port_conflict")
    return estimate_tokens(build_messages(service=case["service"], error=case["error"], evidence=case["evidence"],
                                          max_commands=3, tools_present=case["host_tools"]["present"],
                                          tools_absent=case["host_tools"]["absent"], scope=scope_lines))


def test_the_refused_line_names_the_grant_exception_and_the_prompt_with_a_scope_keeps_its_size():
    nginx = {"name": "nginx", "units": ["nginx.service"], "config_paths": ["/etc/nginx"], "processes": ["nginx"]}
    lines = policy.describe_scope(policy.scope_from_service(nginx, [4242]), policy.load_policy()
                                  .compiled["access_paths"])
    refused = next(line for line in lines if line.startswith("Refused:"))
    for form in ("usermod -aG", "GRANT", "RESET", "VALID UNTIL"):
        assert form in refused, refused
    # The line with three exceptions was 591 characters; the typical prompt with its scope
    # lines was 1,817 tokens then (this sample, no failed commands or passages).
    assert len(refused) <= 591
    assert _typical(lines) <= 1817
