# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host's count of clients just before a waived restart costs, on this machine.

A real server (a Python process listening on TCP, forking a child per client) serves CLIENTS
connections; the count runs ROUNDS times over the evidence's PIDs alone, then with the
service's processes found again as the evidence finds them (service_evidence.current_pids:
every process of the machine read once), as execute_plan runs it. Prints the medians in
milliseconds and the number of processes on the machine (the second grows with it).

    python bench/client_recount_cost.py [--rounds 30] [--clients 20]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

# pylint: disable=wrong-import-position
from ansible_collections.sentinel.remediation.plugins.module_utils import plan_runner, service_evidence, service_spec  # noqa: E402

SERVER = r"""
import os, socket, sys, time
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(64)
print(tcp.getsockname()[1], flush=True)
while True:
    conn, _ = tcp.accept()
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
    conn.close()
"""


def _median_ms(call, rounds: int) -> float:
    times = []
    for _round in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--clients", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
        clients = []
        try:
            port = int(proc.stdout.readline())
            pid_file = Path(work) / "server.pid"
            pid_file.write_text(f"{proc.pid}\n")
            definition = service_spec.resolve({"name": "bench-db", "processes": ["bench-no-such-program"],
                                               "pid_files": [str(pid_file)]})
            clients = [socket.create_connection(("127.0.0.1", port)) for _client in range(args.clients)]
            deadline = time.monotonic() + 10
            while plan_runner.clients_now([proc.pid]).get("count") != args.clients and time.monotonic() < deadline:
                time.sleep(0.05)
            result = {
                "processes_on_machine": sum(1 for name in os.listdir("/proc") if name.isdigit()),
                "clients": plan_runner.clients_now([proc.pid]).get("count"),
                "evidence_pids_ms": _median_ms(lambda: plan_runner.clients_now([proc.pid]), args.rounds),
                "with_processes_found_again_ms": _median_ms(
                    lambda: plan_runner.clients_now([proc.pid], current=lambda: service_evidence.current_pids(definition)),
                    args.rounds),
            }
        finally:
            for client in clients:
                client.close()
            subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
            proc.kill()
            proc.wait()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
