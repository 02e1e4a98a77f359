"""Escalation notifications, end to end: the role's report and escalation tasks run from a real
playbook on localhost with prepared outcomes, and loopback receivers that speak each protocol
record what they got: Slack's incoming webhook (HTTPS, self-signed, community.general.slack),
PagerDuty's Events API v2 and the Alertmanager-style webhook with its auth header
(ansible.builtin.uri), and mail (community.general.mail to an aiosmtpd server).

The same run's callback writes the JSON report, the HTML page and the metrics textfile
(role option remediate_metrics_textfile), checked here with a real Prometheus parser.
"""
from __future__ import annotations

import email
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from email import policy as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
aiosmtpd_controller = pytest.importorskip("aiosmtpd.controller", reason="aiosmtpd (requirements.txt) is needed")
parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client (requirements.txt) is needed")

TOKEN = "s3cret-bearer-token"

OUTCOMES = {
    "web1": [
        {"service": "nginx", "state": "escalated", "escalation": "refused", "attempts": 1, "signature": "sig-nginx",
         "reason": "every command was refused by the policy <script>alert(1)</script>",
         "diagnosis": "config broken", "refused": [{"command": "rm -rf /etc/nginx", "source": "llm",
                                                    "reasons": ["deletes configuration"]}],
         "started": "2026-11-26T06:00:00Z", "finished": "2026-11-26T06:00:04Z",
         "timeline": [{"attempt": 1, "source": "llm", "gate": "escalate", "healthy": None}]},
        {"service": "redis-server", "state": "escalated", "escalation": "llm_error", "attempts": 1,
         "reason": "no safe command to run: the model timed out", "llm_error": "timeout: read timed out",
         "llm": {"calls": 2, "prompt_tokens": 1500, "completion_tokens": 0}},
    ],
    "web2": [
        # No `escalation` key (an older role): derived from what ran -> exhausted.
        {"service": "cron", "state": "escalated", "attempts": 2,
         "reason": "still failing after 2 attempt(s): cron is not running",
         "commands": [{"command": "service cron start", "source": "runbook", "verdict": "allow", "rc": 1,
                       "attempt": 1, "output": "cron: can't open or create /var/run/crond.pid"},
                      {"command": "service cron restart", "source": "llm", "verdict": "allow", "rc": 0,
                       "attempt": 2}],
         "timeline": [{"attempt": 1, "source": "runbook", "gate": "execute", "healthy": False},
                      {"attempt": 2, "source": "llm", "gate": "execute", "healthy": False}]},
        {"service": "ssh", "state": "waiting_approval", "attempts": 1, "approval_id": "ab12cd34",
         "planned": [{"command": "cp /etc/ssh/sshd_config.bak /etc/ssh/sshd_config", "verdict": "approval"}]},
    ],
    "web3": [{"service": "sentinel-app", "state": "healed", "attempts": 1,
              "commands": [{"command": "service sentinel-app start", "source": "memory", "verdict": "allow",
                            "rc": 0, "attempt": 1}],
              "llm": {"calls": 1, "prompt_tokens": 700, "completion_tokens": 60}}],
}

PLAYBOOK = """
- name: Report and escalate prepared outcomes with the remediate role's own tasks
  hosts: all
  gather_facts: false
  vars:
    _remediate_heal:
      outcomes: "{{ prepared[inventory_hostname] }}"
  tasks:
    # What the heal action returns as its custom stat, for outcomes made up here.
    - name: Record the prepared outcomes for the report
      ansible.builtin.set_stats:
        data:
          sentinel_remediation: "{{ _remediate_heal.outcomes }}"
        per_host: true
        aggregate: true

    - name: Record where the run's metrics go (as run.yml does)
      ansible.builtin.set_stats:
        data:
          sentinel_remediation_settings:
            metrics_textfile: "{{ remediate_metrics_textfile }}"
        per_host: false
        aggregate: true
      run_once: true
      when: remediate_metrics_textfile | default('') | length > 0

    - name: The role's escalation
      ansible.builtin.include_role:
        name: sentinel.remediation.remediate
        tasks_from: escalate.yml
"""


