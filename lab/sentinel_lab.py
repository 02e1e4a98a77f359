"""The lab: Debian containers running real services, broken on purpose from lab/faults.yml.

Used three ways: the `lab/lab` command (run this file), a Python API for tests
(`Lab(prefix=...)` with up/down/exec/inject/fix/health) and the inventory script
inventories/lab/containers.sh (`Lab().inventory()`).

Only the standard library is needed, except PyYAML for the fault catalogue (imported when
the catalogue is read), so the inventory script also runs on a bare system python3.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAB_DIR = Path(__file__).resolve().parent
REPO = LAB_DIR.parent
CATALOGUE_PATH = LAB_DIR / "faults.yml"
DEFAULT_PREFIX = "sentinel-lab"
DEFAULT_IMAGE = "sentinel-lab:latest"
HOST_RE = re.compile(r"^lab\d{2,}$")
PREFIX_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
SERVICES = ("nginx", "redis", "cron", "ssh")
# The size of the redis tmpfs: small, so that the disk-full fault fills it in an instant.
REDIS_TMPFS = "/var/lib/redis:size=16m"
FAULT_FIELDS = ("name", "service", "description", "inject", "diagnose", "fix", "healthy", "needs_human")
PLACEHOLDER_RE = re.compile(r"\{([a-z_]+):([^{}]+)\}")
PLACEHOLDERS = {"port_owner_pid": "the PID of the process listening on TCP port N (the lowest when several)"}


class LabError(Exception):
    """A lab operation failed; the message says what and how to go on."""


class LabUsageError(LabError):
    """The caller named something that does not exist (a fault, a host)."""


# ---------------------------------------------------------------------------------------
# The fault catalogue


@dataclass(frozen=True)
class Fault:
    name: str
    service: str
    description: str
    inject: tuple[str, ...]
    diagnose: tuple[Mapping[str, str], ...]
    fix: tuple[str, ...]
    healthy: str
    needs_human: bool
    contract: bool = True

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Fault:
        return cls(
            name=data["name"],
            service=data["service"],
            description=" ".join(str(data["description"]).split()),
            inject=tuple(str(c) for c in data["inject"]),
            diagnose=tuple(dict(d) for d in data["diagnose"]),
            fix=tuple(str(c) for c in data["fix"]),
            healthy=" ".join(str(data["healthy"]).split()),
            needs_human=bool(data["needs_human"]),
            contract=bool(data.get("contract", True)),
        )


@dataclass(frozen=True)
class Catalogue:
    services: Mapping[str, Mapping[str, str]]
    faults: Mapping[str, Fault]

    def get(self, name: str) -> Fault:
        try:
            return self.faults[name]
        except KeyError:
            raise LabUsageError(f"unknown fault {name!r}; known: {', '.join(self.faults)}") from None

    def names(self) -> list[str]:
        return list(self.faults)


def read_catalogue_document(path: Path | str = CATALOGUE_PATH) -> Any:
    import yaml  # only here: the inventory script must not need PyYAML

    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def catalogue_problems(document: Any) -> list[str]:
    """Everything wrong with a catalogue document (empty when it is valid)."""
    problems: list[str] = []
    if not isinstance(document, Mapping):
        return ["the catalogue must be a mapping with `services` and `faults`"]
    services = document.get("services")
    if not isinstance(services, Mapping) or not services:
        problems.append("`services` must be a non-empty mapping")
        services = {}
    for svc, spec in services.items():
        if svc not in SERVICES:
            problems.append(f"service {svc!r} is not one the lab checks ({', '.join(SERVICES)})")
        if not isinstance(spec, Mapping) or not spec.get("init") or not spec.get("checks"):
            problems.append(f"service {svc!r} needs `init` and `checks`")
    faults = document.get("faults")
    if not isinstance(faults, list) or not faults:
        return problems + ["`faults` must be a non-empty list"]
    seen: set[str] = set()
    for index, fault in enumerate(faults):
        where = f"faults[{index}]"
        if not isinstance(fault, Mapping):
            problems.append(f"{where} is not a mapping")
            continue
        name = fault.get("name")
        where = f"fault {name!r}" if name else where
        missing = [key for key in FAULT_FIELDS if key not in fault]
        if missing:
            problems.append(f"{where} lacks {', '.join(missing)}")
            continue
        unknown = sorted(set(fault) - set(FAULT_FIELDS) - {"contract"})
        if unknown:
            problems.append(f"{where} has unknown keys {', '.join(unknown)}")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            problems.append(f"{where}: name must be snake_case")
        elif name in seen:
            problems.append(f"{where} is defined twice")
        seen.add(str(name))
        if fault["service"] not in services:
            problems.append(f"{where}: service {fault['service']!r} is not in `services`")
        elif not str(fault["service"] or "") or not name.startswith(str(fault["service"])):
            problems.append(f"{where}: the name should start with its service {fault['service']!r}")
        for key in ("description", "healthy"):
            if not isinstance(fault[key], str) or not fault[key].strip():
                problems.append(f"{where}: `{key}` must be a non-empty string")
        for key in ("inject", "fix"):
            value = fault[key]
            if not isinstance(value, list) or not value or not all(isinstance(c, str) and c.strip() for c in value):
                problems.append(f"{where}: `{key}` must be a non-empty list of command strings")
        if isinstance(fault["fix"], list):
            for command in fault["fix"]:
                problems.extend(f"{where}: fix {command!r}: {p}" for p in _fix_command_problems(str(command)))
        diagnose = fault["diagnose"]
        if not isinstance(diagnose, list) or not diagnose or not all(
            isinstance(d, Mapping) and set(d) == {"command", "shows"} and all(isinstance(v, str) and v for v in d.values())
            for d in diagnose
        ):
            problems.append(f"{where}: `diagnose` must be a non-empty list of {{command, shows}}")
        if not isinstance(fault["needs_human"], bool):
            problems.append(f"{where}: `needs_human` must be true or false")
        if "contract" in fault and not isinstance(fault["contract"], bool):
            problems.append(f"{where}: `contract` must be true or false")
    return problems


def _fix_command_problems(command: str) -> list[str]:
    """A fix runs without a shell: no shell syntax, only known placeholders."""
    problems = []
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return [f"cannot be split into words ({exc})"]
    if not words:
        problems.append("is empty")
    shell_words = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"}
    if any(w in shell_words or w.startswith(("$(", "`")) for w in words):
        problems.append("uses shell syntax, but fixes run without a shell")
    for kind, _arg in PLACEHOLDER_RE.findall(command):
        if kind not in PLACEHOLDERS:
            problems.append(f"unknown placeholder {{{kind}:...}}; known: {', '.join(PLACEHOLDERS)}")
    return problems


def load_catalogue(path: Path | str = CATALOGUE_PATH) -> Catalogue:
    document = read_catalogue_document(path)
    problems = catalogue_problems(document)
    if problems:
        raise LabError(f"{path}: invalid fault catalogue:\n  " + "\n  ".join(problems))
    faults = {f["name"]: Fault.from_mapping(f) for f in document["faults"]}
    return Catalogue(services={k: dict(v) for k, v in document["services"].items()}, faults=faults)


DOC_BEGIN = "<!-- BEGIN fault catalogue: generated by `lab faults --markdown`, do not edit -->"
DOC_END = "<!-- END fault catalogue -->"


def _cell_code(commands: Iterable[str]) -> str:
    return "<br>".join("`" + c.strip().replace("\n", " ").replace("|", "\\|") + "`" for c in commands)


def _cell_text(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_catalogue_markdown(catalogue: Catalogue) -> str:
    """The catalogue as the Markdown table in docs/lab.md (between DOC_BEGIN and DOC_END)."""
    lines = [
        DOC_BEGIN,
        "",
        "| fault | service | what happens, how injected | how diagnosed | fix | healthy means | needs human |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in catalogue.faults.values():
        name = f"`{f.name}`" + ("" if f.contract else " (extra)")
        diagnose = "<br>".join(f"`{_cell_text(d['command'])}` shows {_cell_text(d['shows'])}" for d in f.diagnose)
        lines.append(
            f"| {name} | {f.service} | {_cell_text(f.description)}<br>{_cell_code(f.inject)} | {diagnose} "
            f"| {_cell_code(f.fix)} | {_cell_text(f.healthy)} | {'**yes**' if f.needs_human else 'no'} |"
        )
    lines += ["", "Health checks of the lab (the referee, independent of the collection):", ""]
    lines += [f"- **{svc}** (`service {spec['init']}`): {_cell_text(spec['checks'])}" for svc, spec in catalogue.services.items()]
    lines += ["", DOC_END]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# The lab's own health check, run inside a container by python3 (stdlib only). Independent
# of the collection on purpose: it is the referee the product is judged by.

HEALTH_SCRIPT = r'''
import json, re, subprocess, sys, urllib.error, urllib.request

def run(argv, timeout=5):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout + p.stderr).strip()

def listeners(port):
    rc, out = run(["ss", "-ltnpH", "sport = :%d" % port])
    rows = [line for line in out.splitlines() if "LISTEN" in line]
    return [(row.split()[3], re.findall(r'\("([^"]+)",pid=(\d+)', row)) for row in rows]

def check(name, ok, detail):
    return {"name": name, "ok": bool(ok), "detail": detail[:300]}

def describe(rows):
    if not rows:
        return "nothing listens"
    return "; ".join("%s by %s" % (addr, ",".join(sorted({n for n, _ in procs})) or "an unknown process")
                     for addr, procs in rows)

def nginx():
    rc, out = run(["service", "nginx", "status"])
    checks = [check("service", rc == 0, "exit %d: %s" % (rc, out or "(no output)"))]
    rows = listeners(80)
    owned = bool(rows) and all(procs and all(n == "nginx" for n, _ in procs) for _, procs in rows)
    checks.append(check("port", owned, ":80 " + describe(rows)))
    try:
        status = urllib.request.urlopen("http://127.0.0.1/", timeout=3).status
        detail = "GET / -> %d" % status
    except urllib.error.HTTPError as exc:
        status, detail = exc.code, "GET / -> %d" % exc.code
    except Exception as exc:
        status, detail = 0, "GET / failed: %s" % getattr(exc, "reason", exc)
    checks.append(check("http", status == 200, detail))
    return checks

def redis():
    rc, out = run(["redis-cli", "ping"])
    checks = [check("ping", out == "PONG", out or "exit %d" % rc)]
    rc, out = run(["redis-cli", "set", "sentinel:probe", "1"])
    checks.append(check("write", out == "OK", out or "exit %d" % rc))
    return checks

def cron():
    rc, out = run(["pgrep", "-x", "cron"])
    return [check("process", rc == 0, "cron pid " + out.replace("\n", ",") if rc == 0 else "no cron process")]

def ssh():
    rows = listeners(22)
    ok = any(n == "sshd" for _, procs in rows for n, _ in procs)
    return [check("port", ok, ":22 " + describe(rows))]

result = {}
for name in sys.argv[1:] or ["nginx", "redis", "cron", "ssh"]:
    checks = globals()[name]()
    result[name] = {"healthy": all(c["ok"] for c in checks), "checks": checks}
print(json.dumps(result))
'''


@dataclass
class ExecResult:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def output(self) -> str:
        return "\n".join(part for part in (self.stdout.strip(), self.stderr.strip()) if part)


@dataclass
class ServiceHealth:
    service: str
    healthy: bool
    checks: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        if self.healthy:
            return "healthy"
        return "; ".join(f"{c['name']}: {c['detail']}" for c in self.checks if not c["ok"])


# ---------------------------------------------------------------------------------------
# The lab


def docker_available(docker: str = "docker") -> str | None:
    """None when docker answers, else why not (for skips and error messages)."""
    if not shutil.which(docker):
        return f"the `{docker}` CLI is not installed"
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20, check=False
        )
    except subprocess.TimeoutExpired:
        return "`docker info` timed out"
    if proc.returncode != 0:
        return f"the Docker daemon does not answer ({proc.stderr.strip() or proc.stdout.strip()}); run scripts/setup"
    return None


class Lab:
    """One set of lab containers, `<prefix>-lab01` ... `<prefix>-labNN`."""

    def __init__(
        self,
        prefix: str | None = None,
        image: str | None = None,
        catalogue: Catalogue | None = None,
        docker: str = "docker",
    ) -> None:
        self.prefix = prefix or os.environ.get("SENTINEL_LAB_PREFIX") or DEFAULT_PREFIX
        if not PREFIX_RE.match(self.prefix):
            raise LabUsageError(f"bad lab prefix {self.prefix!r}: use letters, digits, '.', '_' or '-'")
        self.image = image or os.environ.get("SENTINEL_LAB_IMAGE") or DEFAULT_IMAGE
        self.docker = docker
        self._catalogue = catalogue

    # -- naming --------------------------------------------------------------------------

    @property
    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            self._catalogue = load_catalogue()
        return self._catalogue

    @staticmethod
    def host_name(index: int) -> str:
        return f"lab{index:02d}"

    def container(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    # -- docker --------------------------------------------------------------------------

    def _docker(self, *args: str, timeout: float = 120, stdin: str | None = None) -> ExecResult:
        argv = [self.docker, *args]
        try:
            proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError:
            raise LabError(f"the `{self.docker}` CLI is not installed; run scripts/setup") from None
        except subprocess.TimeoutExpired:
            raise LabError(f"`{shlex.join(argv[:6])}` did not finish within {timeout:g} s") from None
        return ExecResult(argv, proc.returncode, proc.stdout, proc.stderr)

    def containers(self) -> dict[str, dict[str, str]]:
        """This prefix's containers by host: {host: {container, state, image}}."""
        result = self._docker(
            "ps", "-a", "--filter", f"label=sentinel.lab.prefix={self.prefix}",
            "--format", '{{.Label "sentinel.lab.host"}}\t{{.Names}}\t{{.State}}\t{{.Image}}',
        )
        if not result.ok:
            raise LabError(f"cannot list containers: {result.output()}")
        found = {}
        for line in result.stdout.splitlines():
            host, name, state, image = (line.split("\t") + ["", "", "", ""])[:4]
            if host:
                found[host] = {"container": name, "state": state, "image": image}
        return dict(sorted(found.items()))

    def hosts(self) -> list[str]:
        """The hosts whose containers run."""
        return [h for h, c in self.containers().items() if c["state"] == "running"]

    def _require_host(self, host: str) -> str:
        if not HOST_RE.match(host):
            raise LabUsageError(f"bad host name {host!r}: lab hosts are lab01, lab02, ...")
        containers = self.containers()
        if containers.get(host, {}).get("state") != "running":
            running = ", ".join(h for h, c in containers.items() if c["state"] == "running") or "none"
            raise LabUsageError(f"no running lab host {host!r} (prefix {self.prefix}); running: {running}")
        return self.container(host)

    def _run_container(self, host: str) -> None:
        result = self._docker(
            "run", "-d", "--init", "--network", "none",
            # Root sees every process's sockets (`ss -p`), as on a real host; Docker's
            # default capabilities hide those of other users' processes.
            "--cap-add", "SYS_PTRACE",
            "--hostname", host, "--name", self.container(host),
            "--tmpfs", REDIS_TMPFS,
            "--label", f"sentinel.lab.host={host}", "--label", f"sentinel.lab.prefix={self.prefix}",
            self.image,
        )
        if not result.ok:
            raise LabError(f"cannot start {self.container(host)}: {result.output()}")

    def image_problem(self) -> str | None:
        problem = docker_available(self.docker)
        if problem:
            return problem
        if not self._docker("image", "inspect", self.image).ok:
            return f"the lab image {self.image} is missing; run scripts/setup (or bash lab/image/build.sh)"
        return None

    # -- lifecycle -----------------------------------------------------------------------

    def up(self, count: int, timeout: float = 90) -> list[str]:
        """Make lab01..labNN run with healthy services; existing running hosts are kept."""
        if count < 1:
            raise LabUsageError("lab up needs a count of at least 1")
        problem = self.image_problem()
        if problem:
            raise LabError(problem)
        wanted = [self.host_name(i) for i in range(1, count + 1)]
        existing = self.containers()

        def ensure(host: str) -> None:
            state = existing.get(host, {}).get("state")
            if state == "running":
                return
            if state is not None:  # created, exited, dead: start afresh rather than revive
                self._docker("rm", "-f", self.container(host))
            self._run_container(host)

        with ThreadPoolExecutor(max_workers=min(8, count)) as pool:
            list(pool.map(ensure, wanted))
            list(pool.map(lambda h: self.wait_health(h, timeout=timeout), wanted))
        return wanted

    def down(self) -> list[str]:
        """Remove every container of this prefix."""
        names = [c["container"] for c in self.containers().values()]
        if names:
            result = self._docker("rm", "-f", *names)
            if not result.ok:
                raise LabError(f"cannot remove {', '.join(names)}: {result.output()}")
        return names

    def reset(self, host: str, timeout: float = 90) -> None:
        """Recreate one host from the image: every fault gone."""
        if not HOST_RE.match(host):
            raise LabUsageError(f"bad host name {host!r}: lab hosts are lab01, lab02, ...")
        self._docker("rm", "-f", self.container(host))
        self._run_container(host)
        self.wait_health(host, timeout=timeout)

    # -- inside a host -------------------------------------------------------------------

    def exec(
        self,
        host: str,
        command: str | Sequence[str],
        user: str = "root",
        timeout: float = 60,
        check: bool = False,
        stdin: str | None = None,
    ) -> ExecResult:
        """Run a command in a host: a string through `sh -c`, a sequence as argv."""
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        result = self._docker("exec", *(["-i"] if stdin is not None else []), "-u", user,
                              self.container(host), *argv, timeout=timeout, stdin=stdin)
        if check and not result.ok:
            raise LabError(f"{host}: `{shlex.join(argv)}` exited {result.rc}: {result.output()}")
        return result

    def health(self, host: str, services: Iterable[str] | None = None) -> dict[str, ServiceHealth]:
        services = list(services or SERVICES)
        unknown = [s for s in services if s not in SERVICES]
        if unknown:
            raise LabUsageError(f"unknown service {unknown[0]!r}; known: {', '.join(SERVICES)}")
        result = self.exec(host, ["python3", "-", *services], stdin=HEALTH_SCRIPT, timeout=30)
        if not result.ok:
            raise LabError(f"{host}: the health check failed to run: {result.output()}")
        data = json.loads(result.stdout)
        return {name: ServiceHealth(name, item["healthy"], item["checks"]) for name, item in data.items()}

    def wait_health(
        self, host: str, services: Iterable[str] | None = None, healthy: bool = True, timeout: float = 20
    ) -> dict[str, ServiceHealth]:
        """Poll until every service is healthy (or, with healthy=False, until one is broken)."""
        services = list(services or SERVICES)
        deadline = time.monotonic() + timeout
        while True:
            report = self.health(host, services)
            done = all(h.healthy for h in report.values()) if healthy else not all(h.healthy for h in report.values())
            if done:
                return report
            if time.monotonic() > deadline:
                state = "healthy" if healthy else "broken"
                detail = "; ".join(f"{s}: {h.summary()}" for s, h in report.items())
                raise LabError(f"{host}: not {state} after {timeout:g} s ({detail})")
            time.sleep(0.3)

    # -- faults --------------------------------------------------------------------------

    def inject(self, host: str, fault: str) -> Fault:
        """Break a host the way the catalogue says; raise if a step fails."""
        spec = self.catalogue.get(fault)
        self._require_host(host)
        for step in spec.inject:
            result = self.exec(host, step, timeout=60)
            if not result.ok:
                raise LabError(f"{host}: injecting {fault}: `{step}` exited {result.rc}: {result.output()}")
        return spec

    def fix_commands(self, host: str, fault: str) -> list[list[str]]:
        """The catalogue fix of a fault as argv lists, placeholders resolved on the host."""
        spec = self.catalogue.get(fault)
        return [[self._resolve(host, word) for word in shlex.split(command)] for command in spec.fix]

    def fix(self, host: str, fault: str, timeout: float = 20) -> dict[str, ServiceHealth]:
        """Apply the catalogue's fix (as root, no shell) and wait until the service is healthy."""
        spec = self.catalogue.get(fault)
        self._require_host(host)
        for argv in self.fix_commands(host, fault):
            result = self.exec(host, argv, timeout=60)
            if not result.ok:
                raise LabError(f"{host}: fixing {fault}: `{shlex.join(argv)}` exited {result.rc}: {result.output()}")
        return self.wait_health(host, [spec.service], timeout=timeout)

    def _resolve(self, host: str, word: str) -> str:
        def replace(match: re.Match[str]) -> str:
            kind, arg = match.groups()
            if kind == "port_owner_pid":
                return self.port_owner_pid(host, int(arg))
            raise LabError(f"unknown placeholder {match.group(0)}; known: {', '.join(PLACEHOLDERS)}")

        return PLACEHOLDER_RE.sub(replace, word)

    def port_owner_pid(self, host: str, port: int) -> str:
        out = self.exec(host, ["ss", "-ltnpH", f"sport = :{port}"], check=True).stdout
        pids = sorted({int(p) for p in re.findall(r"pid=(\d+)", out)})
        if not pids:
            raise LabError(f"{host}: no process listens on TCP :{port}")
        return str(pids[0])

    # -- reporting -----------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        rows = []
        for host, info in self.containers().items():
            row: dict[str, Any] = {"host": host, **info, "health": {}}
            if info["state"] == "running":
                row["health"] = {s: h.summary() for s, h in self.health(host).items()}
            rows.append(row)
        return rows

    def inventory(self) -> dict[str, Any]:
        """An Ansible inventory (script JSON format) of this prefix's running hosts."""
        hostvars = {}
        for host, info in self.containers().items():
            if info["state"] != "running":
                continue
            labels = self._labels(info["container"])
            hostvars[host] = {
                "ansible_host": info["container"],
                "sentinel_lab_container": info["container"],
                "sentinel_lab_tools_present": _split_labels(labels.get("sentinel.lab.tools_present")),
                "sentinel_lab_tools_absent": _split_labels(labels.get("sentinel.lab.tools_absent")),
            }
        group_vars = {
            "ansible_connection": "community.docker.docker",
            "ansible_user": "sentinel",
            # No ansible_become here: as a variable it would override `become: true` on
            # tasks. Become is off by default; tasks needing root ask for it (sudo).
            "ansible_python_interpreter": "/usr/bin/python3",
            "sentinel_lab_prefix": self.prefix,
        }
        return {"lab": {"hosts": list(hostvars), "vars": group_vars}, "_meta": {"hostvars": hostvars}}

    def write_inventory(self, path: Path | str) -> Path:
        """A static YAML inventory of this prefix (for tests running their own lab)."""
        data = self.inventory()
        group = {
            "hosts": data["_meta"]["hostvars"],
            "vars": {
                **data["lab"]["vars"],
                # As inventories/lab/group_vars/lab.yml says for the default lab.
                "remediation_policy": {"absent_tools": "{{ sentinel_lab_tools_absent }}"},
            },
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"all": {"children": {"lab": group}}}, indent=2) + "\n", encoding="utf-8")
        return path

    def _labels(self, container: str) -> dict[str, str]:
        result = self._docker("inspect", "--format", "{{json .Config.Labels}}", container)
        if not result.ok:
            return {}
        return json.loads(result.stdout or "null") or {}


