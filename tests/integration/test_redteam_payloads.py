# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Red team: hostile Alertmanager payloads against the event source and both rulebooks.

An alert's labels are written by whoever can reach the monitoring side. Two ways they leave
the event source matter: as extra vars of a playbook run (ansible-runner hands them to
ansible-playbook as ``-e @file``, which ansible-core trusts as templates, so text that looks
like Jinja is evaluated on the controller), and as a job's ``limit`` (a host pattern, where
``all``, ``web*`` or ``a,b`` mean many hosts). The real ansible-rulebook runs the
collection's rulebooks here; the controller rulebook talks to the loopback stand-in of
test_eda_controller.py. No lab is needed: every probe is refused before a host is touched.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_eda_controller import _post, _wait_launches, activation  # noqa: F401 pylint: disable=unused-import
from process_group import stop_group

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "extensions" / "eda" / "plugins" / "event_source" / "alertmanager.py"
_spec = importlib.util.spec_from_file_location("sentinel_alertmanager_source_redteam", SOURCE)
alertmanager = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(alertmanager)

TOKEN = "redteam-alert-token-7d21"

# Host labels that are not one inventory host: a template, patterns, a list, an exclusion,
# a look-alike letter (Cyrillic "е"), a space, a line break, every host.
BAD_HOSTS = ["{{ lookup('pipe', 'id') }}", "{% if true %}web01{% endif %}", "all", "ALL", "*", "web*",
             "web0[1-2]", "~web.*", "web01,web02", "web01:&db", "!web01", "w\u0435b01", "web01 web02",
             "web01\nweb02", "localhost", "$(id)", "web01;id"]
BAD_SERVICES = ["{{ 7*7 }}", "nginx;id", "ngin\u0445", "nginx redis", "*", "$(id)", "../nginx"]


def _one(labels: dict) -> dict:
    return alertmanager.events_from_payload({"alerts": [{"status": "firing", "labels": labels}]})[0]["sentinel"]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_a_host_label_that_is_no_plain_host_name_is_refused_naming_the_label_and_handed_on_empty(host: str) -> None:
    sentinel = _one({"host": host, "service": "nginx", "alertname": "NginxDown"})
    assert sentinel["host"] == "" and sentinel["service"] == ""
    assert "the host label (host, hostname, instance)" in sentinel["refused"]


@pytest.mark.parametrize("service", BAD_SERVICES)
def test_a_service_label_that_is_no_plain_service_name_is_refused_naming_the_label(service: str) -> None:
    sentinel = _one({"instance": "web01:9100", "service": service})
    assert sentinel["host"] == "" and sentinel["service"] == ""
    assert "the service label (service)" in sentinel["refused"]


def test_plain_names_pass_and_the_alert_name_is_one_plain_word() -> None:
    sentinel = _one({"instance": "web-01.example.com:9100", "service": "postgresql@15-main.service",
                     "alertname": "Down {{ lookup('env', 'HOME') }}\nforged"})
    assert (sentinel["host"], sentinel["service"], sentinel["refused"]) == ("web-01.example.com", "postgresql@15-main", "")
    assert sentinel["alertname"] == "Down____lookup__env____HOME______forged"
    assert not set(sentinel["alertname"]) & set("{}%'\" \n")


def test_the_refusal_shows_no_template_of_the_label() -> None:
    refused = _one({"host": "{{ 7*7 }}", "service": "nginx"})["refused"]
    assert "{" not in refused and "}" not in refused


# --------------------------------------------------------------------- the CLI rulebook, for real
@pytest.fixture(scope="module")
def cli_rulebook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """ansible-rulebook running sentinel.remediation.remediate_on_alert as docs/operate.md says
    (outside the checkout, the collection by name), over an inventory of one host that watches
    nginx only: an alert the playbook refuses never reaches the driver."""
    if not shutil.which("ansible-rulebook") or not shutil.which("java"):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("ansible-rulebook and Java 17 are needed (scripts/setup installs both)")
        pytest.skip("ansible-rulebook or Java 17 is not installed")
    from test_eda_controller import _free_port

    base = tmp_path_factory.mktemp("redteam-eda")
    inventory = base / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"web01": {
        "ansible_connection": "local", "remediate_services": [{"name": "nginx"}]}}}}))
    port = _free_port()
    log = base / "runs.log"
    variables = base / "vars.yml"
    variables.write_text(yaml.safe_dump({"alert_port": port, "alert_host": "127.0.0.1", "sentinel_eda_log": str(log),
                                         "sentinel_state_dir": str(base / "state")}))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections"), "SENTINEL_ALERT_TOKEN": TOKEN}
    env.pop("ANSIBLE_CONFIG", None)
    output = base / "rulebook.log"
    handle = output.open("w")
    proc = subprocess.Popen(["ansible-rulebook", "-r", "sentinel.remediation.remediate_on_alert",
                             "-i", str(inventory), "--vars", str(variables)],
                            cwd=base, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"ansible-rulebook exited {proc.returncode}:\n{output.read_text()[-3000:]}")
            try:
                import urllib.request
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, output.read_text()[-3000:]
                time.sleep(0.5)
        yield {"port": port, "output": output, "log": log, "base": base}
    finally:
        stop_group(proc)
        handle.close()


def _send(port: int, labels: dict) -> None:
    import urllib.request
    body = json.dumps({"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": labels}]})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 202