class Receiver:
    """A loopback HTTP(S) server recording every request: path, headers, JSON body."""

    def __init__(self, tls: Path | None = None, fail_unless_bearer: str | None = None):
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                refused = (fail_unless_bearer and self.path.startswith("/alerts")
                           and self.headers.get("Authorization") != f"Bearer {fail_unless_bearer}")
                status = 401 if refused else (202 if self.path.startswith("/v2/enqueue") else 200)
                reply = b'{"status": "success"}' if status == 202 else b"ok"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls / "cert.pem", tls / "key.pem")
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Mailbox:
    def __init__(self):
        self.messages: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        message = email.message_from_bytes(envelope.original_content or envelope.content, policy=email_policy.default)
        message["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
        self.messages.append(message)
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def receivers(tmp_path_factory):
    tls = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tls / "key.pem"),
                    "-out", str(tls / "cert.pem")], check=True, capture_output=True)
    slack = Receiver(tls=tls)
    http = Receiver(fail_unless_bearer=TOKEN)
    mailbox = Mailbox()
    smtp = aiosmtpd_controller.Controller(mailbox, hostname="127.0.0.1", port=_free_port())
    smtp.start()
    yield {"slack": slack, "http": http, "mailbox": mailbox, "smtp_port": smtp.port}
    smtp.stop()
    slack.close()
    http.close()


