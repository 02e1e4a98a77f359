# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Autonomy by effect class: the operator's table decides which gated commands run alone,
judged on the real policy engine's verdicts."""
from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy, policy, snapshot_paths
from ansible_collections.sentinel.remediation.plugins.plugin_utils import known_good_plan

NGINX = {"name": "nginx", "units": ["nginx.service"], "processes": ["nginx"], "config_paths": ["/etc/nginx"],
         "data_paths": ["/var/www"], "config_test": ["nginx", "-t"]}
STAGED = "/var/lib/sentinel-remediation/known-good/restore/" + "ab" * 32
EVIDENCE = {"init": "sysv", "config_test": "$ nginx -t\nrc 1\nnginx: [emerg] unknown directive \"listn\" in "
                                           "/etc/nginx/sites-enabled/default:22",
            "known_good": {"recorded": 1, "files": 9, "drift": [
                {"path": "/etc/nginx/sites-enabled/default", "change": "modified", "known_good": "ab" * 32,
                 "now": "cd" * 32, "restore": STAGED, "aside": "cd" * 32,
                 "diff": "--- known-good\n+++ now\n@@ -22 +22 @@\n-\tlisten 80 default_server;\n+\tlistn 80;"},
                {"path": "/etc/nginx/conf.d/broken.conf", "change": "new", "aside": "ef" * 32,
                 "diff": "--- known-good\n+++ now\n@@ -0,0 +1 @@\n+upstream app { server 127.0.0.1:9; }"},
                {"path": "/etc/nginx/conf.d/tls.conf", "change": "new", "aside": "ef" * 32,
                 "diff": "--- known-good\n+++ now\n@@ -0,0 +1 @@\n+ssl_verify_client on;"},
                {"path": "/etc/nginx/conf.d/site.conf", "change": "modified", "restore": STAGED.replace("ab", "12"),
                 "diff": "--- known-good\n+++ now\n@@ -1 +1 @@\n-listen 80;\n+listen 443 ssl; ssl_verify_client on;"}]}}


def _decide(command, table=None, evidence=None, definition=None):
    evidence = EVIDENCE if evidence is None else evidence
    definition = NGINX if definition is None else definition
    loaded = policy.load_policy(None)
    scope = policy.scope_from_service(definition, [], {})
    [verdict] = policy.classify_many([command], loaded, scope=scope)
    [out] = autonomy.apply([verdict], loaded["autonomy"] if table is None else table, evidence=evidence,
                           definition=definition)
    return verdict["verdict"], out


@pytest.mark.parametrize("command, effect_class", [
    ("mkdir -p /etc/nginx/snippets", "create_directory"),
    ("chmod 0640 /etc/nginx/conf.d/site.conf", "tighten_mode"),
    ("chmod go-w /etc/nginx/conf.d/site.conf", "tighten_mode"),
    (f"cp -p {STAGED} /etc/nginx/sites-enabled/default", "restore_known_good"),
    ("mv /etc/nginx/conf.d/broken.conf /etc/nginx/conf.d/broken.conf.disabled", "move_aside_config"),
    ("sed -i s/listn/listen/ /etc/nginx/sites-enabled/default", "config_edit"),
])
def test_a_gated_effect_the_table_sets_to_auto_runs_without_a_human(command, effect_class):
    before, out = _decide(command)
    assert before == "approval"
    assert out["verdict"] == "allow" and effect_class in out["autonomy"]
    assert "autonomy table" in out["reasons"][0]