def _split_labels(value: str | None) -> list[str]:
    return [item for item in (value or "").split(",") if item]


# ---------------------------------------------------------------------------------------
# The `lab` command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lab",
        description="Lab of Debian containers with real services and a catalogue of real faults.",
    )
    parser.add_argument("--prefix", help=f"container name prefix (env SENTINEL_LAB_PREFIX, default {DEFAULT_PREFIX})")
    parser.add_argument("--image", help=f"image (env SENTINEL_LAB_IMAGE, default {DEFAULT_IMAGE})")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser("up", help="start lab01..labNN and wait until their services are healthy")
    p.add_argument("count", type=int, nargs="?", default=3)
    sub.add_parser("down", help="remove every container of the prefix")
    sub.add_parser("status", help="containers and the health of their services")
    for name, text in (("inject", "break HOST with FAULT"), ("fix", "apply the catalogue's fix of FAULT on HOST")):
        p = sub.add_parser(name, help=text)
        p.add_argument("host")
        p.add_argument("fault")
    p = sub.add_parser("health", help="the lab's own health check (exit 1 when something is broken)")
    p.add_argument("host", nargs="?")
    p.add_argument("--service", action="append", choices=SERVICES)
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("faults", help="list the fault catalogue")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true")
    group.add_argument("--markdown", action="store_true", help="the table of docs/lab.md")
    p = sub.add_parser("reset", help="recreate HOST from the image")
    p.add_argument("host")
    p = sub.add_parser("inventory", help="print (or write to PATH) an Ansible inventory of the running hosts")
    p.add_argument("path", nargs="?")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except LabUsageError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    except LabError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    lab = Lab(prefix=args.prefix, image=args.image)
    if args.action == "up":
        start = time.monotonic()
        hosts = lab.up(args.count)
        print(f"lab up: {', '.join(hosts)} healthy in {time.monotonic() - start:.1f} s (prefix {lab.prefix})")
    elif args.action == "down":
        names = lab.down()
        print(f"lab down: removed {', '.join(names)}" if names else f"lab down: nothing to remove (prefix {lab.prefix})")
    elif args.action == "status":
        rows = lab.status()
        if not rows:
            print(f"no lab containers (prefix {lab.prefix}); start some with `lab up N`")
        for row in rows:
            print(f"{row['host']}  {row['container']}  {row['state']}")
            for service, summary in row["health"].items():
                print(f"    {service:<6} {summary}")
    elif args.action == "inject":
        fault = lab.inject(args.host, args.fault)
        print(f"{args.host}: injected {fault.name} ({fault.service})")
    elif args.action == "fix":
        fault = lab.catalogue.get(args.fault)
        lab.fix(args.host, args.fault)
        print(f"{args.host}: fixed {fault.name}; {fault.service} healthy")
    elif args.action == "health":
        hosts = [args.host] if args.host else lab.hosts()
        for host in hosts:
            lab._require_host(host)
        report = {h: lab.health(h, args.service) for h in hosts}
        broken = any(not s.healthy for r in report.values() for s in r.values())
        if args.json:
            print(json.dumps({h: {s: vars(v) for s, v in r.items()} for h, r in report.items()}, indent=2))
        else:
            if not hosts:
                print(f"no running lab hosts (prefix {lab.prefix})")
            for host, services in report.items():
                for service, health in services.items():
                    print(f"{host}  {service:<6} {'ok    ' if health.healthy else 'BROKEN'}  {health.summary()}")
        return 1 if broken else 0
    elif args.action == "faults":
        faults = lab.catalogue.faults.values()
        if args.json:
            print(json.dumps([vars(f) for f in faults], indent=2, default=list))
        elif args.markdown:
            print(render_catalogue_markdown(lab.catalogue), end="")
        else:
            for f in faults:
                flag = "needs human" if f.needs_human else ""
                print(f"{f.name:<28} {f.service:<6} {flag:<12} {f.description[:90]}")
    elif args.action == "reset":
        lab.reset(args.host)
        print(f"{args.host}: recreated, healthy")
    elif args.action == "inventory":
        if args.path:
            print(lab.write_inventory(args.path))
        else:
            print(json.dumps(lab.inventory(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
