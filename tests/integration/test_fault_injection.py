# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault injection (issue 14): playbooks/remediate.yml and the driver under a full and a
read-only fact cache, a controller SIGKILLed at each phase of an attempt, concurrent runs
on one target under two inventory names, a drip-feeding and a silent LLM, and bad input.

Every assertion reads something the code under test does not report about itself: the
command log a wrapper keeps INSIDE each container (``/usr/sbin/service`` is replaced by a
script that appends its argv, then runs the real one), the bytes of the fact cache and of
the incident journal on the controller. Four lab hosts (prefix ``<SENTINEL_LAB_PREFIX>-fi``)
are shared by the module and made healthy again before each test.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from llm_server import LLMServer
from sentinel_lab import Lab, LabError, core_services, lab_group_vars

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PREFIX = f"{os.environ.get('SENTINEL_LAB_PREFIX') or 'sentinel'}-fi"
HOSTS = ["lab01", "lab02", "lab03", "lab04"]
MODEL = "sentinel-test-model"
BIN = Path(sys.executable).parent
# Holds the heal action at a phase (test-only, not in the collection): a sitecustomize for the run.
PAUSE_HOOK = REPO / "tests" / "support" / "pause_hook"
EXEC_LOG = "/var/log/sentinel-exec.log"
FIX_VERBS = {"start", "stop", "restart", "reload", "force-reload", "configtest"}
# Replaces /usr/sbin/service in a host: log the argv, optionally hold before/after the real
# command (a file /etc/sentinel-pause/<before|after> names the argument to hold at), run it.
WRAPPER = r"""#!/bin/sh
printf '%s\t%s\n' "$(date +%s.%N)" "$*" >> /var/log/sentinel-exec.log
hold() {
  f=/etc/sentinel-pause/$1
  [ -f "$f" ] || return 0
  case " $2 " in *" $(cat "$f") "*) ;; *) return 0 ;; esac
  rm -f "$f"; touch /tmp/sentinel-paused
  i=0; while [ -e /tmp/sentinel-hold ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
}
hold before "$*"
/usr/sbin/service.real "$@"; rc=$?
hold after "$*"
exit $rc
"""


# ------------------------------------------------------------------------------- lab


@pytest.fixture(scope="module")
def fi_lab(lab_factory):
    try:
        Lab(prefix=PREFIX).down()  # leftovers of a kept session may be broken
    except LabError:
        pass
    return lab_factory(PREFIX, len(HOSTS))


@pytest.fixture
def lab(fi_lab):
    """The module's hosts, healthy, with the wrapper installed and an empty command log."""
    def prepare(host: str) -> None:
        if host not in fi_lab.hosts():
            fi_lab.up(len(HOSTS))
        try:
            healthy = all(h.healthy for h in fi_lab.health(host).values())
        except LabError:
            healthy = False
        if not healthy:
            fi_lab.reset(host)
        fi_lab.exec(host, ["sh", "-c", "test -e /usr/sbin/service.real || mv /usr/sbin/service /usr/sbin/service.real;"
                           " cat > /usr/sbin/service && chmod 755 /usr/sbin/service;"
                           " rm -rf /etc/sentinel-pause /tmp/sentinel-paused /tmp/sentinel-hold; mkdir /etc/sentinel-pause;"
                           f" : > {EXEC_LOG}"], stdin=WRAPPER, check=True)
    with ThreadPoolExecutor(len(HOSTS)) as pool:
        list(pool.map(prepare, HOSTS))
    return fi_lab


def break_hosts(lab: Lab, faults: dict[str, str]) -> None:
    """Inject the faults, then empty the command logs (the lab's own `service ... stop`)."""
    for host, fault in faults.items():
        lab.inject(host, fault)
    for host in faults:
        lab.exec(host, f": > {EXEC_LOG}", check=True)


def executed(lab: Lab, host: str) -> list[list[str]]:
    """Every argv `service` ran with in the host, in order (the wrapper's log)."""
    text = lab.exec(host, f"cat {EXEC_LOG}").stdout
    return [line.split("\t", 1)[1].split() for line in text.splitlines() if "\t" in line]


def fixes(lab: Lab, host: str) -> list[str]:
    """The state-changing `service` commands that ran in the host ("nginx start", ...)."""
    return [" ".join(argv) for argv in executed(lab, host) if len(argv) >= 2 and argv[1] in FIX_VERBS]