@pytest.mark.parametrize("command, effect_class", [
    ("mv /var/www/html/index.html /var/www/html/index.html.bak", "move_data_aside"),
    ("sed -i s/listn/server_name/ /etc/nginx/sites-enabled/default", "invented_value"),
    ("mkdir -p /etc/apache2/conf.d", "out_of_scope"),
    ("rm -f /etc/nginx/conf.d/site.conf", "irreversible"),
    ("cp -p /tmp/mine /etc/nginx/sites-enabled/default", "invented_value"),
    (f"cp -p {STAGED} /etc/nginx/nginx.conf", "invented_value"),   # staged for another file
    # A file the healthy service read is its configuration: moving it aside invents a change.
    ("mv /etc/nginx/conf.d/site.conf /etc/nginx/conf.d/site.conf.disabled", "invented_value"),
    # Taking out a security setting the file now has: a deliberate tightening, a human's call.
    ("mv /etc/nginx/conf.d/tls.conf /etc/nginx/conf.d/tls.conf.disabled", "weakens_security"),
    (f"cp -p {STAGED.replace('ab', '12')} /etc/nginx/conf.d/site.conf", "weakens_security"),
    ("sed -i s/443/80/ /etc/nginx/conf.d/site.conf", "weakens_security"),
])
def test_a_human_only_effect_keeps_its_approval(command, effect_class):
    before, out = _decide(command)
    assert before == "approval"
    assert out["verdict"] == "approval" and effect_class in out["autonomy"]


def test_a_config_edit_without_a_config_test_keeps_its_approval():
    definition = dict(NGINX, config_test=[])
    _before, out = _decide("sed -i s/listn/listen/ /etc/nginx/sites-enabled/default", definition=definition)
    assert out["verdict"] == "approval" and out["autonomy"] == ["invented_value"]


def test_a_class_the_operator_sets_to_human_needs_one_again():
    table = dict(policy.load_policy(None)["autonomy"], create_directory="human")
    _before, out = _decide("mkdir -p /etc/nginx/snippets", table=table)
    assert out["verdict"] == "approval"


def test_an_allowed_or_refused_command_is_left_as_the_policy_judged_it():
    assert _decide("service nginx restart")[1]["verdict"] == "allow"
    before, out = _decide("chmod 777 /etc/nginx/conf.d/site.conf")
    assert before == out["verdict"] == "reject" and "autonomy" not in out


def test_a_gate_reason_outside_every_class_keeps_the_approval():
    before, out = _decide("systemctl disable nginx")
    assert before == "approval" and out["verdict"] == "approval" and out["autonomy"] == ["unclassed"]


def test_the_table_rejects_auto_for_a_human_only_class_and_unknown_classes():
    with pytest.raises(policy.PolicyError, match="autonomy.irreversible"):
        policy.load_policy({"autonomy": {"irreversible": "auto"}})
    with pytest.raises(policy.PolicyError, match="autonomy.anything"):
        policy.load_policy({"autonomy": {"anything": "auto"}})


def test_drift_the_config_test_names_plans_a_restore_and_a_restart_once():
    planned = known_good_plan.plan("nginx", "nginx is not running", EVIDENCE, NGINX, tried=False)
    assert [c["command"] for c in planned["commands"]] == [
        f"cp -p {STAGED} /etc/nginx/sites-enabled/default", "service nginx restart"]
    assert "+\tlistn 80;" in planned["diagnosis"] and "kept aside" in planned["diagnosis"]
    assert known_good_plan.plan("nginx", "down", EVIDENCE, NGINX, tried=True) is None


def test_drift_the_failure_does_not_name_is_restored_too_unless_it_weakens_security():
    evidence = dict(EVIDENCE, config_test="$ nginx -t\nrc 0\nsyntax is ok")
    unnamed = known_good_plan.plan("nginx", "port 80 is held by python3", evidence, NGINX, tried=False)
    # The last healthy state is the first fix; the TLS drifts (a new file, a modified one) stay a human's.
    assert [c["command"] for c in unnamed["commands"]] == [
        f"cp -p {STAGED} /etc/nginx/sites-enabled/default", "rm -f /etc/nginx/conf.d/broken.conf", "service nginx restart"]
    named = known_good_plan.plan("nginx", "cannot load /etc/nginx/sites-enabled/default", evidence, NGINX,
                                 tried=False)
    assert [c["command"] for c in named["commands"]] == [
        f"cp -p {STAGED} /etc/nginx/sites-enabled/default", "service nginx restart"]
    assert known_good_plan.plan("nginx", "down", {"init": "sysv"}, NGINX, tried=False) is None


