"""One pass of a collection playbook through ansible-runner, the way AWX runs a job.

- a private data dir per run (``<state>/private/<ident>``, removed afterwards) and a
  stable ident ``<kind>-<UTC timestamp>-<6 hex>``; the run's artifacts go to
  ``<state>/artifacts/<ident>/`` and ansible-runner rotates them (``rotate_artifacts``);
- secrets reach ansible only through the process environment (``envvars``), never the
  command line, extra vars or env files (``suppress_env_files``); the ``command``
  artifact that ansible-runner writes with the full environment is scrubbed when the
  run ends, and every artifact file is checked for the secret values;
- live progress from ``event_handler``; ``cancel_callback`` aborts only on request (a
  second SIGINT/SIGTERM), so a stop request normally lets the pass finish;
- the outcome is read from the run's data (the report callback's JSON, or the
  ``set_stats`` outcomes seen in the events), never from stdout.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import report as reporting
from .collection import tool as _tool
from .errors import DriverError
from .locking import HostLocks, describe_holder

DEFAULT_STATE_DIR = Path("~/.local/state/sentinel-remediation")
DEFAULT_ROTATE = 50
REPORT_CALLBACK = "sentinel.remediation.remediation_report"
CALLBACK_JSON = "callback-report.json"

# Environment variables handed to ansible explicitly (they are inherited anyway; naming
# them documents what the collection reads). Values never go to the command line.
FORWARDED_ENV = re.compile(r"^(OPENAI_[A-Z_]+|AZURE_OPENAI_[A-Z_]+|SENTINEL_[A-Z_]+|REMEDIATE_[A-Z_]+)$")
SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE_KEY)", re.IGNORECASE)
REDACTED = "********"


def default_state_dir() -> Path:
    """$XDG_STATE_HOME/sentinel-remediation, else ~/.local/state/sentinel-remediation (as the role's default)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    return Path(xdg) / "sentinel-remediation" if xdg else DEFAULT_STATE_DIR


# ---- the state directory --------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    root: Path
    approvals_dir: Path | None = None

    @classmethod
    def from_options(cls, state_dir: str | None, approvals_dir: str | None = None) -> State:
        root = Path(state_dir or os.environ.get("SENTINEL_STATE_DIR") or default_state_dir()).expanduser().resolve()
        approvals = approvals_dir or os.environ.get("SENTINEL_APPROVALS_DIR")
        return cls(root, Path(approvals).expanduser().resolve() if approvals else None)

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    @property
    def approvals(self) -> Path:
        """The role's ``remediate_artifacts_dir``: pending plans live in ``pending/<id>.json``."""
        return self.approvals_dir or self.root / "remediation"

    def ensure(self) -> None:
        for path in (self.root, self.artifacts, self.private, self.locks, self.approvals):
            path.mkdir(parents=True, exist_ok=True, mode=0o700)


def new_ident(kind: str = "run") -> str:
    return f"{kind}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"


# ---- the collection -------------------------------------------------------------------------


def resolve_hosts(project_dir: Path, inventory: Sequence[str], limit: str | None, env: Mapping[str, str]) -> list[str]:
    """The inventory's hosts within the limit, as ansible sees them (for the locks)."""
    argv = [_tool("ansible"), "all", "--list-hosts"]
    for source in inventory:
        argv += ["-i", source]
    if limit:
        argv += ["--limit", limit]
    proc = subprocess.run(argv, cwd=project_dir, env=dict(env), capture_output=True, text=True, timeout=180, check=False)
    unmatched = re.findall(r"Could not match supplied host pattern, ignoring: (\S+)", proc.stderr or "")
    if limit and unmatched:
        raise DriverError(f"--limit {limit}: {', '.join(dict.fromkeys(unmatched))} matches no host of the inventory; "
                          "nothing was checked (fix the pattern, or leave that part out)")
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise DriverError(f"cannot list the inventory's hosts: {detail[-1] if detail else 'exit ' + str(proc.returncode)}")
    hosts = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line and not re.match(r"^hosts \(\d+\):$", line):
            hosts.append(line)
    return hosts


# ---- secrets --------------------------------------------------------------------------------


def secret_values(env: Mapping[str, Any]) -> list[str]:
    return sorted({str(v) for k, v in env.items() if SECRET_NAME.search(k) and v and len(str(v)) >= 4},
                  key=len, reverse=True)


def safe_env(env: Mapping[str, Any]) -> dict[str, str]:
    """The environment with the values of secret-looking variables replaced (as AWX shows job_env)."""
    return {k: (REDACTED if SECRET_NAME.search(k) and v else str(v)) for k, v in env.items()}


def scrub_artifacts(artifact_dir: Path, secret_list: Sequence[str]) -> list[Path]:
    """Remove secrets from a run's artifacts; returns the files that held one."""
    touched = []
    command_file = artifact_dir / "command"
    if command_file.is_file():
        try:
            data = json.loads(command_file.read_text(encoding="utf-8"))
            if isinstance(data.get("env"), dict):
                data["env"] = safe_env(data["env"])
                command_file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        except (OSError, ValueError):
            command_file.write_text("{}", encoding="utf-8")
    if not secret_list:
        return touched
    needles = [s.encode() for s in secret_list]
    for path in artifact_dir.rglob("*"):
        if not path.is_file():
            continue
        blob = path.read_bytes()
        if any(n in blob for n in needles):
            for n in needles:
                blob = blob.replace(n, REDACTED.encode())
            path.write_bytes(blob)
            touched.append(path)
    return touched


# ---- live progress --------------------------------------------------------------------------


@dataclass
class Progress:
    """Follows a run's events: hosts checked, services failing, outcomes as they land."""

    ident: str
    out: TextIO | None = sys.stderr
    checked: set[str] = field(default_factory=set)
    failing: dict[tuple[str, str], str] = field(default_factory=dict)
    outcomes: dict[str, list[dict]] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)
    failed_tasks: list[str] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    on_outcome: Callable[[], None] | None = None   # called after each outcome lands

    def say(self, text: str) -> None:
        if self.out is not None:
            print(f"[{self.ident}] {reporting.printable(text)}", file=self.out, flush=True)

    def event(self, event: Mapping[str, Any]) -> bool:
        try:
            self._event(event)
        except Exception as exc:  # progress must never break the run
            self.say(f"(progress: cannot read an event: {exc})")
        return True  # keep every event in the artifacts

    def _event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        data = event.get("event_data") or {}
        host = data.get("host") or ""
        res = data.get("res") if isinstance(data.get("res"), Mapping) else {}
        action = str(data.get("resolved_action") or data.get("task_action") or "")
        if kind == "runner_on_unreachable" and host not in self.unreachable:
            self.unreachable.add(host)
            self.say(f"{host}: UNREACHABLE {str(res.get('msg', ''))[:200]}")
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            self.failed_tasks.append(f"{host}: {data.get('task', '?')}: {str(res.get('msg', ''))[:200]}")
        elif kind == "playbook_on_stats":
            self.stats = {k: data.get(k) or {} for k in ("ok", "failures", "dark", "changed", "skipped", "processed")}
        if kind not in ("runner_on_ok", "runner_item_on_ok"):
            return
        if action.endswith("service_health") and "healthy" in res:
            self._health(host, res)
        elif action.endswith("heal") and isinstance(res.get("health"), Mapping):
            self._health(host, res["health"])  # the heal action checked the services itself
        stats = res.get("ansible_stats")
        if isinstance(stats, Mapping):
            records = (stats.get("data") or {}).get("sentinel_remediation")
            if isinstance(records, Mapping):
                records = [records]
            for record in records or []:
                self._outcome(host, record)

    def _health(self, host: str, res: Mapping[str, Any]) -> None:
        self.checked.add(host)
        # The monitor checks every service in one call (`services`); a single-service call
        # (the older form, or a loop over services) reports one.
        rows = res.get("services") if isinstance(res.get("services"), list) else None
        if rows is None:
            loop_var = res.get("ansible_loop_var") or "item"
            item = res.get(loop_var)
            rows = [{"name": (item.get("name") if isinstance(item, Mapping) else None) or res.get("service") or "?",
                     "healthy": res.get("healthy"), "error": res.get("error")}]
        for row in rows:
            if not isinstance(row, Mapping):
                continue
            service = str(row.get("name") or "?")
            if not row.get("healthy") and not row.get("skipped") and (host, service) not in self.failing:
                self.failing[(host, service)] = str(row.get("error") or "")
                self.say(f"{host} {service}: failing: {str(row.get('error') or '')[:200]}")

    def _outcome(self, host: str, record: Any) -> None:
        outcome = reporting.normalise_outcome(host, record)
        self.outcomes.setdefault(host, []).append(record)
        if self.on_outcome is not None:
            self.on_outcome()
        if outcome["state"] != "healthy":
            self.say(reporting.outcome_line(outcome))

    def summary(self) -> str:
        states = [reporting.normalise_outcome(h, o)["state"] for h, rs in self.outcomes.items() for o in rs]
        count = {s: states.count(s) for s in reporting.STATES}
        return (f"hosts checked {len(self.checked)}, services failing {len(self.failing)}, healed {count['healed']}, "
                f"waiting approval {count['waiting_approval']}, escalated {count['escalated']}, failed {count['failed']}, "
                f"unreachable {len(self.unreachable)}")


