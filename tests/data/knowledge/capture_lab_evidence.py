"""Record what the health and evidence modules really report for each lab fault.

Writes tests/data/knowledge/lab_evidence.json: for every fault of lab/faults.yml, the
health error, evidence (contract C3) and tools that `sentinel.remediation.service_health`
reports with `evidence: true` (as the role asks), collected on a real lab container
through `ansible` (docker connection, become), with the role's default service
definitions (contract C1), which are recorded with each sample. The runbook tests match every bundled runbook against these real
samples as well as against tests/fault_samples.py.

    source scripts/setup && SENTINEL_LAB_PREFIX=knowledge python tests/data/knowledge/capture_lab_evidence.py

Re-run it when the evidence module or the lab's faults change.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))
from lab.sentinel_lab import Lab, LabError, core_services  # noqa: E402  pylint: disable=wrong-import-position

ANSIBLE = str(Path(sys.executable).parent / "ansible")
OUT = Path(__file__).with_name("lab_evidence.json")
INIT = {"nginx": "nginx", "redis": "redis-server", "cron": "cron", "ssh": "ssh"}


def module(container: str, name: str, args: dict) -> dict:
    argv = [ANSIBLE, "all", "-i", f"{container},", "-c", "community.docker.docker", "-u", "sentinel", "-b",
            "-m", f"sentinel.remediation.{name}", "-a", json.dumps(args)]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"][container]


def main() -> int:
    # The lab's four core services (the role watches none by default).
    services = {s["name"]: s for s in core_services()}
    lab = Lab()
    host = lab.up(1)[0]
    container = lab.container(host)
    samples = {}
    for fault in lab.catalogue.names():
        spec = lab.catalogue.get(fault)
        service = services[INIT[spec.service]]
        print(f"{fault} ...", file=sys.stderr, flush=True)
        try:
            lab.inject(host, fault)
            time.sleep(1.0)  # let a failed start finish writing its log
            # As the role asks: health and evidence of the service in one call (C1 definition).
            asked = {"services": [service], "evidence": True, "evidence_log_lines": 50, "evidence_max_bytes": 4000}
            health = module(container, "service_health", asked)
            entry = health["services"][0]
            samples[fault] = {"service": service["name"], "definition": service, "error": entry.get("error", ""),
                              "healthy": entry.get("healthy"), "evidence": entry.get("evidence", {}),
                              "host_tools": entry.get("tools") or health.get("tools") or {}}
        finally:
            try:
                lab.fix(host, fault)
            except LabError:
                lab.reset(host)
    OUT.write_text(json.dumps({"how": "tests/data/knowledge/capture_lab_evidence.py on one lab container",
                               "faults": samples}, indent=1, sort_keys=True) + "\n")
    lab.down()
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