def test_without_snapshots_nothing_runs_alone_whatever_the_table_says():
    loaded = policy.load_policy(None)
    scope = policy.scope_from_service(NGINX, [], {})
    [verdict] = policy.classify_many(["mkdir -p /etc/nginx/snippets"], loaded, scope=scope)
    [out] = autonomy.apply([verdict], loaded["autonomy"], evidence=EVIDENCE, definition=NGINX, undoable=False)
    assert out["verdict"] == "approval" and out["autonomy"] == ["create_directory"]


DROP_IN = "/etc/systemd/system/nginx.service.d/20-hook.conf"
FREEZE = "/etc/systemd/system/nginx.service.d/50-freeze.conf"
NEW_FILES = dict(EVIDENCE, init="systemd", known_good={"recorded": 1, "files": 9, "drift": EVIDENCE["known_good"]["drift"] + [
    {"path": DROP_IN, "change": "new", "aside": "ef" * 32,
     "diff": "--- known-good\n+++ now\n@@ -0,0 +1,2 @@\n+[Service]\n+ExecStartPre=/usr/local/sbin/render-upstreams"},
    {"path": FREEZE, "change": "new", "aside": "ef" * 32,
     "diff": "--- known-good\n+++ now\n@@ -0,0 +1,2 @@\n+[Unit]\n+ConditionPathExists=!/etc/nginx/FROZEN"},
    {"path": "/etc/nginx/conf.d/unkept.conf", "change": "new", "diff": "--- known-good\n+++ now\n+x"}]})


@pytest.mark.parametrize("command", [f"rm -f {DROP_IN}", "rm -f /etc/nginx/conf.d/broken.conf",
                                     "rm /etc/nginx/conf.d/broken.conf"])
def test_taking_out_a_file_new_since_the_healthy_pass_whose_bytes_are_kept_runs_alone(command):
    before, out = _decide(command, evidence=NEW_FILES)
    assert before == "approval"
    assert out["verdict"] == "allow" and out["autonomy"] == ["restore_known_good"]


@pytest.mark.parametrize("command, effect_class", [
    (f"rm -f {FREEZE}", "owner_hold"),                              # a hold is its owner's
    ("rm -f /etc/nginx/conf.d/tls.conf", "weakens_security"),       # a new TLS setting
    ("rm -f /etc/nginx/conf.d/unkept.conf", "irreversible"),        # its bytes were not kept
    ("rm -f /etc/nginx/sites-enabled/default", "irreversible"),     # known-good had it: not new
])
def test_taking_out_a_hold_a_security_file_or_an_old_one_keeps_its_approval(command, effect_class):
    before, out = _decide(command, evidence=NEW_FILES)
    assert before == "approval"
    assert out["verdict"] == "approval" and effect_class in out["autonomy"]


def test_an_operator_may_not_let_a_hold_be_undone_alone():
    with pytest.raises(policy.PolicyError, match="owner_hold"):
        policy.load_policy({"autonomy": {"owner_hold": "auto"}})


def test_taking_out_a_new_file_is_undone_byte_identically_when_the_attempt_does_not_heal(tmp_path):
    _before, out = _decide(f"rm -f {DROP_IN}", evidence=NEW_FILES)
    assert snapshot_paths.keep(out) == [{"path": DROP_IN, "tree": True}]  # the runner keeps it before the rm
    # The same kept path, on a file of our own: removed, then the attempt's rollback.
    drop_in = tmp_path / "20-hook.conf"
    drop_in.write_bytes(b"[Service]\nExecStartPre=/usr/local/sbin/render-upstreams\n")
    os.chmod(drop_in, 0o640)
    session = snapshot.Session(str(tmp_path / "state"), "nginx-20261128T060000Z", 1, 10 ** 7, 3600)
    assert session.keep([{"path": str(drop_in), "tree": True}]) == []
    os.unlink(drop_in)
    assert session.rollback()["restored"] == [str(drop_in)]
    assert drop_in.read_bytes() == b"[Service]\nExecStartPre=/usr/local/sbin/render-upstreams\n"
    assert os.stat(drop_in).st_mode & 0o777 == 0o640


SSH = {"name": "ssh", "units": ["ssh.service"], "processes": ["sshd"], "config_paths": ["/etc/ssh"],
       "config_test": ["sshd", "-t"]}


