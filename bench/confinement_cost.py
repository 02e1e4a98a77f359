# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What confinement costs per command, on the lab's hosts of both kinds (BENCHMARKS.md).

The collection's host code (plugins/module_utils) is copied into each running lab container
and the plan runner itself runs there, as execute_plan runs it, as root: the same commands
(`rm -f` of a missing PID file, `sed -n p` of a file, `kill -0` of the runner itself) one at a
time, alternately with confinement off and required, ROUNDS times each. The cost is the
difference of the medians of the wall time run_plan takes per command (ruleset built in
the parent, entered in the child, torn down), in milliseconds.

    lab/lab up 2 --kind mixed && python bench/confinement_cost.py [--rounds 200] [--prefix P --hosts 1]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lab"))

from sentinel_lab import Lab  # noqa: E402  pylint: disable=wrong-import-position

_PROBE = r"""
import json, os, statistics, sys, time
sys.path.insert(0, "/tmp/confine-bench")
from ansible_collections.sentinel.remediation.plugins.module_utils import plan_runner, landlock
rounds = int(sys.argv[1])
commands = [
    {"argv": ["rm", "-f", "/run/confine-bench.pid"], "become": True, "confine": {"remove": ["/run"], "exec": ["rm"]}},
    {"argv": ["sed", "-n", "p", "/etc/hostname"], "become": True, "confine": {"exec": ["sed"]}},
    {"argv": ["kill", "-0", str(os.getpid())], "become": True, "confine": {"exec": ["kill"]}},
]
plan = plan_runner.normalise_commands(commands)
me = plan_runner.invoking_identity({})
times = {"off": [], "required": []}
for _ in range(rounds):
    for mode in ("off", "required"):
        for command in plan:
            started = time.perf_counter()
            result = plan_runner.run_plan([command], {}, me, confinement=mode)["results"][0]
            times[mode].append((time.perf_counter() - started) * 1000)
            assert result["rc"] == 0 and result["confined"] == (mode == "required"), result
print(json.dumps({"abi": landlock.abi_version(),
                  "off_ms": statistics.median(times["off"]), "required_ms": statistics.median(times["required"]),
                  "commands": len(times["off"])}))
"""


def measure(lab: Lab, host: str, rounds: int) -> dict:
    container = lab.container(host)
    base = "/tmp/confine-bench/ansible_collections/sentinel/remediation/plugins"
    subprocess.run(["docker", "exec", container, "sh", "-c", f"rm -rf /tmp/confine-bench && mkdir -p {base}"], check=True)
    subprocess.run(["docker", "cp", str(REPO / "plugins" / "module_utils"), f"{container}:{base}/module_utils"], check=True)
    subprocess.run(["docker", "exec", container, "sh", "-c",
                    "cd /tmp/confine-bench && for d in ansible_collections ansible_collections/sentinel "
                    "ansible_collections/sentinel/remediation ansible_collections/sentinel/remediation/plugins; "
                    "do touch $d/__init__.py; done"], check=True)
    proc = subprocess.run(["docker", "exec", container, "python3", "-c", _PROBE, str(rounds)], capture_output=True,
                          text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{host}: the probe failed: {proc.stderr[-2000:]}")
    figures = json.loads(proc.stdout)
    figures.update(host=host, kind=lab.kind(host), cost_ms=figures["required_ms"] - figures["off_ms"])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--prefix", help="the lab's container prefix (default: the lab command's)")
    parser.add_argument("--hosts", type=int, default=0, help="measure at most one host of each kind (0: every host)")
    args = parser.parse_args()
    lab = Lab(prefix=args.prefix)
    hosts = lab.hosts()
    if args.hosts:
        hosts = [h for kind in ("sysv", "systemd") for h in lab.hosts(kind)[:args.hosts]]
    rows = [measure(lab, host, args.rounds) for host in hosts]
    if not rows:
        raise SystemExit("no lab host is running: lab/lab up 2 --kind mixed")
    print("| host | kind | Landlock ABI | commands | median off (ms) | median confined (ms) | cost per command (ms) |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['host']} | {row['kind']} | {row['abi']} | {row['commands']} | {row['off_ms']:.2f} | "
              f"{row['required_ms']:.2f} | {row['cost_ms']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
