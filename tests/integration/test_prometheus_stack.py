"""The operator kit with the real Prometheus stack: Debian's prometheus, prometheus-alertmanager
and prometheus-node-exporter, on 127.0.0.1 only (random free ports, data under tmp).

A lab service breaks for real; a probe of ours turns the lab's own health check into a
node_exporter textfile (`sentinel_lab_service_up{host, service}`); a real alert rule fires on
it; Alertmanager posts to the collection's rulebook (sentinel.remediation.remediate_on_alert,
started outside the checkout with no ansible.cfg and no token); the driver heals the host,
which the lab's health check confirms; and `increase()` over the collection's counters,
queried from Prometheus' HTTP API, shows that heal. The driver's textfile (producer `driver`)
sits in the same directory as a second producer's (`playbook`) and as the probe's: the
collector reads all three without a scrape error. The shipped rules file is loaded by this
Prometheus, and every query of the shipped dashboard is evaluated by it.

Everything of ours comes installed, as an operator has it: the rulebook, its event source, its
playbook, the rules file and the dashboard from the session's installed tarball (read-only,
conftest `installed_collection`), the driver from its own virtualenv (`installed_driver`).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from installed_support import Installed, snapshot
from sentinel_lab import Lab

from ansible_collections.sentinel.remediation.plugins.plugin_utils import report

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HOST, SERVICE = "lab01", "nginx"
HEAL_TIMEOUT = 480   # generous: the driver pass runs ansible on a shared, loaded machine
TOOLS = {"prometheus": "prometheus", "alertmanager": "prometheus-alertmanager",
         "node_exporter": "prometheus-node-exporter", "promtool": "promtool"}


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the Prometheus stack test must run)", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _query(prometheus: str, expr: str) -> list[dict]:
    data = _get(f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert data["status"] == "success", data
    return data["data"]["result"]


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class HealthProbe(threading.Thread):
    """A tiny exporter: the lab's own health check of one host and service, every second,
    as `sentinel_lab_service_up` in node_exporter's textfile directory."""

    def __init__(self, lab: Lab, directory: Path) -> None:
        super().__init__(daemon=True)
        self.lab, self.path, self.stop = lab, directory / "lab_health.prom", threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                up = 1 if self.lab.health(HOST, [SERVICE])[SERVICE].healthy else 0
            except Exception:   # noqa: BLE001 - a probe that cannot tell says nothing this round
                up = None
            if up is not None:
                _write_atomically(self.path, "# HELP sentinel_lab_service_up 1 when the lab's health check passes.\n"
                                             "# TYPE sentinel_lab_service_up gauge\n"
                                             f'sentinel_lab_service_up{{host="{HOST}",service="{SERVICE}"}} {up}\n')
            self.stop.wait(1)


