"""Defaults that surprise nobody, on a real lab host: the role watches only what the inventory
names (a host given none fails naming the variable), and a service nothing here knows how to
heal is restarted as root only when the fallback restart is turned on.

The unknown service is a small daemon of this test's own, installed on lab01 with a SysV init
script that logs every action it is asked for: what ran on the host is read from that log and
from the host's process table, not from the report."""
from __future__ import annotations

import json

import pytest

from workflow_support import Workspace, require_docker

HOST = "lab01"
PORT = 7070
INIT_LOG = "/var/log/widgetd-init.log"
WIDGET = {
    "name": "widgetd",
    "processes": ["widgetd"],
    "user": "root",
    "pid_files": ["/run/widgetd.pid"],
    "runtime_paths": ["/run/widgetd.pid"],
    "ports": [PORT],
    "checks": [{"type": "service"}, {"type": "http", "url": f"http://127.0.0.1:{PORT}/", "status": 200}],
}
DAEMON = f"""#!/usr/bin/python3
import http.server


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\\n")

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", {PORT}), Answer).serve_forever()
"""
INIT = f"""#!/bin/sh
### BEGIN INIT INFO
# Provides:          widgetd
# Required-Start:    $local_fs
# Required-Stop:     $local_fs
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: a daemon no runbook knows
### END INIT INFO
PIDFILE=/run/widgetd.pid
echo "$1" >> {INIT_LOG}
case "$1" in
  start) start-stop-daemon --start --quiet --background --make-pidfile --pidfile $PIDFILE \\
           --startas /usr/local/bin/widgetd --oknodo ;;
  stop) start-stop-daemon --stop --quiet --pidfile $PIDFILE --retry TERM/5/KILL/2 --oknodo; rm -f $PIDFILE ;;
  restart) "$0" stop && "$0" start ;;
  status) start-stop-daemon --status --pidfile $PIDFILE; exit $? ;;
  *) echo "Usage: $0 {{start|stop|restart|status}}" >&2; exit 3 ;;
esac
"""
ANSWERS = f"""python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:{PORT}/", timeout=3).status)'"""


def init_log(lab) -> list[str]:
    return lab.exec(HOST, f"cat {INIT_LOG} 2>/dev/null || true").stdout.split()


def widget_pids(lab) -> list[str]:
    return lab.exec(HOST, "pgrep -x widgetd || true").stdout.split()


@pytest.fixture
def widget_killed(lab):
    """widgetd installed and started on lab01, then SIGKILLed (its pid file left behind); removed after."""
    require_docker()
    lab.exec(HOST, "cat > /usr/local/bin/widgetd && chmod 0755 /usr/local/bin/widgetd", stdin=DAEMON, check=True)
    lab.exec(HOST, "cat > /etc/init.d/widgetd && chmod 0755 /etc/init.d/widgetd", stdin=INIT, check=True)
    lab.exec(HOST, "service widgetd start", check=True)
    lab.exec(HOST, f"for i in $(seq 50); do {ANSWERS} && exit 0; sleep 0.2; done; exit 1", check=True)
    lab.exec(HOST, f"pkill -KILL -x widgetd; rm -f {INIT_LOG}", check=True)
    yield
    lab.exec(HOST, f"service widgetd stop; rm -f /etc/init.d/widgetd /usr/local/bin/widgetd {INIT_LOG} /run/widgetd.pid")


def heal_widget(lab, tmp_path, **variables):
    work = Workspace(tmp_path, lab.write_inventory(tmp_path / "hosts.json"))
    result = work.run(extravars={"remediate_hosts": HOST, "remediate_backend": "runbook", "remediate_services": [WIDGET],
                                 "remediate_fail_on_escalation": False, **variables})
    return result, result.outcomes().get((HOST, "widgetd"))


def test_an_unknown_failure_is_escalated_not_restarted_while_the_fallback_restart_is_off(lab, tmp_path, widget_killed):
    result, outcome = heal_widget(lab, tmp_path, remediate_fallback_restart=False)
    assert outcome and outcome["state"] == "escalated", result.stdout[-3000:]
    # The host: no restart was asked of the init script and the daemon is still down.
    assert "restart" not in init_log(lab) and "start" not in init_log(lab), init_log(lab)
    assert widget_pids(lab) == []
    assert outcome["commands"] == []
    assert "No plan for widgetd: no source gave a plan that may run (tried: memory, runbook)" in outcome["reason"]
    assert "The fallback restart (`service widgetd restart` as root) is off" in outcome["reason"]
    assert "remediate_fallback_restart: true" in outcome["reason"]


def test_an_unknown_failure_heals_by_the_fallback_restart_once_it_is_on(lab, tmp_path, widget_killed):
    result, outcome = heal_widget(lab, tmp_path, remediate_fallback_restart=True)
    assert outcome and outcome["state"] == "healed", result.stdout[-3000:]
    assert [c["command"] for c in outcome["commands"]] == ["service widgetd restart"]
    assert [c["source"] for c in outcome["commands"]] == ["fallback"]
    # The host: the init script was asked to restart, and the daemon answers again.
    assert "restart" in init_log(lab), init_log(lab)
    assert len(widget_pids(lab)) == 1
    assert lab.exec(HOST, ANSWERS).stdout.strip() == "200"


def test_a_host_whose_inventory_names_no_service_fails_naming_remediate_services(lab, tmp_path):
    require_docker()
    inventory = tmp_path / "hosts.json"
    data = json.loads(lab.write_inventory(inventory).read_text(encoding="utf-8"))
    del data["all"]["children"]["lab"]["vars"]["remediate_services"]  # an inventory that names no service
    inventory.write_text(json.dumps(data), encoding="utf-8")
    result = Workspace(tmp_path, inventory).run(extravars={"remediate_hosts": HOST})
    assert result.rc != 0 and result.status == "failed"
    # The report (what the driver and AWX show) holds the host's failure and its reason, nothing else.
    (outcome,) = result.report["outcomes"]
    assert (outcome["host"], outcome["state"]) == (HOST, "failed")
    assert "remediate_services is empty: this host watches no service" in outcome["reason"]
    assert "remediate_services is empty: this host watches no service" in result.stdout, result.stdout[-3000:]