def _wait_text(run: dict, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in run["output"].read_text():
        assert time.monotonic() < deadline, f"{text!r} never appeared:\n{run['output'].read_text()[-4000:]}"
        time.sleep(1)


def test_no_template_in_an_alerts_labels_is_evaluated_on_the_controller(cli_rulebook: dict) -> None:
    # Each label carries a template that would leave a file behind if anything evaluated it:
    # the alert name (handed to the playbook), and a host and a service label.
    marks = {name: cli_rulebook["base"] / f"evaluated-{name}" for name in ("alertname", "host", "service")}
    touch = {name: "{{ lookup('pipe', 'touch " + str(path) + "') }}" for name, path in marks.items()}
    _send(cli_rulebook["port"], {"instance": "web01:9100", "service": "postfix", "alertname": touch["alertname"]})
    _send(cli_rulebook["port"], {"host": touch["host"], "service": "nginx", "alertname": "HostProbe"})
    _send(cli_rulebook["port"], {"host": "web01", "service": touch["service"], "alertname": "ServiceProbe"})
    # The first reaches the playbook, which refuses postfix (web01 watches nginx only); the
    # other two are refused by the source, naming the label.
    _wait_text(cli_rulebook, "refused: the alert names service 'postfix'")
    _wait_text(cli_rulebook, "refused alert HostProbe: the host label (host, hostname, instance)")
    _wait_text(cli_rulebook, "refused alert ServiceProbe: the service label (service)")
    assert [name for name, path in marks.items() if path.exists()] == []
    (line,) = [line for line in cli_rulebook["log"].read_text().splitlines() if " web01 postfix " in line]
    assert "{" not in line and line.endswith(" refused"), line


# --------------------------------------------------------------- the controller rulebook, for real
def test_a_host_pattern_in_an_alert_never_becomes_a_jobs_limit(activation) -> None:  # noqa: F811
    run = activation({"sentinel_launch": "job_template"})
    for host in ("all", "web*", "web01,web02", "!web01", "web0[1-2]", "~web.*", "{{ 'web01' }}"):
        assert _post(run["port"], {"version": "4", "status": "firing", "alerts": [
            {"status": "firing", "labels": {"host": host, "service": "nginx", "alertname": "Probe"}}]}) == 202
    # A good alert after them: once it has launched, every earlier one has been decided.
    assert _post(run["port"], {"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"host": "web02", "service": "nginx", "alertname": "NginxDown"}}]}) == 202
    launches = _wait_launches(run, 1)
    time.sleep(3)
    assert [launch["body"]["limit"] for launch in run["controller"].launches] == ["web02"], launches


# ------------------------------------------------------------ duplicated and very large payloads
def _serve(requests: list[bytes], max_body: int | None = None) -> tuple[list[int], list[dict]]:
    """The source on a free loopback port: each body POSTed, the answers and the queued events."""
    import asyncio
    import urllib.error
    import urllib.request

    from test_eda_controller import _free_port

    port = _free_port()

    def post(body: bytes) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (ConnectionError, urllib.error.URLError):
            return -1   # the server may close on a body it will not read

    async def scenario():
        queue: asyncio.Queue = asyncio.Queue()
        args = {"port": port, **({"max_body": max_body} if max_body else {})}
        task = asyncio.create_task(alertmanager.main(queue, args))
        loop = asyncio.get_running_loop()
        import socket
        for dummy in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        codes = [await loop.run_in_executor(None, post, body) for body in requests]
        task.cancel()
        return codes, [queue.get_nowait() for dummy in range(queue.qsize())]

    return asyncio.run(scenario())


def test_thousands_of_copies_of_one_alert_make_one_event() -> None:
    alert = {"status": "firing", "labels": {"instance": "web01:9100", "service": "nginx", "alertname": "NginxDown"}}
    other = {"status": "firing", "labels": {"instance": "web02:9100", "service": "nginx", "alertname": "NginxDown"}}
    body = json.dumps({"version": "4", "status": "firing", "alerts": [alert] * 5000 + [other]}).encode()
    assert len(body) < 1024 * 1024   # under the size limit: the limit alone does not stop it
    codes, events = _serve([body])
    assert codes == [202]
    assert [(e["sentinel"]["host"], e["duplicates"]) for e in events] == [("web01", 4999), ("web02", 0)]


def test_a_payload_over_the_size_limit_queues_nothing() -> None:
    alert = {"status": "firing", "labels": {"instance": "web01:9100", "service": "nginx",
                                            "alertname": "x" * 1000}}
    body = json.dumps({"alerts": [alert] * 2000}).encode()   # about 2 MiB
    codes, events = _serve([body], max_body=1024 * 1024)
    assert codes[0] in (413, -1) and events == []


def test_a_host_that_shares_its_name_with_a_group_is_refused_before_any_run(tmp_path: Path) -> None:
    """`--limit web` reaches the whole group `web` even when a host is named `web` too: the alert
    playbook refuses such a host, naming why, and starts no remediation."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"web": {"hosts": {
        "web": {"ansible_connection": "local"}, "web2": {"ansible_connection": "local"}}}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               SENTINEL_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.run([shutil.which("ansible-playbook") or "ansible-playbook", "-i", str(inventory),
                           str(REPO / "playbooks" / "remediate_alert.yml"), "-e", "sentinel_alert_host=web",
                           "-e", "sentinel_alert_service=nginx", "-e", "sentinel_alert_name=NginxDown"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, said[-3000:]
    assert "under a name that is not also a group's" in said, said[-3000:]
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("report.json"))
