# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PostgreSQL's own CLI and its account, judged by what they do, run for real in a lab host.

- A session holds an exclusive lock and blocks every query on its table. The lock view is a
  read the policy allows; `pg_terminate_backend` of the holder's backend needs approval;
  approved, its argv runs in the container: the blocked query completes, the holder's
  backend is gone and the postmaster is the same process (PostgreSQL kept running).
- PostgreSQL cannot read its TLS key (root:GROUP 0640; postgres is not in GROUP). The real
  evidence module's report of the host names the key and its group; adding postgres to that
  group needs approval (any other account change stays refused); approved and run, the
  server starts and the lab's own health check passes.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils import read_pids
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, scope_from_service
from host_module import run_host_module

pytestmark = pytest.mark.lab

HOST = "lab01"
REPO = Path(__file__).resolve().parents[2]
POSTMASTER_PID = "head -1 /var/lib/postgresql/15/main/postmaster.pid"
TABLE = "sentinel_lock_probe"
GROUP = "lab-tls"
KEY = "/etc/ssl/lab-pg/server.key"
TLS_CONF = "/etc/postgresql/15/main/conf.d/zz-lab-tls.conf"


def _definition() -> dict:
    """The lab's own PostgreSQL definition for its SysV hosts (inventories/lab)."""
    data = yaml.safe_load((REPO / "inventories/lab/group_vars/lab_sysv.yml").read_text(encoding="utf-8"))
    return next(dict(s) for s in data["remediate_services"] if s["name"] == "postgresql")


def _as_root(lab, verdict: dict) -> str:
    ran = lab.exec(HOST, verdict["argv"], user="root" if verdict["become"] else "sentinel", timeout=60)
    assert ran.ok, ran.output()
    return ran.stdout


def _sql(lab, statement: str) -> str:
    return lab.exec(HOST, ["runuser", "-u", "postgres", "--", "psql", "-X", "-q", "-tA", "-c", statement],
                    timeout=30).stdout.strip()


def _wait(what: str, test, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.5)