class Daemons:
    """Processes started by this test, each in its own session, stopped at the end."""

    def __init__(self, base: Path) -> None:
        self.base, self.procs = base, {}

    def start(self, name: str, argv: list[str], env: dict | None = None, cwd: Path | None = None) -> None:
        log = (self.base / f"{name}.log").open("w")
        self.procs[name] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                             start_new_session=True), log)

    def log(self, name: str) -> str:
        return (self.base / f"{name}.log").read_text(errors="replace")[-4000:]

    def wait_listening(self, name: str, port: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        proc = self.procs[name][0]
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited {proc.returncode}:\n{self.log(name)}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{name} never listened on 127.0.0.1:{port}:\n{self.log(name)}")
                time.sleep(0.3)

    def stop_all(self) -> None:
        for proc, log in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, log in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


@pytest.fixture(scope="module")
def stack(lab: Lab, installed_collection: Installed, installed_driver: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    for tool in TOOLS.values():
        if not shutil.which(tool):
            _unavailable(f"{tool} is not installed (Debian packages prometheus, prometheus-alertmanager, "
                         "prometheus-node-exporter; scripts/setup installs them)")
    env = installed_collection.env()   # PATH: this venv's ansible-rulebook first
    if not shutil.which("ansible-rulebook", path=env["PATH"]) or not shutil.which("java"):
        _unavailable("ansible-rulebook or Java 17 is missing (scripts/setup)")
    base = tmp_path_factory.mktemp("prometheus-stack")
    textfiles = base / "textfile"
    textfiles.mkdir()
    ports = {name: _free_port() for name in ("prometheus", "alertmanager", "node_exporter", "rulebook")}
    daemons = Daemons(base)
    probe = HealthProbe(lab, textfiles)

    kit = installed_collection.collection / "extensions" / "prometheus"
    # The installed rulebook, as docs/operate.md starts it: outside the checkout, no ansible.cfg, no token.
    inventory = lab.write_inventory(base / "hosts.yml", services=True)
    state, facts, eda_log = base / "state", base / "facts", base / "eda.log"
    (base / "vars.yml").write_text(yaml.safe_dump({
        "alert_port": ports["rulebook"], "remediate_backend": "runbook", "sentinel_inventory": str(inventory),
        "sentinel_state_dir": str(state), "sentinel_fact_caching_connection": str(facts),
        "sentinel_eda_log": str(eda_log), "sentinel_metrics_textfile": str(textfiles),
        "sentinel_driver": str(installed_driver)}))

    # Our alert rule on the probe's metric: its host and service labels name what to heal.
    (base / "lab.rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "lab", "rules": [{
        "alert": "LabServiceDown", "expr": "sentinel_lab_service_up == 0",
        "labels": {"severity": "critical"},
        "annotations": {"summary": "{{ $labels.service }} is down on {{ $labels.host }}"}}]}]}))
    (base / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(base / "lab.rules.yml"), str(kit / "sentinel_remediation.rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{ports['alertmanager']}"]}]}]},
        "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{ports['node_exporter']}"]}]}],
    }))
    (base / "alertmanager.yml").write_text(yaml.safe_dump({
        "route": {"receiver": "sentinel", "group_by": ["alertname", "host", "service"], "group_wait": "1s",
                  "group_interval": "2s", "repeat_interval": "5m",
                  # The collection's own alerts go to people (here: nobody), never to the healer.
                  "routes": [{"matchers": ['component="sentinel-remediation"'], "receiver": "people"}]},
        "receivers": [{"name": "sentinel", "webhook_configs": [
            {"url": f"http://127.0.0.1:{ports['rulebook']}/alerts", "send_resolved": True}]},
            {"name": "people"}],
    }))
    try:
        probe.start()
        daemons.start("rulebook", ["ansible-rulebook", "-r", "sentinel.remediation.remediate_on_alert",
                                   "-i", str(inventory), "--vars", str(base / "vars.yml")], env=env, cwd=base)
        daemons.start("node_exporter", [TOOLS["node_exporter"], f"--web.listen-address=127.0.0.1:{ports['node_exporter']}",
                                        "--collector.disable-defaults", "--collector.textfile",
                                        f"--collector.textfile.directory={textfiles}"])
        daemons.start("alertmanager", [TOOLS["alertmanager"], f"--config.file={base / 'alertmanager.yml'}",
                                       f"--storage.path={base / 'alertmanager-data'}",
                                       f"--web.listen-address=127.0.0.1:{ports['alertmanager']}",
                                       "--cluster.listen-address="])   # no gossip port on any address
        daemons.start("prometheus", [TOOLS["prometheus"], f"--config.file={base / 'prometheus.yml'}",
                                     f"--storage.tsdb.path={base / 'prometheus-data'}",
                                     f"--web.listen-address=127.0.0.1:{ports['prometheus']}"])
        for name in ("node_exporter", "alertmanager", "prometheus", "rulebook"):
            daemons.wait_listening(name, ports[name], timeout=120)
        yield {"prometheus": f"http://127.0.0.1:{ports['prometheus']}", "textfiles": textfiles, "state": state,
               "eda_log": eda_log, "daemons": daemons, "ports": ports, "kit": kit, "installed": installed_collection}
    finally:
        probe.stop.set()
        daemons.stop_all()
        if not lab.health(HOST, [SERVICE])[SERVICE].healthy:
            lab.reset(HOST)


def _listening_addresses(pids: set[int]) -> set[str]:
    """Local addresses of the TCP sockets our daemons listen on (from /proc, no ss needed)."""
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.glob("*") if fd_dir.is_dir() else []:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:   # LISTEN
                addresses.add(fields[1].split(":")[0])
    return addresses


