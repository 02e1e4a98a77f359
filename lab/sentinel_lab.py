"""The lab: Debian containers running real services, broken on purpose from lab/faults.yml.

Two host kinds, both built from Debian packages by lab/image/build.sh:
  sysv     the original target: services under /etc/init.d scripts (`service`), no systemd
  systemd  systemd as PID 1: journald, systemctl, journalctl, unit files and drop-ins

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
import signal
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
HEALTH_SCRIPT_PATH = LAB_DIR / "lab_health.py"
RUNBOOKS_DIR = REPO / "runbooks"
GROUP_VARS_DIR = REPO / "inventories" / "lab" / "group_vars"
CORE_SERVICES = REPO / "lab" / "core_services.yml"
# What Lab.write_inventory() names for the role to watch (`lab inventory PATH --services SET`).
SERVICE_SETS = ("core", "kind")
DEFAULT_PREFIX = "sentinel-lab"
HOST_RE = re.compile(r"^lab\d{2,}$")
PREFIX_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")

KINDS = ("sysv", "systemd")
# What each kind runs; the lab's health check (lab/lab_health.py) knows every one of them.
SERVICES_OF_KIND = {
    "sysv": ("nginx", "redis", "cron", "ssh", "postgres", "app"),
    "systemd": ("nginx", "redis", "cron", "ssh", "postgres", "app", "journald"),
}
SERVICES = ("nginx", "redis", "cron", "ssh", "postgres", "app", "journald")
# Small filesystems of their own, so that the disk-full faults fill them in an instant
# and never touch the machine's disk.
TMPFS = ("/var/lib/redis:size=16m", "/var/lib/sentinel-app:size=16m")
JOURNAL_TMPFS = "/var/log/journal:size=48m"

FAULT_FIELDS = ("name", "service", "kinds", "description", "inject", "diagnose", "fix", "healthy", "needs_human")
OPTIONAL_FAULT_FIELDS = {"contract": False, "novel": False, "reset_after": False, "batch": ""}
BATCH_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
SERVICE_FIELDS = ("init", "kinds", "checks")
PLACEHOLDER_RE = re.compile(r"\{([a-z_]+):([^{}]+)\}")
PLACEHOLDERS = {
    "port_owner_pid": "the PID of the process listening on TCP port N (the lowest when several)",
    "zombie_parent_pid": "the PID of the parent of the zombie process named NAME (the process that never reaped it)",
}


class LabError(Exception):
    """A lab operation failed; the message says what and how to go on."""


class LabUsageError(LabError):
    """The caller named something that does not exist (a fault, a host, a kind)."""


def default_image(kind: str) -> str:
    """The image of a host kind: env SENTINEL_LAB_IMAGE (sysv) / SENTINEL_LAB_SYSTEMD_IMAGE,
    else <LAB_IMAGE_REPO>[-systemd]:latest as lab/image/build.sh tags it."""
    repo = os.environ.get("LAB_IMAGE_REPO") or "sentinel-lab"
    if kind == "sysv":
        return os.environ.get("SENTINEL_LAB_IMAGE") or f"{repo}:latest"
    return os.environ.get("SENTINEL_LAB_SYSTEMD_IMAGE") or f"{repo}-{kind}:latest"


def kinds_for(count: int, kind: str) -> list[str]:
    """The kind of lab01..labNN: one kind for all, or `mixed` (sysv, systemd, sysv, ...)."""
    if kind == "mixed":
        return [KINDS[i % len(KINDS)] for i in range(count)]
    if kind not in KINDS:
        raise LabUsageError(f"unknown host kind {kind!r}; known: {', '.join(KINDS)}, mixed")
    return [kind] * count


# ---------------------------------------------------------------------------------------
# The fault catalogue


def _per_kind(value: Any, kinds: Sequence[str]) -> dict[str, Any]:
    """A field given once for every kind (a list), or per kind ({kind: list})."""
    if isinstance(value, Mapping):
        return {k: value[k] for k in kinds}
    return {k: value for k in kinds}


@dataclass(frozen=True)
class Fault:
    name: str
    service: str
    kinds: tuple[str, ...]
    description: str
    inject: Mapping[str, tuple[str, ...]]
    diagnose: Mapping[str, tuple[Mapping[str, str], ...]]
    fix: Mapping[str, tuple[str, ...]]
    healthy: str
    needs_human: bool
    contract: bool = False
    novel: bool = False
    reset_after: bool = False
    batch: str = ""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Fault:
        kinds = tuple(data["kinds"])
        return cls(
            name=data["name"],
            service=data["service"],
            kinds=kinds,
            description=" ".join(str(data["description"]).split()),
            inject={k: tuple(str(c) for c in v) for k, v in _per_kind(data["inject"], kinds).items()},
            diagnose={k: tuple(dict(d) for d in v) for k, v in _per_kind(data["diagnose"], kinds).items()},
            fix={k: tuple(str(c) for c in v) for k, v in _per_kind(data["fix"], kinds).items()},
            healthy=" ".join(str(data["healthy"]).split()),
            needs_human=bool(data["needs_human"]),
            contract=bool(data.get("contract", False)),
            novel=bool(data.get("novel", False)),
            reset_after=bool(data.get("reset_after", False)),
            batch=str(data.get("batch", "")),
        )

    def steps(self, what: str, kind: str) -> tuple[Any, ...]:
        """The inject, diagnose or fix steps of this fault on a host of `kind`."""
        if kind not in self.kinds:
            raise LabUsageError(
                f"fault {self.name} happens on {'/'.join(self.kinds)} hosts, not on a {kind} host"
            )
        return getattr(self, what)[kind]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "service": self.service, "kinds": list(self.kinds), "description": self.description,
            "inject": {k: list(v) for k, v in self.inject.items()},
            "diagnose": {k: [dict(d) for d in v] for k, v in self.diagnose.items()},
            "fix": {k: list(v) for k, v in self.fix.items()},
            "healthy": self.healthy, "needs_human": self.needs_human, "contract": self.contract,
            "novel": self.novel, "reset_after": self.reset_after, "batch": self.batch,
        }


@dataclass(frozen=True)
class Catalogue:
    services: Mapping[str, Mapping[str, Any]]
    faults: Mapping[str, Fault]

    def get(self, name: str) -> Fault:
        try:
            return self.faults[name]
        except KeyError:
            raise LabUsageError(f"unknown fault {name!r}; known: {', '.join(self.faults)}") from None

    def names(self, kind: str | None = None) -> list[str]:
        return [n for n, f in self.faults.items() if kind is None or kind in f.kinds]

    def depends_on(self, service: str) -> list[str]:
        return list(self.services.get(service, {}).get("depends_on", []))

    def scope(self, service: str) -> set[str]:
        """A service with what it needs and what needs it: a fault of one may break the others."""
        return {service, *self.depends_on(service), *(s for s in self.services if service in self.depends_on(s))}


def read_catalogue_document(path: Path | str = CATALOGUE_PATH) -> Any:
    import yaml  # only here: the inventory script must not need PyYAML

    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _is_commands(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(c, str) and c.strip() for c in value)


def _is_diagnose(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(d, Mapping) and set(d) == {"command", "shows"} and all(isinstance(v, str) and v for v in d.values())
        for d in value
    )


def _service_problems(services: Any) -> list[str]:
    if not isinstance(services, Mapping) or not services:
        return ["`services` must be a non-empty mapping"]
    problems = []
    for svc, spec in services.items():
        if svc not in SERVICES:
            problems.append(f"service {svc!r} is not one the lab checks ({', '.join(SERVICES)})")
            continue
        if not isinstance(spec, Mapping) or any(not spec.get(key) for key in SERVICE_FIELDS):
            problems.append(f"service {svc!r} needs {', '.join(f'`{k}`' for k in SERVICE_FIELDS)}")
            continue
        expected = [k for k in KINDS if svc in SERVICES_OF_KIND[k]]
        if list(spec["kinds"]) != expected:
            problems.append(f"service {svc!r}: `kinds` must be {expected} (what the lab's hosts run)")
        for dep in spec.get("depends_on", []) or []:
            if dep not in services:
                problems.append(f"service {svc!r} depends on {dep!r}, which is not in `services`")
    return problems


def catalogue_problems(document: Any) -> list[str]:
    """Everything wrong with a catalogue document (empty when it is valid)."""
    if not isinstance(document, Mapping):
        return ["the catalogue must be a mapping with `services` and `faults`"]
    problems = _service_problems(document.get("services"))
    services = document.get("services") if isinstance(document.get("services"), Mapping) else {}
    faults = document.get("faults")
    if not isinstance(faults, list) or not faults:
        return problems + ["`faults` must be a non-empty list"]
    seen: set[str] = set()
    for index, fault in enumerate(faults):
        if not isinstance(fault, Mapping):
            problems.append(f"faults[{index}] is not a mapping")
            continue
        name = fault.get("name")
        problems.extend(_fault_problems(fault, f"fault {name!r}" if name else f"faults[{index}]", services, seen))
        seen.add(str(name))
    return problems


def _fault_problems(fault: Mapping[str, Any], where: str, services: Mapping[str, Any], seen: set[str]) -> list[str]:
    missing = [key for key in FAULT_FIELDS if key not in fault]
    if missing:
        return [f"{where} lacks {', '.join(missing)}"]
    problems = []
    name, service = fault["name"], fault["service"]
    unknown = sorted(set(fault) - set(FAULT_FIELDS) - set(OPTIONAL_FAULT_FIELDS))
    if unknown:
        problems.append(f"{where} has unknown keys {', '.join(unknown)}")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        problems.append(f"{where}: name must be snake_case")
    elif name in seen:
        problems.append(f"{where} is defined twice")
    if service not in services:
        problems.append(f"{where}: service {service!r} is not in `services`")
    elif not str(name).startswith(str(service)):
        problems.append(f"{where}: the name should start with its service {service!r}")
    kinds = fault["kinds"]
    if not isinstance(kinds, list) or not kinds or any(k not in KINDS for k in kinds) or len(set(kinds)) != len(kinds):
        problems.append(f"{where}: `kinds` must be a non-empty list of {', '.join(KINDS)} without repeats")
        return problems
    if service in services:
        missing_kinds = [k for k in kinds if k not in (services[service].get("kinds") or [])]
        if missing_kinds:
            problems.append(f"{where}: {service} does not run on {', '.join(missing_kinds)} hosts")
    for key in ("description", "healthy"):
        if not isinstance(fault[key], str) or not fault[key].strip():
            problems.append(f"{where}: `{key}` must be a non-empty string")
    for key, valid, shape in (("inject", _is_commands, "a non-empty list of command strings"),
                              ("fix", _is_commands, "a non-empty list of command strings"),
                              ("diagnose", _is_diagnose, "a non-empty list of {command, shows}")):
        value = fault[key]
        if isinstance(value, Mapping):
            if sorted(value) != sorted(kinds):
                problems.append(f"{where}: `{key}` per kind must name exactly the fault's kinds ({', '.join(kinds)})")
                continue
            bad = [k for k in kinds if not valid(value[k])]
            problems.extend(f"{where}: `{key}` for {k} must be {shape}" for k in bad)
        elif not valid(value):
            problems.append(f"{where}: `{key}` must be {shape} (or one such per kind)")
    fixes = fault["fix"].values() if isinstance(fault["fix"], Mapping) else [fault["fix"]]
    for commands in fixes:
        for command in commands if isinstance(commands, list) else []:
            problems.extend(f"{where}: fix {command!r}: {p}" for p in _fix_command_problems(str(command)))
    if not isinstance(fault["needs_human"], bool):
        problems.append(f"{where}: `needs_human` must be true or false")
    for key, default in OPTIONAL_FAULT_FIELDS.items():
        if key not in fault:
            continue
        if isinstance(default, bool) and not isinstance(fault[key], bool):
            problems.append(f"{where}: `{key}` must be true or false")
        elif isinstance(default, str) and not (isinstance(fault[key], str) and BATCH_RE.match(fault[key])):
            problems.append(f"{where}: `{key}` must be a short lower-case name (letters, digits, - and _)")
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


def runbook_faults(directory: Path = RUNBOOKS_DIR) -> dict[str, list[str]]:
    """{fault name: [runbook ids]} from the `faults:` lists of runbooks/*.yml."""
    import yaml

    found: dict[str, list[str]] = {}
    for path in sorted(directory.glob("*.yml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        for fault in data.get("faults", []) if isinstance(data, Mapping) else []:
            found.setdefault(str(fault), []).append(str(data.get("id", path.stem)))
    return found


DOC_BEGIN = "<!-- BEGIN fault catalogue: generated by `lab faults --markdown`, do not edit -->"
DOC_END = "<!-- END fault catalogue -->"


def _cell_code(commands: Iterable[str]) -> str:
    return "<br>".join("`" + c.strip().replace("\n", " ").replace("|", "\\|") + "`" for c in commands)


def _cell_text(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _per_kind_cell(fault: Fault, what: str, render: Any) -> str:
    values = getattr(fault, what)
    first = values[fault.kinds[0]]
    if all(values[k] == first for k in fault.kinds):
        return render(first)
    return "<br>".join(f"*{k}:* {render(values[k])}" for k in fault.kinds)


def render_catalogue_markdown(catalogue: Catalogue) -> str:
    """The catalogue as the Markdown table in docs/lab.md (between DOC_BEGIN and DOC_END)."""
    lines = [
        DOC_BEGIN,
        "",
        "| fault | kinds | service | what happens, how injected | how diagnosed | fix | healthy means | needs human |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def diagnose(items: Iterable[Mapping[str, str]]) -> str:
        return "<br>".join(f"`{_cell_text(d['command'])}` shows {_cell_text(d['shows'])}" for d in items)

    for f in catalogue.faults.values():
        tags = [t for t, on in (("contract", f.contract), ("novel", f.novel), (f"batch {f.batch}", f.batch)) if on]
        name = f"`{f.name}`" + (f" ({', '.join(tags)})" if tags else "")
        lines.append(
            f"| {name} | {', '.join(f.kinds)} | {f.service} | {_cell_text(f.description)}<br>"
            f"{_per_kind_cell(f, 'inject', _cell_code)} | {_per_kind_cell(f, 'diagnose', diagnose)} "
            f"| {_per_kind_cell(f, 'fix', _cell_code)} | {_cell_text(f.healthy)} | {'**yes**' if f.needs_human else 'no'} |"
        )
    lines += ["", "Health checks of the lab (the referee, independent of the collection):", ""]
    for svc, spec in catalogue.services.items():
        needs = f"; needs {', '.join(spec['depends_on'])}" if spec.get("depends_on") else ""
        lines.append(f"- **{svc}** ({', '.join(spec['kinds'])}; `{spec['init']}`{needs}): {_cell_text(spec['checks'])}")
    lines += ["", DOC_END]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------
# Results


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


# Each systemd (PID 1, path units, journald...) holds several inotify instances, all counted
# against the host's root user: the kernel default of 128 lets about 20 systemd hosts boot,
# and the next ones stall in "initializing" ("Failed to create inotify object: Too many open
# files"). What the lab needs for a few hundred hosts:
INOTIFY_INSTANCES = 8192
_INOTIFY_PATH = Path("/proc/sys/fs/inotify/max_user_instances")


def ensure_inotify_instances(wanted: int = INOTIFY_INSTANCES, path: Path = _INOTIFY_PATH) -> int:
    """Raise the host's inotify instance limit to ``wanted`` when it is lower and we may
    (root); returns the limit in force. Never lowers it."""
    try:
        current = int(path.read_text().strip())
    except (OSError, ValueError):
        return 0
    if current < wanted:
        try:
            path.write_text(f"{wanted}\n")
            return wanted
        except OSError:
            print(f"lab: fs.inotify.max_user_instances is {current}: more than about {current // 6} systemd "
                  f"hosts will not boot (raise it to {wanted} as root)", file=sys.stderr)
    return current


def docker_available(docker: str = "docker") -> str | None:
    """None when docker answers, else why not (for skips and error messages)."""
    if not shutil.which(docker):
        return f"the `{docker}` CLI is not installed"
    try:
        proc = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        return f"`docker info` did not answer within 60 s ({docker_daemon_report()})"
    if proc.returncode != 0:
        return f"the Docker daemon does not answer ({proc.stderr.strip() or proc.stdout.strip()}); run scripts/setup"
    return None


DOCKER_PIDFILE = Path("/var/run/docker.pid")
_GOROUTINE_RE = re.compile(r"^goroutine \d+ \[([^\],]+)(?:, (\d+) minutes)?")
_DOCKER_FRAME_RE = re.compile(r"^github\.com/docker/docker/([\w/]+\.\(?\*?[\w]+\)?\.?\w*)\(")


def docker_daemon_report(pidfile: Path | None = None, wait: float = 3.0) -> str:
    """Where a Docker daemon that does not answer is stuck, in one line (for error messages).

    Its process state, and, when we may signal it, a summary of the goroutine stacks it writes
    on SIGUSR1: where its API requests in progress wait (summarise_goroutines)."""
    try:
        pid = int((pidfile or DOCKER_PIDFILE).read_text().strip())
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return "dockerd: no running process found through its pid file"
    report = f"dockerd pid {pid} state {state}"
    stacks_dir = Path(f"/proc/{pid}/root/var/run/docker")
    before = set(stacks_dir.glob("goroutine-stacks-*.log"))
    try:
        os.kill(pid, signal.SIGUSR1)  # the daemon writes its goroutine stacks and carries on
    except OSError as exc:
        return f"{report}; no stack dump ({exc.strerror})"
    deadline = time.monotonic() + wait
    while not (dumps := set(stacks_dir.glob("goroutine-stacks-*.log")) - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not dumps:
        return f"{report}; it wrote no stack dump within {wait:g} s"
    dump = max(dumps)
    return f"{report}; {summarise_goroutines(dump.read_text(errors='replace'))} (dump: {dump})"


def summarise_goroutines(text: str, top: int = 3) -> str:
    """Where the daemon's API requests wait, the most common place first (with the minutes
    Go reports for a goroutine blocked a minute or more).

    Only goroutines that serve a request count (a frame of an api/server/router handler): a
    running container's log copiers and monitors wait for as long as it runs, and mean nothing."""
    waiting: dict[str, list[int]] = {}
    for block in text.split("\n\n"):
        lines = block.strip().splitlines()
        head = _GOROUTINE_RE.match(lines[0]) if lines else None
        if not head or not any("github.com/docker/docker/api/server/router/" in line for line in lines):
            continue
        frame = next((m.group(1) for line in lines[1:] if (m := _DOCKER_FRAME_RE.match(line))), "?")
        waiting.setdefault(f"{frame} [{head.group(1)}]", []).append(int(head.group(2) or 0))
    if not waiting:
        return "no API request in progress"
    worst = sorted(waiting.items(), key=lambda kv: (-len(kv[1]), -max(kv[1])))[:top]
    return "requests in progress: " + "; ".join(
        f"{len(m)} in {name}" + (f" up to {max(m)} min" if max(m) else "") for name, m in worst)


class Lab:
    """One set of lab containers, `<prefix>-lab01` ... `<prefix>-labNN`, of either kind."""

    def __init__(
        self,
        prefix: str | None = None,
        image: str | None = None,
        catalogue: Catalogue | None = None,
        docker: str = "docker",
        systemd_image: str | None = None,
    ) -> None:
        self.prefix = prefix or os.environ.get("SENTINEL_LAB_PREFIX") or DEFAULT_PREFIX
        # Several checkouts (git worktrees) testing on one Docker daemon keep apart by namespace.
        namespace = os.environ.get("SENTINEL_LAB_NAMESPACE")
        if namespace and not self.prefix.startswith(f"{namespace}-"):
            self.prefix = f"{namespace}-{self.prefix}"
        if not PREFIX_RE.match(self.prefix):
            raise LabUsageError(f"bad lab prefix {self.prefix!r}: use letters, digits, '.', '_' or '-'")
        self.images = {"sysv": image or default_image("sysv"), "systemd": systemd_image or default_image("systemd")}
        self.docker = docker
        self._catalogue = catalogue
        self._kinds: dict[str, str] = {}

    @property
    def image(self) -> str:
        """The SysV kind's image (the original target)."""
        return self.images["sysv"]

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
            raise LabError(f"`{shlex.join(argv[:6])}` did not finish within {timeout:g} s "
                           f"({docker_daemon_report()})") from None
        return ExecResult(argv, proc.returncode, proc.stdout, proc.stderr)

    def containers(self) -> dict[str, dict[str, str]]:
        """This prefix's containers by host: {host: {container, state, image, kind}}."""
        result = self._docker(
            "ps", "-a", "--filter", f"label=sentinel.lab.prefix={self.prefix}",
            "--format",
            '{{.Label "sentinel.lab.host"}}\t{{.Names}}\t{{.State}}\t{{.Image}}\t{{.Label "sentinel.lab.kind"}}',
        )
        if not result.ok:
            raise LabError(f"cannot list containers: {result.output()}")
        found = {}
        for line in result.stdout.splitlines():
            host, name, state, image, kind = (line.split("\t") + [""] * 5)[:5]
            if host:
                found[host] = {"container": name, "state": state, "image": image, "kind": kind or "sysv"}
        return dict(sorted(found.items()))

    def hosts(self, kind: str | None = None) -> list[str]:
        """The hosts whose containers run (of one kind, when given)."""
        return [h for h, c in self.containers().items() if c["state"] == "running" and kind in (None, c["kind"])]

    def kind(self, host: str) -> str:
        """The kind of a running host (sysv or systemd), from its container's label."""
        if host not in self._kinds:
            self._require_host(host)
            result = self._docker("inspect", "--format", '{{index .Config.Labels "sentinel.lab.kind"}}',
                                  self.container(host))
            self._kinds[host] = result.stdout.strip() if result.ok and result.stdout.strip() in KINDS else "sysv"
        return self._kinds[host]

    def _require_host(self, host: str) -> str:
        if not HOST_RE.match(host):
            raise LabUsageError(f"bad host name {host!r}: lab hosts are lab01, lab02, ...")
        containers = self.containers()
        if containers.get(host, {}).get("state") != "running":
            running = ", ".join(h for h, c in containers.items() if c["state"] == "running") or "none"
            raise LabUsageError(f"no running lab host {host!r} (prefix {self.prefix}); running: {running}")
        return self.container(host)

    def run_argv(self, host: str, kind: str) -> list[str]:
        """The `docker run` arguments of a lab host of `kind` (without the docker CLI)."""
        argv = [
            "run", "-d", "--network", "none",
            # Root sees every process's sockets (`ss -p`), as on a real host; Docker's
            # default capabilities hide those of other users' processes.
            "--cap-add", "SYS_PTRACE",
            "--hostname", host, "--name", self.container(host),
            "--label", f"sentinel.lab.host={host}", "--label", f"sentinel.lab.prefix={self.prefix}",
            "--label", f"sentinel.lab.kind={kind}",
        ]
        for mount in TMPFS:
            argv += ["--tmpfs", mount]
        if kind == "systemd":
            # systemd as PID 1 without --privileged: the host's cgroups (read-only), its own
            # /run and /run/lock, and `container=docker` so it knows where it runs.
            argv += ["--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--tmpfs", "/run",
                     "--tmpfs", "/run/lock", "--tmpfs", JOURNAL_TMPFS, "-e", "container=docker",
                     "--stop-signal", "SIGRTMIN+3"]
        else:
            argv += ["--init"]
        return argv + [self.images[kind]]

    def _run_container(self, host: str, kind: str) -> None:
        self._kinds.pop(host, None)
        if kind == "systemd":
            ensure_inotify_instances()
        result = self._docker(*self.run_argv(host, kind))
        if not result.ok:
            raise LabError(f"cannot start {self.container(host)} ({kind}): {result.output()}")
        self._kinds[host] = kind

    def wait_booted(self, host: str, timeout: float = 120) -> None:
        """Block until the host's boot has started its services: one `docker exec` that waits
        inside the host (systemd's own `is-system-running --wait`; on SysV, until lab-boot has
        started every service and become the reaper), instead of health checks polled while
        the services start (each one costs about half a CPU-second across the host and the
        Docker engine). Best effort: the health check that follows is still the judge."""
        if self.kind(host) == "systemd":
            # `--wait` needs systemd's bus, which a container just started may not have yet
            argv = ["sh", "-c", f"i=0; while [ $i -lt {int(timeout * 5)} ]; do "
                                "case \"$(systemctl is-system-running --wait 2>/dev/null)\" in "
                                "running|degraded|maintenance|stopping) break;; esac; sleep 0.2; i=$((i+1)); done"]
        else:
            argv = ["sh", "-c", f"i=0; while pgrep -x lab-boot >/dev/null && [ $i -lt {int(timeout * 10)} ]; "
                                "do sleep 0.1; i=$((i+1)); done"]
        self.exec(host, argv, timeout=timeout + 10)

    def image_problem(self, kinds: Iterable[str] = ("sysv",)) -> str | None:
        problem = docker_available(self.docker)
        if problem:
            return problem
        for kind in kinds:
            if not self._docker("image", "inspect", self.images[kind]).ok:
                return (f"the lab image {self.images[kind]} ({kind}) is missing; run scripts/setup "
                        f"(or bash lab/image/build.sh {kind})")
        return None

    # -- lifecycle -----------------------------------------------------------------------

    def up(self, count: int, kind: str = "sysv", timeout: float = 120) -> list[str]:
        """Make lab01..labNN run with healthy services; `kind` is sysv, systemd or mixed
        (odd hosts sysv, even hosts systemd). Running hosts of the right kind are kept."""
        if count < 1:
            raise LabUsageError("lab up needs a count of at least 1")
        wanted = {self.host_name(i + 1): k for i, k in enumerate(kinds_for(count, kind))}
        problem = self.image_problem(sorted(set(wanted.values())))
        if problem:
            raise LabError(problem)
        existing = self.containers()

        def ensure(host: str) -> None:
            info = existing.get(host, {})
            if info.get("state") == "running" and info.get("kind") == wanted[host]:
                self._kinds[host] = wanted[host]
                return
            if info:  # created, exited, dead or of the other kind: start afresh rather than revive
                self._docker("rm", "-f", "-v", self.container(host))
            self._run_container(host, wanted[host])
            self.wait_booted(host, timeout=timeout)

        with ThreadPoolExecutor(max_workers=min(8, count)) as pool:
            list(pool.map(ensure, wanted))
            list(pool.map(lambda h: self.wait_health(h, timeout=timeout), wanted))
        return list(wanted)

    def down(self, timeout: float = 600, batch: int = 8) -> list[str]:
        """Remove every container of this prefix (and their anonymous volumes).

        A few at a time: one `docker rm` of many names asks the daemon for up to 50 removals
        at once, and the daemon deletes the containers' layers one by one under one lock, so
        a large lab's removal outlasts any single call's timeout while everything else that
        needs the daemon waits behind it."""
        names = [c["container"] for c in self.containers().values()]
        deadline = time.monotonic() + timeout
        for start in range(0, len(names), batch):
            chunk = names[start:start + batch]
            result = self._docker("rm", "-f", "-v", *chunk, timeout=max(30.0, deadline - time.monotonic()))
            if not result.ok:
                raise LabError(f"cannot remove {', '.join(chunk)}: {result.output()}")
        self._kinds.clear()
        return names

    def reset(self, host: str, timeout: float = 120, kind: str | None = None) -> None:
        """Recreate one host from its image (same kind unless told): every fault gone."""
        if not HOST_RE.match(host):
            raise LabUsageError(f"bad host name {host!r}: lab hosts are lab01, lab02, ...")
        if kind is None:
            kind = self.containers().get(host, {}).get("kind") or "sysv"
        self._docker("rm", "-f", "-v", self.container(host))
        self._run_container(host, kind)
        self.wait_booted(host, timeout=timeout)
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

    def clear_failures(self, host: str) -> None:
        """Forget the failures of earlier faults: on a systemd host, `systemctl reset-failed`
        (failed states and start-limit counters), so that a fault run after others on a
        shared host meets the unit as it would on a fresh one. Nothing on SysV hosts."""
        if self.kind(host) == "systemd":
            self.exec(host, ["systemctl", "reset-failed"], check=True)

    def services(self, host: str) -> tuple[str, ...]:
        """The services a host runs (by its kind)."""
        return SERVICES_OF_KIND[self.kind(host)]

    def health(self, host: str, services: Iterable[str] | None = None) -> dict[str, ServiceHealth]:
        """The lab's own health check of a host's services (all that its kind runs by default)."""
        runs = self.services(host)
        services = list(services or runs)
        unknown = [s for s in services if s not in SERVICES]
        if unknown:
            raise LabUsageError(f"unknown service {unknown[0]!r}; known: {', '.join(SERVICES)}")
        absent = [s for s in services if s not in runs]
        if absent:
            raise LabUsageError(f"{host} is a {self.kind(host)} host and runs no {absent[0]} ({', '.join(runs)})")
        script = HEALTH_SCRIPT_PATH.read_text(encoding="utf-8")
        result = self.exec(host, ["python3", "-", *services], stdin=script, timeout=90)
        if not result.ok:
            raise LabError(f"{host}: the health check failed to run: {result.output()}")
        try:
            data = json.loads(result.stdout)
        except ValueError:
            raise LabError(f"{host}: the health check printed no JSON: {result.output()[:300]}") from None
        return {name: ServiceHealth(name, item["healthy"], item["checks"]) for name, item in data.items()}

    def wait_health(
        self, host: str, services: Iterable[str] | None = None, healthy: bool = True, timeout: float = 20,
        broken: str | None = None,
    ) -> dict[str, ServiceHealth]:
        """Poll until every service is healthy (or, with healthy=False, until one is broken; with
        broken=NAME as well, until that one is: the report still covers every service asked)."""
        services = list(services or self.services(host))
        deadline = time.monotonic() + timeout
        pause = 0.5  # then longer: each check costs about half a CPU-second, and the lab shares 2 cores
        while True:
            report = self.health(host, services)
            if broken is not None and not healthy:
                done = not report[broken].healthy
            else:
                done = all(h.healthy for h in report.values()) if healthy else not all(h.healthy for h in report.values())
            if done:
                return report
            if time.monotonic() > deadline:
                state = "healthy" if healthy else "broken"
                detail = "; ".join(f"{s}: {h.summary()}" for s, h in report.items() if h.healthy != healthy)
                raise LabError(f"{host}: not {state} after {timeout:g} s ({detail})")
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(2.0, pause * 1.5)

    # -- faults --------------------------------------------------------------------------

    def inject(self, host: str, fault: str) -> Fault:
        """Break a host the way the catalogue says for its kind; raise if a step fails."""
        spec = self.catalogue.get(fault)
        self._require_host(host)
        for step in spec.steps("inject", self.kind(host)):
            result = self.exec(host, step, timeout=90)
            if not result.ok:
                raise LabError(f"{host}: injecting {fault}: `{step}` exited {result.rc}: {result.output()}")
        return spec

    def fix_commands(self, host: str, fault: str) -> list[list[str]]:
        """The catalogue fix of a fault on this host as argv lists, placeholders resolved."""
        spec = self.catalogue.get(fault)
        steps = spec.steps("fix", self.kind(host))
        return [[self._resolve(host, word) for word in shlex.split(command)] for command in steps]

    def fix(self, host: str, fault: str, timeout: float = 30, wait: bool = True) -> dict[str, ServiceHealth]:
        """Apply the catalogue's fix (as root, no shell; a placeholder is resolved just before
        its command runs) and wait until the services in the fault's scope are healthy (with
        wait=False, return {} once the commands ran: the caller waits for what it needs)."""
        spec = self.catalogue.get(fault)
        self._require_host(host)
        for command in spec.steps("fix", self.kind(host)):
            argv = [self._resolve(host, word) for word in shlex.split(command)]
            result = self.exec(host, argv, timeout=90)
            if not result.ok:
                raise LabError(f"{host}: fixing {fault}: `{shlex.join(argv)}` exited {result.rc}: {result.output()}")
        if not wait:
            return {}
        scope = [s for s in self.services(host) if s in self.catalogue.scope(spec.service)]
        return self.wait_health(host, scope, timeout=timeout)

    def _resolve(self, host: str, word: str) -> str:
        def replace(match: re.Match[str]) -> str:
            kind, arg = match.groups()
            if kind == "port_owner_pid":
                return self.port_owner_pid(host, int(arg))
            if kind == "zombie_parent_pid":
                return self.zombie_parent_pid(host, arg)
            raise LabError(f"unknown placeholder {match.group(0)}; known: {', '.join(PLACEHOLDERS)}")

        return PLACEHOLDER_RE.sub(replace, word)

    def port_owner_pid(self, host: str, port: int) -> str:
        out = self.exec(host, ["ss", "-ltnpH", f"sport = :{port}"], check=True).stdout
        pids = sorted({int(p) for p in re.findall(r"pid=(\d+)", out)})
        if not pids:
            raise LabError(f"{host}: no process listens on TCP :{port}")
        return str(pids[0])

    def zombie_parent_pid(self, host: str, comm: str) -> str:
        out = self.exec(host, ["ps", "-e", "-o", "stat=,ppid=,comm="], check=True).stdout
        parents = sorted({int(ppid) for stat, ppid, name in (line.split(None, 2) for line in out.splitlines()
                                                             if len(line.split(None, 2)) == 3)
                          if stat.startswith("Z") and name.strip() == comm})
        if not parents:
            raise LabError(f"{host}: no zombie process named {comm}")
        return str(parents[0])

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
        """An Ansible inventory (script JSON format) of this prefix's running hosts: group
        `lab` with the children `lab_sysv` and `lab_systemd`."""
        hostvars = {}
        by_kind: dict[str, list[str]] = {k: [] for k in KINDS}
        for host, info in self.containers().items():
            if info["state"] != "running":
                continue
            labels = self._labels(info["container"])
            kind = labels.get("sentinel.lab.kind") if labels.get("sentinel.lab.kind") in KINDS else "sysv"
            by_kind[kind].append(host)
            hostvars[host] = {
                "ansible_host": info["container"],
                "sentinel_lab_container": info["container"],
                "sentinel_lab_kind": kind,
                "sentinel_init": kind,
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
        data: dict[str, Any] = {
            "lab": {"hosts": list(hostvars), "children": [f"lab_{k}" for k in KINDS], "vars": group_vars},
            "_meta": {"hostvars": hostvars},
        }
        for kind in KINDS:
            data[f"lab_{kind}"] = {"hosts": by_kind[kind], "vars": {"sentinel_init": kind}}
        return data

    def write_inventory(self, path: Path | str, services: str | bool = "core") -> Path:
        """A static inventory of this prefix (for tests running their own lab): group `lab`
        with children `lab_sysv` / `lab_systemd`, and the variables of
        inventories/lab/group_vars/lab.yml. The role watches only what an inventory names, so
        the file always names services: `core` (the default) the four of lab/core_services.yml
        for every host; `kind` (or True) each kind's complete definitions of
        inventories/lab/group_vars/lab_<kind>.yml, PostgreSQL and the app included."""
        mode = {True: "kind", False: "core"}.get(services, services) if isinstance(services, bool) else services
        if mode not in SERVICE_SETS:
            raise LabUsageError(f"services must be one of {', '.join(SERVICE_SETS)}, got {services!r}")
        data = self.inventory()
        children: dict[str, Any] = {}
        for kind in KINDS:
            group_vars = dict(data[f"lab_{kind}"]["vars"])
            if mode == "kind":
                group_vars.update(kind_group_vars(kind))
            children[f"lab_{kind}"] = {"hosts": {h: {} for h in data[f"lab_{kind}"]["hosts"]}, "vars": group_vars}
        lab_vars = {**data["lab"]["vars"], **lab_group_vars()}
        if mode == "core":
            lab_vars["remediate_services"] = core_services()
        group = {"hosts": data["_meta"]["hostvars"], "vars": lab_vars, "children": children}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"all": {"children": {"lab": group}}}, indent=2) + "\n", encoding="utf-8")
        return path

    def _labels(self, container: str) -> dict[str, str]:
        result = self._docker("inspect", "--format", "{{json .Config.Labels}}", container)
        if not result.ok:
            return {}
        return json.loads(result.stdout or "null") or {}


def _variables(path: Path, what: str) -> dict[str, Any]:
    import yaml  # needs PyYAML

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise LabError(f"cannot read {what}: {exc}") from None


def kind_group_vars(kind: str) -> dict[str, Any]:
    """The variables of inventories/lab/group_vars/lab_<kind>.yml (needs PyYAML)."""
    return _variables(GROUP_VARS_DIR / f"lab_{kind}.yml", f"the group variables of lab_{kind}")


def lab_group_vars() -> dict[str, Any]:
    """The variables of every lab host, inventories/lab/group_vars/lab.yml (needs PyYAML)."""
    return _variables(GROUP_VARS_DIR / "lab.yml", "the group variables of lab")


def core_services() -> list[dict[str, Any]]:
    """The four service definitions of lab/core_services.yml (nginx, redis-server, cron, ssh),
    valid on both kinds (needs PyYAML)."""
    return list(_variables(CORE_SERVICES, "the lab's core services")["remediate_services"])


def _split_labels(value: str | None) -> list[str]:
    return [item for item in (value or "").split(",") if item]


# ---------------------------------------------------------------------------------------
# The `lab` command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lab",
        description="Lab of Debian containers (SysV and systemd hosts) with real services and real faults.",
    )
    parser.add_argument("--prefix", help=f"container name prefix (env SENTINEL_LAB_PREFIX, default {DEFAULT_PREFIX})")
    parser.add_argument("--image", help="image of the sysv kind (env SENTINEL_LAB_IMAGE, default sentinel-lab:latest)")
    parser.add_argument("--systemd-image",
                        help="image of the systemd kind (env SENTINEL_LAB_SYSTEMD_IMAGE, default sentinel-lab-systemd:latest)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser("up", help="start lab01..labNN and wait until their services are healthy")
    p.add_argument("count", type=int, nargs="?", default=3)
    p.add_argument("--kind", choices=[*KINDS, "mixed"], default="mixed",
                   help="host kind; mixed (default): odd hosts sysv, even hosts systemd")
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
    p.add_argument("--kind", choices=KINDS, help="only the faults of this host kind")
    p.add_argument("--batch", help="only the faults of this batch (the catalogue's `batch` field, e.g. s32)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true")
    group.add_argument("--markdown", action="store_true", help="the table of docs/lab.md")
    p = sub.add_parser("reset", help="recreate HOST from its image")
    p.add_argument("host")
    p = sub.add_parser("inventory", help="print (or write to PATH) an Ansible inventory of the running hosts")
    p.add_argument("path", nargs="?")
    p.add_argument("--services", nargs="?", choices=SERVICE_SETS, default="core", const="kind",
                   help="with PATH, the remediate_services the file names: core (default; nginx, redis-server, cron "
                        "and ssh, lab/core_services.yml) or kind (bare --services: each kind's complete definitions, "
                        "inventories/lab/group_vars)")
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


def _print_health(lab: Lab, hosts: list[str], services: list[str] | None, as_json: bool) -> int:
    for host in hosts:
        lab._require_host(host)
    report = {h: lab.health(h, [s for s in services if s in lab.services(h)] if services else None) for h in hosts}
    broken = any(not s.healthy for r in report.values() for s in r.values())
    if as_json:
        print(json.dumps({h: {s: vars(v) for s, v in r.items()} for h, r in report.items()}, indent=2))
        return 1 if broken else 0
    if not hosts:
        print(f"no running lab hosts (prefix {lab.prefix})")
    for host, health in report.items():
        for service, item in health.items():
            print(f"{host}  {lab.kind(host):<7} {service:<8} {'ok    ' if item.healthy else 'BROKEN'}  {item.summary()}")
    return 1 if broken else 0


def _dispatch(args: argparse.Namespace) -> int:
    lab = Lab(prefix=args.prefix, image=args.image, systemd_image=args.systemd_image)
    if args.action == "up":
        start = time.monotonic()
        hosts = lab.up(args.count, kind=args.kind)
        kinds = ", ".join(f"{h} ({lab.kind(h)})" for h in hosts)
        print(f"lab up: {kinds} healthy in {time.monotonic() - start:.1f} s (prefix {lab.prefix})")
    elif args.action == "down":
        names = lab.down()
        print(f"lab down: removed {', '.join(names)}" if names else f"lab down: nothing to remove (prefix {lab.prefix})")
    elif args.action == "status":
        rows = lab.status()
        if not rows:
            print(f"no lab containers (prefix {lab.prefix}); start some with `lab up N`")
        for row in rows:
            print(f"{row['host']}  {row['kind']:<7} {row['container']}  {row['state']}")
            for service, summary in row["health"].items():
                print(f"    {service:<8} {summary}")
    elif args.action == "inject":
        fault = lab.inject(args.host, args.fault)
        print(f"{args.host}: injected {fault.name} ({fault.service}, {lab.kind(args.host)})")
    elif args.action == "fix":
        fault = lab.catalogue.get(args.fault)
        lab.fix(args.host, args.fault)
        print(f"{args.host}: fixed {fault.name}; {fault.service} healthy")
    elif args.action == "health":
        return _print_health(lab, [args.host] if args.host else lab.hosts(), args.service, args.json)
    elif args.action == "faults":
        faults = [f for f in lab.catalogue.faults.values()
                  if args.kind in (None, *f.kinds) and args.batch in (None, f.batch)]
        if args.batch and not faults:
            batches = sorted({f.batch for f in lab.catalogue.faults.values() if f.batch})
            raise LabUsageError(f"no fault of batch {args.batch!r}; batches: {', '.join(batches) or 'none'}")
        if args.json:
            print(json.dumps([f.as_dict() for f in faults], indent=2))
        elif args.markdown:
            print(render_catalogue_markdown(lab.catalogue), end="")
        else:
            with_runbook = runbook_faults()
            for f in faults:
                flags = ", ".join(flag for flag, on in (("needs human", f.needs_human), ("novel", f.novel),
                                                        ("runbook", f.name in with_runbook)) if on)
                print(f"{f.name:<32} {'/'.join(f.kinds):<13} {f.service:<8} {flags:<20} {f.description[:70]}")
    elif args.action == "reset":
        lab.reset(args.host)
        print(f"{args.host}: recreated, healthy")
    elif args.action == "inventory":
        if args.path:
            print(lab.write_inventory(args.path, services=args.services))
        else:
            print(json.dumps(lab.inventory(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
