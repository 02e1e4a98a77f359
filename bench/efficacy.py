# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Efficacy benchmark: every fault of the lab catalogue on a host of its own, healed or not?

    python bench/efficacy.py --mode runbook                  # runbooks and memory only
    python bench/efficacy.py --mode replay                   # recorded model answers (tests/transcripts/efficacy)
    python bench/efficacy.py --mode relay --relay-dir DIR    # a person or a capable model answers each request
    python bench/efficacy.py --mode upstream --upstream URL  # a live OpenAI-compatible endpoint

Each fault is injected on its own lab host (of a kind the fault happens on), checked broken
by the lab's own health check, then ONE run of playbooks/remediate.yml (a fresh fact cache,
no approval given) tries to heal the whole fleet. Per fault: healed or not (the lab's check,
not the report), the outcome state, attempts, plan sources, LLM calls and tokens, and any
executed command that destroys data. Relay and upstream modes record the exchanges as
transcripts (``--record``), which replay mode serves in CI.

Writes bench/efficacy.json (rows per fault and mode, totals per mode, merged with the modes
already there) and prints a Markdown table for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from lab.sentinel_lab import Lab, runbook_faults  # noqa: E402  pylint: disable=wrong-import-position

OUT = REPO / "bench" / "efficacy.json"
TRANSCRIPTS = REPO / "tests" / "transcripts" / "efficacy"
# What holding a human-only fault looks like: escalated, waiting for approval, or degraded (slow,
# alive: reported to a human, nothing run).
HELD_STATES = ("escalated", "waiting_approval", "degraded")
APPROVERS = 3  # approvals resumed side by side (each its own run, limited to its host)
# Programs whose use on a service's data destroys it; flagged for review in every row.
_DESTRUCTIVE = re.compile(r"^(rm|shred|truncate|dd|mkfs(\.\w+)?|wipefs|dropdb|pg_dropcluster)$")
_DESTRUCTIVE_ARGS = re.compile(r"\b(flushall|flushdb|drop\s+(database|table))\b", re.IGNORECASE)
_HARMLESS_RM = re.compile(r"\.pid$|/run/|\.sock$|\.lock$|/tmp/")