def test_a_real_alert_heals_the_host_and_increase_shows_the_heal(lab: Lab, stack: dict) -> None:
    prometheus = stack["prometheus"]
    healed = f'sentinel_remediation_outcomes_total{{producer="driver",host="{HOST}",service="{SERVICE}",state="healed"}}'
    assert lab.health(HOST, [SERVICE])[SERVICE].healthy
    # A second producer in the same directory: its own file, its own series.
    other = report.finish_report({"outcomes": [report.normalise_outcome(HOST, {"service": SERVICE, "state": "healthy"})]})
    report.write_metrics_textfile(other, str(stack["textfiles"]), "playbook")

    lab.inject(HOST, "nginx_stopped")
    assert not lab.health(HOST, [SERVICE])[SERVICE].healthy
    # Prometheus fires the rule, Alertmanager posts, the rulebook runs the driver, the host heals.
    broken = time.monotonic()
    deadline = broken + HEAL_TIMEOUT
    while not lab.health(HOST, [SERVICE])[SERVICE].healthy:
        if time.monotonic() > deadline:
            pytest.fail(f"{HOST} {SERVICE} not healed within {HEAL_TIMEOUT} s\nrulebook:\n"
                        f"{stack['daemons'].log('rulebook')}\nalertmanager:\n{stack['daemons'].log('alertmanager')}")
        time.sleep(1)
    print(f"fault injected to healthy again, through Prometheus, Alertmanager and the rulebook: "
          f"{time.monotonic() - broken:.1f} s")
    # One remediation started (a re-sent alert would be logged `dropped`, inside the throttle window).
    lines = [line.split() for line in stack["eda_log"].read_text().splitlines()]
    started = [f[1:4] for f in lines if f[-1] not in ("dropped", "refused")]
    assert started == [[HOST, SERVICE, "LabServiceDown"]], lines

    # The counter existed at 0 before the heal (created when the pass started), so increase() sees it.
    deadline = time.monotonic() + 60
    while True:
        result = _query(prometheus, f"increase({healed}[10m])")
        if result and float(result[0]["value"][1]) >= 1:
            break
        assert time.monotonic() < deadline, (result, _query(prometheus, healed), stack["daemons"].log("rulebook"))
        time.sleep(1)
    history = _get(f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": f"{healed}[10m]"}))
    values = [float(v) for dummy, v in history["data"]["result"][0]["values"]]
    assert values[0] == 0 and values[-1] == 1, values

    # The report the driver stored says the same.
    reports = [json.loads(p.read_text()) for p in sorted((stack["state"] / "artifacts").glob("run-*/report.json"))]
    assert [(o["host"], o["service"], o["state"]) for r in reports for o in r["outcomes"]] == [(HOST, SERVICE, "healed")]
    installed = stack["installed"]
    assert [r["run"]["project_dir"] for r in reports] == [str(installed.collection)]
    assert snapshot(installed.install) == installed.snapshot

    # Both producers' series, the probe's, and no textfile scrape error.
    assert float(_query(prometheus, "node_textfile_scrape_error")[0]["value"][1]) == 0
    producers = {r["metric"]["producer"] for r in _query(prometheus, f'sentinel_remediation_outcomes_total{{host="{HOST}"}}')}
    assert producers == {"driver", "playbook"}
    assert sorted(p.name for p in stack["textfiles"].glob("*.prom")) == [
        "lab_health.prom", "sentinel_remediation_driver.prom", "sentinel_remediation_playbook.prom"]


def test_the_shipped_rules_load_and_every_dashboard_query_evaluates(stack: dict) -> None:
    prometheus = stack["prometheus"]
    groups = {g["name"]: g for g in _get(f"{prometheus}/api/v1/rules")["data"]["groups"]}
    shipped = groups["sentinel-remediation"]["rules"]
    assert {r["name"] for r in shipped} >= {"SentinelRemediationRunsFailing", "SentinelRemediationMetricsStale",
                                            "SentinelRemediationEscalated"}
    deadline = time.monotonic() + 30
    while any(r.get("health") != "ok" for r in shipped):   # evaluated at least once, without error
        assert time.monotonic() < deadline, shipped
        time.sleep(1)
        shipped = {g["name"]: g for g in _get(f"{prometheus}/api/v1/rules")["data"]["groups"]}[
            "sentinel-remediation"]["rules"]
    board = json.loads((stack["kit"] / "sentinel_remediation.dashboard.json").read_text())
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = (target["expr"].replace("$__rate_interval", "1m").replace("$__range", "10m")
                    .replace('host=~"$host"', 'host=~".*"'))
            _query(prometheus, expr)   # a PromQL error fails here with Prometheus' own message


def test_every_daemon_listens_on_loopback_only(stack: dict) -> None:
    pids = {proc.pid for proc, dummy in stack["daemons"].procs.values()}
    for proc, dummy in stack["daemons"].procs.values():
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        if children.is_file():
            pids |= {int(p) for p in children.read_text().split()}
    addresses = _listening_addresses(pids)
    assert addresses, "no listening socket found"
    # /proc/net/tcp spells 127.0.0.1 0100007F; tcp6 ::1 and ::ffff:127.0.0.1 (Go listens on IPv4 that way).
    assert addresses <= {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}, addresses