@pytest.mark.parametrize("command, verdict, effect_class", [
    # sshd refuses a host key others may read: taking their access away runs alone, kept by its mode
    ("chmod 600 /etc/ssh/ssh_host_rsa_key /etc/ssh/ssh_host_ed25519_key", "allow", "tighten_mode"),
    ("chmod go-rwx /etc/ssh/ssh_host_rsa_key", "allow", "tighten_mode"),
    # a key that is not among the service's own paths is not this incident's to change
    ("chmod 600 /etc/ssl/private/other.key", "approval", "out_of_scope"),
])
def test_a_private_keys_mode_that_only_takes_access_away_runs_alone_in_the_services_own_paths(
        command, verdict, effect_class):
    _before, out = _decide(command, evidence={}, definition=SSH)
    assert out["verdict"] == verdict and effect_class in out["autonomy"], out
    if verdict == "allow":
        # what the host keeps: each key's mode and owner, never its bytes
        assert all(k.get("meta") for k in snapshot_paths.keep(out)), snapshot_paths.keep(out)


def test_a_tightened_keys_snapshot_keeps_no_copy_of_it_and_puts_its_mode_back(tmp_path):
    key = tmp_path / "ssh" / "ssh_host_rsa_key"
    key.parent.mkdir()
    secret = b"-----BEGIN OPENSSH PRIVATE KEY-----\nKEY-MARKER\n-----END OPENSSH PRIVATE KEY-----\n"
    key.write_bytes(secret)
    os.chmod(key, 0o644)
    session = snapshot.Session(str(tmp_path / "state"), "inc-key", 1, 1 << 20, 3600)
    [change] = snapshot_paths.declared_changes([f"sets the mode of {key}"])
    assert change == {"path": str(key), "tree": False, "meta": True}
    assert session.keep([change]) == []
    os.chmod(key, 0o600)
    [changed] = session.changed()
    assert changed["before"]["mode"] == 0o644 and changed["after"]["mode"] == 0o600
    assert session.rollback()["restored"] == [str(key)]
    session.save([changed], True)  # the incident's manifest, for a later undo
    assert os.stat(key).st_mode & 0o777 == 0o644 and key.read_bytes() == secret
    # no copy of the key anywhere in the host's state directory
    for path in (tmp_path / "state").rglob("*"):
        assert not path.is_file() or b"KEY-MARKER" not in path.read_bytes(), path


REDIS = {"name": "redis-server", "units": ["redis-server.service"], "processes": ["redis-server"],
         "config_paths": ["/etc/redis"], "data_paths": ["/var/lib/redis"]}
ENV_FILE = "/etc/default/redis-server"


def _env_drift():
    item = {"path": ENV_FILE, "change": "modified", "restore": STAGED, "aside": "cd" * 32,
            "diff": "--- known-good\n+++ now\n@@ -6 +6 @@\n-ULIMIT=65536\n+ULIMIT=16"}
    return {"init": "sysv", "known_good": {"recorded": 1, "files": 3, "drift": [item]}}


def test_the_environment_a_services_own_start_reads_is_its_configuration():
    """Debian's /etc/default/UNIT is sourced by the unit's init script (and named by its systemd
    unit): putting its known-good version back runs alone; another service's stays out of scope."""
    before, out = _decide(f"cp -p {STAGED} {ENV_FILE}", evidence=_env_drift(), definition=REDIS)
    assert before == "approval" and out["verdict"] == "allow" and "restore_known_good" in out["autonomy"], out
    assert "an edit of the service's configuration" in policy.classify(
        "sed -i s/16/65536/ /etc/default/redis-server", policy.load_policy(None),
        scope=policy.scope_from_service(REDIS, [], {}))["reasons"][0]
    # another service's environment, and the operating system's, are not this service's
    before, out = _decide(f"cp -p {STAGED} {ENV_FILE}", evidence=_env_drift(), definition=NGINX)
    assert out["verdict"] == "approval" and "out_of_scope" in out["autonomy"], out
    assert policy.classify("sed -i s/x/y/ /etc/default/grub", policy.load_policy(None),
                           scope=policy.scope_from_service(REDIS, [], {}))["verdict"] == "reject"


