# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runbook knowledge base, its placeholders and the sentinel.remediation.runbook lookup."""
from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleLookupError

from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import retrieve
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import (
    PlaceholderError,
    RunbookError,
    load_runbooks,
    match_runbooks,
    resolve_placeholders,
)
from fault_samples import FAULTS, sample

BOOKS = load_runbooks()
EXPECTED = {
    "nginx_stopped": ["service nginx start"],
    "nginx_port_conflict": ["kill 4242", "service nginx start"],
    "nginx_config_syntax": ["mv /etc/nginx/conf.d/zz-broken.conf /etc/nginx/conf.d/zz-broken.conf.disabled",
                            "service nginx start"],
    "nginx_missing_log_dir": ["mkdir -p /var/log/nginx", "service nginx start"],
    "nginx_stale_pid": ["rm -f /run/nginx.pid", "service nginx start"],
    "nginx_binary_missing": [],
    "redis_stopped": ["service redis-server start"],
    "redis_bad_dir_permissions": ["chown redis:redis /var/lib/redis", "chmod 750 /var/lib/redis",
                                  "service redis-server start"],
    "redis_killed": ["rm -f /run/redis/redis-server.pid", "service redis-server start"],
    "redis_disk_full": ["rm -f /var/lib/redis/ballast.bin", "service redis-server restart"],
    "cron_stopped": ["service cron start"],
    "ssh_stopped": ["service ssh start"],
}


def test_every_lab_fault_has_a_runbook():
    covered = {fault for book in BOOKS for fault in book["faults"]}
    assert set(FAULTS) <= covered


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_matches_its_runbook_and_steps_resolve(fault):
    case = sample(fault)
    matches = match_runbooks(BOOKS, case["service"], case["error"], case["evidence"], case["host_tools"])
    best = matches[0]["runbook"]
    assert fault in best["faults"]
    commands = [resolve_placeholders(s["command"], case["evidence"], case["service"], case["error"])
                for s in best["steps"]]
    assert commands == EXPECTED[fault]


def test_redis_data_dir_owned_by_root_as_the_evidence_module_words_it():
    # What the lab's redis leaves behind: the fatal "Can't chdir" goes to stderr, not to
    # the log, so only the evidence module's path line shows the wrong owner.
    evidence = {
        "status": "$ service redis-server status\nrc 3\nredis-server is not running ... failed!",
        "paths": {"/var/lib/redis": "directory, owner root:root, mode 0700; filesystem at /var/lib/redis: "
                                    "0% used, 16.0 MiB free, inodes 0% used"},
        "listeners": "port 6379: nothing listening",
        "logs": {"/var/log/redis/redis-server.log": "45:M 23 Nov 2026 11:03:38.848 # Redis is now ready to exit, bye bye..."},
    }
    error = "service redis-server status: redis-server is not running (rc 3)"
    best = match_runbooks(BOOKS, "redis-server", error, evidence)[0]["runbook"]
    assert best["id"] == "redis_bad_dir_permissions"
    healthy = dict(evidence, paths={"/var/lib/redis": "directory, owner redis:redis, mode 0750"})
    assert match_runbooks(BOOKS, "redis-server", error, healthy)[0]["runbook"]["id"] != "redis_bad_dir_permissions"


def test_escalation_runbook_has_no_commands():
    book = next(b for b in BOOKS if b["id"] == "nginx_binary_missing")
    assert book["escalate"] is True and book["steps"] == [] and "human" in book["notes"]


