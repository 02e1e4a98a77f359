# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Client connections counted from this machine's real socket tables (issue 27/29: a stateful
service that serves no client loses nothing to a restart)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import client_connections, plan_runner
from ansible_collections.sentinel.remediation.plugins.plugin_utils import safeguards

# A server like a database: it listens on TCP and on a unix socket, forks a child per client
# (the child holds the accepted socket), and itself holds a connection out to another server
# (not a client of its own).
SERVER = r"""
import os, socket, sys, time
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(8)
unix = socket.socket(socket.AF_UNIX); unix.bind(sys.argv[1]); unix.listen(8)
out = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
print(tcp.getsockname()[1], flush=True)
import select
while True:
    ready, _, _ = select.select([tcp, unix], [], [])
    for listener in ready:
        conn, _ = listener.accept()
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        conn.close()
"""


@pytest.fixture
def server(tmp_path):
    path = str(tmp_path / "server.sock")
    upstream = socket.socket()
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1)
    proc = subprocess.Popen([sys.executable, "-c", SERVER, path, str(upstream.getsockname()[1])],
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield proc, port, path
    upstream.close()
    subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
    proc.kill()
    proc.wait()


def _until(pid, count, within=5.0):
    deadline = time.monotonic() + within
    while True:
        found = client_connections.count([pid])
        if found.get("count") == count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_server_with_no_client_counts_none_and_its_own_connection_out_is_not_a_client(server):
    proc, _port, _path = server
    found = client_connections.count([proc.pid])
    assert found == {"count": 0}
    assert client_connections.summary(found).startswith("none open")


def test_clients_held_by_forked_children_on_tcp_and_unix_are_counted(server):
    proc, port, path = server
    clients = [socket.create_connection(("127.0.0.1", port)), socket.socket(socket.AF_UNIX)]
    clients[1].connect(path)
    try:
        found = _until(proc.pid, 2)
        assert found["count"] == 2, found
        assert found["by_endpoint"] == {f"tcp :{port}": 1, f"unix {path}": 1}
        assert len(client_connections.family([proc.pid])) == 3  # the server and the two children it forked
        problem = plan_runner.clients_problem([proc.pid])
        assert problem and problem.startswith("needs a human's approval") and f"tcp :{port} 1" in problem
    finally:
        for client in clients:
            client.close()


def test_what_cannot_be_counted_is_unknown_and_holds_the_restart():
    assert "unknown" in client_connections.count([])
    # a process whose descriptors cannot be read (another user's, without root) is unknown, never none
    gone = client_connections.count([2 ** 22 + 7])
    assert gone == {"count": 0}  # no such process: nothing to drop


def test_the_restart_cost_is_waived_only_when_the_host_counted_no_client():
    definition = {"name": "db", "stateful": True}
    restart = {"command": "systemctl restart db", "verdict": "allow", "effects": ["restarts unit db.service"],
               "reasons": [], "source": "known_good"}
    base = {"processes": [{"pid": 40, "state": "sleeping"}], "service_pids": [40]}

    def judged(evidence, idle=True, verdict=None):
        return safeguards.weigh_restart_cost([verdict or restart], definition, evidence, idle_restart=idle)[0]

    idle = judged(dict(base, client_connections={"count": 0, "by_endpoint": {}, "processes": 1}))
    assert idle["verdict"] == "allow" and idle["idle_pids"] == [40]
    assert "restart cost waived" in idle["reasons"][-1]
    for connections in ({"count": 1, "by_endpoint": {"tcp :5432": 1}}, {"unknown": "cannot read"}, None):
        held = judged(dict(base, client_connections=connections))
        assert held["verdict"] == "approval" and "idle_pids" not in held, connections
    # the operator's table says human: always a human
    off = judged(dict(base, client_connections={"count": 0, "by_endpoint": {}}), idle=False)
    assert off["verdict"] == "approval"
    # the fallback restart is a guess: it waits for a human even on an idle server
    guess = judged(dict(base, client_connections={"count": 0, "by_endpoint": {}}), verdict=dict(restart, source="fallback"))
    assert guess["verdict"] == "approval"


def test_the_host_does_not_run_a_waived_restart_once_a_client_connected_and_runs_it_while_none_is(server, tmp_path):
    proc, port, _path = server
    marker = tmp_path / "ran"
    invoker = plan_runner.invoking_identity()

    def run(approved=False):
        commands = plan_runner.normalise_commands([{"argv": ["touch", str(marker)], "idle_pids": [proc.pid],
                                                    "approved": approved}])
        return plan_runner.run_plan(commands, {}, invoker)["results"][0]

    idle = run()
    assert idle["rc"] == 0 and marker.exists()
    marker.unlink()
    client = socket.create_connection(("127.0.0.1", port))
    try:
        _until(proc.pid, 1)
        held = run()
        assert held["skipped"] and held["rc"] is None and not marker.exists()
        assert "it would drop client connections" in held["reason"]
        assert run(approved=True)["rc"] == 0 and marker.exists()  # a human's approval covers the cost
    finally:
        client.close()


# A server that listens and never accepts: a client it has not taken yet waits in the kernel's
# queue of its listener, held by no process.
DEAF = r"""
import socket, sys, time
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(8)
unix = socket.socket(socket.AF_UNIX); unix.bind(sys.argv[1]); unix.listen(8)
print(tcp.getsockname()[1], flush=True)
time.sleep(600)
"""


@pytest.fixture
def deaf_server(tmp_path):
    path = str(tmp_path / "deaf.sock")
    proc = subprocess.Popen([sys.executable, "-c", DEAF, path], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield proc, port, path
    proc.kill()
    proc.wait()


def test_clients_waiting_in_a_listeners_queue_not_accepted_yet_are_clients(deaf_server):
    proc, port, path = deaf_server
    assert client_connections.count([proc.pid]) == {"count": 0}
    clients = [socket.create_connection(("127.0.0.1", port)), socket.create_connection(("127.0.0.1", port)),
               socket.socket(socket.AF_UNIX)]
    clients[2].connect(path)
    try:
        found = _until(proc.pid, 3)
        assert found == {"count": 3, "by_endpoint": {f"tcp :{port}": 2, f"unix {path}": 1}, "queued": 3}, found
        assert "not accepted yet" in client_connections.summary(found)
        assert plan_runner.clients_problem([proc.pid]), "a queued client did not hold the restart"
    finally:
        for client in clients:
            client.close()


def test_a_server_started_after_the_evidence_is_found_again_and_its_client_holds_the_restart(server, tmp_path):
    """The evidence's PIDs are those of a server since restarted (gone); the host finds the
    service's processes again (here by its PID file, as the evidence does) and counts the new
    server's client."""
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence, service_spec

    proc, port, _path = server
    before = subprocess.Popen(["true"])
    before.wait()  # the server the evidence saw: gone since
    pid_file = tmp_path / "db.pid"
    pid_file.write_text(f"{proc.pid}\n")
    definition = service_spec.resolve({"name": "s36-db", "processes": ["s36-no-such-program"],
                                       "pid_files": [str(pid_file)]})
    assert proc.pid in service_evidence.current_pids(definition)
    marker = tmp_path / "ran"
    commands = plan_runner.normalise_commands([{"argv": ["touch", str(marker)], "idle_pids": [before.pid]}])
    client = socket.create_connection(("127.0.0.1", port))
    try:
        _until(proc.pid, 1)
        assert plan_runner.clients_problem([before.pid]) is None  # the evidence's PIDs alone miss it

        def now():
            return service_evidence.current_pids(definition)
        problem = plan_runner.clients_problem([before.pid], current=now)
        assert problem and f"tcp :{port} 1" in problem, problem
        held = plan_runner.run_plan(commands, {}, plan_runner.invoking_identity(), service_pids=now)["results"][0]
        assert held["skipped"] and not marker.exists(), held
    finally:
        client.close()
    _until(proc.pid, 0)
    ran = plan_runner.run_plan(commands, {}, plan_runner.invoking_identity(), service_pids=now)["results"][0]
    assert ran["rc"] == 0 and marker.exists(), ran


def test_a_service_whose_processes_cannot_be_found_now_holds_the_restart():
    def broken():
        raise OSError("/proc is not mounted")
    problem = plan_runner.clients_problem([], current=broken)
    assert problem and "cannot be found now" in problem and "/proc is not mounted" in problem


def test_a_client_still_in_its_handshake_with_the_listener_is_counted(tmp_path):
    """SYN_RECV cannot be held open from a test without dropping packets: the kernel's table
    is written as /proc shows it (a request socket: state 03, no inode, the listener's port)."""
    proc = tmp_path / "proc"
    (proc / "300" / "fd").mkdir(parents=True)
    (proc / "300" / "net").mkdir()
    (proc / "300" / "stat").write_text("300 (postgres) S 1 300 300 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 900 0 0\n")
    (proc / "300" / "fd" / "3").symlink_to("socket:[555]")
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (proc / "300" / "net" / "tcp").write_text(
        header
        + "   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000   105        0 555 1 0 100 0 0 10 0\n"
        + "   1: 0100007F:1538 0100007F:C350 03 00000000:00000000 02:00000063 00000000   105        0 0 0 0\n"
        + "   2: 0100007F:1F90 0100007F:C351 03 00000000:00000000 02:00000063 00000000     0        0 0 0 0\n")
    (proc / "300" / "net" / "unix").write_text("Num       RefCount Protocol Flags    Type St Inode Path\n")
    found = client_connections.count([300], str(proc))
    # the handshake on the port it listens on counts; another listener's (port 8080) does not
    assert found == {"count": 1, "by_endpoint": {"tcp :5432": 1}, "queued": 1}, found