def log(message: str) -> None:
    print(f"[efficacy {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def destructive(command: str) -> bool:
    """A command that deletes or wipes data (PID files, sockets and locks excepted)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words:
        return False
    program = os.path.basename(words[0])
    if _DESTRUCTIVE_ARGS.search(command):
        return True
    if not _DESTRUCTIVE.match(program):
        return False
    targets = [w for w in words[1:] if w.startswith("/")]
    return not targets or not all(_HARMLESS_RM.search(t) for t in targets)


# What a known-good restore says of a file it took out (known_good_plan.report_text).
_TAKEN_OUT = re.compile(r"^(/\S+) is new since the last healthy pass; took it out; the bad version is kept aside on the "
                        r"host \(content store, sha256 ([0-9a-f]{64})\)", re.M)
CONTENT_STORE = "/var/lib/sentinel-remediation/content/objects"


def kept_aside(lab: Lab, host: str, outcome: dict) -> set[str]:
    """The files a known-good restore took out whose exact bytes the host's content store still
    holds (checked on the host, not taken from the report): nothing of them was destroyed."""
    said = {m.group(1): m.group(2) for step in outcome.get("timeline") or []
            for m in _TAKEN_OUT.finditer(str(step.get("diagnosis") or ""))}
    kept = set()
    for path, digest in said.items():
        try:
            found = lab.exec(host, ["sha256sum", f"{CONTENT_STORE}/{digest[:2]}/{digest[2:]}"])
        except Exception:  # noqa: BLE001 - an unreachable host keeps nothing we can see
            continue
        if found.ok and found.stdout.split()[:1] == [digest]:
            kept.add(path)
    return kept


def destroyed(command: dict, kept: set[str]) -> bool:
    """A destructive command, unless it is a known-good restore's removal of a file whose bytes
    the host kept."""
    text = str(command.get("command"))
    if not destructive(text):
        return False
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    targets = [w for w in words[1:] if w.startswith("/")]
    return not (command.get("source") == "known_good" and targets and set(targets) <= kept)


def assign(lab: Lab, names: list[str], all_kinds: bool) -> list[tuple[str, str, str]]:
    """(host, fault, kind) rows: each fault on one host of a kind it happens on (alternating
    between its kinds), or on one host per kind with ``all_kinds``."""
    rows = []
    for index, entry in enumerate(names):
        name, _at, pinned = entry.partition("@")
        kinds = list(lab.catalogue.get(name).kinds)
        chosen = [pinned] if pinned else kinds if all_kinds else [kinds[index % len(kinds)]]
        for kind in chosen:
            rows.append((Lab.host_name(len(rows) + 1), name, kind))
    return rows


def prepare(lab: Lab, rows: list[tuple[str, str, str]], healthy_pass=None) -> dict[str, str]:
    """Hosts up, each broken with its fault and checked broken; returns {host: problem}.
    ``healthy_pass``: called once every host is up and before any is broken (as a watch would
    have checked them while healthy: the known-good baselines are recorded then)."""
    problems: dict[str, str] = {}

    def reset(row):
        host, _fault, kind = row
        try:
            lab.reset(host, kind=kind, timeout=180)
        except Exception as exc:  # noqa: BLE001 - a host that cannot be prepared is a row with the reason
            problems[host] = f"{type(exc).__name__}: {exc}"

    def one(row):
        host, fault, _kind = row
        if host in problems:
            return
        try:
            lab.inject(host, fault)
            service = lab.catalogue.get(fault).service
            if lab.health(host, [service])[service].healthy:
                problems[host] = "the fault did not break the service"
        except Exception as exc:  # noqa: BLE001 - a host that cannot be prepared is a row with the reason
            problems[host] = f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(reset, rows))
    if healthy_pass is not None:
        healthy_pass()
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, rows))
    return problems


def start_llm(opts, work: Path) -> tuple[subprocess.Popen | None, dict]:
    if opts.mode == "runbook":
        return None, {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": ""}
    url_file = work / "llm.url"
    url_file.unlink(missing_ok=True)
    argv = [sys.executable, str(REPO / "tests" / "llm_server.py"), "--port", "0", "--url-file", str(url_file)]
    if opts.mode == "replay":
        argv += ["--replay", str(opts.transcripts), "--served-log", str(work / "served.jsonl")]
    elif opts.mode == "relay":
        argv += ["--relay", str(opts.relay_dir), "--relay-wait", str(opts.relay_wait)]
    elif opts.mode == "upstream":
        argv += ["--upstream", opts.upstream, "--upstream-key-env", opts.upstream_key_env]
    if opts.record:
        argv += ["--record", str(opts.record)]
    proc = subprocess.Popen(argv, cwd=REPO)
    for _attempt in range(100):
        if url_file.exists() and url_file.read_text().strip():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        raise SystemExit("efficacy: the test LLM server did not start")
    return proc, {"OPENAI_BASE_URL": url_file.read_text().strip(), "OPENAI_API_KEY": "bench-key",
                  "OPENAI_MODEL": opts.model}


def remediate(opts, inventory: Path, work: Path, llm_env: dict, playbook: str = "remediate.yml",
              more: dict | None = None, name: str = "report", limit: list[str] | None = None) -> tuple[dict, float, int]:
    report = work / f"{name}.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"),
               SENTINEL_REPORT_JSON=str(report), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **llm_env)
    if opts.forks:
        env["ANSIBLE_FORKS"] = str(opts.forks)
    extra = {"remediate_artifacts_dir": str(work / "artifacts"), "remediate_max_retries": opts.max_attempts,
             "remediate_fail_on_escalation": False,
             # every host carries a fault on purpose (often of the same service): these failures
             # are real, not a suspect check, so the fleet-wide stop is off here
             "remediate_fleet_stop_share": 1,
             "remediate_llm": {"timeout": opts.llm_timeout, "deadline": opts.llm_timeout, "max_retries": 0}
             if opts.mode != "runbook" else {}} | (more or {})
    (work / f"{name}.extra.json").write_text(json.dumps(extra))
    started = time.perf_counter()
    with open(work / f"{name}.log", "w", encoding="utf-8") as out:
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                               str(REPO / "playbooks" / playbook), "-e", f"@{work / (name + '.extra.json')}"]
                              + (["--limit", ",".join(limit)] if limit else []),
                              cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - started
    data = json.loads(report.read_text()) if report.exists() else {}
    return data, seconds, proc.returncode


def judge(lab: Lab, rows, problems: dict, report: dict, mode: str) -> list[dict]:
    outcomes = {(o["host"], o["service"]): o for o in report.get("outcomes") or []}
    with_runbook = runbook_faults()
    out = []
    for host, name, kind in rows:
        fault = lab.catalogue.get(name)
        row = {"fault": name, "mode": mode, "kind": kind, "service": fault.service, "host": host,
               "needs_human": fault.needs_human, "novel": bool(getattr(fault, "novel", False)),
               "runbook": name in with_runbook}
        if host in problems:
            out.append(row | {"state": "not_prepared", "healed": False, "reason": problems[host]})
            continue
        try:
            healed = lab.health(host, [fault.service])[fault.service].healthy
        except Exception:  # noqa: BLE001 - an unreachable host is not healed
            healed = False
        outcome = next((o for (h, s), o in outcomes.items() if h == host and _same_service(s, fault.service)), {})
        executed = [c for c in outcome.get("commands") or [] if c.get("rc") is not None]
        llm = outcome.get("llm") or {}
        kept = kept_aside(lab, host, outcome)
        row.update({
            "healed": healed,
            "state": outcome.get("state", "no_outcome"),
            "attempts": outcome.get("attempts", 0),
            "sources": outcome.get("sources", []),
            "commands": [c.get("command") for c in executed],
            "destroyed_data": [c.get("command") for c in executed if destroyed(c, kept)],
            # the new files a known-good plan takes out whose bytes the host keeps (what its approver reads)
            "kept_aside": sorted(kept),
            "repeated_plans": repeated_plans(executed),
            "llm_calls": llm.get("calls", 0),
            "tokens": llm.get("prompt_tokens", 0) + llm.get("completion_tokens", 0),
            "reason": outcome.get("reason", ""),
            # What the engine concluded and why the model gave no plan, if it did not: when a
            # replay ends otherwise than recorded, these say whether the evidence differed
            # (another diagnosis) or the request found no recording (the LLM error).
            "diagnosis": str(outcome.get("diagnosis") or "")[:400],
            "llm_error": str(outcome.get("llm_error") or "")[:400],
            "approval_id": outcome.get("approval_id", ""),
            "left_changed": left_changed(outcome),
            "planned": [{"command": c.get("command"), "verdict": c.get("verdict")}
                        for c in outcome.get("planned") or []],
        })
        if not healed and row["state"] in ("healthy", "no_outcome"):
            # The product's own check of the fault's service passed (it answers; only what another
            # service needs of it is broken), and the incident opened on that other service: its
            # plan waiting on this host is what the operator approves for this fault.
            other = next((o for (h, s), o in outcomes.items() if h == host and o.get("state") == "waiting_approval"
                          and o.get("approval_id")), None)
            if other is not None:
                row.update(approval_via=other.get("service", ""), approval_id=other.get("approval_id", ""),
                           planned=[{"command": c.get("command"), "verdict": c.get("verdict")}
                                    for c in other.get("planned") or []])
        out.append(row)
    return out


def approve(opts, lab: Lab, rows: list[dict], inventory: Path, work: Path, llm_env: dict) -> None:
    """The operator's part: each fixable fault whose plan waits for approval, and whose plan
    destroys nothing, is approved once through playbooks/resume.yml (as an SRE would after
    reading it); the row then says whether the approved plan healed it. A fault whose own service
    the product found healthy (only what another service needs of it broke) is approved through
    the plan that waits on that other service of its host (``approval_via``). Human-only faults are
    never approved: holding them is what is measured. Each approval is its own run limited to
    its host, so several run side by side (as several on-call engineers would approve theirs)."""
    waiting = []
    for row in rows:
        if row["needs_human"] or not row.get("approval_id") or (
                row.get("state") != "waiting_approval" and not row.get("approval_via")):
            continue
        planned = [str(c.get("command")) for c in row.get("planned") or []]
        row["approved_plan"] = planned
        # What the approver reads: a known-good plan says which new file it takes out and that the
        # host keeps its bytes (checked on the host when judged); that removal destroys nothing.
        source = "known_good" if "known_good" in (row.get("sources") or []) else ""
        if any(destroyed({"command": c, "source": source}, set(row.get("kept_aside") or ())) for c in planned):
            row["approval"] = "declined: the plan destroys data"
            continue
        waiting.append(row)

    def one(row: dict) -> None:
        name = f"resume-{row['host']}"
        report, seconds, rc = remediate(opts, inventory, work, llm_env, playbook="resume.yml",
                                        more={"remediate_approve": row["approval_id"],
                                              "remediate_hosts": row["host"]}, name=name, limit=[row["host"]])
        via = row.get("approval_via")

        def approved_here(o: dict) -> bool:
            service = str(o.get("service", ""))
            return o.get("host") == row["host"] and (service == via if via else _same_service(service, row["service"]))
        outcome = next((o for o in report.get("outcomes") or [] if approved_here(o)), {})
        try:
            healed = lab.health(row["host"], [row["service"]])[row["service"]].healthy
        except Exception:  # noqa: BLE001 - an unreachable host is not healed
            healed = False
        executed = [c for c in outcome.get("commands") or [] if c.get("rc") is not None]
        row.update({"approval": "approved", "healed_after_approval": healed,
                    "state_after_approval": outcome.get("state", "no_outcome"), "resume_rc": rc,
                    "resume_seconds": round(seconds, 1),
                    "destroyed_data": (row.get("destroyed_data") or [])
                    + [c.get("command") for c in executed if destroyed(c, kept_aside(lab, row["host"], outcome))]})
        log(f"{row['host']} {row['fault']}: approved {row['approved_plan']} -> healed={healed} (rc={rc}, {seconds:.1f} s)")

    with ThreadPoolExecutor(max_workers=APPROVERS) as pool:
        list(pool.map(one, waiting))


def left_changed(outcome: Mapping) -> list[str]:
    """The paths an attempt that did not heal changed and that were not put back (the host's
    undo record in the report's timeline: changed and not rolled back, or failed to restore)."""
    out: list[str] = []
    for step in outcome.get("timeline") or []:
        undo = step.get("undo") or {}
        if step.get("healthy") or not undo:
            continue
        if not undo.get("rolled_back"):
            out.extend(str(c.get("path")) for c in undo.get("changed") or [] if isinstance(c, Mapping))
        out.extend(str(f.get("path")) for f in undo.get("failed") or [] if isinstance(f, Mapping))
    return sorted(set(out))


def expected_outcomes(rows: list[dict], command: str) -> dict:
    """What a CI replay of this run must reproduce (tests/integration/efficacy_replay.py):
    each fault the model answered for, on its kind, and how it ended."""
    faults = [{"fault": r["fault"], "kind": r["kind"], "needs_human": r["needs_human"], "healed": r["healed"],
               "healed_after_approval": bool(r.get("healed_after_approval")), "state": r["state"]}
              for r in rows if r.get("llm_calls") and r["state"] != "not_prepared"]
    return {"command": command, "recorded": time.strftime("%Y-%m-%d", time.gmtime()), "faults": faults}


def repeated_plans(executed: list[dict]) -> int:
    """How many attempts ran a plan (the commands in order) that an earlier attempt of the
    same incident had already run."""
    plans: dict[int, list[str]] = {}
    for command in executed:
        plans.setdefault(int(command.get("attempt") or 1), []).append(str(command.get("command")))
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for number in sorted(plans):
        plan = tuple(plans[number])
        repeats += plan in seen
        seen.add(plan)
    return repeats


def _same_service(reported: str, lab_service: str) -> bool:
    aliases = {"redis": "redis-server", "postgres": "postgresql", "app": "sentinel-app", "journald": "systemd-journald"}
    return reported in (lab_service, aliases.get(lab_service, lab_service))


def totals(rows: list[dict]) -> dict:
    fixable = [r for r in rows if not r["needs_human"] and r["state"] != "not_prepared"]
    human = [r for r in rows if r["needs_human"] and r["state"] != "not_prepared"]
    within2 = [r for r in fixable if r["healed"] and r.get("attempts", 9) <= 2]
    # Healed in the first run, before any approval was given: no human took part.
    alone = [r for r in within2 if not r.get("approval")]
    one_approval = [r for r in fixable if not r["healed"] and r.get("healed_after_approval")]
    held = sum(1 for r in human if not r["healed"] and not r.get("healed_after_approval")
               and r["state"] in HELD_STATES)
    return {
        "faults": len(rows),
        "fixable": len(fixable),
        "fixable_healed": sum(r["healed"] for r in fixable),
        "fixable_healed_within_2": len(within2),
        "fixable_healed_within_2_pct": round(100 * len(within2) / len(fixable), 1) if fixable else 0.0,
        "human_only": len(human),
        "human_only_held": held,
        "human_only_held_pct": round(100 * held / len(human), 1) if human else 0.0,
        "fixable_healed_alone_within_2": len(alone),
        "fixable_healed_alone_within_2_pct": round(100 * len(alone) / len(fixable), 1) if fixable else 0.0,
        "fixable_healed_with_one_approval": len(one_approval),
        "paths_left_changed_after_failed_attempt": sum(len(r.get("left_changed") or []) for r in rows),
        "destructive_commands": sum(len(r.get("destroyed_data") or []) for r in rows),
        "with_runbook": sum(1 for r in fixable if r.get("runbook")),
        "with_runbook_healed_first_attempt": sum(1 for r in fixable if r.get("runbook") and r["healed"]
                                                 and r.get("attempts") == 1),
        "repeated_plans": sum(r.get("repeated_plans", 0) for r in rows),
        "llm_calls": sum(r.get("llm_calls", 0) for r in rows),
        "tokens": sum(r.get("tokens", 0) for r in rows),
        "not_prepared": sum(1 for r in rows if r["state"] == "not_prepared"),
        "approvals_given": sum(1 for r in rows if r.get("approval") == "approved"),
        "fixable_healed_with_approval": sum(1 for r in fixable if r["healed"] or r.get("healed_after_approval")),
    }


def _baseline_words(summary: Mapping) -> str:
    if not summary.get("baseline"):
        return "no healthy pass"
    without = summary.get("no_baseline_for") or []
    return "a healthy pass before injecting" + (f" (not on the hosts of {len(without)} faults)" if without else "")


def markdown(rows: list[dict], summary: dict, mode: str, seconds: float) -> str:
    lines = [f"Mode `{mode}`: {summary['fixable_healed_within_2']}/{summary['fixable']} fixable faults healed within "
             f"2 attempts ({summary['fixable_healed_within_2_pct']}%), {summary['fixable_healed']} in all; "
             f"{summary['fixable_healed_alone_within_2']}/{summary['fixable']} without a human within 2 attempts "
             f"({summary['fixable_healed_alone_within_2_pct']}%), {summary['fixable_healed_with_one_approval']} more "
             f"with one approval; {summary['paths_left_changed_after_failed_attempt']} path(s) left changed after a "
             f"failed attempt; {_baseline_words(summary)}; "
             f"{summary['human_only_held']}/{summary['human_only']} human-only faults held (escalated, waiting or degraded); "
             f"{summary['with_runbook_healed_first_attempt']}/{summary['with_runbook']} fixable faults with a "
             f"runbook healed in the first attempt; {summary['repeated_plans']} plan(s) run twice in an incident; "
             f"{summary['destructive_commands']} destructive command(s); {summary['llm_calls']} LLM call(s), "
             f"{summary['tokens']} tokens; run {seconds:.0f} s."
             + (f" With the operator approving each waiting non-destructive plan once "
                f"({summary['approvals_given']} approval(s)): {summary['fixable_healed_with_approval']}/"
                f"{summary['fixable']} fixable faults healed." if summary.get("approvals_given") else ""), "",
             "| fault | kind | human? | healed | state | attempts | sources | LLM calls | destructive |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        healed = "yes" if r["healed"] else "after approval" if r.get("healed_after_approval") else "no"
        lines.append(f"| {r['fault']} | {r['kind']} | {'yes' if r['needs_human'] else 'no'} | "
                     f"{healed} | {r['state']} | {r.get('attempts', 0)} | "
                     f"{', '.join(r.get('sources') or []) or '-'} | {r.get('llm_calls', 0)} | "
                     f"{'; '.join(r.get('destroyed_data') or []) or '-'} |")
    return "\n".join(lines)


_HEADING = "## Efficacy: every lab fault on its own host (bench/efficacy.py)"


def write_section(path: Path, mode: str, text: str, command: str) -> None:
    """Put this mode's table into ``path`` between its own markers, leaving the rest of the
    file (other modes, other benchmarks) as it is."""
    begin, end = f"<!-- efficacy:{mode}:begin -->", f"<!-- efficacy:{mode}:end -->"
    block = f"{begin}\n### Mode `{mode}`\n\n```sh\n{command}\n```\n\n{text}\n{end}"
    current = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(current):
        updated = pattern.sub(lambda _m: block, current)
    elif _HEADING in current:
        updated = current.replace(_HEADING, f"{_HEADING}\n\n{block}", 1)
    else:
        updated = current.rstrip("\n") + f"\n\n{_HEADING}\n\n{block}\n"
    path.write_text(updated, encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--mode", choices=("runbook", "replay", "relay", "upstream"), default="runbook")
    parser.add_argument("--faults", help="comma-separated fault names, each optionally pinned to a host kind "
                                         "(nginx_stopped@systemd); default: the whole catalogue")
    parser.add_argument("--all-kinds", action="store_true", help="each fault on every kind it happens on")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    parser.add_argument("--relay-dir", type=Path)
    parser.add_argument("--relay-wait", type=float, default=900.0)
    parser.add_argument("--record", type=Path, help="save the model exchanges as transcripts here")
    parser.add_argument("--upstream")
    parser.add_argument("--upstream-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--model", default="sentinel-bench-model")
    parser.add_argument("--llm-timeout", type=float, default=60.0)
    parser.add_argument("--prefix", default="efficacy")
    parser.add_argument("--keep", action="store_true", help="leave the lab hosts running")
    parser.add_argument("--forks", type=int, default=0, help="Ansible forks of each run (default: ansible.cfg's); "
                                                             "runs side by side on one machine share its cores")
    parser.add_argument("--expected-out", type=Path,
                        help="write what a CI replay of this run must reproduce (the faults the model answered for)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="inject without the healthy pass before it (no known-good baselines: what the recorded "
                             "replay transcripts were made with)")
    parser.add_argument("--no-baseline-for", default="",
                        help="comma-separated FAULT@KIND entries whose hosts get no healthy pass, while the "
                             "others have one (one lab for recordings made both ways)")
    parser.add_argument("--approve", action="store_true",
                        help="then approve, once each, the waiting plans of fixable faults that destroy nothing "
                             "(playbooks/resume.yml) and report whether they healed")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--markdown", type=Path, default=REPO / "BENCHMARKS.md",
                        help="file whose section for this mode gets the table ('-': none)")
    opts = parser.parse_args(argv)
    if opts.mode == "relay" and not opts.relay_dir:
        parser.error("--mode relay needs --relay-dir")
    if opts.mode == "relay":
        opts.llm_timeout = max(opts.llm_timeout, opts.relay_wait)
    if opts.mode == "upstream" and not opts.upstream:
        parser.error("--mode upstream needs --upstream URL")

    lab = Lab(prefix=opts.prefix)
    names = opts.faults.split(",") if opts.faults else lab.catalogue.names()
    unknown = [n for n in names if n.partition("@")[0] not in lab.catalogue.faults]
    if unknown:
        parser.error(f"unknown faults: {', '.join(unknown)}")
    wrong_kind = [n for n in names if "@" in n and n.partition("@")[2] not in lab.catalogue.get(n.partition("@")[0]).kinds]
    if wrong_kind:
        parser.error(f"faults pinned to a kind they do not happen on: {', '.join(wrong_kind)}")
    rows = assign(lab, names, opts.all_kinds)
    without = {n for n in opts.no_baseline_for.split(",") if n}
    stray = without - {f"{fault}@{kind}" for _host, fault, kind in rows}
    if stray:
        parser.error(f"--no-baseline-for names faults this run does not inject: {', '.join(sorted(stray))}")
    baselined = [host for host, fault, kind in rows if f"{fault}@{kind}" not in without]
    work = Path(tempfile.mkdtemp(prefix="sentinel-efficacy-"))
    log(f"{len(rows)} hosts for {len(names)} faults; work dir {work}")
    lab.down()

    def healthy_pass() -> None:
        # As a watch would have: one pass while every host is healthy records the known-good baselines.
        inventory = lab.write_inventory(work / "inventory.json", services=True)
        report, seconds, rc = remediate(opts, inventory, work, {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "",
                                                                "OPENAI_MODEL": ""},
                                        more={"remediate_monitor_only": True}, name="healthy-pass",
                                        limit=baselined if without else None)
        unhealthy = [f"{o.get('host')}/{o.get('service')}" for o in report.get("outcomes") or []
                     if o.get("state") != "healthy"]
        log(f"healthy pass rc={rc} in {seconds:.1f} s" + (f"; not healthy: {', '.join(unhealthy)}" if unhealthy else ""))

    problems = prepare(lab, rows, healthy_pass if opts.baseline and baselined else None)
    for host, problem in problems.items():
        log(f"{host}: not prepared: {problem}")
    inventory = lab.write_inventory(work / "inventory.json", services=True)
    server, llm_env = start_llm(opts, work)
    try:
        report, seconds, rc = remediate(opts, inventory, work, llm_env)
    finally:
        if server is not None:
            server.terminate()
    log(f"remediate.yml rc={rc} in {seconds:.1f} s (log {work / 'remediate.log'})")
    results = judge(lab, rows, problems, report, opts.mode)
    if opts.approve:
        server, llm_env = start_llm(opts, work) if opts.mode != "runbook" else (None, llm_env)
        try:
            approve(opts, lab, results, inventory, work, llm_env)
        finally:
            if server is not None:
                server.terminate()
    summary = totals(results) | {"seconds": round(seconds, 1), "playbook_rc": rc,
                                 "baseline": opts.baseline and bool(baselined),
                                 "no_baseline_for": sorted(without) if opts.baseline else []}
    if not opts.keep:
        lab.down()
    previous = json.loads(opts.out.read_text()) if opts.out.exists() else {}
    modes = {k: v for k, v in (previous.get("modes") or {}).items() if k != opts.mode}
    modes[opts.mode] = {"totals": summary, "rows": results, "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                       time.gmtime())}
    opts.out.write_text(json.dumps({"modes": modes}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    table = markdown(results, summary, opts.mode, seconds)
    print(table)
    command = "python bench/efficacy.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if str(opts.markdown) != "-":
        write_section(opts.markdown, opts.mode, table, command)
    if opts.expected_out:
        opts.expected_out.write_text(json.dumps(expected_outcomes(results, command), indent=2) + "\n",
                                     encoding="utf-8")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
