# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runbook matching on the specific evidence of a fault, the runbook schema, operator runbooks.

The matrix tests match every bundled runbook against every fault sample: each runbook
must fit its own fault and no other (tests/fault_samples.py: the evidence as the modules
report it, on two different hosts; tests/data/knowledge/lab_evidence.json: recorded on
a real lab container by capture_lab_evidence.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils.failure_facts import (
    FACTS,
    extract_facts,
    parse_path_state,
    writable_by,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.fact_requirements import instances, parse_requirement
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import (
    DEFAULT_DIR,
    PLACEHOLDERS,
    PlaceholderError,
    RunbookError,
    collect_runbooks,
    example_command,
    gate_steps,
    load_runbooks,
    match_runbooks,
    resolve_placeholders,
    why_not,
)
from fault_samples import FAULTS, sample

DATA = Path(__file__).resolve().parents[3] / "data" / "knowledge"
BOOKS = load_runbooks()
LAB_EVIDENCE = DATA / "lab_evidence.json"
# What C1 service definitions say about the lab's services (the role's defaults plus the
# new keys), for the tests that pass a service definition.
SERVICE_DEFS = {
    "nginx": {"name": "nginx", "ports": [80], "processes": ["nginx"], "user": "www-data",
              "runtime_paths": ["/run/nginx.pid"], "log_paths": ["/var/log/nginx"]},
    "redis-server": {"name": "redis-server", "ports": [6379], "processes": ["redis-server"], "user": "redis",
                     "data_paths": ["/var/lib/redis"], "runtime_paths": ["/run/redis"]},
    "cron": {"name": "cron", "processes": ["cron"]},
    "ssh": {"name": "ssh", "ports": [22], "processes": ["sshd"], "runtime_paths": ["/run/sshd"]},
}


def matched_ids(case: dict, books=BOOKS, service_def=None) -> list[str]:
    found = match_runbooks(books, case["service"], case["error"], case["evidence"], case.get("host_tools"), service_def)
    return [m["runbook"]["id"] for m in found]


# ---------------------------------------------------------------------- the cross-matching matrix

@pytest.mark.parametrize("host", [1, 2])
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("with_definition", [False, True])
def test_each_runbook_fits_its_own_fault_and_no_other(fault: str, host: int, with_definition: bool) -> None:
    case = sample(fault, host)
    definition = SERVICE_DEFS[case["service"]] if with_definition else None
    found = matched_ids(case, service_def=definition)
    owners = [b["id"] for b in BOOKS if fault in b["faults"]]
    assert found == owners, (fault, found, why_not(BOOKS, case["service"], case["error"], case["evidence"],
                                                   case["host_tools"], definition))


def test_matrix_covers_every_bundled_runbook_of_a_lab_fault() -> None:
    """Every runbook that names a lab fault is exercised by the matrix above."""
    for book in BOOKS:
        assert set(book["faults"]) <= set(FAULTS), book["id"]
    assert {f for b in BOOKS for f in b["faults"]} >= set(FAULTS)


def _lab_samples() -> dict:
    if not LAB_EVIDENCE.exists():
        pytest.skip("no recorded lab evidence (tests/data/knowledge/capture_lab_evidence.py)")
    return json.loads(LAB_EVIDENCE.read_text())["faults"]


def test_recorded_lab_evidence_matrix() -> None:
    """Real evidence of each catalogue fault: its runbook fits; no other runbook does.

    A fault with no runbook in the catalogue (its fix is not a bundled runbook) must be
    matched by none: a plain start must not fire on a fault starting cannot fix.
    """
    samples = _lab_samples()
    problems = []
    for fault, case in sorted(samples.items()):
        owners = [b["id"] for b in BOOKS if fault in b["faults"]]
        for definition in (None, case.get("definition")):   # with and without the C1 definition
            found = matched_ids(case, service_def=definition)
            if found != owners:
                problems.append((fault, found, owners, why_not(BOOKS, case["service"], case["error"],
                                                               case["evidence"], case["host_tools"], definition)))
    assert not problems, problems


# ---------------------------------------------------------------------- faults nobody wrote a runbook for

NGINX_OK_CONFIG = ("$ nginx -t\nrc 0\nnginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
                   "nginx: configuration file /etc/nginx/nginx.conf test is successful")
REDIS_DOWN = "redis-cli ping: Could not connect to Redis at 127.0.0.1:6379: Connection refused"
REDIS_LOG = "/var/log/redis/redis-server.log"


def unseen(fault: str) -> dict:
    """Faults outside the catalogue, worded the way the evidence module reports them."""
    if fault == "redis_port_conflict":
        return {"service": "redis-server", "error": REDIS_DOWN, "evidence": {
            "status": "$ service redis-server status\nrc 3\nredis-server is not running ... failed! (dead, pid file exists)",
            "listeners": "127.0.0.1:6379 held by python3 (pid 3131)",
            "pid_files": {"/run/redis/redis-server.pid": "pid 77 is not running (stale PID file)"},
            "logs": {REDIS_LOG: "77:M 01 Jan 2026 10:00:00.000 # Warning: Could not create server TCP listening socket "
                                "127.0.0.1:6379: bind: Address already in use\n"
                                "77:M 01 Jan 2026 10:00:00.000 # Failed listening on port 6379 (tcp), aborting."}}}
    if fault == "redis_missing_log_dir":
        return {"service": "redis-server", "error": REDIS_DOWN, "evidence": {
            "status": "redis-server is not running ... failed! (dead, pid file exists)",
            "paths": {"/var/log/redis": "missing (nearest existing parent /var/log: directory, owner root:root, "
                                        "mode 0755)"},
            "logs": {REDIS_LOG: "missing"}}}
    if fault == "redis_corrupt_rdb":
        return {"service": "redis-server", "error": REDIS_DOWN, "evidence": {
            "status": "redis-server is not running ... failed! (dead, pid file exists)",
            "pid_files": {"/run/redis/redis-server.pid": "pid 88 is not running (stale PID file)"},
            "logs": {REDIS_LOG: "88:M 01 Jan 2026 10:00:00.000 * DB loaded from disk? Loading RDB produced by version 7.0\n"
                                "88:M 01 Jan 2026 10:00:00.000 # Internal error in RDB reading offset 0, function at "
                                "rdb.c:3079 -> Unexpected EOF reading RDB file\n"
                                "88:M 01 Jan 2026 10:00:00.001 # Terminating server after rdb file reading failure."}}}
    if fault == "ssh_host_keys_missing":
        return {"service": "ssh", "error": "nothing listens on port 22", "evidence": {
            "status": "sshd is not running ... failed!", "listeners": "port 22: nothing listening",
            "config_test": "$ sshd -t\nrc 1\nsshd: no hostkeys available -- exiting."}}
    if fault == "cron_binary_missing":
        return {"service": "cron", "error": "no process named cron runs", "evidence": {
            "status": "cron is not running ... failed!", "processes": "no process named or running cron",
            "paths": {"/usr/sbin/cron": "missing (nearest existing parent /usr/sbin: directory, owner root:root)"}}}
    if fault == "nginx_sigstopped":
        # C3 evidence: nginx's processes exist but are stopped; its port is its own.
        return {"service": "nginx", "error": "GET http://127.0.0.1/ timed out", "evidence": {
            "init": "sysv", "status": "$ service nginx status\nrc 0\nnginx is running.",
            "processes": [{"pid": 50, "ppid": 1, "user": "root", "state": "stopped", "comm": "nginx",
                           "cmdline": "nginx: master process /usr/sbin/nginx", "ports": [80], "start": 1000},
                          {"pid": 51, "ppid": 50, "user": "www-data", "state": "stopped", "comm": "nginx",
                           "cmdline": "nginx: worker process", "ports": [80], "start": 1001}],
            "service_pids": [50, 51], "config_test": NGINX_OK_CONFIG}}
    if fault == "nginx_main_config_broken":
        return {"service": "nginx", "error": "nginx is not running", "evidence": {
            "status": "nginx is not running ... failed!", "listeners": "port 80: nothing listening",
            "config_test": "$ nginx -t\nrc 1\nnginx: [emerg] unknown directive \"worker_connectionz\" in "
                           "/etc/nginx/nginx.conf:14\nnginx: configuration file /etc/nginx/nginx.conf test failed"}}
    if fault == "nginx_port_conflict_and_stale_pid":
        case = sample("nginx_port_conflict")
        case["evidence"]["pid_files"] = {"/run/nginx.pid": "pid 811 is not running (stale PID file)"}
        return case
    if fault == "nginx_crashed_with_unknown_error":
        return {"service": "nginx", "error": "nginx is not running", "evidence": {
            "status": "nginx is not running ... failed!", "listeners": "port 80: nothing listening",
            "config_test": NGINX_OK_CONFIG,
            "logs": {"/var/log/nginx/error.log": "2026/01/01 10:00:00 [alert] 12#12: worker process 13 exited on "
                                                 "signal 11 (core dumped)\n2026/01/01 10:00:00 [crit] 12#12: "
                                                 "SSL_CTX_use_PrivateKey failed"}}}
    raise KeyError(fault)


UNSEEN = {
    # fault: runbooks allowed to match (none: a plain start or a look-alike would not heal it)
    "redis_port_conflict": [],
    "redis_missing_log_dir": [],
    "redis_corrupt_rdb": [],
    "ssh_host_keys_missing": [],
    "cron_binary_missing": [],
    "nginx_sigstopped": [],
    "nginx_main_config_broken": [],
    "nginx_port_conflict_and_stale_pid": [],
    "nginx_crashed_with_unknown_error": [],
}


@pytest.mark.parametrize("fault", sorted(UNSEEN))
def test_no_bundled_runbook_fires_on_a_fault_it_does_not_address(fault: str) -> None:
    case = unseen(fault)
    assert matched_ids(case) == UNSEEN[fault], why_not(BOOKS, case["service"], case["error"], case["evidence"])


def test_why_not_names_the_unexplained_cause() -> None:
    case = unseen("redis_corrupt_rdb")
    reasons = why_not(BOOKS, case["service"], case["error"], case["evidence"])
    assert "log_error" in reasons["redis_killed"] and "Unexpected EOF reading RDB file" in reasons["redis_killed"]
    assert "stale_pid_file" in reasons["redis_stopped"]
    case = unseen("redis_port_conflict")
    assert "port_held_by_other" in why_not(BOOKS, case["service"], case["error"], case["evidence"])["redis_killed"]


# ---------------------------------------------------------------------- structured (C3) and systemd evidence

def c3_port_conflict() -> dict:
    return {"service": "nginx", "error": "nginx is not running; port 80 is held by another process", "evidence": {
        "init": "systemd", "status": "$ systemctl status nginx\nrc 3\n○ nginx.service - nginx\n     Active: failed",
        "unit": {"Id": "nginx.service", "LoadState": "loaded", "ActiveState": "failed", "SubState": "failed",
                 "Result": "exit-code", "UnitFileState": "enabled", "NeedDaemonReload": "no"},
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Starting nginx.service - A high performance web server...\n"
                   "Jan 01 10:00:00 web1 nginx[99]: nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)\n"
                   "Jan 01 10:00:00 web1 systemd[1]: nginx.service: Control process exited, code=exited, status=1/FAILURE\n"
                   "Jan 01 10:00:00 web1 systemd[1]: nginx.service: Failed with result 'exit-code'.\n"
                   "Jan 01 10:00:00 web1 systemd[1]: Failed to start nginx.service - A high performance web server.",
        "processes": [{"pid": 7070, "ppid": 1, "user": "nobody", "state": "sleeping", "comm": "python3",
                       "cmdline": "python3 -m http.server 80", "ports": [80], "start": 5000}],
        "service_pids": [7070], "config_test": NGINX_OK_CONFIG, "named_paths": {}}}


def systemd_case(**unit) -> dict:
    props = {"Id": "billing-api.service", "LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead",
             "Result": "success", "UnitFileState": "enabled", "NeedDaemonReload": "no"}
    props.update(unit)
    return {"service": "billing-api", "error": "billing-api is not running", "evidence": {
        "init": "systemd", "unit": props, "processes": [], "service_pids": [],
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Stopped billing-api.service - Billing API."}}


def test_structured_port_holder_and_the_pid_from_the_process_table() -> None:
    case = c3_port_conflict()
    matches = match_runbooks(BOOKS, case["service"], case["error"], case["evidence"])
    assert [m["runbook"]["id"] for m in matches] == ["nginx_port_conflict"]
    assert any(f["fact"] == "port_held_by_other" and f["pid"] == 7070 for f in matches[0]["facts"])
    step = matches[0]["runbook"]["steps"][0]["command"]
    assert resolve_placeholders(step, case["evidence"], "nginx") == "kill 7070"


def test_systemd_masked_unit_needs_the_unmask_runbook_and_its_approval() -> None:
    case = systemd_case(LoadState="masked", UnitFileState="masked")
    matches = match_runbooks(BOOKS, case["service"], case["error"], case["evidence"])
    assert [m["runbook"]["id"] for m in matches] == ["systemd_unit_masked"]
    book = matches[0]["runbook"]
    commands = [resolve_placeholders(s["command"], case["evidence"], case["service"]) for s in book["steps"]]
    assert commands == ["systemctl unmask billing-api.service", "systemctl start billing-api.service"]
    allowed = [{"command": c, "verdict": "allow", "reasons": ["ok"]} for c in commands]
    gated = gate_steps(allowed, book["steps"], book["id"])
    assert [g["verdict"] for g in gated] == ["approval", "allow"]
    assert "asks a human to approve" in gated[0]["reasons"][-1]
    # a rejection is never lowered
    assert gate_steps([{"command": "x", "verdict": "reject", "reasons": []}], book["steps"], "x")[0]["verdict"] == "reject"


def test_systemd_start_limit_and_daemon_reload() -> None:
    hit = systemd_case(ActiveState="failed", Result="start-limit-hit")
    hit["evidence"]["journal"] = ("Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Start request repeated too "
                                  "quickly.\nJan 01 10:00:00 web1 systemd[1]: billing-api.service: Failed with result "
                                  "'start-limit-hit'.\nJan 01 10:00:00 web1 systemd[1]: Failed to start billing-api.service.")
    matches = match_runbooks(BOOKS, hit["service"], hit["error"], hit["evidence"])
    assert [m["runbook"]["id"] for m in matches] == ["systemd_start_limit_hit"]
    assert [resolve_placeholders(s["command"], hit["evidence"], hit["service"])
            for s in matches[0]["runbook"]["steps"]] == ["systemctl reset-failed billing-api.service",
                                                         "systemctl start billing-api.service"]
    changed = systemd_case(NeedDaemonReload="yes")
    assert matched_ids(changed) == ["systemd_unit_changed"]
    # a start limit hit because of a config error: the config error must be fixed first
    hit["evidence"]["config_test"] = "$ billing-api --check\nrc 2\nerror: /etc/billing-api/settings.toml:3: bad key"
    assert matched_ids(hit) == []
    # the systemd runbooks never fire on a SysV host
    sysv = systemd_case(NeedDaemonReload="yes")
    sysv["evidence"]["init"] = "sysv"
    assert matched_ids(sysv) == []


def test_a_config_error_the_config_test_now_accepts_is_history() -> None:
    """A deploy with a bad listen port, rolled back: the journal still tells the crashes,
    the unit sits at its start limit, and the configuration test passes now."""
    hit = systemd_case(ActiveState="failed", Result="exit-code", NRestarts="2")
    hit["evidence"]["journal"] = (
        "Jan 01 10:00:00 web1 billing-api[9]: fatal: /etc/billing-api/settings.toml: [server] listen must be "
        "HOST:PORT, got '127.0.0.1:80800'\n"
        "Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Main process exited, code=exited, status=1/FAILURE\n"
        "Jan 01 10:00:01 web1 systemd[1]: billing-api.service: Start request repeated too quickly.\n"
        "Jan 01 10:00:01 web1 systemd[1]: Failed to start billing-api.service.")
    passing = ("$ billing-api --config /etc/billing-api/settings.toml --check\nrc 0\n"
               "billing-api: configuration /etc/billing-api/settings.toml is ok")
    hit["evidence"]["config_test"] = passing
    assert matched_ids(hit) == ["systemd_start_limit_hit"]
    # the same complaint while the test still fails is the cause: no reset and start
    hit["evidence"]["config_test"] = hit["evidence"]["config_test"].replace("rc 0", "rc 1").replace(
        "is ok", "listen must be HOST:PORT")
    assert matched_ids(hit) == []
    # a test run as root passes where the service's user cannot read: access stays a cause
    hit["evidence"]["config_test"] = passing
    hit["evidence"]["journal"] = hit["evidence"]["journal"].replace(
        "[server] listen must be HOST:PORT, got '127.0.0.1:80800'", "Permission denied")
    assert "permission_denied" in [f["fact"] for f in extract_facts(hit["service"], hit["error"], hit["evidence"]).facts]
    assert matched_ids(hit) == []


def test_a_failure_the_program_says_it_ignored_is_no_cause() -> None:
    changed = systemd_case(ActiveState="failed", Result="exit-code", NeedDaemonReload="yes")
    changed["evidence"]["journal"] = (
        "Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Failed to get cgroup ID of cgroup "
        "/sys/fs/cgroup/unified/docker/0f/system.slice/billing-api.service, ignoring: Operation not permitted\n"
        "Jan 01 10:00:00 web1 (ing-api)[7]: billing-api.service: Failed at step EXEC spawning "
        "/usr/local/bin/billing-api: No such file or directory\n"
        "Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Main process exited, code=exited, status=203/EXEC")
    facts = [f["fact"] for f in extract_facts(changed["service"], changed["error"], changed["evidence"]).facts]
    assert "permission_denied" not in facts and "binary_missing" in facts
    # the program the old definition names was moved by the change the reload picks up
    assert matched_ids(changed) == ["systemd_unit_changed"]


def _start_limit_journal(first_line: str, exit_status: str) -> str:
    """Three starts of billing-api, each set apart by the cgroup warning systemd prints in a
    container, then the start limit: the case where the daemon's own line follows a line
    systemd says it ignored."""
    one = ("Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Failed to get cgroup ID of cgroup "
           "/sys/fs/cgroup/unified/docker/0f/system.slice/billing-api.service, ignoring: Operation not permitted\n"
           "Jan 01 10:00:00 web1 systemd[1]: Started billing-api.service - Billing API.\n"
           + (f"Jan 01 10:00:00 web1 billing-api[7]: {first_line}\n" if first_line else "")
           + f"Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Main process exited, code=exited, status={exit_status}\n"
           "Jan 01 10:00:00 web1 systemd[1]: billing-api.service: Failed with result 'exit-code'.\n")
    return one * 3 + ("Jan 01 10:00:01 web1 systemd[1]: billing-api.service: Start request repeated too quickly.\n"
                      "Jan 01 10:00:01 web1 systemd[1]: Failed to start billing-api.service - Billing API.")


def test_the_line_after_an_ignored_failure_is_still_read() -> None:
    """A line systemd says it carried on after is set aside, but it explains nothing: the
    daemon's error just after it is the cause, and the start-limit reset does not apply."""
    case = systemd_case(ActiveState="failed", Result="exit-code")
    case["evidence"]["journal"] = _start_limit_journal("fatal: cannot read : No such file or directory", "1/FAILURE")
    facts = extract_facts(case["service"], case["error"], case["evidence"]).facts
    errors = [f for f in facts if f["fact"] == "log_error"]
    assert errors and "fatal: cannot read" in errors[0]["line"], facts
    assert "permission_denied" not in [f["fact"] for f in facts]
    assert matched_ids(case) == []
    # with no line of its own, a crash loop is what the start-limit runbook is for
    case["evidence"]["journal"] = _start_limit_journal("", "1/FAILURE")
    assert matched_ids(case) == ["systemd_start_limit_hit"]


def test_a_daemons_error_that_reaches_the_journal_after_systemds_lines_is_still_read() -> None:
    """journald may file a daemon's last words after systemd's own lines about its exit: they
    are not a consequence of "Failed with result", which is another process's line."""
    case = systemd_case(ActiveState="failed", Result="exit-code")
    case["evidence"]["journal"] = "\n".join([
        "2026-11-26T13:09:09+0000 web1 systemd[1]: Started billing-api.service - Billing API.",
        "2026-11-26T13:09:09+0000 web1 systemd[1]: billing-api.service: Main process exited, code=exited, "
        "status=1/FAILURE",
        "2026-11-26T13:09:09+0000 web1 systemd[1]: billing-api.service: Failed with result 'exit-code'.",
        "2026-11-26T13:09:09+0000 web1 billing-api[7]: fatal: cannot read : No such file or directory",
        "2026-11-26T13:09:10+0000 web1 systemd[1]: billing-api.service: Start request repeated too quickly.",
    ])
    facts = extract_facts(case["service"], case["error"], case["evidence"]).facts
    assert [f for f in facts if f["fact"] == "log_error" and "fatal: cannot read" in f["line"]], facts
    assert matched_ids(case) == []
    # the short (syslog) timestamps of journalctl's default output name the process too
    case["evidence"]["journal"] = case["evidence"]["journal"].replace("2026-11-26T13:09:09+0000", "Nov 26 13:09:09")
    facts = extract_facts(case["service"], case["error"], case["evidence"]).facts
    assert [f for f in facts if f["fact"] == "log_error" and "fatal: cannot read" in f["line"]], facts


@pytest.mark.parametrize("line, step", [
    ("Main process exited, code=exited, status=217/USER", "USER"),
    ("Main process exited, code=exited, status=200/CHDIR", "CHDIR"),
    ("Failed at step NAMESPACE spawning /usr/local/bin/billing-api: Read-only file system", "NAMESPACE"),
])
def test_a_step_systemd_could_not_set_up_is_the_cause(line: str, step: str) -> None:
    """systemd's own exit statuses (200-243) say which step of setting up the process failed:
    a cause, never a crash loop a reset would cure."""
    case = systemd_case(ActiveState="failed", Result="exit-code")
    case["evidence"]["journal"] = _start_limit_journal("", "1/FAILURE").replace(
        "Main process exited, code=exited, status=1/FAILURE", line)
    facts = extract_facts(case["service"], case["error"], case["evidence"]).facts
    assert {"fact": "exec_step_failed", "step": step}.items() <= next(
        f for f in facts if f["fact"] == "exec_step_failed").items()
    assert matched_ids(case) == []
    # the program's own exit code (1 to 199) is not such a step
    case["evidence"]["journal"] = _start_limit_journal("", "1/FAILURE").replace("status=1/", "status=199/")
    assert "exec_step_failed" not in [f["fact"] for f in extract_facts(case["service"], case["error"], case["evidence"]).facts]


def test_a_required_unit_that_does_not_exist_is_the_cause_not_a_plain_stop() -> None:
    stopped = {"service": "redis-server", "error": "redis-server.service is inactive/dead", "evidence": {
        "init": "systemd", "unit": {"Id": "redis-server.service", "LoadState": "loaded", "ActiveState": "inactive",
                                    "Result": "success", "RequiredNotLoaded": "stunnel@redis.service (not-found)"},
        "processes": [],
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Stopped redis-server.service - Advanced key-value store."}}
    facts = extract_facts(stopped["service"], stopped["error"], stopped["evidence"]).facts
    assert {"fact": "required_unit_missing", "required": "stunnel@redis.service"}.items() <= next(
        f for f in facts if f["fact"] == "required_unit_missing").items()
    assert matched_ids(stopped) == []          # a plain start cannot work: systemd refuses it
    del stopped["evidence"]["unit"]["RequiredNotLoaded"]
    assert matched_ids(stopped) == ["redis_stopped"]


def test_cron_takes_over_the_pid_file_systemd_leaves_behind() -> None:
    stopped = {"service": "cron", "error": "no process named cron", "evidence": {
        "init": "systemd", "unit": {"Id": "cron.service", "ActiveState": "inactive", "Result": "success"},
        "processes": [], "pid_files": {"/run/crond.pid": "pid 47 is not running (stale PID file)"},
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Stopped cron.service - Regular background program "
                   "processing daemon."}}
    found = extract_facts("cron", stopped["error"], stopped["evidence"])
    assert "stale_pid_file" in [f["fact"] for f in found.facts]
    assert matched_ids(stopped) == ["cron_stopped"]
    # a stale PID file of another program is still unexplained
    stopped["evidence"]["pid_files"] = {"/run/atd.pid": "pid 47 is not running (stale PID file)"}
    assert matched_ids(stopped) == []


def test_systemd_plain_stop_and_config_error_pick_the_service_runbooks() -> None:
    stopped = {"service": "nginx", "error": "nginx is not running", "evidence": {
        "init": "systemd", "unit": {"Id": "nginx.service", "LoadState": "loaded", "ActiveState": "inactive",
                                    "Result": "success", "NeedDaemonReload": "no"},
        "processes": [], "config_test": NGINX_OK_CONFIG,
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Stopping nginx.service...\n"
                   "Jan 01 10:00:00 web1 systemd[1]: nginx.service: Deactivated successfully.\n"
                   "Jan 01 10:00:00 web1 systemd[1]: Stopped nginx.service."}}
    assert matched_ids(stopped) == ["nginx_stopped"]
    broken = {"service": "nginx", "error": "nginx is not running", "evidence": {
        "init": "systemd", "unit": {"Id": "nginx.service", "ActiveState": "failed", "Result": "exit-code"},
        "processes": [],
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Starting nginx.service...\n"
                   "Jan 01 10:00:00 web1 nginx[5]: nginx: [emerg] unknown directive \"lisen\" in "
                   "/etc/nginx/conf.d/site.conf:2\n"
                   "Jan 01 10:00:00 web1 systemd[1]: nginx.service: Failed with result 'exit-code'."}}
    assert matched_ids(broken) == ["nginx_config_syntax"]
    assert resolve_placeholders("{config_error_file:/etc/nginx/conf.d/}", broken["evidence"], "nginx") == \
        "/etc/nginx/conf.d/site.conf"
    # the same failed unit without a known cause: no plain start
    broken["evidence"]["journal"] = broken["evidence"]["journal"].replace(
        'nginx: [emerg] unknown directive "lisen" in /etc/nginx/conf.d/site.conf:2', "segfault at 0 ip 0")
    assert matched_ids(broken) == []


# ---------------------------------------------------------------------- facts

def test_facts_classes_and_shapes() -> None:
    assert {k.klass for k in FACTS.values()} == {"symptom", "cause", "weak", "info"}
    found = extract_facts("nginx", sample("nginx_port_conflict")["error"], sample("nginx_port_conflict")["evidence"])
    holder = found.of("port_held_by_other")[0]
    assert holder == {"fact": "port_held_by_other", "class": "cause", "port": 80, "process": "python3", "pid": 4242,
                      "source": "probe", "evidence": "port 80 held by python3 (pid 4242)"}
    assert "port_held_by_other port=80 process=python3 pid=4242" in found.lines()


def test_history_in_the_log_that_the_current_state_contradicts_is_not_this_fault() -> None:
    old_bind = ("2026/01/01 09:00:00 [emerg] 9#9: bind() to 0.0.0.0:80 failed (98: Address already in use)\n"
                "2026/01/01 09:00:00 [emerg] 9#9: still could not bind()")
    case = {"service": "nginx", "error": "nginx is not running", "evidence": {
        "status": "$ service nginx status\nrc 3\nnginx is not running ... failed!",
        "listeners": "port 80: nothing listening", "config_test": NGINX_OK_CONFIG,
        "logs": {"/var/log/nginx/error.log": old_bind}}}
    # the port is free now: the old bind() errors are a past incident; a plain start fits
    assert matched_ids(case) == ["nginx_stopped"]
    case["evidence"]["listeners"] = "0.0.0.0:80 held by python3 (pid 5)"
    assert matched_ids(case) == ["nginx_port_conflict"]
    full = {"service": "redis-server", "error": REDIS_DOWN, "evidence": {
        "status": "redis-server is not running ... failed!",
        "paths": {"/var/lib/redis": "directory, owner redis:redis, mode 0750; filesystem at /var/lib/redis: 4% used"},
        "logs": {REDIS_LOG: "1:C # Write error saving DB on disk(fflush): No space left on device\n"
                            "1:M # User requested shutdown...\n1:M # Redis is now ready to exit, bye bye..."}}}
    assert matched_ids(full) == ["redis_stopped"]


def test_request_errors_do_not_explain_a_stopped_service() -> None:
    favicon = ('2026/01/01 09:00:00 [error] 20#20: *7 open() "/var/www/html/favicon.ico" failed (2: No such file or '
               'directory), client: 10.0.0.5, server: _, request: "GET /favicon.ico HTTP/1.1", host: "web1"')
    case = {"service": "nginx", "error": "nginx is not running", "evidence": {
        "status": "$ service nginx status\nrc 3\nnginx is not running ... failed!",
        "listeners": "port 80: nothing listening", "config_test": NGINX_OK_CONFIG,
        "logs": {"/var/log/nginx/error.log": favicon}}}
    assert matched_ids(case) == ["nginx_stopped"]
    # while nginx runs, a request error is the evidence (nginx_docroot_unreadable's 403)
    evidence = {"status": "nginx is running.", "processes": "pid 5 user root: nginx: master process",
                "logs": {"/var/log/nginx/error.log": favicon}}
    running = extract_facts("nginx", "GET / returned 403", evidence)
    assert running.of("path_missing")


def test_a_sigkilled_systemd_service_is_started_again() -> None:
    case = {"service": "nginx", "error": "nginx is not running", "evidence": {
        "init": "systemd", "unit": {"Id": "nginx.service", "ActiveState": "failed", "Result": "signal",
                                    "ExecMainStatus": "9"},
        "processes": [], "config_test": NGINX_OK_CONFIG,
        "journal": "Jan 01 10:00:00 web1 systemd[1]: Started nginx.service.\n"
                   "Jan 01 11:00:00 web1 systemd[1]: nginx.service: Main process exited, code=killed, status=9/KILL\n"
                   "Jan 01 11:00:00 web1 systemd[1]: nginx.service: Failed with result 'signal'."}}
    assert matched_ids(case) == ["nginx_stopped"]
    assert extract_facts("nginx", "", case["evidence"]).has("killed")


def test_lsb_status_exit_1_means_dead_with_a_pid_file() -> None:
    evidence = {"status": "$ service redis-server status\nrc 1\nredis-server is not running ... failed!",
                "listeners": "port 6379: nothing listening"}
    found = extract_facts("redis-server", REDIS_DOWN, evidence)
    assert found.of("stale_pid_file")[0]["source"] == "status"
    assert matched_ids({"service": "redis-server", "error": REDIS_DOWN, "evidence": evidence}) == ["redis_killed"]
    evidence["status"] = evidence["status"].replace("rc 1", "rc 3")
    assert matched_ids({"service": "redis-server", "error": REDIS_DOWN, "evidence": evidence}) == ["redis_stopped"]
    # systemctl's exit codes are not LSB's
    systemd = {"status": "$ systemctl status redis-server\nrc 1\n× redis-server.service"}
    assert not extract_facts("redis-server", "", systemd).of("stale_pid_file")


def test_port_held_by_the_service_itself_is_no_conflict() -> None:
    found = extract_facts("redis-server", "", {"listeners": "127.0.0.1:6379 held by redis-server (pid 9)"})
    assert not found.of("port_held_by_other")
    own = extract_facts("ssh", "", {"listeners": "0.0.0.0:22 held by sshd (pid 9)"})
    assert not own.of("port_held_by_other")
    custom = extract_facts("billing-api", "", {"listeners": "127.0.0.1:8081 held by gunicorn (pid 9)"},
                           service_def={"processes": ["gunicorn"], "ports": [8081]})
    assert not custom.of("port_held_by_other")


def test_pid_file_reused_by_another_program_is_stale() -> None:
    found = extract_facts("nginx", "", {"pid_files": {"/run/nginx.pid": "pid 12 is running as user root: /usr/sbin/cron -f"}})
    assert found.of("stale_pid_file")[0]["path"] == "/run/nginx.pid"
    live = extract_facts("nginx", "", {"pid_files": {"/run/nginx.pid": "pid 12 is running as user root: nginx: master "
                                                                       "process /usr/sbin/nginx"}})
    assert not live.of("stale_pid_file")


def test_path_states_and_writability() -> None:
    state = parse_path_state("/var/lib/redis", "directory, owner root:root, mode 0700; filesystem at /: 3% used")
    assert (state.kind, state.owner, state.group, state.mode, state.used_pct) == ("directory", "root", "root", 0o700, 3)
    assert writable_by(state, "redis") is False and writable_by(state, "root") is True
    assert writable_by(parse_path_state("/var/lib/redis", "directory, owner redis:redis, mode 0750"), "redis") is True
    assert writable_by(parse_path_state("/srv/x", {"type": "directory", "owner": "app", "group": "app",
                                                   "mode": "0770"}), "app") is True
    assert writable_by(parse_path_state("/srv/x", "missing"), "app") is None
    # which paths must be writable is the runbook's knowledge; the user is the service's own
    found = extract_facts("redis-server", REDIS_DOWN, {"paths": {"/var/lib/redis": "directory, owner cache:cache, "
                                                                                   "mode 0700"}},
                          service_def={"user": "cache"})
    requirement = parse_requirement({"path_not_writable": {"path": "^/var/lib/redis$", "user": "redis"}}, "test")
    assert instances(requirement, found) == []     # writable by the service's real user
    found.user = None
    assert instances(requirement, found)[0]["user"] == "redis"
    # the host's own judgement of the user's access wins over mode bits
    judged = parse_path_state("/srv/app", {"type": "directory", "owner": "root:app", "mode": "0770",
                                           "user_access": "r-x"})
    assert writable_by(judged, "app") is False
    line = parse_path_state("/var/lib/redis", "directory, owner root:root, mode 0777; user redis may r-x")
    assert writable_by(line, "redis") is False


def test_a_missing_file_the_service_creates_at_start_is_no_fault() -> None:
    stopped = {"status": "$ service ssh status\nrc 3\nsshd is not running ... failed!",
               "paths": {"/run/sshd.pid": "missing (nearest existing parent /run: directory, owner root:root, "
                                          "mode 0755)",
                         "/run/sshd": "directory, owner root:root, mode 0755"}}
    assert matched_ids({"service": "ssh", "error": "port 22 is not listening", "evidence": stopped}) == ["ssh_stopped"]
    # the runtime filesystem is emptied at boot and the start fills it (systemd removes a
    # unit's RuntimeDirectory at stop): a missing /run directory alone is no fault ...
    gone = dict(stopped, paths={"/run/sshd": "missing (nearest existing parent /run: directory)"})
    assert matched_ids({"service": "ssh", "error": "port 22 is not listening", "evidence": gone}) == ["ssh_stopped"]
    # ... nor is a config test run outside the start that misses it (sshd -t on systemd)
    tested = dict(gone, config_test="$ sshd -t\nrc 255\nMissing privilege separation directory: /run/sshd")
    assert matched_ids({"service": "ssh", "error": "port 22 is not listening", "evidence": tested}) == ["ssh_stopped"]
    # ... but a start that failed for want of it says so, and that is a fault
    failed = dict(gone, journal="2026-11-23T10:00:00+0000 h sshd[9]: fatal: chdir(\"/run/sshd\"): "
                                "No such file or directory")
    assert extract_facts("ssh", "", failed).of("path_missing")[0]["path"] == "/run/sshd"
    assert matched_ids({"service": "ssh", "error": "port 22 is not listening", "evidence": failed}) == []
    # a missing directory elsewhere is a fault, and so is a missing file whose directory is missing too
    away = dict(stopped, paths={"/etc/ssh": "missing (nearest existing parent /etc: directory)"})
    assert matched_ids({"service": "ssh", "error": "port 22 is not listening", "evidence": away}) == []
    named = {"/var/log/app/app.log": {"type": "missing", "existing_parent": "/var/log"}}
    deep = extract_facts("app", "", {"named_paths": named})
    assert deep.of("path_missing")[0]["path"] == "/var/log/app/app.log"


def test_named_paths_from_c3_evidence() -> None:
    evidence = {"config_test": "$ nginx -t\nrc 1\nnginx: [emerg] open() \"/var/log/nginx/site/error.log\" failed "
                               "(2: No such file or directory)\nnginx: configuration file /etc/nginx/nginx.conf test failed",
                "named_paths": {"/var/log/nginx/site/error.log": "missing",
                                "/var/log/nginx/site": "missing (nearest existing parent /var/log/nginx: directory)"}}
    case = {"service": "nginx", "error": "nginx is not running", "evidence": evidence}
    assert matched_ids(case) == ["nginx_missing_log_dir"]
    assert resolve_placeholders("mkdir -p {missing_dir:/var/log/nginx}", evidence, "nginx") == \
        "mkdir -p /var/log/nginx/site"


def test_log_lines_right_after_a_specific_one_are_its_consequences() -> None:
    found = extract_facts("redis-server", "", sample("redis_disk_full")["evidence"])
    assert not found.of("log_error")
    found = extract_facts("redis-server", "", {"logs": {REDIS_LOG: "1:M # Background saving error"}})
    assert found.of("log_error")
    warned = extract_facts("redis-server", "", {"logs": {REDIS_LOG: "1:M # WARNING: The TCP backlog setting of 511 "
                                                                    "cannot be enforced"}})
    assert not warned.of("log_error")


# ---------------------------------------------------------------------- placeholders

def test_new_placeholders_resolve_from_the_evidence() -> None:
    evidence = {"pid_files": {"/run/app/app.pid": "pid 5 is not running (stale PID file)"},
                "listeners": "0.0.0.0:8081 held by python3 (pid 777)"}
    assert resolve_placeholders("rm -f {stale_pid_file:/run/}", evidence, "app") == "rm -f /run/app/app.pid"
    assert resolve_placeholders("kill {port_owner_pid}", evidence, "app") == "kill 777"
    assert resolve_placeholders("systemctl start {unit}", evidence, "app") == "systemctl start app.service"
    assert resolve_placeholders("systemctl start {unit}", evidence, "app",
                                service_def={"units": ["app-main.service"]}) == "systemctl start app-main.service"
    assert resolve_placeholders("chown {user} /srv", evidence, "app", service_def={"user": "appuser"}) == \
        "chown appuser /srv"
    with pytest.raises(PlaceholderError, match="user is not known"):
        resolve_placeholders("chown {user} /srv", evidence, "app")
    with pytest.raises(PlaceholderError, match="no stale PID file under /var/"):
        resolve_placeholders("rm -f {stale_pid_file:/var/}", evidence, "app")
    with pytest.raises(PlaceholderError, match="no missing directory"):
        resolve_placeholders("mkdir {missing_dir:/var/log}", evidence, "app")


def test_every_placeholder_has_an_example_for_the_checker() -> None:
    book = {"services": ["billing-api"]}
    for name, spec in PLACEHOLDERS.items():
        arg = {"port": ":80", "optional-port": ":80", "path": ":/var/lib/x", "optional-path": ":/etc/x/",
               "none": ""}[spec.arg]
        value = example_command(f"echo {{{name}{arg}}}", book)
        assert "{" not in value and value != "echo ", name


# ---------------------------------------------------------------------- schema, operator runbooks

def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


GOOD_MATCH = "match: {facts: [not_running]}\n"
BAD_RUNBOOKS = {
    "bad_pattern.yml": ("id: a\nmatch: {any: ['(']}\nsteps: [{command: service a start}]\n",
                        "bad_pattern.yml: match.any[0]: bad pattern '('"),
    "unknown_fact.yml": ("id: b\nmatch: {facts: [port_taken]}\nsteps: [{command: service b start}]\n",
                         "unknown_fact.yml: match.facts[0]: unknown fact 'port_taken'"),
    "bad_attribute.yml": ("id: c\nmatch: {facts: [{path_missing: {file: x}}]}\nsteps: [{command: service c start}]\n",
                          "bad_attribute.yml: match.facts[0].path_missing.file: fact 'path_missing' has no attribute"),
    "literal_pid.yml": ("id: d\n" + GOOD_MATCH + "steps: [{command: kill -TERM 4242}]\n",
                        "literal_pid.yml: steps[0].command: `kill -TERM 4242` signals a PID written by hand"),
    "unknown_placeholder.yml": ("id: e\n" + GOOD_MATCH + "steps: [{command: 'rm -rf {home_dir}'}]\n",
                                "unknown_placeholder.yml: steps[0].command: unknown placeholder {home_dir}"),
    "typo.yml": ("id: f\n" + GOOD_MATCH + "stpes: [{command: service f start}]\n",
                 "typo.yml: stpes: unknown key"),
    "no_match.yml": ("id: g\nsteps: [{command: service g start}]\n",
                     "no_match.yml: match: needs evidence to select it"),
    "escalate_steps.yml": ("id: h\nescalate: true\n" + GOOD_MATCH + "steps: [{command: service h start}]\n",
                           "escalate_steps.yml: steps: an escalation runbook (escalate: true) has no steps"),
    "not_yaml.yml": ("id: [unclosed\n", "not_yaml.yml: not valid YAML (line"),
    "bad_step.yml": ("id: i\n" + GOOD_MATCH + "steps: [{command: ''}, {command: x, approve: true}]\n",
                     "bad_step.yml: steps[0].command: a non-empty string"),
    "bad_port.yml": ("id: j\n" + GOOD_MATCH + "steps: [{command: 'kill {port_owner_pid:http}'}]\n",
                     "bad_port.yml: steps[0].command: placeholder {port_owner_pid:http} needs a port number"),
    "not_a_mapping.yml": ("- just\n- words\n", "not_a_mapping.yml [0]: a runbook is a mapping"),
    "bad_priority.yml": ("id: k\npriority: high\n" + GOOD_MATCH + "steps: [{command: service k start}]\n",
                         "bad_priority.yml: priority: an integer"),
    "bad_init.yml": ("id: l\ninit: [upstart]\n" + GOOD_MATCH + "steps: [{command: service l start}]\n",
                     "bad_init.yml: init: 'upstart' is not one of"),
}


@pytest.mark.parametrize("name", sorted(BAD_RUNBOOKS))
def test_bad_runbooks_are_named_by_file_and_key(tmp_path: Path, name: str) -> None:
    text, expected = BAD_RUNBOOKS[name]
    write(tmp_path, name, text)
    with pytest.raises(RunbookError) as error:
        load_runbooks([tmp_path])
    assert expected in str(error.value), str(error.value)
    assert str(tmp_path / name) in str(error.value)


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    write(tmp_path, "many.yml", "id: m\nmatch: {any: ['('], facts: [nope]}\nsteps: [{command: 'kill 12'}]\n")
    _books, problems = collect_runbooks([tmp_path], bundled=False)
    assert len(problems) == 3 and all(p.startswith(str(tmp_path / "many.yml")) for p in problems)


def test_duplicate_ids_in_one_directory(tmp_path: Path) -> None:
    for name in ("one.yml", "two.yml"):
        write(tmp_path, name, "id: same\n" + GOOD_MATCH + "steps: [{command: service x start}]\n")
    with pytest.raises(RunbookError, match=r"two\.yml: id: 'same' is also the id of a runbook in .*one\.yml"):
        load_runbooks([tmp_path])


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RunbookError, match="does not exist"):
        load_runbooks([tmp_path / "nope"])


def test_operator_runbooks_add_to_and_override_the_bundled_ones() -> None:
    books = load_runbooks([DATA / "runbooks"])
    by_id = {b["id"]: b for b in books}
    assert {"billing_api_stale_lock", "memcached_port_conflict", "ssh_host_keys_missing",
            "nginx_docroot_unreadable"} <= set(by_id)
    assert len(books) == len(BOOKS) + 4
    override = by_id["nginx_stopped"]
    assert override["path"] == str(DATA / "runbooks" / "nginx_stopped.yml")
    assert override["overrides"] == str(DEFAULT_DIR / "nginx_stopped.yml")
    assert [s["command"] for s in override["steps"]] == ["nginx -t", "service nginx start"]
    case = sample("nginx_stopped")
    top = match_runbooks(books, case["service"], case["error"], case["evidence"], case["host_tools"])[0]["runbook"]
    assert top["id"] == "nginx_stopped" and top["steps"][0]["command"] == "nginx -t"


def test_recorded_lab_evidence_with_the_operator_runbooks() -> None:
    """With the team's runbooks, every recorded lab fault (also those the bundled runbooks
    leave to the model) selects exactly its runbook, and the placeholders resolve."""
    books = load_runbooks([DATA / "runbooks"])
    for fault, case in sorted(_lab_samples().items()):
        matches = match_runbooks(books, case["service"], case["error"], case["evidence"], case["host_tools"])
        assert [m["runbook"]["id"] for m in matches] == [b["id"] for b in books if fault in b["faults"]], fault
    case = _lab_samples()["nginx_docroot_unreadable"]
    step = next(b for b in books if b["id"] == "nginx_docroot_unreadable")["steps"][0]["command"]
    assert resolve_placeholders(step, case["evidence"], "nginx") == "chmod 0644 /var/www/html/index.nginx-debian.html"


def test_operator_runbook_heals_what_the_bundled_ones_cannot() -> None:
    case = unseen("ssh_host_keys_missing")
    assert matched_ids(case) == []
    books = load_runbooks([DATA / "runbooks"])
    assert matched_ids(case, books) == ["ssh_host_keys_missing"]
    # and it does not fire on a plain stopped sshd
    assert matched_ids(sample("ssh_stopped"), books) == ["ssh_stopped"]


def test_operator_runbooks_for_services_the_collection_does_not_know() -> None:
    books = load_runbooks([DATA / "runbooks"])
    memcached = {"service": "memcached", "error": "nothing listens on port 11211", "evidence": {
        "status": "memcached is not running ... failed!",
        "listeners": "0.0.0.0:11211 held by nc (pid 6161)",
        "logs": {"/var/log/memcached.log": "failed to listen on TCP port 11211: Address already in use"}}}
    top = match_runbooks(books, memcached["service"], memcached["error"], memcached["evidence"])
    assert [m["runbook"]["id"] for m in top] == ["memcached_port_conflict"]
    assert resolve_placeholders(top[0]["runbook"]["steps"][0]["command"], memcached["evidence"], "memcached") == \
        "kill 6161"
    billing = {"service": "billing-api", "error": "billing-api is not running", "evidence": {
        "status": "billing-api is not running",
        "logs": {"/var/log/billing-api/app.log": "refusing to start: lock file /run/billing-api/worker.lock is "
                                                 "held by pid 4242"}}}
    assert matched_ids(billing, books) == ["billing_api_stale_lock"]
    billing["evidence"]["logs"] = {"/var/log/billing-api/app.log": "psycopg.OperationalError: connection refused"}
    assert matched_ids(billing, books) == []


def test_the_bundled_runbooks_hold_no_literal_pid_and_only_known_placeholders() -> None:
    books, problems = collect_runbooks(bundled=True)
    assert problems == [] and len(books) == len(list(DEFAULT_DIR.glob("*.yml")))


def test_a_multi_line_error_names_its_path_on_an_earlier_line() -> None:
    """redis reports a config error over several lines; the path is on the line before
    "Permission denied", and systemd's start limit that the crash loop hit does not hide
    the cause from its runbook."""
    journal = "\n".join([
        "2026-11-23T22:41:08+0000 h redis-server[204]: *** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***",
        "2026-11-23T22:41:08+0000 h redis-server[204]: Reading the configuration file, at line 504",
        "2026-11-23T22:41:08+0000 h redis-server[204]: >>> 'dir /var/lib/redis'",
        "2026-11-23T22:41:08+0000 h redis-server[204]: Permission denied",
        "2026-11-23T22:41:08+0000 h systemd[1]: redis-server.service: Start request repeated too quickly.",
    ])
    evidence = {"journal": journal, "unit": {"Id": "redis-server.service", "ActiveState": "failed",
                                             "Result": "start-limit-hit"}}
    found = extract_facts("redis-server", "redis-server.service is failed", evidence)
    assert [f.get("path") for f in found.of("permission_denied")] == ["/var/lib/redis"]
    assert found.has("start_limit_hit")
    assert matched_ids({"service": "redis-server", "error": "redis-server.service is failed",
                        "evidence": evidence}) == ["redis_bad_dir_permissions"]
    # another process's line in between is a separate message: no path borrowed from it
    other = journal.replace(">>> 'dir /var/lib/redis'", ">>> 'dir /var/lib/redis'\n"
                            "2026-11-23T22:41:08+0000 h cron[7]: opened /etc/crontab")
    found = extract_facts("redis-server", "", {"journal": other})
    assert [f.get("path") for f in found.of("permission_denied")] == [None]
    # the start limit alone (with the failed state) is what its own runbook handles
    alone = {"unit": {"Id": "redis-server.service", "ActiveState": "failed", "Result": "start-limit-hit"},
             "processes": []}
    assert matched_ids({"service": "redis-server", "error": "redis-server.service is failed",
                        "evidence": alone}) == ["systemd_start_limit_hit"]


def test_a_config_error_told_over_several_log_lines_is_a_config_fact() -> None:
    """redis (and daemons like it) log a config error as a banner, the line number, the line
    and the reason; systemd's start limit after the crash loop does not make the start-limit
    runbook fit, since the cause is the configuration."""
    journal = "\n".join([
        "2026-11-24T00:16:00+0000 h redis-server[200]: Reading the configuration file, at line 2279",
        "2026-11-24T00:16:00+0000 h redis-server[200]: >>> 'locale-collate C'",
        "2026-11-24T00:16:00+0000 h redis-server[200]: Bad directive or wrong number of arguments",
        "2026-11-24T00:16:00+0000 h systemd[1]: redis-server.service: Failed with result 'exit-code'.",
        "2026-11-24T00:16:00+0000 h systemd[1]: redis-server.service: Start request repeated too quickly.",
    ])
    evidence = {"journal": journal, "unit": {"Id": "redis-server.service", "ActiveState": "failed",
                                             "Result": "start-limit-hit"}, "processes": []}
    found = extract_facts("redis-server", "redis-server.service is failed", evidence)
    config = found.of("config_invalid")
    assert [(c.get("line"), c["message"]) for c in config] == [
        (2279, "Bad directive or wrong number of arguments; at line 2279: 'locale-collate C'")]
    assert matched_ids({"service": "redis-server", "error": "redis-server.service is failed", "evidence": evidence}) == []


def test_a_unit_systemd_refuses_is_a_cause_no_reload_fixes() -> None:
    journal = ("2026-11-24T00:16:00+0000 h systemd[1]: nginx.service: Service has more than one ExecStart= "
               "setting, which is only allowed for Type=oneshot services. Refusing.")
    evidence = {"journal": journal, "processes": [],
                "unit": {"Id": "nginx.service", "LoadState": "bad-setting", "ActiveState": "inactive",
                         "NeedDaemonReload": "yes"}}
    found = extract_facts("nginx", "nginx.service is inactive (load state bad-setting)", evidence)
    assert "more than one ExecStart=" in found.of("unit_bad_setting")[0]["message"]
    assert matched_ids({"service": "nginx", "error": "nginx.service is inactive", "evidence": evidence}) == []


def test_a_config_test_banner_after_the_named_cause_adds_no_second_fact() -> None:
    """systemd's ExecStartPre `nginx -t` logs the specific error, then "test failed": the
    banner repeats it, it is no configuration error of its own."""
    journal = "\n".join([
        '2026-11-24T00:20:00+0000 h nginx[50]: nginx: [emerg] open() "/var/log/nginx/error.log" failed '
        "(2: No such file or directory)",
        "2026-11-24T00:20:00+0000 h nginx[50]: nginx: configuration file /etc/nginx/nginx.conf test failed",
        "2026-11-24T00:20:00+0000 h systemd[1]: nginx.service: Control process exited, code=exited, status=1/FAILURE",
    ])
    evidence = {"journal": journal, "processes": [],
                "unit": {"Id": "nginx.service", "ActiveState": "failed", "Result": "exit-code"},
                "paths": {"/var/log/nginx": "missing (nearest existing parent /var/log: directory)"}}
    found = extract_facts("nginx", "nginx.service is failed", evidence)
    assert not found.has("config_invalid")
    assert matched_ids({"service": "nginx", "error": "nginx.service is failed", "evidence": evidence}) == \
        ["nginx_missing_log_dir"]
