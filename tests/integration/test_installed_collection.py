"""The collection as its users get it: the tarball of `ansible-galaxy collection build`, installed
with its declared dependencies only into a read-only collections path, used from a directory
outside the checkout with a configuration that knows nothing of the checkout.

One small lab (the session lab's three hosts) serves every step, in order: heal and escalate
with ansible-core alone (no community.general), leave a plan waiting and approve it with the
installed resume playbook, then the driver, installed into a virtualenv of its own from
driver/ with pip, against the installed collection, and an Alertmanager alert through the
installed rulebook (ansible-rulebook), whose playbook hands it to that driver. The install and
the driver's venv are the session's (conftest: installed_collection, installed_driver). What is asserted comes from outside: the lab's own health check, the
report files, the state directory, and a snapshot of every file under the install.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from installed_support import Installed, snapshot
from sentinel_lab import Lab
from process_group import stop_group

BIN = Path(sys.executable).parent
TOKEN = "installed-eda-token-5e1a"
HEAL_TIMEOUT = 300


def _outcomes(report: dict) -> dict[tuple[str, str], dict]:
    return {(o["host"], o["service"]): o for o in report.get("outcomes", [])}


@pytest.fixture(scope="module")
def installed(lab: Lab, installed_collection: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The session's installed collection, used from this module's own directory outside the checkout."""
    try:
        yield installed_collection.for_user(tmp_path_factory.mktemp("installed-user") / "user", lab)
    finally:
        for host in ("lab01", "lab02", "lab03"):
            if not all(h.healthy for h in lab.health(host).values()):
                lab.reset(host)