def test_a_blocking_locks_backend_is_terminated_after_approval_and_postgresql_keeps_running(lab) -> None:
    scope = scope_from_service(_definition())
    lab.wait_health(HOST, ["postgres"], timeout=60)
    postmaster = lab.exec(HOST, POSTMASTER_PID, check=True).stdout.strip()
    _sql(lab, f"CREATE TABLE IF NOT EXISTS {TABLE} (id int)")
    try:
        lab.exec(HOST, "nohup runuser -u postgres -- psql -X -q -c "
                       f"'BEGIN; LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(300); COMMIT;' "
                       ">/tmp/lock-holder.out 2>&1 &", check=True)
        _wait("the holder's lock", lambda: _sql(lab, f"SELECT count(*) FROM pg_locks WHERE granted AND "
                                                     f"relation = '{TABLE}'::regclass") == "1")
        lab.exec(HOST, f"nohup runuser -u postgres -- psql -X -q -tA -c 'SELECT count(*) FROM {TABLE}' "
                       ">/tmp/lock-waiter.out 2>&1 &", check=True)
        _wait("a query blocked on the lock",
              lambda: _sql(lab, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") == "1")

        read = classify("sudo -u postgres psql -tAc \"SELECT pid FROM pg_locks WHERE granted AND "
                        f"mode = 'AccessExclusiveLock' AND relation = '{TABLE}'::regclass\"", scope=scope)
        assert read["verdict"] == "allow", read["reasons"]
        holder = _as_root(lab, read).strip()
        assert holder.isdigit() and holder != postmaster, holder

        verdict = classify(f"sudo -u postgres psql -c 'SELECT pg_terminate_backend({holder})'", scope=scope)
        assert verdict["verdict"] == "approval", verdict["reasons"]
        assert f"pg_terminate_backend on backend PID {holder}" in verdict["effects"]
        # approved: the argv the approver saw runs as it is
        assert "t" in _as_root(lab, verdict).split()

        _wait("the blocked query's answer", lambda: lab.exec(HOST, "cat /tmp/lock-waiter.out").stdout.strip() == "0")
        assert _sql(lab, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {holder}") == "0"
        assert lab.exec(HOST, POSTMASTER_PID, check=True).stdout.strip() == postmaster
        assert lab.exec(HOST, ["kill", "-0", postmaster]).ok
        assert lab.health(HOST, ["postgres"])["postgres"].healthy
    finally:
        lab.exec(HOST, "pkill -f 'pg_sleep\\(300\\)'; pkill -f 'FROM sentinel_lock_probe'", timeout=30)
        _sql(lab, f"DROP TABLE IF EXISTS {TABLE}")


def _module(lab, name: str, args: dict) -> dict:
    """sentinel.remediation.NAME on the host as the role runs it (docker connection, user sentinel, become)."""
    return run_host_module(lab.container(HOST), name, args)


def _host_definition(definition: dict) -> dict:
    """The definition as the host modules take it (the controller's safeguard keys left out)."""
    return {k: v for k, v in definition.items() if k not in ("stateful", "confirm_attempts", "confirm_interval")}


def _evidence(lab, definition: dict, error: str) -> dict:
    """The host's evidence for PostgreSQL, from the real evidence module."""
    args = dict(_host_definition(definition), service=definition["name"], error=error)
    args.pop("name", None)
    return _module(lab, "evidence", args)["evidence"]


def test_a_backend_pid_a_read_printed_is_signalled_only_as_postgresqls_process(lab) -> None:
    """A PID known only from a read's output: the policy judges it as the incident's, and the
    host's execute_plan signals it only after /proc shows it is one of PostgreSQL's processes."""
    definition = _definition()
    lab.wait_health(HOST, ["postgres"], timeout=60)
    postmaster = lab.exec(HOST, POSTMASTER_PID, check=True).stdout.strip()
    try:
        lab.exec(HOST, "nohup runuser -u postgres -- psql -X -q -c 'SELECT pg_sleep(300)' >/dev/null 2>&1 &",
                 check=True)
        lab.exec(HOST, "nohup sleep 4242 >/dev/null 2>&1 &", check=True)
        _wait("the sleeping backend", lambda: _sql(lab, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                                        "'SELECT pg_sleep(300)%'") == "1")
        # the reads a model runs in this incident, through the policy; their output is all it knows
        printed = []
        for command in ("sudo -u postgres psql -tAc \"SELECT pid FROM pg_stat_activity WHERE query LIKE "
                        "'SELECT pg_sleep(300)%'\"", "pgrep -fx 'sleep 4242'"):
            read = classify(command, scope=scope_from_service(definition))
            assert read["verdict"] == "allow", (command, read["reasons"])
            printed.append(read_pids.pids_in(_as_root(lab, read)))
        assert [len(p) for p in printed] == [1, 1], printed
        backend, stray = str(printed[0][0]), str(printed[1][0])
        scope = dict(scope_from_service(definition), seen_pids=[int(backend), int(stray)])
        verdicts = [classify(f"kill {pid}", scope=scope) for pid in (backend, stray)]
        assert [v["verdict"] for v in verdicts] == ["allow", "allow"], [v["reasons"] for v in verdicts]
        result = _module(lab, "execute_plan", {
            "commands": [{"argv": v["argv"], "become": v["become"], "pids": v["pids"]} for v in verdicts],
            "expect_pids": {backend: {"seen": True}, stray: {"seen": True}},
            "stop_on_failure": False, "verify": _host_definition(definition), "settle": 0})
        ended, kept = result["results"]
        assert ended["rc"] == 0, ended
        assert kept["skipped"] and "not one of postgresql's processes now" in kept["reason"], kept
        _wait("the backend's end", lambda: _sql(lab, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {backend}")
              == "0")
        assert lab.exec(HOST, ["kill", "-0", stray]).ok  # another program's process is untouched
        assert lab.exec(HOST, POSTMASTER_PID, check=True).stdout.strip() == postmaster
        assert lab.health(HOST, ["postgres"])["postgres"].healthy
    finally:
        lab.exec(HOST, "pkill -f 'pg_sleep\\(300\\)'; pkill -fx 'sleep 4242'", timeout=30)


def test_the_service_account_joins_the_group_of_its_key_after_approval_and_the_server_starts(lab) -> None:
    definition = _definition()
    lab.wait_health(HOST, ["postgres"], timeout=60)
    try:
        lab.exec(HOST, f"groupadd -f {GROUP} && install -d -m 0755 /etc/ssl/lab-pg && "
                       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                       f"-subj /CN=lab-pg -keyout {KEY} -out /etc/ssl/lab-pg/server.crt 2>/dev/null && "
                       f"chown root:{GROUP} {KEY} && chmod 0640 {KEY} && "
                       "printf \"ssl = on\\nssl_cert_file = '%s'\\nssl_key_file = '%s'\\n\" "
                       f"/etc/ssl/lab-pg/server.crt {KEY} "
                       f"> {TLS_CONF} && service postgresql restart", timeout=90)
        lab.wait_health(HOST, ["postgres"], healthy=False, timeout=60)
        log = lab.exec(HOST, "tail -n 20 /var/log/postgresql/postgresql-15-main.log").stdout
        assert f'could not load private key file "{KEY}": Permission denied' in log, log
        key_before = lab.exec(HOST, f"sha256sum {KEY}; stat -c '%U:%G %a' {KEY}", check=True).stdout

        evidence = _evidence(lab, definition, "postgresql is not running")
        scope = scope_from_service(definition, evidence.get("service_pids") or (), evidence)
        assert scope["path_groups"].get(GROUP) == KEY, json.dumps(
            [scope["path_groups"], evidence.get("named_paths"), evidence.get("logs")], indent=1)

        for refused in (f"usermod -aG {GROUP} www-data", f"gpasswd -d postgres {GROUP}", "usermod -aG sudo postgres",
                        f"usermod -G {GROUP} postgres", f"adduser --system {GROUP}-svc"):
            assert classify(refused, scope=scope)["verdict"] == "reject", refused
        verdict = classify(f"usermod -aG {GROUP} postgres", scope=scope)
        assert verdict["verdict"] == "approval", verdict["reasons"]
        _as_root(lab, verdict)  # approved

        assert GROUP in lab.exec(HOST, ["id", "-nG", "postgres"], check=True).stdout.split()
        start = classify("service postgresql start", scope=scope)
        assert start["verdict"] == "allow", start["reasons"]
        _as_root(lab, start)
        lab.wait_health(HOST, ["postgres"], timeout=60)
        assert _sql(lab, "SHOW ssl") == "on"
        assert lab.exec(HOST, f"sha256sum {KEY}; stat -c '%U:%G %a' {KEY}", check=True).stdout == key_before
    finally:
        lab.exec(HOST, f"rm -f {TLS_CONF}; gpasswd -d postgres {GROUP}; rm -rf /etc/ssl/lab-pg; groupdel {GROUP}; "
                       "service postgresql restart", timeout=90)
        lab.wait_health(HOST, ["postgres"], timeout=60)