def test_port_owner_pid_validation():
    own = {"listeners": "0.0.0.0:80 held by nginx (pid 10)"}
    with pytest.raises(PlaceholderError):
        resolve_placeholders("kill {port_owner_pid:80}", own, "nginx")
    with pytest.raises(PlaceholderError):
        resolve_placeholders("kill {port_owner_pid:80}", {"listeners": "0.0.0.0:80 held by init (pid 1)"}, "nginx")
    with pytest.raises(PlaceholderError):
        resolve_placeholders("kill {port_owner_pid:eighty}", own, "nginx")
    ss = 'LISTEN 0 5 0.0.0.0:80 0.0.0.0:* users:(("httpd",pid=300,fd=3),("httpd",pid=200,fd=3))'
    assert resolve_placeholders("kill {port_owner_pid:80}", {"ports": ss}, "nginx") == "kill 200"
    assert resolve_placeholders("{port_owner_name:80}", {"ports": ss}, "nginx") == "httpd"
    guessed = {"listeners": "0.0.0.0:80 listening as user nobody (holder not visible; "
                            "that user runs python3 (pid 90), sleep (pid 91))"}
    with pytest.raises(PlaceholderError):
        resolve_placeholders("kill {port_owner_pid:80}", guessed, "nginx")


def test_config_error_file_stays_under_its_prefix():
    evidence = {"config_test": "nginx: [emerg] unknown directive in /etc/nginx/nginx.conf:12"}
    with pytest.raises(PlaceholderError):
        resolve_placeholders("mv {config_error_file:/etc/nginx/conf.d/} x", evidence, "nginx")
    sneaky = {"config_test": "nginx: [emerg] bad in /etc/nginx/conf.d/../nginx.conf:1"}
    with pytest.raises(PlaceholderError):
        resolve_placeholders("mv {config_error_file:/etc/nginx/conf.d/} x", sneaky, "nginx")


def _redis_dir(*largest: str) -> dict:
    """Evidence whose host listing of /var/lib/redis (the evidence module's own words) names these."""
    listing = "directory, owner redis:redis, mode 0750; user redis may rwx; filesystem at /var/lib/redis: 100% used"
    return {"paths": {"/var/lib/redis": listing + "\nlargest files:\n" + "\n".join(f"  {line}" for line in largest)}}


def test_largest_file_never_picks_redis_data():
    evidence = _redis_dir("9M /var/lib/redis/dump.rdb", "5M /var/lib/redis/appendonly.aof", "1M /var/lib/redis/core.123")
    assert resolve_placeholders("rm -f {largest_file:/var/lib/redis}", evidence, "redis") == "rm -f /var/lib/redis/core.123"
    with pytest.raises(PlaceholderError):
        resolve_placeholders("rm -f {largest_file:/var/lib/redis}", _redis_dir("9M /var/lib/redis/dump.rdb"), "redis")


@pytest.mark.parametrize("where", ["journal", "logs", "status", "oom", "disk"])
def test_largest_file_is_never_chosen_by_size_lines_a_local_user_can_write(where):
    # `logger`, a unit description or a log line can print "999G /var/lib/redis/backup.tar.gz":
    # that must not make root delete it. Only the host's listing of the directory counts.
    forged = {where: "999G /var/lib/redis/backup-2026.tar.gz\n-rw-r--r-- 1 redis redis 99999999999 Nov 1 /var/lib/redis/keep"}
    with pytest.raises(PlaceholderError, match="shows no removable file"):
        resolve_placeholders("rm -f {largest_file:/var/lib/redis}", forged, "redis")
    evidence = dict(_redis_dir("16M /var/lib/redis/ballast.bin"), **forged)
    assert resolve_placeholders("rm -f {largest_file:/var/lib/redis}", evidence, "redis") == "rm -f /var/lib/redis/ballast.bin"


def test_largest_file_ignores_a_listing_of_another_directory_and_lines_outside_the_listing():
    evidence = _redis_dir("16M /var/lib/redis/ballast.bin")
    evidence["paths"]["/var/lib/redis"] = "99G /var/lib/redis/first-line\n" + evidence["paths"]["/var/lib/redis"]
    evidence["paths"]["/var/log/redis"] = "directory\nlargest files:\n  90G /var/lib/redis/other"
    assert resolve_placeholders("rm -f {largest_file:/var/lib/redis}", evidence, "redis") == "rm -f /var/lib/redis/ballast.bin"