def run_playbook(tmp: Path, extravars: dict) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp / "play.yml").write_text(PLAYBOOK)
    hosts = {h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable} for h in OUTCOMES}
    (tmp / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    (tmp / "vars.json").write_text(json.dumps({"prepared": OUTCOMES, **extravars}))
    env = dict(os.environ,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".collections")),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp / "facts"),
               ANSIBLE_CALLBACKS_ENABLED="sentinel.remediation.remediation_report",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               SENTINEL_REPORT_JSON=str(tmp / "out" / "report.json"),
               SENTINEL_REPORT_HTML=str(tmp / "out" / "report.html"))
    env.pop("SENTINEL_REPORT_METRICS", None)
    proc = subprocess.run(["ansible-playbook", "-i", str(tmp / "hosts.yml"), str(tmp / "play.yml"),
                           "-e", f"@{tmp / 'vars.json'}"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    report_file = tmp / "out" / "report.json"
    assert report_file.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(report_file.read_text())


def settings(receivers, **over) -> dict:
    base = {
        "remediate_webhook_url": f"http://127.0.0.1:{receivers['http'].port}/alerts",
        "remediate_webhook_token": TOKEN,
        "remediate_webhook_headers": {"X-Team": "sre"},
        # The module's webhook form that names its host (the legacy "domain" one) reaches a
        # loopback receiver; a real token (T.../B.../...) goes to hooks.slack.com.
        "remediate_notify_slack": {"token": "loopbacktoken", "domain": f"127.0.0.1:{receivers['slack'].port}",
                                   "channel": "#ops", "validate_certs": False},
        "remediate_notify_pagerduty": {"routing_key": "R0UTINGKEY",
                                       "url": f"http://127.0.0.1:{receivers['http'].port}/v2/enqueue"},
        "remediate_notify_mail": {"host": "127.0.0.1", "port": receivers["smtp_port"], "secure": "never",
                                  "from": "sentinel@example.test", "to": ["oncall@example.test"],
                                  "subject_prefix": "[sentinel] "},
        "remediate_notify_routes": {"refused": ["pagerduty", "slack", "webhook"], "llm_error": ["slack"],
                                    "exhausted": ["mail", "webhook"], "waiting_approval": ["mail"],
                                    "default": ["webhook"]},
    }
    base.update(over)
    return base


def test_each_reason_reaches_its_channels_and_the_report_says_so(receivers, tmp_path):
    started = time.time()
    metrics_file = tmp_path / "textfile" / "sentinel.prom"
    proc, report = run_playbook(tmp_path, settings(receivers, remediate_metrics_textfile=str(metrics_file)))
    # Escalated hosts end failed (remediate_fail_on_escalation); the healed one does not.
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "web3" not in {line.split()[0] for line in proc.stdout.splitlines() if "failed=1" in line}

    # Slack: only the refused and the llm_error escalations, through the module's real payload.
    slack = receivers["slack"].requests
    assert sorted(r["body"]["text"].splitlines()[0] for r in slack) == [
        "sentinel.remediation could not heal nginx on web1 (refused)",
        "sentinel.remediation could not heal redis-server on web1 (llm_error)"]
    assert all(r["path"].startswith("/services/hooks/incoming-webhook?token=loopbacktoken") for r in slack)
    assert {r["body"]["channel"] for r in slack} == {"#ops"}
    assert any("llm error: timeout: read timed out" in r["body"]["text"] for r in slack)

    http = receivers["http"].requests
    # PagerDuty Events API v2: one trigger, for the refused escalation only.
    pages = [r for r in http if r["path"] == "/v2/enqueue"]
    assert len(pages) == 1
    event = pages[0]["body"]
    assert event["routing_key"] == "R0UTINGKEY" and event["event_action"] == "trigger"
    assert event["dedup_key"] == "sentinel/web1/nginx/sig-nginx"
    assert event["payload"]["source"] == "web1" and event["payload"]["component"] == "nginx"
    assert event["payload"]["severity"] == "critical" and event["payload"]["class"] == "refused"
    assert event["payload"]["custom_details"]["description"].startswith("every command was refused")

    # The webhook: one POST per host, with the bearer token and the extra header.
    hooks = [r for r in http if r["path"] == "/alerts"]
    assert len(hooks) == 2
    for hook in hooks:
        assert hook["headers"]["Authorization"] == f"Bearer {TOKEN}"
        assert hook["headers"]["X-Team"] == "sre"
    alerts = {(a["labels"]["instance"], a["labels"]["service"]): a for h in hooks for a in h["body"]["alerts"]}
    assert set(alerts) == {("web1", "nginx"), ("web2", "cron")}
    assert alerts[("web2", "cron")]["labels"]["reason"] == "exhausted"
    assert alerts[("web2", "cron")]["annotations"]["commands_tried"] == "service cron start; service cron restart"

    # Mail: the exhausted escalation and the plan waiting for approval.
    mails = {m["Subject"]: m for m in receivers["mailbox"].messages}
    assert set(mails) == {"[sentinel] sentinel.remediation could not heal cron on web2 (exhausted)",
                          "[sentinel] sentinel.remediation: ssh on web2 waits for approval (ab12cd34)"}
    approval = mails["[sentinel] sentinel.remediation: ssh on web2 waits for approval (ab12cd34)"]
    assert approval["X-Envelope-To"] == "oncall@example.test"
    assert "sentinel-remediate approvals approve ab12cd34" in approval.get_body(preferencelist=("plain",)).get_content()

    # The report lists every notification as sent, and nothing leaked the token.
    sent = {(n["host"], n["service"], n["channel"]): n["status"] for n in report["notifications"]}
    assert sent == {("web1", "nginx", "pagerduty"): "sent", ("web1", "nginx", "slack"): "sent",
                    ("web1", "nginx", "webhook"): "sent", ("web1", "redis-server", "slack"): "sent",
                    ("web2", "cron", "mail"): "sent", ("web2", "cron", "webhook"): "sent",
                    ("web2", "ssh", "mail"): "sent"}
    assert TOKEN not in proc.stdout and "R0UTINGKEY" not in proc.stdout

    # The callback's HTML page and the textfile, from the same run.
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    families = {f.name: f for f in parser.text_string_to_metric_families(metrics_file.read_text())}
    value = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "producer"))): s.value
             for f in families.values() for s in f.samples}
    assert value[("sentinel_remediation_last_run_outcomes", (("host", "web1"), ("service", "nginx"), ("state", "escalated")))] == 1
    assert sum(v for (name, labels), v in value.items() if name == "sentinel_remediation_last_run_outcomes"
               and dict(labels)["service"] == "sentinel-app" and dict(labels)["state"] == "healed") == 1
    assert value[("sentinel_remediation_escalations_total",
                  (("host", "web2"), ("reason", "exhausted"), ("service", "cron")))] == 1
    assert value[("sentinel_remediation_last_run_llm_calls", ())] == report["llm"]["calls"] == 3
    assert value[("sentinel_remediation_last_run_llm_tokens", (("kind", "prompt"),))] == 2200
    assert value[("sentinel_remediation_last_run_notifications", (("channel", "slack"), ("status", "sent")))] == 2
    assert started - 5 <= value[("sentinel_remediation_last_run_timestamp_seconds", ())] <= time.time() + 5
    assert value[("sentinel_remediation_run_duration_seconds", ())] > 0


