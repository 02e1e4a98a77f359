# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The EDA Controller rulebook with the real ansible-rulebook, against a loopback stand-in
of the Automation Controller API (no AWX can run here).

The stand-in answers the calls ansible-rulebook makes for run_workflow_template and
run_job_template (config, unified job template lookup by name and organization, launch,
job polling) and records each launch, so the test asserts what reached "the controller":
which template, in which organization, limited to which host, with which token. The
rulebook names the event source by its collection name (no -S), and the source's
liveness route answers while the activation runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from process_group import stop_group

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RULEBOOK = "extensions/eda/rulebooks/remediate_on_alert_controller.yml"
ALERT_TOKEN = "eda-controller-test-token-5e1f"
CONTROLLER_TOKEN = "controller-oauth-token-not-real"
TEMPLATES = [  # as configure_controller.yml creates them
    {"id": 7, "type": "job_template", "name": "Sentinel - remediate", "org": "Default", "ask_limit_on_launch": True},
    {"id": 9, "type": "workflow_job_template", "name": "Sentinel - remediate with approval", "org": "Default",
     "ask_limit_on_launch": True},
    {"id": 11, "type": "workflow_job_template", "name": "Sentinel - remediate with approval", "org": "Other",
     "ask_limit_on_launch": True},
]


class ControllerStub:
    """The few Automation Controller API routes that ansible-rulebook uses, on 127.0.0.1."""

    def __init__(self) -> None:
        self.launches: list[dict] = []
        self.calls: list[str] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status: int, payload) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorised(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {CONTROLLER_TOKEN}":
                    return True
                self._json(401, {"detail": "Authentication credentials were not provided."})
                return False

            def do_GET(self):  # pylint: disable=invalid-name
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                with stub.lock:
                    stub.calls.append(f"GET {parts.path}")
                if not self._authorised():
                    return
                if parts.path == "/api/v2/config/":
                    return self._json(200, {"version": "24.6.1"})
                if parts.path == "/api/v2/unified_job_templates/":
                    found = [t for t in TEMPLATES if t["name"] == query.get("name")]
                    return self._json(200, {"count": len(found), "next": None, "results": [{
                        "id": t["id"], "type": t["type"], "name": t["name"],
                        "summary_fields": {"organization": {"name": t["org"]}},
                        "related": {"launch": f"/api/v2/{t['type']}s/{t['id']}/launch/"},
                        "ask_limit_on_launch": t["ask_limit_on_launch"], "ask_labels_on_launch": False,
                        "ask_inventory_on_launch": False, "ask_variables_on_launch": False} for t in found]})
                if parts.path in ("/api/v2/jobs/", "/api/v2/workflow_jobs/"):
                    ids = [int(i) for i in query.get("id__in", "").split(",") if i]
                    return self._json(200, {"count": len(ids), "results": [
                        {"id": i, "status": "successful", "artifacts": {}} for i in ids]})
                return self._json(404, {"detail": "Not found."})

            def do_POST(self):  # pylint: disable=invalid-name
                path = urlsplit(self.path).path
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with stub.lock:
                    stub.calls.append(f"POST {path}")
                if not self._authorised():
                    return
                for template in TEMPLATES:
                    if path == f"/api/v2/{template['type']}s/{template['id']}/launch/":
                        with stub.lock:
                            number = 100 + len(stub.launches)
                            stub.launches.append({"template": template, "body": body})
                        kind = "workflow_jobs" if template["type"] == "workflow_job_template" else "jobs"
                        return self._json(201, {"id": number, "url": f"/api/v2/{kind}/{number}/", "status": "pending"})
                return self._json(404, {"detail": "Not found."})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alert(host: str, service: str) -> dict:
    labels = {"alertname": f"{service}Down", "instance": f"{host}:9100", "service": service}
    return {"version": "4", "status": "firing", "receiver": "sentinel", "groupKey": "{}", "alerts": [
        {"status": "firing", "labels": labels, "annotations": {},
         "fingerprint": hashlib.sha256(f"{host}{service}".encode()).hexdigest()[:16]}]}


def _post(port: int, payload: dict) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {ALERT_TOKEN}"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


@pytest.fixture
def activation(tmp_path: Path) -> Iterator:
    """``start(variables) -> {port, output, controller}``: ansible-rulebook running the controller rulebook."""
    if not shutil.which("ansible-rulebook") or not shutil.which("java"):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("ansible-rulebook and Java 17 are needed (scripts/setup installs both)")
        pytest.skip("ansible-rulebook or Java 17 is not installed")
    controller = ControllerStub()
    procs: list[subprocess.Popen] = []

    def start(variables: dict) -> dict:
        port = _free_port()
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"web01": {}, "web02": {}}}}))
        vars_file = tmp_path / "vars.yml"
        vars_file.write_text(yaml.safe_dump({"alert_host": "127.0.0.1", "alert_port": port, **variables}))
        output = tmp_path / f"rulebook-{port}.log"
        env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "SENTINEL_ALERT_TOKEN": ALERT_TOKEN,
               "EDA_CONTROLLER_URL": controller.url, "EDA_CONTROLLER_TOKEN": CONTROLLER_TOKEN}
        handle = output.open("w")
        proc = subprocess.Popen(["ansible-rulebook", "-r", RULEBOOK, "-i", str(inventory), "--vars", str(vars_file),
                                 "--env-vars", "SENTINEL_ALERT_TOKEN"],
                                cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ansible-rulebook exited {proc.returncode}:\n{output.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the event source never answered /healthz:\n{output.read_text()[-3000:]}"
            time.sleep(0.5)
        return {"port": port, "output": output, "controller": controller}

    yield start
    for proc in procs:
        stop_group(proc)
    controller.stop()


def _wait_launches(run: dict, count: int) -> list[dict]:
    deadline = time.monotonic() + 60
    while len(run["controller"].launches) < count:
        assert time.monotonic() < deadline, run["output"].read_text()[-4000:]
        time.sleep(0.5)
    return run["controller"].launches


def test_a_firing_alert_launches_the_approval_workflow_for_its_host(activation) -> None:
    run = activation({"sentinel_launch": "workflow"})
    with urllib.request.urlopen(f"http://127.0.0.1:{run['port']}/healthz", timeout=5) as response:
        health = json.loads(response.read())
    assert health["status"] == "ok"
    assert _post(run["port"], _alert("web02", "nginx")) == 202
    launch = _wait_launches(run, 1)[0]
    assert launch["template"]["name"] == "Sentinel - remediate with approval"
    assert launch["template"]["org"] == "Default"          # not the same name in another organization
    assert launch["body"]["limit"] == "web02"
    assert launch["body"]["extra_vars"]["ansible_eda"]["event"]["sentinel"] == {
        "host": "web02", "service": "nginx", "alertname": "nginxDown", "status": "firing", "refused": ""}
    # An alert storm for the same host and service launches nothing more (throttle).
    for dummy in range(5):
        assert _post(run["port"], _alert("web02", "nginx")) == 202
    time.sleep(5)
    assert len(run["controller"].launches) == 1
    # The job was followed to its end on the controller.
    assert any(call.startswith("GET /api/v2/workflow_jobs/") for call in run["controller"].calls)
    with urllib.request.urlopen(f"http://127.0.0.1:{run['port']}/healthz", timeout=5) as response:
        assert json.loads(response.read())["alerts"] == 6


def test_job_template_mode_launches_the_remediation_template(activation) -> None:
    run = activation({"sentinel_launch": "job_template"})
    assert _post(run["port"], _alert("web01", "redis")) == 202
    launch = _wait_launches(run, 1)[0]
    assert (launch["template"]["type"], launch["template"]["name"]) == ("job_template", "Sentinel - remediate")
    assert launch["body"]["limit"] == "web01"
    time.sleep(3)
    assert len(run["controller"].launches) == 1   # the workflow rule did not fire as well


def test_a_missing_launch_mode_stops_the_activation_with_its_name(tmp_path: Path) -> None:
    if not shutil.which("ansible-rulebook") or not shutil.which("java"):
        pytest.skip("ansible-rulebook or Java 17 is not installed")
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"web01": {}}}}))
    (tmp_path / "vars.yml").write_text(yaml.safe_dump({"alert_host": "127.0.0.1", "alert_port": _free_port()}))
    controller = ControllerStub()
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "EDA_CONTROLLER_URL": controller.url,
           "EDA_CONTROLLER_TOKEN": CONTROLLER_TOKEN}
    try:
        proc = subprocess.run(["ansible-rulebook", "-r", RULEBOOK, "-i", str(tmp_path / "hosts.yml"),
                               "--vars", str(tmp_path / "vars.yml")], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=120, check=False)
    finally:
        controller.stop()
    assert proc.returncode != 0
    assert "sentinel_launch" in proc.stdout + proc.stderr