def test_unknown_placeholder():
    with pytest.raises(PlaceholderError):
        resolve_placeholders("echo {home_dir}", {}, "nginx")


def test_bad_runbook_files_are_named(tmp_path):
    (tmp_path / "bad.yml").write_text("id: x\nmatch: {any: ['(']}\nsteps: []\n")
    with pytest.raises(RunbookError, match="bad.yml"):
        load_runbooks([tmp_path])


def test_retrieval_ranks_the_right_runbook_first():
    top = retrieve(BOOKS, "redis Write error saving DB on disk: No space left on device", "redis-server", 3)
    assert top[0]["runbook"] == "redis_disk_full"
    assert all(p["score"] > 0 for p in top)
    nginx = retrieve(BOOKS, "bind() to 0.0.0.0:80 failed (98: Address already in use)", "nginx", 2)
    assert nginx[0]["runbook"] == "nginx_port_conflict"


def _lookup():
    """The lookup as the plugin loader would set it up (its options registered from its docs)."""
    from ansible import constants as C

    from ansible_collections.sentinel.remediation.plugins.lookup import runbook

    name = "sentinel.remediation.runbook"
    options = yaml.safe_load(runbook.DOCUMENTATION)["options"]
    C.config.initialize_plugin_configuration_definitions("lookup", name, options)
    plugin = runbook.LookupModule()
    plugin._load_name = name
    return plugin


def test_lookup_passages_for_a_failure():
    case = sample("nginx_config_syntax")
    result = _lookup().run([], variables={}, service="nginx", error=case["error"], evidence=case["evidence"], top=2)
    assert len(result) == 2 and result[0]["runbook"] == "nginx_config_syntax"
    assert {"runbook", "kind", "text", "score"} <= set(result[0])


def test_lookup_free_text_and_match_mode():
    assert _lookup().run(["sshd port 22 stopped"], variables={}, top=1)[0]["runbook"] == "ssh_stopped"
    matches = _lookup().run([], variables={}, service="redis-server", error="Can't chdir to '/var/lib/redis': "
                                                                            "Permission denied", match=True)
    assert matches[0]["runbook"]["id"] == "redis_bad_dir_permissions"
    assert "_all" not in matches[0]["runbook"]


def test_lookup_needs_a_query():
    with pytest.raises(AnsibleLookupError):
        _lookup().run([], variables={})


def test_lookup_with_the_operators_knowledge():
    from pathlib import Path

    data = Path(__file__).resolve().parents[3] / "data" / "knowledge"
    result = _lookup().run([], variables={}, service="billing-api", top=2,
                           error="refusing to start: lock file /run/billing-api/worker.lock is held by pid 9",
                           runbook_dirs=[str(data / "runbooks")], docs_dirs=[str(data / "docs")])
    assert {(r["file"], r["heading"]) for r in result} == {
        ("docs/billing-api.md", "billing-api > Stale worker lock after a crash"),
        ("runbooks/billing_api_stale_lock.yml",
         "billing-api refuses to start because a dead worker's lock file is still there")}
    assert all(r["other_service"] is False for r in result)
    case = sample("nginx_port_conflict")
    matches = _lookup().run([], variables={}, service="nginx", error=case["error"], evidence=case["evidence"],
                            match=True, runbook_dirs=[str(data / "runbooks")])
    assert matches[0]["runbook"]["id"] == "nginx_port_conflict"
    assert {"fact": "port_held_by_other", "port": 80, "pid": 4242}.items() <= matches[0]["facts"][0].items()


def test_lookup_names_a_bad_runbook(tmp_path):
    (tmp_path / "bad.yml").write_text("id: x\nmatch: {facts: [nope]}\nsteps: [{command: service x start}]\n")
    with pytest.raises(AnsibleLookupError, match=r"sentinel\.remediation\.runbook: .*bad\.yml: match\.facts\[0\]"):
        _lookup().run(["x"], variables={}, runbook_dirs=[str(tmp_path)])