def test_a_failed_notification_is_a_warning_and_a_record_never_a_failed_heal(receivers, tmp_path):
    before = len(receivers["http"].requests)
    proc, report = run_playbook(tmp_path, settings(
        receivers, remediate_fail_on_escalation=False, remediate_webhook_token="wrong-token",
        remediate_notify_mail={"host": "127.0.0.1", "port": _free_port(), "secure": "never",
                               "to": ["oncall@example.test"]},
        remediate_notify_routes={"default": ["webhook", "mail"], "waiting_approval": []}))
    assert proc.returncode == 0, proc.stdout[-3000:]
    status = {(n["host"], n["service"], n["channel"]): n for n in report["notifications"]}
    assert {k: v["status"] for k, v in status.items()} == {
        ("web1", "nginx", "webhook"): "failed", ("web1", "nginx", "mail"): "failed",
        ("web1", "redis-server", "webhook"): "failed", ("web1", "redis-server", "mail"): "failed",
        ("web2", "cron", "webhook"): "failed", ("web2", "cron", "mail"): "failed"}
    assert "401" in status[("web1", "nginx", "webhook")]["error"]
    # The receiver was reached and refused the wrong token.
    assert len(receivers["http"].requests) == before + 2
    warnings = [w["warning"] for w in report["warnings"]]
    assert any("the mail notification for cron on web2 (exhausted) failed" in w for w in warnings)
    assert "NOTIFICATION FAILED webhook web1 nginx" in proc.stdout
    assert "[WARNING]: sentinel.remediation.notifications: the webhook notification" in proc.stdout + proc.stderr


def test_a_route_to_a_channel_that_is_not_configured_is_refused_before_any_host_is_touched(tmp_path):
    (tmp_path / "play.yml").write_text("""
- name: Check the routes
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The role's own check
      ansible.builtin.include_role:
        name: sentinel.remediation.remediate
        tasks_from: main.yml
""")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".collections")),
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"),
                           "-e", json.dumps({"remediate_notify_routes": {"refused": ["pagerduty"]},
                                             "remediate_services": [{"name": "cron"}]})],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert ("remediate_notify_routes.refused names pagerduty, which is not configured "
            "(remediate_notify_pagerduty.routing_key is empty)") in proc.stdout
    # no health check ran: the split pass's health task (only for a fleet) was skipped, and the
    # heal task refused the input before touching the host
    health = re.findall(r"TASK \[[^\]]*Check every watched service's health[^\]]*\] \**\n(\w+):", proc.stdout)
    assert health in ([], ["skipping"]), proc.stdout[-2000:]
    assert "Check and heal every watched service" in proc.stdout and "ok: [localhost]" not in proc.stdout.split(
        "Check and heal every watched service", 1)[1]