def inventory(lab: Lab, names: dict[str, str], path: Path, host_vars: dict | None = None) -> Path:
    """An inventory naming lab hosts as told ({inventory name: lab host}); two names may point
    at one container (an aliased inventory)."""
    data = lab.inventory()
    hostvars = {name: data["_meta"]["hostvars"][host] for name, host in names.items() if host in data["_meta"]["hostvars"]}
    for name, host in names.items():
        if name not in hostvars:  # a host whose container does not exist
            hostvars[name] = {**data["_meta"]["hostvars"][HOSTS[0]], "ansible_host": f"{PREFIX}-{host}"}
    for name, extra in (host_vars or {}).items():
        hostvars[name] = {**hostvars[name], **extra}
    # The lab's variables and the four core services the role is told to watch.
    group = {"hosts": hostvars, "vars": {**data["lab"]["vars"], **lab_group_vars(), "remediate_services": core_services()}}
    path.write_text(json.dumps({"all": {"children": {"lab": group}}}), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- runs


class Run:
    """One ansible-playbook (or driver) process with its report, cache and artifacts."""

    def __init__(self, work: Path, inv: Path, *, cache: Path, artifacts: Path, variables: dict | None = None,
                 name: str = "run", argv: list[str] | None = None, env: dict | None = None):
        work.mkdir(parents=True, exist_ok=True)
        self.report_path = work / f"{name}-report.json"
        self.log_path = work / f"{name}.log"
        self.cache, self.artifacts = cache, artifacts
        variables = {"remediate_artifacts_dir": str(artifacts), "remediate_max_retries": 2, **(variables or {})}
        vars_file = work / f"{name}-vars.json"
        vars_file.write_text(json.dumps(variables), encoding="utf-8")
        self.argv = argv or [str(BIN / "ansible-playbook"), "-i", str(inv), str(REPO / "playbooks" / "remediate.yml"),
                             "-e", f"@{vars_file}"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SENTINEL_TEST_"))}
        self.env.update({"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache),
                         "ANSIBLE_CALLBACKS_ENABLED": "sentinel.remediation.remediation_report",
                         "SENTINEL_REPORT_JSON": str(self.report_path), "ANSIBLE_NOCOLOR": "1",
                         "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})})
        self.proc: subprocess.Popen | None = None
        self.rc: int | None = None

    def start(self) -> Run:
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    def wait(self, timeout: float = 300) -> Run:
        self.rc = self.proc.wait(timeout=timeout)
        return self

    def __call__(self, timeout: float = 300) -> Run:
        return self.start().wait(timeout)

    def kill(self) -> None:
        """SIGKILL the controller: ansible-playbook and every process under it at once.

        Not os.killpg: ansible's workers call setsid(), so they leave the group and would
        finish their host's work after a group kill, which is no crash at all."""
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)

    @property
    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    @property
    def report(self) -> dict:
        assert self.report_path.exists(), f"no report was written (rc {self.rc}):\n{self.output[-3000:]}"
        return json.loads(self.report_path.read_text(encoding="utf-8"))

    def outcome(self, host: str, service: str) -> dict:
        found = [o for o in self.report["outcomes"] if o["host"] == host and o["service"] == service]
        assert found, f"no outcome for {host}/{service}: {self.report['outcomes']}\n{self.output[-2000:]}"
        return found[0]


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc, whatever its session or group)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def llm_vars(url: str, **llm) -> dict:
    return {"remediate_backend": "llm",
            "remediate_llm": {"base_url": url, "api_key": "test-key", "model": MODEL, "timeout": 5, "max_retries": 0,
                              **llm}}


def plan(*commands: str, **extra) -> dict:
    return {"plan": {"diagnosis": "scripted", "commands": list(commands), "rationale": "scripted"}, **extra}


def journal(artifacts: Path, host: str) -> list[dict]:
    """The incident journal of an inventory host, read as bytes from the controller's disk."""
    path = artifacts / "journal" / f"{host}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines() if line.strip()]


def cache_entry(cache: Path, host: str) -> Path:
    (found,) = [p for p in cache.iterdir() if p.name.split("_", 1)[-1] == host and ".corrupt" not in p.name]
    return found


def episodes(cache: Path, host: str) -> list[dict]:
    data = json.loads(cache_entry(cache, host).read_text(encoding="utf-8"))
    facts = json.loads(data["__payload__"]) if "__payload__" in data else data
    memory = facts.get("sentinel_memory") or []
    return memory.get("value", memory) if isinstance(memory, dict) else memory


def iso(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=None).timestamp() - time.timezone \
        if stamp.endswith("Z") else datetime.fromisoformat(stamp).timestamp()


def wait_for(predicate, timeout: float, what: str, run: Run | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if run is not None and run.proc.poll() is not None:
            pytest.fail(f"the run ended (rc {run.proc.returncode}) before {what}:\n{run.output[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}" + (f":\n{run.output[-3000:]}" if run else ""))


# ------------------------------------------------------------------------------- memory writes


@pytest.fixture
def tmpfs_pair(tmp_path):
    mounts = []
    for name in ("full", "readonly"):
        mount = tmp_path / name
        mount.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"cannot mount a tmpfs for the fact cache (the test needs root): {done.stderr}")
        mounts.append(mount)
    yield mounts
    for mount in mounts:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_cache_that_cannot_be_written_keeps_the_good_entry_and_says_memory_was_not_saved(lab, tmp_path, tmpfs_pair):
    full, readonly = tmpfs_pair
    break_hosts(lab, {"lab01": "nginx_stopped", "lab02": "nginx_stopped"})
    seed = Run(tmp_path / "seed", inventory(lab, {"lab01": "lab01", "lab02": "lab02"}, tmp_path / "seed.json"),
               cache=full, artifacts=tmp_path / "artifacts", variables={"remediate_backend": "runbook"})()
    assert seed.rc == 0, seed.output[-3000:]
    good = {"lab01": cache_entry(full, "lab01").read_bytes(), "lab02": cache_entry(full, "lab02").read_bytes()}
    assert b"sentinel_memory" in good["lab01"]
    shutil.copy2(cache_entry(full, "lab02"), readonly / cache_entry(full, "lab02").name)
    cache_entry(full, "lab02").unlink()
    # The full one: filled to the last block. The read-only one: remounted read-only.
    subprocess.run(["dd", "if=/dev/zero", f"of={full / 'filler'}", "bs=4k"], capture_output=True, check=False)
    subprocess.run(["mount", "-o", "remount,ro", str(readonly)], check=True)
    break_hosts(lab, {"lab01": "nginx_stopped", "lab02": "nginx_stopped"})
    runs = {host: Run(tmp_path / host, inventory(lab, {host: host}, tmp_path / f"{host}.json"), cache=cache,
                      artifacts=tmp_path / "artifacts", variables={"remediate_backend": "runbook"}).start()
            for host, cache in (("lab01", full), ("lab02", readonly))}
    for host, cache in (("lab01", full), ("lab02", readonly)):
        run = runs[host].wait()
        assert cache_entry(cache, host).read_bytes() == good[host], f"{host}: the good entry was replaced"
        report = run.report
        # ansible-playbook's own exit code stays 0 (the cache is written after the task);
        # the report is where the loss is said.
        assert report["ok"] is False, report
        assert [e["host"] for e in report["errors"]] == [host], report["errors"]
        assert "memory not saved" in report["errors"][0]["error"]
        outcome = run.outcome(host, "nginx")
        assert "memory not saved" in outcome["reason"], outcome
        # The fix itself ran once, in the host, and healed it.
        assert fixes(lab, host) == ["nginx start"], fixes(lab, host)
        assert lab.health(host, ["nginx"])["nginx"].healthy


# ------------------------------------------------------------------------------- SIGKILL


def test_a_controller_killed_at_each_phase_is_accounted_for_by_the_rerun(lab, tmp_path):
    """One run, four hosts, each held at a different phase of the same plan, then SIGKILL:

    lab01 before the plan's commands (intent journaled), lab02 between its two commands,
    lab03 after its commands and before the verification, lab04 after the verification
    and before the memory is written. The rerun must verify first and never run a command
    of a half-applied plan again.
    """
    break_hosts(lab, {h: "nginx_stopped" for h in HOSTS})
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    (pauses / "before_commands@lab01").touch()
    (pauses / "after_verify@lab04").touch()
    for host, when, word in (("lab02", "after", "configtest"), ("lab03", "after", "start")):
        lab.exec(host, f"echo {word} > /etc/sentinel-pause/{when} && touch /tmp/sentinel-hold", check=True)
    inv = inventory(lab, {h: h for h in HOSTS}, tmp_path / "inventory.json")
    cache, artifacts = tmp_path / "cache", tmp_path / "artifacts"
    two_step = plan("service nginx configtest", "service nginx start")
    with LLMServer(rules=[{"match": r"Service: nginx\b", "reply": two_step}], model=MODEL) as server:
        # No canary: the four hosts must run the shared plan at once to be held at four phases.
        killed = Run(tmp_path / "killed", inv, cache=cache, artifacts=artifacts,
                     variables=dict(llm_vars(server.url), remediate_canary_size=0),
                     env={"SENTINEL_TEST_PAUSE_DIR": str(pauses), "PYTHONPATH": str(PAUSE_HOOK)}).start()
        wait_for(lambda: all((pauses / f"{p}.reached").exists() for p in ("before_commands@lab01", "after_verify@lab04"))
                 and all(lab.exec(h, "test -e /tmp/sentinel-paused").ok for h in ("lab02", "lab03")),
                 180, "every host held at its phase", killed)
        killed.kill()
        for host in ("lab02", "lab03"):  # let the commands left running on the host finish
            lab.exec(host, "rm -f /tmp/sentinel-hold", check=True)
        for host in HOSTS:
            wait_for(lambda h=host: not lab.exec(h, ["pgrep", "-f", "AnsiballZ"]).ok, 60, f"{host}'s module to end")
        first = {h: fixes(lab, h) for h in HOSTS}
        # What the killed run left: exactly what reached each host before the kill.
        assert first["lab01"] == [], first
        assert first["lab02"][0] == "nginx configtest", first
        assert first["lab03"] == first["lab04"] == ["nginx configtest", "nginx start"], first
        records = {h: journal(artifacts, h) for h in HOSTS}
        for host in HOSTS:
            intents = [r for r in records[host] if r["kind"] == "intent"]
            assert len(intents) == 1 and [c["command"] for c in intents[0]["commands"]] == \
                ["service nginx configtest", "service nginx start"], (host, records[host])
        for host in ("lab01", "lab02", "lab03"):
            assert not [r for r in records[host] if r["kind"] == "result"], (host, records[host])
        (result,) = [r for r in records["lab04"] if r["kind"] == "result"]
        assert result["healthy"] is True and [r["rc"] for r in result["results"]] == [0, 0], result
        # The rerun: same model answer, same cache and journal.
        rerun = Run(tmp_path / "rerun", inv, cache=cache, artifacts=artifacts, variables=llm_vars(server.url))()
    assert rerun.rc == 0, rerun.output[-3000:]
    after = {h: fixes(lab, h)[len(first[h]):] for h in HOSTS}
    for host in HOSTS:
        assert lab.health(host, ["nginx"])["nginx"].healthy, host
        assert "busy" not in rerun.outcome(host, "nginx")["state"], rerun.outcome(host, "nginx")
        # No command of the interrupted plan ran a second time.
        assert not set(after[host]) & set(first[host]), (host, first[host], after[host])
        assert all(after[host].count(c) <= 1 for c in after[host]), (host, after[host])
    # lab01: nothing had reached it; the rerun verified (still broken), did not replay the
    # interrupted plan, and healed with another one.
    o = rerun.outcome("lab01", "nginx")
    assert o["state"] == "healed" and o["attempts"] == 2, o
    interrupted = [c for c in o["commands"] if c["attempt"] == 1]
    assert [c["command"] for c in interrupted] == ["service nginx configtest", "service nginx start"] and \
        {c["rc"] for c in interrupted} == {-1}, o["commands"]  # counted as run, outcome unknown
    assert len(after["lab01"]) == 1 and after["lab01"][0] not in ("nginx configtest", "nginx start"), after
    # lab02, lab03: the host finished the plan after the kill; the rerun saw it healthy and ran nothing.
    for host in ("lab02", "lab03"):
        o = rerun.outcome(host, "nginx")
        assert o["state"] == "healthy" and "interrupted" in o["reason"], o
        assert after[host] == [], (host, after[host])
        rec = journal(artifacts, host)
        assert rec[-1]["kind"] == "closed" and rec[-1]["state"] == "healthy", rec[-1]
    # lab04: verified healed before the kill; the rerun found it healthy, ran nothing, and
    # wrote the episode the killed run could not, from the journal's intent and result.
    o = rerun.outcome("lab04", "nginx")
    assert o["state"] == "healthy" and "recovered from the journal" in o["reason"], o
    assert after["lab04"] == []
    assert [r["kind"] for r in journal(artifacts, "lab04")] == ["intent", "result", "closed"]
    learned = [e for e in episodes(cache, "lab04") if e.get("success")]
    assert learned and [c["command"] if isinstance(c, dict) else c for c in learned[-1]["commands"]] == \
        ["service nginx configtest", "service nginx start"], episodes(cache, "lab04")


# ------------------------------------------------------------------------------- concurrency


def test_concurrent_playbook_and_driver_runs_remediate_each_target_once(lab, tmp_path):
    """A playbook, a driver, and a driver whose inventory names the same containers
    differently, all at once: one remediation per container, the others say busy."""
    break_hosts(lab, {"lab01": "nginx_stopped", "lab02": "nginx_stopped"})
    cache = tmp_path / "cache"
    slow = plan("service nginx start", delay=8)
    with LLMServer(rules=[{"match": r"Service: nginx\b", "reply": slow}], model=MODEL) as server:
        variables = llm_vars(server.url, timeout=20)
        plain = inventory(lab, {"lab01": "lab01", "lab02": "lab02"}, tmp_path / "p.json")
        runs = {"playbook": Run(tmp_path / "playbook", plain, cache=cache, artifacts=tmp_path / "playbook-artifacts",
                                variables=variables)}
        for name, names in (("driver", {"lab01": "lab01", "lab02": "lab02"}),
                            ("aliased", {"web-a": "lab01", "web-b": "lab02"})):
            inv = inventory(lab, names, tmp_path / f"{name}.json")
            argv = [str(BIN / "sentinel-remediate"), "--state-dir", str(tmp_path / f"state-{name}"), "--project-dir",
                    str(REPO), "-q", "run", "-i", str(inv), "--format", "json"]
            for key, value in variables.items():
                argv += ["-e", f"{key}={json.dumps(value)}"]
            runs[name] = Run(tmp_path / name, inv, cache=cache, artifacts=tmp_path / f"state-{name}" / "remediation",
                             name=name, argv=argv)
        for run in runs.values():
            run.start()
        for run in runs.values():
            run.wait()
    reports = {"playbook": runs["playbook"].report}
    for name in ("driver", "aliased"):
        out = runs[name].output
        reports[name] = json.loads(out[out.index("{"):]) if "{" in out else {}
        assert reports[name].get("outcomes"), (name, out[-3000:])
    for host in ("lab01", "lab02"):
        assert fixes(lab, host) == ["nginx start"], (host, fixes(lab, host))
        assert lab.health(host, ["nginx"])["nginx"].healthy
    alias = {"web-a": "lab01", "web-b": "lab02"}
    by_target: dict[str, list[tuple[str, dict]]] = {}
    for name, report in reports.items():
        for o in report["outcomes"]:
            if o["service"] == "nginx":
                by_target.setdefault(alias.get(o["host"], o["host"]), []).append((name, o))
    for host, seen in by_target.items():
        states = sorted(o["state"] for _run, o in seen)
        assert len(seen) == 3 and states.count("healed") == 1, (host, seen)
        for name, o in seen:
            if o["state"] == "busy":
                assert "being remediated by" in o["reason"], o
            else:
                assert o["state"] in ("healed", "healthy"), (name, o)
    assert any(o["state"] == "busy" for seen in by_target.values() for _run, o in seen), by_target


def test_controllers_sharing_a_redis_cache_remediate_each_target_once(lab, tmp_path):
    """Two controllers (their own lease directories and artifacts, one inventory naming the
    containers differently) on one Redis fact cache, at once: the host lease lives in that
    Redis, so each container is remediated once and the other controller says busy."""
    from redis_server import RedisServer, skip_or_fail_without_redis  # pylint: disable=import-outside-toplevel

    skip_or_fail_without_redis()
    break_hosts(lab, {"lab01": "nginx_stopped"})
    slow = plan("service nginx start", delay=8)
    with RedisServer(tmp_path) as redis_server, \
            LLMServer(rules=[{"match": r"Service: nginx\b", "reply": slow}], model=MODEL) as server:
        env = {"ANSIBLE_CACHE_PLUGIN": "community.general.redis",
               "ANSIBLE_CACHE_PLUGIN_CONNECTION": redis_server.connection,
               "ANSIBLE_CACHE_PLUGIN_PREFIX": "fi_lease_"}
        runs = {}
        for name, names in (("ctl1", {"lab01": "lab01"}), ("ctl2", {"web-a": "lab01"})):
            inv = inventory(lab, names, tmp_path / f"{name}.json")
            runs[name] = Run(tmp_path / name, inv, cache=tmp_path / f"{name}-unused-cache", name=name,
                             artifacts=tmp_path / f"{name}-artifacts", env=env,
                             variables=llm_vars(server.url, timeout=20)
                             | {"remediate_lease_dir": str(tmp_path / f"{name}-leases")})
        for run in runs.values():
            run.start()
        for run in runs.values():
            run.wait()
        assert redis_server.client.keys("fi_lease_sentinel:lease:*") == []  # released when done
    assert fixes(lab, "lab01") == ["nginx start"], fixes(lab, "lab01")
    assert lab.health("lab01", ["nginx"])["nginx"].healthy
    outcomes = {name: next(o for o in run.report["outcomes"] if o["service"] == "nginx")
                for name, run in runs.items()}
    states = sorted(o["state"] for o in outcomes.values())
    assert states == ["busy", "healed"], outcomes
    busy = next(o for o in outcomes.values() if o["state"] == "busy")
    assert "being remediated by" in busy["reason"], busy
    for name in runs:  # no file lease was involved: each controller's own directory stays empty
        assert not list((tmp_path / f"{name}-leases").glob("*.json")), name


# ------------------------------------------------------------------------------- LLM deadlines


@pytest.mark.parametrize("server_kind", ["drip", "silent"])
def test_a_stalling_llm_is_cut_at_its_deadline_and_delays_no_runbook_fix(lab, tmp_path, server_kind):
    deadline = 12
    # lab01 asks the model first (backend llm); lab02 plans from its runbooks, in the same run.
    break_hosts(lab, {"lab01": "redis_config_unknown_directive", "lab02": "nginx_stopped"})
    stall = {"drip": {**plan("service redis-server start"), "drip": 1.0},  # one byte a second, never silent
             "silent": {**plan("service redis-server start"), "delay": 120}}[server_kind]
    variables = llm_vars("", timeout=4, deadline=deadline)
    with LLMServer(rules=[{"match": r"Service: redis", "reply": stall}], model=MODEL) as server:
        variables["remediate_llm"]["base_url"] = server.url
        variables.pop("remediate_backend")
        inv = inventory(lab, {"lab01": "lab01", "lab02": "lab02"}, tmp_path / "inv.json",
                        host_vars={"lab01": {"remediate_backend": "llm"}, "lab02": {"remediate_backend": "runbook"}})
        run = Run(tmp_path, inv, cache=tmp_path / "cache", artifacts=tmp_path / "artifacts",
                  # The subject is the model's deadline: the known-good restore (the shared host's
                  # earlier healthy passes recorded redis.conf) would plan ahead of the model.
                  variables={**variables, "remediate_max_retries": 1, "remediate_known_good": False})(timeout=240)
        asked = len(server.chat_requests)
    assert asked >= 1, "the model was never asked: the case tests nothing"
    stuck = run.outcome("lab01", "redis-server")
    # The outcome says what went wrong with the model: its kind and its message.
    kind = {"drip": "deadline", "silent": "timeout"}[server_kind]
    assert stuck["llm_error"].startswith(f"{kind}: ") and len(stuck["llm_error"]) > len(kind) + 10, stuck
    assert stuck["sources"][0] != "llm" and not [c for c in stuck["commands"] if c["source"] == "llm"], stuck
    # The planning step ended within the deadline (+ margin): from the attempt's start in the
    # report to the journal's intent (or the attempt's end when nothing ran).
    first = stuck["timeline"][0]
    intents = [r for r in journal(tmp_path / "artifacts", "lab01") if r["kind"] == "intent" and r["attempt"] == 1]
    ended = intents[0]["ts"] if intents else iso(first["finished"])
    assert ended - iso(first["started"]) <= deadline + 6, (first, intents[:1])
    # lab02's runbook fix did not wait for lab01's model: its commands went to the host (the
    # journal's intent) before lab01's planning ended, well inside the deadline. (Its outcome's
    # end also counts the host's own time to run and verify, which a loaded machine stretches.)
    fixed = run.outcome("lab02", "nginx")
    assert fixed["state"] == "healed" and fixed["sources"] == ["runbook"], fixed
    (sent,) = [r["ts"] for r in journal(tmp_path / "artifacts", "lab02") if r["kind"] == "intent"]
    assert sent < ended and sent < iso(first["started"]) + deadline, (sent, ended, first["started"])
    assert fixes(lab, "lab02") == ["nginx start"], fixes(lab, "lab02")
    lab.fix("lab01", "redis_config_unknown_directive")  # cheaper than the next test's reset


# ------------------------------------------------------------------------------- bad input


BAD_INPUT = {
    "retries out of range": ({"remediate_max_retries": -1}, [], "remediate_max_retries=-1"),
    "base_url that cannot work": ({"remediate_llm": {"base_url": "not a url", "api_key": "k", "model": MODEL}}, [],
                                  "base_url=not a url"),
    "host pattern matching nothing": ({"remediate_hosts": "nosuchhost"}, [], "remediate_hosts=nosuchhost matches no host"),
    # checked against the role's argument spec by the heal action, before its health round trip
    "backend the role does not know": ({"remediate_backend": "guess"}, [], "value of remediate_backend must be one of"),
    "webhook that is not http(s)": ({"remediate_webhook_url": "ftp://alerts.invalid/x"}, [],
                                    "remediate_webhook_url=ftp://alerts.invalid/x"),
    "limit matching nothing": ({}, ["--limit", "nosuchhost"], "nosuchhost"),
    # the role watches nothing by default: a host given no service is a mistake, said as such
    "no service to watch": ({"remediate_services": []}, [], "remediate_services is empty: this host watches no service"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_refused_before_any_host_is_touched(lab, tmp_path, case):
    variables, extra_argv, named = BAD_INPUT[case]
    break_hosts(lab, {"lab01": "nginx_stopped"})
    run = Run(tmp_path, inventory(lab, {"lab01": "lab01"}, tmp_path / "inv.json"), cache=tmp_path / "cache",
              artifacts=tmp_path / "artifacts", variables=variables)
    run.argv += extra_argv
    run(timeout=120)
    assert run.rc not in (0, None), (run.rc, run.output[-2000:])
    assert named in " ".join(run.output.split()), run.output[-2000:]
    assert "Traceback" not in run.output
    assert executed(lab, "lab01") == [], executed(lab, "lab01")
    lab.fix("lab01", "nginx_stopped")  # cheaper than the next test's reset


def test_a_missing_host_is_unreachable_and_the_others_are_handled(lab, tmp_path):
    run = Run(tmp_path, inventory(lab, {"lab01": "lab01", "ghost": "lab99"}, tmp_path / "inv.json"),
              cache=tmp_path / "cache", artifacts=tmp_path / "artifacts")(timeout=180)
    assert run.rc != 0
    ghost = [o for o in run.report["outcomes"] if o["host"] == "ghost"]
    assert ghost and all(o["state"] == "unreachable" for o in ghost), run.report["outcomes"]
    assert "lab99" in json.dumps(ghost) or "ghost" in json.dumps(ghost)
    assert run.outcome("lab01", "nginx")["state"] == "healthy"
    assert fixes(lab, "lab01") == []


def test_an_oversized_memory_entry_is_cut_with_a_warning_in_the_report(lab, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    episode = {"signature": "nginx:0000000000000000", "service": "nginx", "host": "lab01",
               "error": "service nginx status: nginx is not running (rc 3)", "diagnosis": "stopped",
               "commands": [{"command": "service nginx start", "source": "runbook", "verdict": "allow", "rc": 0}],
               "success": True, "attempts": 1, "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:00:01Z"}
    memory = [dict(episode, signature=f"nginx:{i:016x}") for i in range(10_000)]
    (cache / "s1_lab01").write_text(json.dumps({"__payload__": json.dumps({"sentinel_memory": memory})}),
                                    encoding="utf-8")
    run = Run(tmp_path, inventory(lab, {"lab01": "lab01"}, tmp_path / "inv.json"), cache=cache,
              artifacts=tmp_path / "artifacts", variables={"remediate_memory_max": 50})(timeout=300)
    assert run.rc == 0, run.output[-3000:]
    warned = [w["warning"] for w in run.report["warnings"] if w["host"] == "lab01" and "10000 episodes" in w["warning"]]
    assert warned and "remediate_memory_max" in warned[0], run.report["warnings"]
    assert fixes(lab, "lab01") == []
    kept = episodes(cache, "lab01")  # the cut entry was written back, newest episodes kept
    assert len(kept) == 50 and kept[-1]["signature"] == f"nginx:{9_999:016x}", len(kept)
