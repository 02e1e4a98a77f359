"""sentinel-remediate: run, watch, approve and report sentinel.remediation passes.

Exit codes (every command):
  0  every service healthy or healed (or the command succeeded)
  1  something escalated, failed or was unreachable, or the run itself failed
  2  usage error: bad option, unknown run or approval id, no collection found
  3  nothing failed, but a plan waits for approval
  4  nothing ran: every host was held by another pass (run without --wait)
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
from importlib import metadata
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import yaml

from . import approvals as approving
from . import report as reporting
from . import runbook_check
from .locking import LockTimeout
from .collection import find_project_dir
from .errors import DriverError
from .exit_codes import EXIT_BUSY, EXIT_FAILED, EXIT_USAGE
from .runner import DEFAULT_ROTATE, PassOptions, State, run_pass, SECRET_NAME

PROG = "sentinel-remediate"
EPILOG = """exit codes: 0 all healthy or healed; 1 something escalated, failed or unreachable
(or the run failed); 2 usage error; 3 only waiting for approval; 4 every host busy
(another pass holds it; use --wait).

Secrets (OPENAI_API_KEY ...) are read from the environment only and handed to ansible
through the process environment, never on a command line or in the artifacts."""


class UsageError(Exception):
    pass


def _extra_var(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key = key.strip()
    if SECRET_NAME.search(key):
        raise argparse.ArgumentTypeError(
            f"{key} looks like a secret: pass it through the environment (e.g. OPENAI_API_KEY), not -e")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key, parsed


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"a port is 1-65535: {text!r}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def collection_version(project_dir: Path) -> str | None:
    """The version in the collection's galaxy.yml (a checkout) or MANIFEST.json (an installed collection)."""
    try:
        galaxy = project_dir / "galaxy.yml"
        if galaxy.is_file():
            return str((yaml.safe_load(galaxy.read_text(encoding="utf-8")) or {}).get("version") or "") or None
        manifest = project_dir / "MANIFEST.json"
        if manifest.is_file():
            return str(json.loads(manifest.read_text(encoding="utf-8"))["collection_info"]["version"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return None
    return None


def version_text(project_dir: str | None = None) -> str:
    """``sentinel-remediate X (collection sentinel.remediation Y at PATH)``: what --version prints."""
    try:
        package = metadata.version("sentinel-remediate")
    except metadata.PackageNotFoundError:
        package = None
    try:
        project = find_project_dir(project_dir)
    except DriverError:
        project = None
    collection = collection_version(project) if project else None
    version = package or collection or "unknown"
    where = f" (collection sentinel.remediation {collection} at {project})" if collection else \
        " (no sentinel.remediation collection found)"
    return f"{PROG} {version}{where}"


class _VersionAction(argparse.Action):
    """--version: computed only when asked (finding the collection may run ansible-galaxy)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):  # noqa: A002
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text(getattr(namespace, "project_dir", None)))
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=argparse.SUPPRESS,
                        help="runs, artifacts, locks, pending plans (env SENTINEL_STATE_DIR; "
                             "default ~/.local/state/sentinel-remediation)")
    common.add_argument("--approvals-dir", default=argparse.SUPPRESS,
                        help="the role's remediate_artifacts_dir (env SENTINEL_APPROVALS_DIR; default STATE/remediation)")
    common.add_argument("--project-dir", default=argparse.SUPPRESS,
                        help="the sentinel.remediation collection: a checkout, an installed collection or a collections path "
                             "(env SENTINEL_PROJECT_DIR; default: this checkout, else Ansible's collections path)")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no live progress")

    passing = argparse.ArgumentParser(add_help=False)
    passing.add_argument("-i", "--inventory", action="append", default=[],
                         help="inventory source (repeatable; default: ansible.cfg's)")
    passing.add_argument("-l", "--limit", help="ansible host pattern to limit the pass to")
    passing.add_argument("-e", "--extra-var", dest="extra_vars", action="append", type=_extra_var, default=[],
                         metavar="KEY=VALUE", help="role variable (YAML value), e.g. remediate_backend=runbook")
    passing.add_argument("--wait", action="store_true",
                         help="wait for hosts that another pass holds (default: skip them and say so)")
    passing.add_argument("--wait-timeout", type=_positive, metavar="SECONDS", help="give up waiting after this long")
    passing.add_argument("--rotate", type=int, default=DEFAULT_ROTATE, metavar="N",
                         help=f"run artifacts kept on disk (default {DEFAULT_ROTATE})")
    passing.add_argument("--timeout", type=int, metavar="SECONDS", help="cancel a pass that runs longer")
    passing.add_argument("-v", "--verbose", action="store_true", help="show ansible's own output too")

    knowledge = argparse.ArgumentParser(add_help=False)
    knowledge.add_argument("--runbook-dir", dest="runbook_dirs", action="append", default=[], metavar="DIR",
                           help="the team's runbooks, added to the bundled ones (repeatable; role var "
                                "remediate_runbook_dirs)")
    knowledge.add_argument("--docs-dir", dest="docs_dirs", action="append", default=[], metavar="DIR",
                           help="the team's Markdown/text documents, indexed for the planner (repeatable; role var "
                                "remediate_docs_dirs)")

    formats = argparse.ArgumentParser(add_help=False)
    formats.add_argument("--format", choices=sorted(reporting.RENDERERS), default="text",
                         help="report format (html: one self-contained page; prometheus: the run's metrics)")
    formats.add_argument("-o", "--output", metavar="FILE",
                         help="write the report to FILE (atomically) instead of standard output")

    metrics = argparse.ArgumentParser(add_help=False)
    metrics.add_argument("--metrics-textfile", metavar="FILE|DIR",
                         help="after each pass, write its Prometheus metrics to FILE (node_exporter's textfile "
                              "collector: a .prom file in its directory), or to DIR/sentinel_remediation_PRODUCER.prom; "
                              "its counters continue the file's values")
    metrics.add_argument("--metrics-producer", default="driver", metavar="NAME",
                         help="the `producer` label of every sample (and the file's name in a DIR): writers of one "
                              "textfile directory need different names (default: driver)")

    parser = argparse.ArgumentParser(prog=PROG, parents=[common], epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Drive sentinel.remediation through ansible-runner.")
    parser.add_argument("--version", action=_VersionAction, help="print the driver's and the collection's version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("run", parents=[common, passing, knowledge, formats, metrics],
                       help="one remediation pass, then the report")
    p.add_argument("--check", action="store_true",
                   help="dry run: ansible-playbook's check mode (plans and verdicts, no command run, "
                        "nothing remembered, no escalation sent); the report says so")

    p = sub.add_parser("watch", parents=[common, passing, knowledge, metrics],
                       help="a pass every --interval until SIGINT/SIGTERM")
    p.add_argument("--metrics-port", type=_port, metavar="PORT",
                   help="serve Prometheus metrics on http://ADDRESS:PORT/metrics (the last pass, and totals over passes)")
    p.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDRESS",
                   help="address the metrics endpoint binds to (default 127.0.0.1)")
    p.add_argument("--interval", type=_positive, default=30.0, metavar="SECONDS", help="seconds between pass starts")
    p.add_argument("--max-passes", type=int, metavar="N", help="stop after N passes")

    p = sub.add_parser("approvals", parents=[common], help="plans waiting for a human")
    asub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = asub.add_parser("list", parents=[common], help="the pending plans")
    a.add_argument("--format", choices=["text", "json"], default="text")
    a = asub.add_parser("show", parents=[common], help="one plan: commands as the policy displays them, and why")
    a.add_argument("id")
    a.add_argument("--format", choices=["text", "json"], default="text")
    for name, text in (("approve", "run exactly this plan (playbooks/resume.yml)"),
                       ("reject", "reject this plan (escalates)")):
        a = asub.add_parser(name, parents=[common, passing, formats], help=text)
        a.add_argument("id")

    p = sub.add_parser("holds", parents=[common], help="services left alone (budget spent, flapping) until cleared")
    hsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    h = hsub.add_parser("list", parents=[common], help="the services held")
    h.add_argument("--format", choices=["text", "json"], default="text")
    h = hsub.add_parser("clear", parents=[common], help="act on this host's service again")
    h.add_argument("host")
    h.add_argument("service")

    p = sub.add_parser("report", parents=[common, formats], help="the report of the last or a given run")
    p.add_argument("run", nargs="?", help="run ident (or a unique prefix); default: the last run")
    p.add_argument("--list", action="store_true", help="list the stored runs")

    p = sub.add_parser("undo", parents=[common],
                       help="put back what a healed incident changed on a host (a dry run with the diff unless --yes)")
    p.add_argument("host", help="the inventory host")
    p.add_argument("incident", help="the incident's undo id, from the report (undo_id), e.g. nginx-20261128T055900Z")
    p.add_argument("--yes", action="store_true", help="put the paths back (default: a dry run that shows the diff)")
    p.add_argument("--force", action="store_true",
                   help="also put back paths that changed again after the incident (that later change is lost)")
    p.add_argument("-i", "--inventory", action="append", default=[], help="inventory source (repeatable)")
    p.add_argument("--snapshot-dir", default="", help="the hosts' store (role var remediate_snapshot_dir), when not the default")

    runbook_check.add_parser(sub, [common])
    return parser


def _opt(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(args, name, default)


def _state(args: argparse.Namespace) -> State:
    return State.from_options(_opt(args, "state_dir"), _opt(args, "approvals_dir"))


def _pass_options(args: argparse.Namespace, state: State, **over: Any) -> PassOptions:
    extravars = dict(args.extra_vars)
    extravars.setdefault("remediate_artifacts_dir", str(state.approvals))
    for option, var in (("runbook_dirs", "remediate_runbook_dirs"), ("docs_dirs", "remediate_docs_dirs")):
        dirs = _opt(args, option) or []
        for directory in dirs:
            if not Path(directory).expanduser().is_dir():
                raise UsageError(f"--{option[:-1].replace('_', '-')} {directory}: no such directory")
        if dirs:
            # Absolute: the playbook runs from the project's directory, not from here.
            extravars[var] = [str(Path(d).expanduser().resolve()) for d in dirs]
    options = PassOptions(inventory=list(args.inventory), limit=args.limit, extravars=extravars, wait=args.wait,
                          wait_timeout=args.wait_timeout, rotate=args.rotate, timeout=args.timeout,
                          verbose=args.verbose)
    for key, value in over.items():
        setattr(options, key, value)
    return options


def _emit(result: dict, fmt: str, output: str | None = None) -> None:
    text = reporting.RENDERERS[fmt](result)
    if output:
        target = Path(output).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
        return
    sys.stdout.write(text)
    sys.stdout.flush()


def _write_metrics(args: argparse.Namespace, result: dict) -> None:
    path = _opt(args, "metrics_textfile")
    if not path:
        return
    from .metrics import write_textfile

    try:
        write_textfile(result, path, _opt(args, "metrics_producer") or "driver")
    except OSError as exc:
        print(f"{PROG}: cannot write the metrics textfile {path}: {exc}", file=sys.stderr)


def _series_creator(args: argparse.Namespace, options: PassOptions):
    """Before the playbook: the counters of the pass's hosts and named services at 0 in the
    textfile (a first heal is then an increase a scrape can see), or None."""
    path = _opt(args, "metrics_textfile")
    services = options.extravars.get("remediate_services")
    names = [str(s["name"]) for s in services if isinstance(s, dict) and s.get("name")] if isinstance(services, list) else []
    if not path or not names:
        return None

    def create(hosts: list[str]) -> None:
        from .metrics import create_series

        try:
            create_series(path, hosts, names, _opt(args, "metrics_producer") or "driver")
        except OSError as exc:
            print(f"{PROG}: cannot write the metrics textfile {path}: {exc}", file=sys.stderr)
    return create


def _single_pass(args: argparse.Namespace, state: State, options: PassOptions) -> int:
    """One pass with SIGINT/SIGTERM cancelling it cleanly (the report says `canceled`)."""
    from .watch import StopSignal

    out = None if _opt(args, "quiet") else sys.stderr
    project = find_project_dir(_opt(args, "project_dir"))
    stopper = StopSignal(out, first_cancels=True).install()
    try:
        result = run_pass(state, project, options, out=out, cancel=stopper.cancelled,
                          on_locked=_series_creator(args, options))
    finally:
        stopper.restore()
    _write_metrics(args, result)
    _emit(result, args.format, _opt(args, "output"))
    _say_fatal(args, result)
    return reporting.exit_code(result)


def _say_fatal(args: argparse.Namespace, result: dict) -> None:
    """What stopped ansible-playbook, on standard error, without -v (which shows all its output)."""
    run = result.get("run") or {}
    if _opt(args, "verbose") or run.get("rc") in (0, None):
        return
    for line in run.get("fatal") or []:
        print(f"{PROG}: ansible-playbook failed (exit {run.get('rc')}): {reporting.printable(line)}", file=sys.stderr)


def _check_knowledge(args: argparse.Namespace) -> None:
    """The team's runbooks are read before any host is touched: a bad one is a usage error
    naming the file and the key, not a planning failure in the middle of a pass."""
    dirs = _opt(args, "runbook_dirs") or []
    if not dirs or not all(Path(d).expanduser().is_dir() for d in dirs):
        return  # _pass_options says which directory is missing
    try:
        problems = runbook_check.runbook_problems([str(Path(d).expanduser()) for d in dirs],
                                                  _opt(args, "project_dir"))
    except runbook_check.CheckUsageError as exc:
        raise UsageError(str(exc)) from exc
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise UsageError(f"bad runbooks (sentinel-remediate runbooks check shows them all):\n  {shown}")


def cmd_run(args: argparse.Namespace) -> int:
    state = _state(args)
    options = _pass_options(args, state, kind="run", check=bool(args.check))
    _check_knowledge(args)
    return _single_pass(args, state, options)


def cmd_watch(args: argparse.Namespace) -> int:
    from .watch import watch

    state = _state(args)
    project = find_project_dir(_opt(args, "project_dir"))
    out = None if _opt(args, "quiet") else sys.stderr
    _pass_options(args, state, kind="watch")   # a bad option fails now, not at the first pass
    _check_knowledge(args)

    collector = server = None
    if args.metrics_port:
        from .metrics import PassCollector, serve

        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise UsageError("--metrics-port needs the prometheus_client package "
                             "(pip install 'sentinel-remediate[metrics]' or prometheus_client)") from None
        collector = PassCollector()
        try:
            server, _thread = serve(collector, args.metrics_port, args.metrics_address)
        except OSError as exc:
            raise UsageError(f"--metrics-port {args.metrics_port}: cannot listen on "
                             f"{args.metrics_address}:{args.metrics_port}: {exc}") from exc
        print(f"watch: metrics on http://{args.metrics_address}:{args.metrics_port}/metrics", file=sys.stderr,
              flush=True)

    def one(cancel):
        options = _pass_options(args, state, kind="watch")
        result = run_pass(state, project, options, out=out, cancel=cancel, on_locked=_series_creator(args, options))
        if collector is not None:
            collector.observe(result)
        _write_metrics(args, result)
        _say_fatal(args, result)
        if out is not None:
            out.write(reporting.render_text(result))
            out.flush()
        return result

    try:
        return watch(one, args.interval, args.max_passes, out=sys.stderr)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


def cmd_approvals(args: argparse.Namespace) -> int:
    state = _state(args)
    if args.action == "list":
        plans = approving.load_pending(state.approvals)
        if args.format == "json":
            print(json.dumps([approving.public(p) for p in plans], indent=2, sort_keys=True))
        else:
            sys.stdout.write(approving.render_list(plans))
        return 0
    plan = approving.find_pending(state.approvals, args.id)
    if args.action == "show":
        if args.format == "json":
            print(json.dumps(approving.public(plan), indent=2, sort_keys=True))
        else:
            sys.stdout.write(approving.render_show(plan))
        return 0
    host = plan.get("host")
    if not host:
        raise UsageError(f"plan {plan['id']} names no host: {plan.get('error', 'malformed plan file')}")
    decision = "remediate_approve" if args.action == "approve" else "remediate_reject"
    options = _pass_options(args, state, kind=args.action, playbook="playbooks/resume.yml", hosts=[str(host)],
                            limit=str(host))
    options.extravars[decision] = str(plan["id"])
    options.extravars["remediate_approved_by"] = approver()
    if plan.get("_digest"):
        options.extravars["remediate_approve_digest"] = str(plan["_digest"])
    if not options.inventory:
        # The plan was made against some inventory: reuse the one of the run that made it.
        options.inventory = list(reporting.origin_of_approval(state.artifacts, str(plan["id"])).get("inventory") or [])
    return _single_pass(args, state, options)


def approver() -> str:
    """Who approves from this terminal: the login user (through sudo, the one who ran sudo)."""
    user = os.environ.get("SUDO_USER") or ""
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid {os.getuid()}"
    return f"{user} (sentinel-remediate on {socket.gethostname()})"


def cmd_report(args: argparse.Namespace) -> int:
    state = _state(args)
    if args.list:
        for run_dir in reporting.list_runs(state.artifacts):
            r = reporting.load_report(run_dir)
            totals = ", ".join(f"{k}={v}" for k, v in (r.get("totals") or {}).items() if v) or "no outcome"
            print(f"{run_dir.name}  exit {reporting.exit_code(r)}  {totals}")
        return 0
    result = reporting.load_report(reporting.find_run(state.artifacts, args.run))
    _emit(result, args.format, args.output)
    return reporting.exit_code(result)


def cmd_runbooks(args: argparse.Namespace) -> int:
    try:
        return runbook_check.run(args)
    except runbook_check.CheckUsageError as exc:
        raise UsageError(str(exc)) from exc


def cmd_holds(args: argparse.Namespace) -> int:
    from . import holds

    journal = _state(args).approvals / "journal"
    if args.action == "clear":
        try:
            found = holds.clear(journal, args.host, args.service, by=os.environ.get("USER") or "sentinel-remediate")
        except holds.HoldError as exc:
            raise UsageError(str(exc)) from exc
        print(f"cleared: {found['host']} {found['service']} ({found['reason']}); the next pass acts on it again")
        return 0
    found = holds.current(journal)
    if args.format == "json":
        print(json.dumps(found, indent=2, sort_keys=True))
    elif not found:
        print("no service is held")
    for item in found if args.format == "text" else ():
        print(f"{item['host']} {item['service']}: {item['reason']}")
    return 0


def cmd_undo(args: argparse.Namespace) -> int:
    from . import undo as undoing  # pylint: disable=import-outside-toplevel

    undoing.check_incident(args.incident)
    outcome = undoing.run_undo(_state(args), find_project_dir(_opt(args, "project_dir")), args.host, args.incident,
                               confirm=args.yes, force=args.force, inventory=args.inventory,
                               snapshot_dir=args.snapshot_dir)
    return undoing.emit(outcome, sys.stdout)


COMMANDS = {"undo": cmd_undo, "run": cmd_run, "watch": cmd_watch, "approvals": cmd_approvals, "report": cmd_report,
            "runbooks": cmd_runbooks, "holds": cmd_holds}


def _collection_first(argv: Sequence[str] | None) -> None:
    """The collection named by --project-dir, before the parser (whose report formats are the
    collection's) is built: its report module is the one the driver uses."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--project-dir")
    known, _rest = early.parse_known_args(argv)
    if known.project_dir:
        reporting.use_collection(find_project_dir(known.project_dir))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        _collection_first(argv)
        parser = build_parser()
    except (DriverError, ImportError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (DriverError, UsageError, approving.ApprovalError, LookupError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LockTimeout as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