# ---------------------------------------------------------------- going back where the system's paths are the service's
JOURNALD = {"name": "systemd-journald", "units": ["systemd-journald.service"], "processes": ["systemd-journal"],
            "user": "root", "config_paths": ["/etc/systemd/journald.conf", "/etc/systemd/journald.conf.d"],
            "data_paths": ["/var/log/journal"], "runtime_paths": ["/run/systemd/journal"]}
JOURNALD_DROP_IN = "/etc/systemd/journald.conf.d/60-wear.conf"
JOURNALD_DRIFT = {"init": "systemd", "known_good": {"recorded": 1, "files": 2, "drift": [
    {"path": JOURNALD_DROP_IN, "change": "new", "aside": "ef" * 32,
     "diff": "--- known-good\n+++ now\n@@ -0,0 +1,2 @@\n+[Journal]\n+Storage=volatile"},
    {"path": "/etc/systemd/journald.conf", "change": "modified", "known_good": "ab" * 32, "now": "cd" * 32,
     "restore": STAGED, "aside": "cd" * 32,
     "diff": "--- known-good\n+++ now\n@@ -1 +1 @@\n-#Storage=auto\n+Storage=none"}]}}


@pytest.mark.parametrize("command", [f"rm -f {JOURNALD_DROP_IN}", f"cp -p {STAGED} /etc/systemd/journald.conf"])
def test_going_back_to_known_good_in_system_paths_the_definition_names_as_the_services_runs_alone(command):
    before, out = _decide(command, evidence=JOURNALD_DRIFT, definition=JOURNALD)
    assert before == "approval"
    assert out["verdict"] == "allow" and out["autonomy"] == ["restore_known_good"], out


@pytest.mark.parametrize("command", [
    "rm -f /etc/systemd/journald.conf",                                 # known-good had it: not new
    "cp -p /tmp/journald.conf /etc/systemd/journald.conf",              # not the staged known-good copy
    f"mv {JOURNALD_DROP_IN} {JOURNALD_DROP_IN}.off",                    # any other change there: a human's
    "sed -i s/volatile/persistent/ " + JOURNALD_DROP_IN,
])
def test_other_changes_in_system_paths_the_definition_names_keep_their_approval(command):
    before, out = _decide(command, evidence=JOURNALD_DRIFT, definition=JOURNALD)
    assert before == "approval" and out["verdict"] == "approval", out


def test_known_goods_plan_for_a_new_journald_drop_in_runs_alone_end_to_end():
    planned = known_good_plan.plan("systemd-journald", "a new message did not reach /var/log/journal",
                                   JOURNALD_DRIFT, JOURNALD, tried=False)
    commands = [c["command"] for c in planned["commands"]]
    assert f"rm -f {JOURNALD_DROP_IN}" in commands and commands[-1] == "systemctl restart systemd-journald.service"
    loaded = policy.load_policy(None)
    verdicts = policy.classify_many(commands, loaded, scope=policy.scope_from_service(JOURNALD, [], {}))
    out = autonomy.apply(verdicts, loaded["autonomy"], evidence=JOURNALD_DRIFT, definition=JOURNALD)
    assert [v["verdict"] for v in out] == ["allow"] * len(commands), out


# ---------------------------------------------------------------- a configuration its package replaced
APP = {"name": "sentinel-app", "units": ["sentinel-app.service"], "processes": ["sentinel-app"], "user": "sentinel-app",
       "config_paths": ["/etc/sentinel-app"], "data_paths": ["/var/lib/sentinel-app"],
       "config_test": ["/usr/local/bin/sentinel-app", "--config", "/etc/sentinel-app/app.conf", "--check"]}
APP_CONF = "/etc/sentinel-app/app.conf"
GOOD, SHIPPED = "ab" * 32, "cd" * 32
PASSWORD_DIFF = ("--- known-good\n+++ now\n@@ -1,2 +1,2 @@\n-# the host's own\n+# shipped: set the database password\n"
                 "-dsn = user=app password=[REDACTED:password]\n+dsn = user=app password=[REDACTED:password]")