# ---- one pass ------------------------------------------------------------------------------


@dataclass
class PassOptions:
    playbook: str = "playbooks/remediate.yml"
    kind: str = "run"
    inventory: list[str] = field(default_factory=list)
    limit: str | None = None
    hosts: list[str] | None = None          # skip inventory resolution (approvals know their host)
    extravars: dict[str, Any] = field(default_factory=dict)
    wait: bool = False
    wait_timeout: float | None = None
    rotate: int = DEFAULT_ROTATE
    timeout: int | None = None
    verbose: bool = False
    check: bool = False                     # ansible-playbook --check: a dry run


def _world_writable(directory: Path) -> bool:
    """Ansible's rule for an ansible.cfg in the current directory: ignored when others may
    write to the directory (the sticky bit of /tmp does not stop a new file)."""
    try:
        return bool(directory.stat().st_mode & stat.S_IWOTH)
    except OSError:
        return True


def child_env(project_dir: Path, callback_json: Path | None) -> dict[str, str]:
    """What ansible gets on top of the inherited environment (``envvars``)."""
    env = {k: v for k, v in os.environ.items() if FORWARDED_ENV.match(k)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    if not os.environ.get("ANSIBLE_CONFIG"):
        # The playbook runs in the collection's directory, where Ansible would not see the
        # configuration of the directory the driver was started from: name it (a checkout's
        # own ansible.cfg first; an installed collection has none). Only where Ansible itself
        # would read it: never from a world-writable directory, where anyone could plant one
        # (a named ANSIBLE_CONFIG skips Ansible's own check).
        for config in (project_dir / "ansible.cfg", Path.cwd() / "ansible.cfg"):
            if config.is_file() and not _world_writable(config.parent):
                env["ANSIBLE_CONFIG"] = str(config.resolve())
                break
    enabled = [c for c in os.environ.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c.strip()]
    if REPORT_CALLBACK not in enabled:
        enabled.append(REPORT_CALLBACK)
    env["ANSIBLE_CALLBACKS_ENABLED"] = ",".join(enabled)
    if callback_json is not None:
        env["SENTINEL_REPORT_JSON"] = str(callback_json)
        env["ANSIBLE_CALLBACK_REMEDIATION_REPORT_JSON_PATH"] = str(callback_json)
        env.pop("SENTINEL_REPORT_JUNIT", None)
    env.pop("SENTINEL_STATE_DIR", None)
    return env


_ERROR_LINE = re.compile(r"^(?:\[ERROR\]:|ERROR!)\s*(.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fatal_errors(stdout: str, limit: int = 5) -> list[str]:
    """ansible-playbook's own error messages (``[ERROR]: ...``, ``ERROR! ...`` before 2.19,
    with the lines that continue them up to the ``Origin:`` or a blank line) from a run's
    output: what stopped a playbook, which the report cannot show when no task ran (a missing
    role, a syntax error, a bad configuration)."""
    found: list[list[str]] = []
    inside = False
    for raw in _ANSI.sub("", stdout).splitlines():
        line = raw.strip()
        match = _ERROR_LINE.match(line)
        if match:
            found.append([match.group(1).strip()])
            inside = True
        elif inside and line and not line.startswith(("Origin:", "[WARNING]", "[DEPRECATION")):
            found[-1].append(line)
        else:
            inside = False
    return [" ".join(parts)[:1000] for parts in found][-limit:]


def run_pass(
    state: State,
    project_dir: Path,
    options: PassOptions,
    out: TextIO | None = sys.stderr,
    cancel: Callable[[], bool] = lambda: False,
    ident: str | None = None,
    on_locked: Callable[[list[str]], None] | None = None,
) -> dict:
    """Lock the hosts, run the playbook, store and return the report (with a ``run`` section).
    ``on_locked`` is told the hosts the pass holds, before the playbook starts."""
    import ansible_runner  # imported late: `report` and `approvals list` do not need it

    state.ensure()
    ident = ident or new_ident(options.kind)
    progress = Progress(ident, out)
    run_dir = state.artifacts / ident
    callback_json = run_dir / CALLBACK_JSON
    envvars = child_env(project_dir, callback_json)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    meta: dict[str, Any] = {"ident": ident, "kind": options.kind, "playbook": options.playbook,
                            "project_dir": str(project_dir), "started": started, "limit": options.limit,
                            "inventory": list(options.inventory),
                            "extravars": options.extravars, "skipped": {}, "check": bool(options.check)}

    hosts = options.hosts
    if hosts is None:
        hosts = resolve_hosts(project_dir, options.inventory, options.limit, {**os.environ, **envvars})
    if not hosts:
        raise DriverError(f"no host matches the inventory{' and limit ' + options.limit if options.limit else ''}")

    locks = HostLocks(state.locks, ident)
    locks.acquire(hosts, wait=options.wait, timeout=options.wait_timeout,
                  on_wait=lambda h, info: progress.say(f"{h}: waiting for the pass that holds it ({describe_holder(info)})"),
                  should_stop=cancel)
    try:
        for host, info in sorted(locks.busy.items()):
            progress.say(f"{host}: skipped, another pass holds it ({describe_holder(info)}); use --wait to wait")
            meta["skipped"][host] = describe_holder(info)
        meta["hosts"] = sorted(locks.held)
        if not locks.held:
            meta.update(status="skipped", rc=None, busy_only=True,
                        finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            result = reporting.finish_report({"outcomes": [], "run": meta})
            run_dir.mkdir(parents=True, exist_ok=True)
            reporting.write_report(run_dir, result)
            return result

        progress.say(f"{options.kind}: {options.playbook} on {', '.join(sorted(locks.held))}")

        def provisional() -> None:
            """The report so far, stored as each outcome lands: a pass killed midway (a killed
            watch) leaves what it did on record, marked interrupted; the final report replaces it."""
            partial = reporting.finish_report({
                "outcomes": reporting.build_report(progress.outcomes, progress.unreachable)["outcomes"],
                "run": dict(meta, status="interrupted", rc=None, partial=True,
                            finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))})
            try:
                run_dir.mkdir(parents=True, exist_ok=True)
                reporting.write_report(run_dir, partial)
            except OSError as exc:
                progress.say(f"cannot store the report so far: {exc}")
        progress.on_outcome = provisional
        if on_locked is not None:
            on_locked(sorted(locks.held))
        private = state.private / ident
        private.mkdir(parents=True, exist_ok=True, mode=0o700)
        kwargs: dict[str, Any] = dict(
            private_data_dir=str(private),
            project_dir=str(project_dir),
            artifact_dir=str(state.artifacts),
            ident=ident,
            playbook=options.playbook,
            # localhost: the playbooks' controller-side plays (fact cache guard) run too.
            limit=",".join(sorted(locks.held) + ["localhost"]),
            extravars=dict(options.extravars),
            envvars=envvars,
            suppress_env_files=True,
            # Keep the fact cache that ansible.cfg configures: it holds the role's episodic
            # memory and pending plans, which must outlive one run (runner would otherwise
            # point a jsonfile cache at this run's artifacts).
            fact_cache_type="configured",
            rotate_artifacts=max(2, int(options.rotate)),
            event_handler=progress.event,
            cancel_callback=cancel,
            quiet=not options.verbose,
        )
        if options.inventory:
            kwargs["inventory"] = [str(Path(i).expanduser().resolve()) if Path(i).expanduser().exists() else i
                                   for i in options.inventory]
        if options.timeout:
            kwargs["timeout"] = int(options.timeout)
        if options.check:
            # As AWX runs a job template of type check: ansible-playbook's own check mode.
            kwargs["cmdline"] = "--check"
        try:
            runner = ansible_runner.run(**kwargs)
            status, rc = runner.status, runner.rc
        finally:
            secret_list = secret_values({**os.environ, **envvars})
            if run_dir.is_dir():
                scrub_artifacts(run_dir, secret_list)
            shutil.rmtree(private, ignore_errors=True)
    finally:
        locks.release()

    fatal: list[str] = []
    if rc not in (0, None):
        try:
            fatal = fatal_errors((run_dir / "stdout").read_text(encoding="utf-8", errors="replace"))
        except OSError:
            fatal = []
    meta.update(status=status, rc=rc, finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                unreachable=sorted(progress.unreachable), failed_tasks=progress.failed_tasks[:20], fatal=fatal,
                source="callback" if callback_json.is_file() else "events")
    extra: dict[str, Any] = {}
    if callback_json.is_file():
        try:
            base = json.loads(callback_json.read_text(encoding="utf-8"))
            outcomes = [reporting.normalise_outcome(o.get("host", "?"), o) for o in base.get("outcomes") or []]
            # What the callback saw beside the outcomes: run errors, the collection's warnings, notifications.
            extra = {k: base[k] for k in ("errors", "warnings", "notifications") if isinstance(base.get(k), list)}
        except (OSError, ValueError):
            outcomes = reporting.build_report(progress.outcomes, progress.unreachable)["outcomes"]
    else:
        outcomes = reporting.build_report(progress.outcomes, progress.unreachable)["outcomes"]
    result = reporting.finish_report({"outcomes": outcomes, "run": meta, **extra})
    run_dir.mkdir(parents=True, exist_ok=True)
    reporting.write_report(run_dir, result)
    progress.say(progress.summary())
    return result
