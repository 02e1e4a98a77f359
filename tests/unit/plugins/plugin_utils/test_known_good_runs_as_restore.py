# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a service runs as and runs, put back as it was at the last healthy pass: the plan ahead
of the model (known_good_plan), and the verdicts the real policy and the autonomy table give
each restoring command (a membership lost, a program's mode changed) against one never held."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy, confinement, policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils import known_good_plan, snapshot_paths

POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
            "user": "postgres", "config_paths": ["/etc/postgresql/15/main"]}
NGINX = {"name": "nginx", "units": ["nginx.service"], "processes": ["nginx"], "config_paths": ["/etc/nginx"],
         "config_test": ["nginx", "-t"]}
KEY = "/etc/ssl/private/ssl-cert-snakeoil.key"
HOOK = "/usr/local/sbin/render-upstreams"
PRIVILEGED = policy.load_policy(None)["privileged_groups"]

PG_EVIDENCE = {
    "init": "systemd",
    "journal": f'FATAL:  could not access private key file "{KEY}": Permission denied',
    "named_paths": {KEY: {"type": "file", "owner": "root:ssl-cert", "mode": "0640", "named_in": "journal"}},
    "unit": {"User": "postgres"},
    "known_good": {"recorded": 1, "files": 8, "drift": [], "runs_as": [
        {"account": "postgres", "change": "groups", "lost": ["docker", "ssl-cert"], "added": [],
         "known_good": ["docker", "postgres", "ssl-cert"], "now": ["postgres"]}]}}
NGINX_EVIDENCE = {
    "init": "systemd",
    "status": f"Process: 254 ExecStartPre={HOOK} (code=exited, status=203/EXEC)",
    "unit": {"Programs": f"/usr/sbin/nginx {HOOK}"},
    "known_good": {"recorded": 1, "files": 18, "drift": [], "runs_as": [
        {"path": HOOK, "role": "program", "change": "attributes", "known_good": "mode 0755 owner root:root",
         "now": "mode 0644 owner root:root", "mode": "0755"}]}}


def _verdict(command, definition, evidence, table=None):
    loaded = policy.load_policy(None)
    scope = policy.scope_from_service(definition, [], evidence)
    [verdict] = policy.classify_many([command], loaded, scope=scope)
    [out] = autonomy.apply([verdict], loaded["autonomy"] if table is None else table, evidence=evidence,
                           definition=definition)
    return verdict, out


def test_a_lost_membership_the_failure_explains_is_planned_back_ahead_of_the_model_never_a_privileged_one():
    planned = known_good_plan.plan("postgresql", "port 5432 is not listening", PG_EVIDENCE, POSTGRES, tried=False,
                                   privileged=PRIVILEGED)
    assert [c["command"] for c in planned["commands"]] == [
        "gpasswd -a postgres ssl-cert", "systemctl restart postgresql@15-main.service"]
    assert planned["source"] == "known_good"
    assert "postgres lost its membership of ssl-cert" in planned["diagnosis"]
    assert "not restored, a human decides: postgres in docker (a privileged group)" in planned["diagnosis"]
    assert known_good_plan.plan("postgresql", "down", PG_EVIDENCE, POSTGRES, tried=True, privileged=PRIVILEGED) is None


def test_a_program_that_lost_its_mode_is_planned_back_with_its_recorded_mode():
    planned = known_good_plan.plan("nginx", "nginx.service is failed", NGINX_EVIDENCE, NGINX, tried=False)
    assert [c["command"] for c in planned["commands"]] == [f"chmod 0755 {HOOK}", "systemctl restart nginx.service"]
    assert f"{HOOK} (program) is mode 0644 owner root:root now, mode 0755 owner root:root" in planned["diagnosis"]
    owned = copy.deepcopy(NGINX_EVIDENCE)
    owned["known_good"]["runs_as"][0].update(owner="root:root", now="mode 0644 owner www-data:www-data")
    assert [c["command"] for c in known_good_plan.plan("nginx", "down", owned, NGINX, tried=False)["commands"]][:2] \
        == [f"chown root:root {HOOK}", f"chmod 0755 {HOOK}"]


def test_drift_in_what_it_runs_as_that_the_failure_does_not_explain_plans_nothing():
    quiet = dict(PG_EVIDENCE, journal="FATAL:  could not bind IPv4 address: Address already in use", named_paths={})
    assert known_good_plan.plan("postgresql", "port 5432 is not listening", quiet, POSTGRES, tried=False) is None
    unnamed = dict(NGINX_EVIDENCE, status="Active: failed (Result: exit-code)")
    assert known_good_plan.plan("nginx", "nginx.service is failed", unnamed, NGINX, tried=False) is None