def _replaced(sibling: str | None = APP_CONF + ".dpkg-old", sibling_hash: str = GOOD, package: str = "",
              path: str = APP_CONF) -> dict:
    drift = [{"path": path, "change": "modified", "known_good": GOOD, "now": SHIPPED, "restore": STAGED,
              "aside": SHIPPED, "diff": PASSWORD_DIFF.replace(APP_CONF, path)}]
    if package:
        drift[0]["package"] = f"{path}: {package}"
    if sibling:
        drift.append({"path": sibling, "change": "new", "aside": sibling_hash, "now": sibling_hash,
                      "diff": "--- known-good\n+++ now\n@@ -0,0 +1 @@\n+dsn = password=[REDACTED:password]"})
    return {"init": "sysv", "known_good": {"recorded": 1, "files": 2, "drift": drift}}


@pytest.mark.parametrize("evidence", [
    _replaced(),                                                         # dpkg kept the host's version beside it
    _replaced(sibling=APP_CONF + ".ucf-old"),
    _replaced(sibling=None, package="the package's default (sentinel-app, as installed)"),
], ids=["dpkg-old", "ucf-old", "dpkg-default"])
def test_a_configuration_its_package_replaced_goes_back_to_known_good_alone(evidence):
    planned = known_good_plan.plan("sentinel-app", "password authentication failed", evidence, APP, tried=False)
    assert planned and planned["commands"][0]["command"] == f"cp -p {STAGED} {APP_CONF}", planned
    before, out = _decide(f"cp -p {STAGED} {APP_CONF}", evidence=evidence, definition=APP)
    assert before == "approval" and out["verdict"] == "allow" and out["autonomy"] == ["restore_known_good"], out


@pytest.mark.parametrize("evidence", [
    _replaced(sibling=None),                                             # a person's change of the password
    _replaced(sibling_hash="ef" * 32),                                   # the kept file is not the known-good one
    _replaced(sibling=APP_CONF + ".bak"),                                # not where a package manager keeps it
    _replaced(sibling=None, package="differs from the package's default (sentinel-app)"),
], ids=["no-sign", "other-bytes", "not-a-packager-name", "not-the-default"])
def test_a_password_change_without_a_package_behind_it_stays_a_humans(evidence):
    planned = known_good_plan.plan("sentinel-app", "password authentication failed", evidence, APP, tried=False)
    assert planned is None or all(APP_CONF + " " not in c["command"] + " " for c in planned["commands"]), planned
    _before, out = _decide(f"cp -p {STAGED} {APP_CONF}", evidence=evidence, definition=APP)
    assert out["verdict"] == "approval" and out["autonomy"] == ["weakens_security"], out


def test_keys_and_access_rules_put_back_to_a_default_stay_a_humans_even_from_a_package():
    rules = "/etc/sentinel-app/pg_hba.conf"
    evidence = _replaced(path=rules, sibling=rules + ".dpkg-old")
    assert known_good_plan.replaced_by_package(evidence["known_good"]["drift"][0],
                                               evidence["known_good"]["drift"]) is False
    _before, out = _decide(f"cp -p {STAGED} {rules}", evidence=evidence, definition=APP)
    assert out["verdict"] == "approval" and out["autonomy"] == ["weakens_security"], out


def test_a_drift_going_back_would_weaken_is_marked_a_humans_call_in_the_evidence():
    evidence = copy.deepcopy(NEW_FILES)
    marked = known_good_plan.mark_security(evidence)
    # the new TLS file and the modified TLS site are marked; plain drift and an unkept file are not
    assert sorted(marked) == ["/etc/nginx/conf.d/site.conf", "/etc/nginx/conf.d/tls.conf"]
    by_path = {d["path"]: d for d in evidence["known_good"]["drift"]}
    assert by_path["/etc/nginx/conf.d/tls.conf"]["security"] == known_good_plan.SECURITY_NOTE
    assert "security" not in by_path["/etc/nginx/conf.d/broken.conf"]
    # a configuration its package replaced is a plain restore, not a human's call
    replaced = _replaced()
    assert known_good_plan.mark_security(replaced) == []