def test_the_tarball_holds_what_users_run_and_names_its_dependencies(installed: Installed) -> None:
    with tarfile.open(installed.tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
        # nothing shipped reads a test-only switch
        reads_test_switch = [m.name for m in tar.getmembers()
                             if m.name.endswith(".py") and b"SENTINEL_TEST_" in tar.extractfile(m).read()]
    assert not reads_test_switch
    for wanted in ("LICENSE", "meta/runtime.yml", "roles/remediate/tasks/escalate.yml", "playbooks/remediate.yml",
                   "playbooks/resume.yml", "plugins/action/heal.py", "docs/docsite/links.yml", "changelogs/changelog.yaml"):
        assert wanted in names, wanted
    for unwanted in ("tests", "lab", "bench", "molecule", "driver", "scripts", "docs/lab.md", "BENCHMARKS.md",
                     "ansible.cfg", "changelogs/fragments"):
        assert not [n for n in names if n == unwanted or n.startswith(unwanted + "/")], unwanted
    # test-only hooks never ship
    assert not [n for n in names if "_test_" in n or "sitecustomize" in n or "misread" in n]
    assert manifest["license_file"] == "LICENSE" and manifest["repository"]
    assert "community.general" in manifest["dependencies"]


def test_installed_collection_heals_and_escalates_with_ansible_core_alone(lab: Lab, installed: Installed) -> None:
    lab.inject("lab01", "nginx_stopped")
    lab.inject("lab02", "redis_killed")
    lab.inject("lab03", "nginx_binary_missing")   # only a human can fix it: escalated, no channel configured
    proc, report = installed.playbook("remediate", "-e", "remediate_backend=runbook", with_deps=False)
    outcomes = _outcomes(report)
    assert outcomes[("lab01", "nginx")]["state"] == "healed", outcomes[("lab01", "nginx")]
    assert outcomes[("lab02", "redis-server")]["state"] == "healed", outcomes[("lab02", "redis-server")]
    assert outcomes[("lab03", "nginx")]["state"] == "escalated", outcomes[("lab03", "nginx")]
    # The escalation fails lab03 (remediate_fail_on_escalation) and nothing else stopped the play.
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "community.general" not in proc.stdout + proc.stderr
    assert "escalated nginx on lab03" in proc.stdout
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    assert lab.health("lab02", ["redis"])["redis"].healthy
    assert not lab.health("lab03", ["nginx"])["nginx"].healthy
    # The run's state is in the user's XDG state directory, not in the collection.
    journal = installed.state / "sentinel-remediation" / "remediation" / "journal"
    for host in ("lab01", "lab02"):
        records = [json.loads(line) for line in (journal / f"{host}.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [r["kind"] for r in records if r["kind"] in ("intent", "result")][:2] == ["intent", "result"], records
    assert snapshot(installed.install) == installed.snapshot
    lab.reset("lab03")


def test_installed_resume_playbook_runs_an_approved_plan(lab: Lab, installed: Installed) -> None:
    lab.inject("lab01", "nginx_config_syntax")   # its runbook edits nginx's configuration: gated
    # No known-good restore ahead of the runbook: it would take the new snippet out alone.
    proc, report = installed.playbook("remediate", "-e", "remediate_backend=runbook", "-e", "remediate_hosts=lab01",
                                      "-e", json.dumps({"remediate_known_good": False}))
    waiting = _outcomes(report)[("lab01", "nginx")]
    assert waiting["state"] == "waiting_approval", (waiting, proc.stdout[-3000:])
    pending = installed.state / "sentinel-remediation" / "remediation" / "pending" / f"{waiting['approval_id']}.json"
    assert pending.is_file()
    assert not lab.health("lab01", ["nginx"])["nginx"].healthy   # nothing ran

    proc, report = installed.playbook("resume", "-e", f"remediate_approve={waiting['approval_id']}",
                                      "-e", "remediate_hosts=lab01", report="resume.json")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert _outcomes(report)[("lab01", "nginx")]["state"] == "healed", report
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    assert not pending.exists()
    assert snapshot(installed.install) == installed.snapshot


def test_state_inside_the_installed_collection_is_refused_before_the_host_is_touched(
        lab: Lab, installed: Installed) -> None:
    inside = installed.collection / ".cache" / "remediation"
    proc = subprocess.run([str(BIN / "ansible-playbook"), "sentinel.remediation.remediate", "-e", "remediate_hosts=lab01",
                           "-e", f"remediate_artifacts_dir={inside}"], cwd=installed.user, env=installed.env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode != 0
    assert f"the state directory {inside} (remediate_artifacts_dir) is inside the installed collection" in proc.stdout, \
        proc.stdout[-3000:]
    assert snapshot(installed.install) == installed.snapshot


def test_the_driver_installed_alone_runs_the_installed_collection(lab: Lab, installed: Installed,
                                                                  installed_driver: Path) -> None:
    venv = installed_driver.parent.parent
    env = installed.env()

    def driver(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(installed_driver), *args], cwd=installed.user, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    # The venv's own package, not the checkout's editable install.
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import sentinel_remediate; print(sentinel_remediate.__file__)"],
                           env=env, capture_output=True, text=True, check=False)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr

    # Found on the collections path of the user's configuration, and named explicitly.
    version = driver("--version")
    assert version.returncode == 0 and f"collection sentinel.remediation 0.1.0 at {installed.collection}" \
        in version.stdout, version.stdout + version.stderr
    named = driver("--project-dir", str(installed.install), "--version")
    assert str(installed.collection) in named.stdout, named.stdout + named.stderr

    lab.inject("lab02", "nginx_stopped")
    proc = driver("run", "-e", "remediate_backend=runbook", "--limit", "lab02", "--format", "json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert _outcomes(report)[("lab02", "nginx")]["state"] == "healed", report
    assert report["run"]["project_dir"] == str(installed.collection)
    assert lab.health("lab02", ["nginx"])["nginx"].healthy
    assert (installed.state / "sentinel-remediation" / "artifacts" / report["run"]["ident"] / "report.json").is_file()

    # A playbook that stops on its own error says why, without -v.
    failed = driver("run", "-e", "remediate_hosts=no_such_group", "--limit", "lab02")
    assert failed.returncode != 0
    assert "ansible-playbook failed" in failed.stderr and "no_such_group matches no host" in failed.stderr, \
        failed.stderr[-3000:]
    assert snapshot(installed.install) == installed.snapshot


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alert(host: str, service: str) -> dict:
    """An Alertmanager webhook body (version 4) for one firing alert."""
    labels = {"alertname": "ServiceDown", "instance": f"{host}:9100", "service": service, "severity": "critical"}
    return {"version": "4", "groupKey": '{}:{alertname="ServiceDown"}', "truncatedAlerts": 0, "status": "firing",
            "receiver": "sentinel", "groupLabels": {"alertname": "ServiceDown"}, "commonLabels": labels,
            "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
            "alerts": [{"status": "firing", "labels": labels, "annotations": {},
                        "startsAt": "2025-01-01T00:00:00.000Z", "endsAt": "0001-01-01T00:00:00Z",
                        "generatorURL": "http://127.0.0.1:9090/graph", "fingerprint": f"{host}-{service}"}]}


def test_the_installed_rulebook_heals_the_host_an_alert_names(lab: Lab, installed: Installed,
                                                              installed_driver: Path) -> None:
    """ansible-rulebook with the installed rulebook, its event source and its playbook (by FQCN), which hands
    the alert to the driver installed in its own venv, running the installed collection."""
    if not shutil.which("ansible-rulebook", path=f"{BIN}{os.pathsep}{os.environ['PATH']}") or not shutil.which("java"):
        message = "ansible-rulebook or Java 17 is missing (scripts/setup)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    eda = installed.user.parent / "eda"
    eda.mkdir()
    port, log, state = _free_port(), eda / "alerts.log", eda / "state"
    (eda / "vars.yml").write_text(yaml.safe_dump({
        "alert_port": port, "remediate_backend": "runbook", "sentinel_inventory": str(installed.user / "hosts.yml"),
        "sentinel_state_dir": str(state), "sentinel_eda_log": str(log), "sentinel_driver": str(installed_driver),
        "sentinel_fact_caching": "sentinel.remediation.jsonfile",
        "sentinel_fact_caching_connection": str(eda / "facts")}), encoding="utf-8")
    env = installed.env(SENTINEL_ALERT_TOKEN=TOKEN)
    out = (eda / "rulebook.log").open("w")
    lab.inject("lab01", "nginx_stopped")
    proc = subprocess.Popen([str(BIN / "ansible-rulebook"), "-r", "sentinel.remediation.remediate_on_alert",
                             "-i", str(installed.user / "hosts.yml"), "--vars", str(eda / "vars.yml")],
                            cwd=eda, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    output = eda / "rulebook.log"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, output.read_text()[-4000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, output.read_text()[-4000:]
                time.sleep(0.5)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", data=json.dumps(_alert("lab01", "nginx")).encode(),
                                         headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                                         method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 202
        deadline = time.monotonic() + HEAL_TIMEOUT
        while not lab.health("lab01", ["nginx"])["nginx"].healthy:
            assert time.monotonic() < deadline, output.read_text()[-4000:]
            time.sleep(1)
        # The driver's pass, reported in the state directory the rulebook's variables named.
        deadline = time.monotonic() + 60
        while not list((state / "artifacts").glob("run-*/report.json")):
            assert time.monotonic() < deadline, output.read_text()[-4000:]
            time.sleep(1)
    finally:
        stop_group(proc)
        out.close()
    (report_file,) = (state / "artifacts").glob("run-*/report.json")
    report = json.loads(report_file.read_text(encoding="utf-8"))
    assert [(o["host"], o["service"], o["state"]) for o in report["outcomes"]] == [("lab01", "nginx", "healed")], report
    assert report["run"]["project_dir"] == str(installed.collection)
    assert [line.split()[1:3] for line in log.read_text(encoding="utf-8").splitlines()] == [["lab01", "nginx"]]
    assert snapshot(installed.install) == installed.snapshot


USER_PLAY = """---
- name: Heal nginx on the lab hosts
  hosts: lab
  gather_facts: false
  tasks:
    - name: Check and heal
      ansible.builtin.include_role:
        name: sentinel.remediation.remediate
      vars:
        remediate_backend: runbook
        remediate_services:
          - name: nginx
            units: [nginx.service]
            processes: [nginx]
            config_paths: [/etc/nginx]
            checks:
              - type: service
              - type: port
                port: 80
                process: nginx
"""


def test_every_installed_plugin_is_documented_and_a_user_playbook_lints(installed: Installed) -> None:
    env = installed.env()
    for kind in ("module", "filter", "lookup", "callback", "cache"):
        listed = subprocess.run([str(BIN / "ansible-doc"), "-t", kind, "--list", "--json", "sentinel.remediation"],
                                cwd=installed.user, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert listed.returncode == 0, listed.stderr
        names = sorted(json.loads(listed.stdout))
        assert names, kind
        shown = subprocess.run([str(BIN / "ansible-doc"), "-t", kind, *names], cwd=installed.user, env=env,
                               capture_output=True, text=True, timeout=300, check=False)
        assert shown.returncode == 0 and "[WARNING]" not in shown.stderr and "ERROR" not in shown.stderr, \
            (kind, shown.stderr[-3000:])
        for name in names:
            assert f"> {kind.upper()} {name}" in shown.stdout, (kind, name)
    assert "tree-sitter" in subprocess.run([str(BIN / "ansible-doc"), "sentinel.remediation.heal"], cwd=installed.user,
                                           env=env, capture_output=True, text=True, timeout=300, check=False).stdout

    (installed.user / "site.yml").write_text(USER_PLAY, encoding="utf-8")
    lint = subprocess.run([str(BIN / "ansible-lint"), "--offline", "--profile", "production", "site.yml"],
                          cwd=installed.user, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
    assert snapshot(installed.install) == installed.snapshot