def test_putting_back_a_membership_held_while_healthy_runs_without_a_human_and_can_be_undone():
    before, out = _verdict("gpasswd -a postgres ssl-cert", POSTGRES, PG_EVIDENCE)
    assert before["verdict"] == "approval"
    assert out["verdict"] == "allow" and out["autonomy"] == ["restore_membership"], out
    # The host keeps the account files before it runs, and the kernel holds it to them.
    assert snapshot_paths.keep(out) == [{"path": "/etc/group", "tree": False}, {"path": "/etc/gshadow", "tree": False}]
    confine = confinement.derive(out)
    assert confine["exec"] == ["gpasswd"] and confine["write"] == ["/etc/group", "/etc/gshadow"], confine
    # The same with usermod.
    assert _verdict("usermod -aG ssl-cert postgres", POSTGRES, PG_EVIDENCE)[1]["verdict"] == "allow"


def test_a_membership_never_held_waits_for_a_human_and_a_privileged_one_is_refused_even_if_held():
    # The key's group owns a path of the service, but the account was never in it while healthy.
    never = copy.deepcopy(PG_EVIDENCE)
    never["known_good"]["runs_as"] = []
    _before, out = _verdict("gpasswd -a postgres ssl-cert", POSTGRES, never)
    assert out["verdict"] == "approval" and out["autonomy"] == ["invented_value"], out
    # A group neither owning a path of the service nor held while healthy: refused.
    assert _verdict("gpasswd -a postgres www-data", POSTGRES, PG_EVIDENCE)[1]["verdict"] == "reject"
    # Held at the last healthy pass, but privileged: never given by a command.
    held, out = _verdict("gpasswd -a postgres docker", POSTGRES, PG_EVIDENCE)
    assert held["verdict"] == out["verdict"] == "reject" and any("privileged_groups" in r for r in held["reasons"])
    # Another account than the service's: refused.
    assert _verdict("gpasswd -a www-data ssl-cert", POSTGRES, PG_EVIDENCE)[1]["verdict"] == "reject"


def test_a_membership_held_while_healthy_is_the_policys_ground_even_when_no_path_shows_the_group():
    hidden = dict(PG_EVIDENCE, named_paths={}, journal="FATAL: could not open file: Permission denied")
    verdict, out = _verdict("gpasswd -a postgres ssl-cert", POSTGRES, hidden)
    assert "adds postgres to group ssl-cert (a membership postgres held at the last healthy pass)" in verdict["effects"]
    assert out["verdict"] == "allow"


def test_the_operator_sets_restoring_memberships_to_human():
    table = dict(policy.load_policy(None)["autonomy"], restore_membership="human")
    _before, out = _verdict("gpasswd -a postgres ssl-cert", POSTGRES, PG_EVIDENCE, table=table)
    assert out["verdict"] == "approval" and out["autonomy"] == ["restore_membership"]


@pytest.mark.parametrize("command, verdict, effect_class", [
    (f"chmod 0755 {HOOK}", "allow", "restore_known_good"),
    (f"chmod 755 {HOOK}", "allow", "restore_known_good"),
    (f"chmod 0700 {HOOK}", "approval", "unclassed"),           # a mode never known-good
    (f"chmod u+x {HOOK}", "approval", "unclassed"),            # not the recorded value, said exactly
    (f"chown www-data:www-data {HOOK}", "approval", "unclassed"),
    ("chmod 0755 /usr/sbin/nginx", "approval", "unclassed"),   # a program whose mode did not drift
])
def test_only_the_recorded_mode_of_the_units_program_runs_without_a_human(command, verdict, effect_class):
    before, out = _verdict(command, NGINX, NGINX_EVIDENCE)
    assert before["verdict"] == "approval"
    assert out["verdict"] == verdict and out["autonomy"] == [effect_class], out
    if verdict == "allow":
        assert snapshot_paths.keep(out) == [{"path": HOOK, "tree": False, "meta": True}]  # the old mode is kept (not its bytes), to undo


def test_the_scope_carries_the_memberships_lost_since_the_last_seen_good():
    scope = policy.scope_from_service(POSTGRES, [], PG_EVIDENCE)
    assert scope["known_good_groups"] == {"postgres": ["docker", "ssl-cert"]}
    assert policy.scope_from_service(POSTGRES, [], {})["known_good_groups"] == {}
