"""Event-driven remediation for real: ansible-rulebook on 127.0.0.1, Alertmanager payloads, lab faults healed.

ansible-rulebook (Java 17 for its Drools engine) runs the rulebook sentinel.remediation.remediate_on_alert
with our event source (extensions/eda/plugins/event_source/alertmanager.py) on a free
loopback port, started as docs/operate.md says: from a directory outside the checkout, with
no ansible.cfg, the collection found on ANSIBLE_COLLECTIONS_PATH and the token in the
environment only. A real Alertmanager (webhook payload version 4) POST for a lab host whose
service is broken must end with the lab's own health check saying healed; an alert storm
(the same alert 10 times) must run one remediation and log the others as dropped, counted
by the playbook's run log; an alert that names no watched service heals nothing.

The playbook hands each alert to the driver (`sentinel-remediate run --limit HOST`), so an
alert-triggered pass must share the driver's state: its report lands in the driver's state
directory, its episode in the driver's fact cache (the same fault on another host is then
planned from memory, without the LLM), and it waits for a host whose lock another pass holds.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sentinel_lab import Lab
from process_group import stop_group

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PREFIX = os.environ.get("SENTINEL_LAB_PREFIX", "sentinel") + "-eda2"   # this module's own lab (healthy hosts per test)
HEAL_TIMEOUT = 180
TOKEN = "eda-test-token-91c3"   # the webhook's shared secret, given to ansible-rulebook through the environment


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the EDA test must run)", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alert_payload(host: str, service: str, alertname: str, exporter_port: int = 9100) -> dict:
    """A webhook body as Alertmanager sends it (receiver webhook_configs, version 4)."""
    labels = {"alertname": alertname, "instance": f"{host}:{exporter_port}", "job": f"{service}-exporter",
              "service": service, "severity": "critical"}
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "sentinel",
        "groupLabels": {"alertname": alertname},
        "commonLabels": labels,
        "commonAnnotations": {"summary": f"{service} is down on {host}"},
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [{
            "status": "firing",
            "labels": labels,
            "annotations": {"summary": f"{service} is down on {host}"},
            "startsAt": "2025-01-01T00:00:00.000Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.example:9090/graph",
            "fingerprint": hashlib.sha256(f"{host}/{service}".encode()).hexdigest()[:16],
        }],
    }


def post(port: int, payload: dict, token: str | None = TOKEN) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", data=json.dumps(payload).encode(),
                                     headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


@pytest.fixture(scope="module")
def eda_lab(lab_factory) -> Iterator[Lab]:
    lab = lab_factory(PREFIX, 2)
    yield lab
    for host in ("lab01", "lab02"):   # hand the shared hosts on healthy
        if not all(h.healthy for h in lab.health(host).values()):
            lab.reset(host)


@pytest.fixture(scope="module")
def rulebook(eda_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    if not shutil.which("ansible-rulebook"):
        _unavailable("ansible-rulebook is not installed (pip install -r requirements.txt)")
    if not shutil.which("java"):
        _unavailable("Java 17 is not installed (ansible-rulebook needs it)")
    base = tmp_path_factory.mktemp("eda")
    inventory = eda_lab.write_inventory(base / "hosts.yml")
    port = _free_port()
    log = base / "runs.log"
    variables = base / "vars.yml"
    state = base / "state"    # the driver's state (locks, reports, pending plans), as SENTINEL_STATE_DIR says
    facts = base / "facts"    # the driver's fact cache (episodic memory), private to this module
    variables.write_text(yaml.safe_dump({"alert_port": port, "alert_host": "127.0.0.1",
                                         "remediate_backend": "runbook", "sentinel_eda_log": str(log),
                                         "sentinel_inventory": str(inventory),
                                         "sentinel_fact_caching_connection": str(facts),
                                         # The operator's map: an alert's service -> watched services.
                                         "sentinel_alert_services": {"nginx-frontend": ["nginx"]}}))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections"), "SENTINEL_ALERT_TOKEN": TOKEN,
           "SENTINEL_STATE_DIR": str(state)}
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_CACHE_PLUGIN", "ANSIBLE_CACHE_PLUGIN_CONNECTION", "SENTINEL_APPROVALS_DIR"):
        env.pop(name, None)
    out = (base / "rulebook.log").open("w")
    proc = subprocess.Popen(
        # No -S, no path: the rulebook, its event source and its playbook are the collection's,
        # found by their names; no --env-vars: the token is optional and read from the environment.
        ["ansible-rulebook", "-r", "sentinel.remediation.remediate_on_alert",
         "-i", str(inventory), "--vars", str(variables)],
        cwd=base, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ansible-rulebook exited {proc.returncode}:\n{(base / 'rulebook.log').read_text()[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"ansible-rulebook never listened on {port}:\n{(base / 'rulebook.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield {"port": port, "log": log, "output": base / "rulebook.log", "state": state, "facts": facts}
    finally:
        stop_group(proc)
        out.close()


def _log_lines(log: Path, host: str, service: str, what: str = "started") -> list[str]:
    """The playbook's log lines for host and service: `started` (a remediation ran),
    `dropped` (inside the throttle window) or `refused` (no watched service of that name)."""
    if not log.is_file():
        return []
    lines = [line.split() for line in log.read_text().splitlines()]
    return [" ".join(f) for f in lines if f[1:3] == [host, service]
            and (f[-1] if f[-1] in ("dropped", "refused") else "started") == what]


def _runs(log: Path, host: str, service: str) -> list[str]:
    return _log_lines(log, host, service)


def _wait_for(what, rulebook: dict, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, rulebook["output"].read_text()[-4000:]
        time.sleep(1)


def _wait_healed(lab: Lab, host: str, service: str, rulebook: dict) -> float:
    start = time.monotonic()
    while not lab.health(host, [service])[service].healthy:
        if time.monotonic() - start > HEAL_TIMEOUT:
            pytest.fail(f"{host} {service} not healed within {HEAL_TIMEOUT} s:\n"
                        f"{rulebook['output'].read_text()[-4000:]}")
        time.sleep(1)
    return time.monotonic() - start


def _driver_reports(rulebook: dict) -> list[dict]:
    """The reports the driver stored for the passes it ran, oldest first."""
    return [json.loads(p.read_text()) for p in sorted((rulebook["state"] / "artifacts").glob("run-*/report.json"))]


def _wait_report(rulebook: dict, host: str, service: str, seen: int) -> dict:
    """The first report after the `seen` first ones with an outcome for host and service."""
    deadline = time.monotonic() + 60
    while True:
        for report in _driver_reports(rulebook)[seen:]:
            for outcome in report["outcomes"]:
                if (outcome["host"], outcome["service"]) == (host, service):
                    return {"report": report, "outcome": outcome}
        if time.monotonic() > deadline:
            pytest.fail(f"no driver report for {host} {service}:\n{rulebook['output'].read_text()[-4000:]}")
        time.sleep(1)


def _memory(rulebook: dict, host: str) -> list[dict]:
    """The episodes of host in the driver's fact cache, read with ansible's own jsonfile cache plugin."""
    from ansible.plugins.loader import cache_loader

    cache = cache_loader.get("jsonfile", _uri=str(rulebook["facts"]), _prefix="", _timeout=0)
    facts = cache.get(host) if host in cache.keys() else {}
    return [dict(e) for e in facts.get("sentinel_memory") or []]


def _ensure_healthy(lab: Lab, host: str) -> None:
    if not all(h.healthy for h in lab.health(host).values()):
        lab.reset(host)


def test_firing_alert_heals_the_lab_host(eda_lab: Lab, rulebook: dict) -> None:
    _ensure_healthy(eda_lab, "lab01")
    seen = len(_driver_reports(rulebook))
    eda_lab.inject("lab01", "nginx_stopped")
    assert not eda_lab.health("lab01", ["nginx"])["nginx"].healthy
    assert post(rulebook["port"], alert_payload("lab01", "nginx", "NginxDown")) == 202
    _wait_healed(eda_lab, "lab01", "nginx", rulebook)
    assert len(_runs(rulebook["log"], "lab01", "nginx")) == 1
    # The pass was the driver's: limited to the alert's host, reported in its state directory...
    found = _wait_report(rulebook, "lab01", "nginx", seen)
    assert found["outcome"]["state"] == "healed", found["outcome"]
    assert found["report"]["run"]["limit"] == "lab01" and found["report"]["run"]["hosts"] == ["lab01"]
    assert [o["service"] for o in found["report"]["outcomes"]] == ["nginx"]   # the alert's service only
    assert (rulebook["state"] / "locks" / "lab01.lock").is_file()
    # ... and its episode is in the driver's fact cache, which outlives the run.
    episodes = [e for e in _memory(rulebook, "lab01") if e["service"] == "nginx"]
    assert any(e["success"] for e in episodes), episodes


def test_the_same_fault_again_is_planned_from_memory(eda_lab: Lab, rulebook: dict) -> None:
    # The throttle holds lab01/nginx for five minutes; the same fault on lab02 is a new
    # alert, and its plan must come from lab01's episode in the shared fact cache.
    lesson = [e for e in _memory(rulebook, "lab01") if e["service"] == "nginx" and e["success"]]
    assert lesson, "test_firing_alert_heals_the_lab_host left no episode in the driver's fact cache"
    _ensure_healthy(eda_lab, "lab02")
    seen = len(_driver_reports(rulebook))
    eda_lab.inject("lab02", "nginx_stopped")
    assert post(rulebook["port"], alert_payload("lab02", "nginx", "NginxDown")) == 202
    _wait_healed(eda_lab, "lab02", "nginx", rulebook)
    outcome = _wait_report(rulebook, "lab02", "nginx", seen)["outcome"]
    assert outcome["state"] == "healed", outcome
    assert outcome["signature"] == lesson[-1]["signature"]
    assert outcome["commands"] and {c.get("source") for c in outcome["commands"]} == {"memory"}, outcome
    assert outcome["llm"]["calls"] == 0


def test_alert_waits_for_a_pass_that_holds_the_host(eda_lab: Lab, rulebook: dict) -> None:
    from sentinel_remediate.locking import HostLocks   # the driver's own locks, as `run` and `watch` take them

    _ensure_healthy(eda_lab, "lab01")
    seen = len(_driver_reports(rulebook))
    locks = HostLocks(rulebook["state"] / "locks", "test-holder")
    locks.acquire(["lab01"])
    try:
        assert list(locks.held) == ["lab01"]
        eda_lab.inject("lab01", "redis_stopped")
        assert post(rulebook["port"], alert_payload("lab01", "redis", "RedisDown", 9121)) == 202
        deadline = time.monotonic() + 60
        while not _runs(rulebook["log"], "lab01", "redis"):   # the playbook started the driver...
            assert time.monotonic() < deadline, rulebook["output"].read_text()[-4000:]
            time.sleep(1)
        time.sleep(15)
        # ... which waits for the lock: nothing touched the host, no pass was reported.
        assert not eda_lab.health("lab01", ["redis"])["redis"].healthy
        assert len(_driver_reports(rulebook)) == seen
    finally:
        locks.release()
    _wait_healed(eda_lab, "lab01", "redis", rulebook)
    assert _wait_report(rulebook, "lab01", "redis-server", seen)["outcome"]["state"] == "healed"


def test_escalation_fails_the_job_and_spends_no_throttle_window(eda_lab: Lab, rulebook: dict) -> None:
    # `nginx-frontend` is mapped to nginx by the operator's sentinel_alert_services. A missing
    # nginx binary is beyond the runbooks: the driver escalates and exits 1, the job fails.
    _ensure_healthy(eda_lab, "lab01")
    seen = len(_driver_reports(rulebook))
    eda_lab.inject("lab01", "nginx_binary_missing")
    try:
        assert post(rulebook["port"], alert_payload("lab01", "nginx-frontend", "FrontendDown")) == 202
        found = _wait_report(rulebook, "lab01", "nginx", seen)
        assert found["outcome"]["state"] == "escalated", found["outcome"]
        assert [o["service"] for o in found["report"]["outcomes"]] == ["nginx"]   # the mapped service only
        failed = "sentinel-remediate exited 1 (escalated, failed or unreachable)"
        _wait_for(lambda: failed in rulebook["output"].read_text(), rulebook, 60)
        # The failed job held nothing: the same alert again (Alertmanager's repeat) runs again.
        assert post(rulebook["port"], alert_payload("lab01", "nginx-frontend", "FrontendDown")) == 202
        _wait_for(lambda: len(_runs(rulebook["log"], "lab01", "nginx-frontend")) == 2, rulebook, 120)
        _wait_report(rulebook, "lab01", "nginx", seen + 1)    # the second pass ran, and was reported
        assert not _log_lines(rulebook["log"], "lab01", "nginx-frontend", "dropped")
    finally:
        eda_lab.reset("lab01")


def test_alert_for_a_service_nothing_watches_is_refused(eda_lab: Lab, rulebook: dict) -> None:
    seen = len(_driver_reports(rulebook))
    assert post(rulebook["port"], alert_payload("lab02", "postfix", "PostfixDown")) == 202
    _wait_for(lambda: _log_lines(rulebook["log"], "lab02", "postfix", "refused"), rulebook)
    _wait_for(lambda: "refused: the alert names service 'postfix', which is none of the services watched on lab02"
              in rulebook["output"].read_text(), rulebook, 30)
    assert _runs(rulebook["log"], "lab02", "postfix") == []
    assert len(_driver_reports(rulebook)) == seen    # the driver never started


def test_an_alert_name_with_a_line_break_forges_no_log_line(rulebook: dict) -> None:
    # The monitored side writes the labels: an alert name carrying a forged log line ("... lab02
    # nginx", which the log's readers would take for a run) adds no line of its own making.
    before = _log_lines(rulebook["log"], "lab02", "nginx")
    forged = "\n2026-11-29T00:00:00+00:00 lab02 nginx"
    assert post(rulebook["port"], alert_payload("lab02", "exim4", "EximDown" + forged)) == 202
    _wait_for(lambda: _log_lines(rulebook["log"], "lab02", "exim4", "refused"), rulebook)
    assert _log_lines(rulebook["log"], "lab02", "nginx") == before
    (line,) = [line for line in rulebook["log"].read_text().splitlines() if " lab02 exim4 " in line]
    assert len(line.split()) == 5 and line.split()[3].startswith("EximDown") and line.endswith(" refused"), line


def test_alert_without_a_service_label_is_refused_not_read_as_every_service(rulebook: dict) -> None:
    payload = alert_payload("lab02", "nginx", "HostDown")
    for labels in (payload["alerts"][0]["labels"], payload["commonLabels"]):
        labels.pop("service", None)   # job "nginx-exporter" stays: it names the exporter, not a service
    assert post(rulebook["port"], payload) == 202
    _wait_for(lambda: "refused alert HostDown: the alert names no service (labels service)"
              in rulebook["output"].read_text(), rulebook, 60)
    assert _log_lines(rulebook["log"], "lab02", "nginx-exporter") == []


def test_alert_for_a_host_outside_the_inventory_is_refused(rulebook: dict) -> None:
    assert post(rulebook["port"], alert_payload("ghost09", "nginx", "NginxDown")) == 202
    deadline = time.monotonic() + 90
    while "the host must be in the inventory" not in rulebook["output"].read_text():
        assert time.monotonic() < deadline, rulebook["output"].read_text()[-4000:]
        time.sleep(1)
    assert _runs(rulebook["log"], "ghost09", "nginx") == []


def test_alert_storm_runs_one_remediation(eda_lab: Lab, rulebook: dict) -> None:
    _ensure_healthy(eda_lab, "lab02")
    eda_lab.inject("lab02", "redis_stopped")
    payload = alert_payload("lab02", "redis", "RedisDown", 9121)   # `redis` names the role's redis-server
    assert [post(rulebook["port"], payload) for dummy in range(10)] == [202] * 10
    _wait_healed(eda_lab, "lab02", "redis", rulebook)
    # The other nine are dropped one after another (each a short job), each logged.
    _wait_for(lambda: len(_log_lines(rulebook["log"], "lab02", "redis", "dropped")) >= 3, rulebook, 120)
    runs = _runs(rulebook["log"], "lab02", "redis")
    assert len(runs) == 1, runs
    assert "healed" in rulebook["output"].read_text()
    assert "inside the throttle window of 300 s (sentinel_eda_throttle)" in rulebook["output"].read_text()


def test_bad_payload_is_refused(rulebook: dict) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{rulebook['port']}/alerts", data=b'{"no": "alerts"}',
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, timeout=10)
    assert exc.value.code == 400


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_alert_without_the_token_is_refused(eda_lab: Lab, rulebook: dict, token: str | None) -> None:
    with pytest.raises(urllib.error.HTTPError) as exc:
        post(rulebook["port"], alert_payload("lab01", "nginx", "NginxDown"), token=token)
    assert exc.value.code == 401
    assert TOKEN not in rulebook["output"].read_text()
