"""The sentinel-remediate CLI end to end on the lab: run, watch, approvals, concurrent passes.

Judged by the lab's own health check (lab/sentinel_lab.py), not by the driver's report.
Planning uses the runbooks (remediate_backend=runbook), so no LLM is needed; the fact
cache (episodic memory, pending plans) and the driver's state are private to this module.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sentinel_lab import Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PREFIX = "sentinel-drv"   # this module's own lab (test files run in parallel, one lab each)
RUNBOOK = ["-e", "remediate_backend=runbook"]


@pytest.fixture(scope="module")
def drv_lab(lab_factory) -> Iterator[Lab]:
    lab = lab_factory(PREFIX, 2)
    yield lab
    leave_healthy(lab)


def leave_healthy(lab: Lab) -> None:
    """The next module reuses these hosts: whatever happened here, hand them over healthy."""
    for host in ("lab01", "lab02"):
        if not all(h.healthy for h in lab.health(host).values()):
            lab.reset(host)


@pytest.fixture(scope="module")
def env(drv_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("driver")
    inventory = drv_lab.write_inventory(base / "hosts.yml")
    environ = dict(os.environ)
    environ.update({
        "SENTINEL_STATE_DIR": str(base / "state"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(base / "facts"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "driver"), environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "ANSIBLE_INVENTORY": str(inventory),
        "SENTINEL_TEST_INVENTORY": str(inventory),
    })
    environ.pop("OPENAI_API_KEY", None)
    return environ


@pytest.fixture(autouse=True)
def healthy_lab(drv_lab: Lab) -> Iterator[None]:
    leave_healthy(drv_lab)
    yield


def cli(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "sentinel_remediate", *args]
    return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


def start(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sentinel_remediate", *args], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def inventory(env: dict[str, str]) -> list[str]:
    return ["-i", env["SENTINEL_TEST_INVENTORY"]]


def healed(lab: Lab, host: str, service: str) -> bool:
    return lab.health(host, [service])[service].healthy


def test_run_heals_faults_and_reports(drv_lab: Lab, env: dict[str, str]) -> None:
    drv_lab.inject("lab01", "nginx_stopped")
    drv_lab.inject("lab02", "redis_killed")
    assert not healed(drv_lab, "lab01", "nginx") and not healed(drv_lab, "lab02", "redis")

    # A key in the environment (as AWX's credential injects it) must reach no artifact.
    secret = "sk-drv-never-stored-5e0b7c"
    proc = cli({**env, "OPENAI_API_KEY": secret}, "run", *inventory(env), *RUNBOOK, "--format", "json")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(proc.stdout)
    states = {(o["host"], o["service"]): o["state"] for o in report["outcomes"]}
    assert states[("lab01", "nginx")] == "healed" and states[("lab02", "redis-server")] == "healed"
    assert "lab01 nginx: failing" in proc.stderr          # live progress
    assert "hosts checked 2" in proc.stderr
    assert healed(drv_lab, "lab01", "nginx") and healed(drv_lab, "lab02", "redis")

    run_dir = Path(env["SENTINEL_STATE_DIR"]) / "artifacts" / report["run"]["ident"]
    assert (run_dir / "job_events").is_dir() and (run_dir / "report.json").is_file()
    assert [p for p in run_dir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()] == []
    assert json.loads((run_dir / "command").read_text())["env"]["OPENAI_API_KEY"] == "********"

    junit = cli(env, "report", report["run"]["ident"], "--format", "junit")
    assert junit.returncode == 0 and 'name="lab01/nginx"' in junit.stdout


def test_approval_is_listed_approved_and_heals(drv_lab: Lab, env: dict[str, str]) -> None:
    # The runbook's fix renames a config file: the policy gates `mv` behind a human. The file is
    # new since the last healthy pass, so the autonomy table would let it run alone, and the
    # known-good restore would take it out first: this operator keeps moves aside for a human
    # and has no known-good baselines.
    drv_lab.inject("lab02", "nginx_config_syntax")
    human = ["-e", "remediate_policy=" + json.dumps({"autonomy": {"move_aside_config": "human"}}),
             "-e", "remediate_known_good=false"]
    proc = cli(env, "run", *inventory(env), "--limit", "lab02", *RUNBOOK, *human)
    assert proc.returncode == 3, proc.stderr + proc.stdout      # waiting approval only
    assert "WAITING APPROVAL" in proc.stdout
    assert not healed(drv_lab, "lab02", "nginx")

    listed = cli(env, "approvals", "list", "--format", "json")
    plans = [p for p in json.loads(listed.stdout) if p["host"] == "lab02"]
    assert len(plans) == 1 and plans[0]["service"] == "nginx"
    text = cli(env, "approvals", "list").stdout
    assert "[approval] mv /etc/nginx/conf.d/zz-broken.conf" in text and "a human should confirm" in text

    approved = cli(env, "approvals", "approve", plans[0]["id"])   # inventory: the one of the run that made it
    assert approved.returncode == 0, approved.stderr + approved.stdout
    assert "lab02 nginx: healed" in approved.stdout
    assert healed(drv_lab, "lab02", "nginx")
    assert plans[0]["id"] not in cli(env, "approvals", "list").stdout


def test_concurrent_second_run_skips_or_waits(drv_lab: Lab, env: dict[str, str]) -> None:
    drv_lab.inject("lab01", "nginx_stopped")
    first = start(env, "run", *inventory(env), "--limit", "lab01", *RUNBOOK, "--format", "json")
    lock = Path(env["SENTINEL_STATE_DIR"]) / "locks" / "lab01.lock"
    deadline = time.monotonic() + 60
    while not (lock.is_file() and str(first.pid) in lock.read_text()):
        assert first.poll() is None and time.monotonic() < deadline, "the first run never took lab01's lock"
        time.sleep(0.1)

    skipped = cli(env, "run", *inventory(env), "--limit", "lab01", *RUNBOOK)
    assert skipped.returncode == 4, skipped.stderr + skipped.stdout
    assert "lab01: skipped, another pass holds it" in skipped.stderr and f"pid {first.pid}" in skipped.stderr

    waited = start(env, "run", *inventory(env), "--limit", "lab01", *RUNBOOK, "--wait", "--format", "json")
    first_out, first_err = first.communicate(timeout=240)
    waited_out, waited_err = waited.communicate(timeout=240)
    assert first.returncode == 0, first_err
    assert waited.returncode == 0, waited_err
    assert "lab01: waiting for the pass that holds it" in waited_err
    first_nginx = [o for o in json.loads(first_out)["outcomes"] if o["service"] == "nginx"][0]
    waited_nginx = [o for o in json.loads(waited_out)["outcomes"] if o["service"] == "nginx"][0]
    assert first_nginx["state"] == "healed"
    # The waiting run started after the first had healed lab01: nothing left to do, nothing run twice.
    assert waited_nginx["state"] == "healthy" and waited_nginx["commands"] == []
    assert healed(drv_lab, "lab01", "nginx")


def test_watch_heals_a_fault_injected_while_it_runs_and_stops_on_sigterm(drv_lab: Lab, env: dict[str, str]) -> None:
    state = Path(env["SENTINEL_STATE_DIR"])
    before = set((state / "artifacts").glob("watch-*")) if (state / "artifacts").is_dir() else set()
    watch = start(env, "watch", "--interval", "5", *inventory(env), *RUNBOOK)
    try:
        def passes() -> list[Path]:
            return sorted(p for p in (state / "artifacts").glob("watch-*/report.json") if p.parent not in before)

        deadline = time.monotonic() + 120
        while not passes():
            assert watch.poll() is None, watch.communicate()[1]
            assert time.monotonic() < deadline, "no watch pass finished"
            time.sleep(0.5)
        drv_lab.inject("lab01", "nginx_stale_pid")
        deadline = time.monotonic() + 150
        while not healed(drv_lab, "lab01", "nginx"):
            assert watch.poll() is None, watch.communicate()[1]
            assert time.monotonic() < deadline, "watch did not heal nginx_stale_pid"
            time.sleep(1)
        # SIGTERM during a pass: it finishes (its report is stored, not canceled), then watch exits 0.
        started = len(list((state / "artifacts").glob("watch-*")))
        deadline = time.monotonic() + 60
        while len(list((state / "artifacts").glob("watch-*"))) == started:
            assert time.monotonic() < deadline, "no new pass started"
            time.sleep(0.2)
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=180)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 0, err
    assert "SIGTERM: stopping after the pass under way" in err and "stopped after" in err
    reports = [json.loads(p.read_text()) for p in passes()]
    assert reports[-1]["run"]["status"] == "successful"
    healed_by = [r["run"]["ident"] for r in reports
                 if any(o["host"] == "lab01" and o["service"] == "nginx" and o["state"] == "healed" for o in r["outcomes"])]
    assert healed_by, "no watch pass reports healing lab01 nginx"
