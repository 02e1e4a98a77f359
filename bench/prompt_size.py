# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prompt size of the planner for each lab fault, with the evidence included.

Runs the real planner (backend llm, the real policy engine) against tests/llm_server.py
on 127.0.0.1 and measures the prompt the server received:

  .venv/bin/python bench/prompt_size.py            # table for every lab fault
  .venv/bin/python bench/prompt_size.py --show nginx_port_conflict   # plus that full prompt

The last two rows are one app incident without and with its database's part (the
dependency's suspect note and its own log lines on the failure: dependency_evidence.py).

Token counts: tiktoken's o200k_base when tiktoken is installed AND its encoding file
can be loaded (it is downloaded on first use, so it is usually absent offline); otherwise
two documented estimates: ``pieces`` splits the text like GPT pre-tokenizers do (letter
runs, 1-3 digit groups, punctuation runs), which tracks BPE counts of log-like English
closely and slightly high; ``chars/4`` is the planner's own rough estimate.  The budget
(2,000 prompt tokens) is judged on the larger of the counts.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / ".collections"), str(REPO / "tests")]
# conftest makes the checkout importable as sentinel.remediation.
import conftest  # noqa: E402,F401  pylint: disable=unused-import
from fault_samples import FAULTS, sample  # noqa: E402
from llm_server import LLMServer, plan_content  # noqa: E402

from ansible_collections.sentinel.remediation.plugins.plugin_utils import dependency_evidence  # noqa: E402
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import resolve_settings  # noqa: E402
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner  # noqa: E402

BUDGET = 2000
_PIECES = re.compile(r"[A-Za-z]+|\d{1,3}|[^\sA-Za-z\d]+|\s+")


def tiktoken_counter():
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
    except Exception:
        return None
    return lambda text: len(encoding.encode(text))


def pieces(text: str) -> int:
    # A single space before a word belongs to that word's token in GPT tokenizers, so
    # only other whitespace runs (newlines, indentation) count as pieces of their own.
    return sum(1 for p in _PIECES.findall(text) if not p.isspace() or p != " ")


def measure(messages, counter) -> dict:
    text = "".join(m["content"] for m in messages)
    overhead = 4 * len(messages) + 3  # chat framing per message
    result = {"chars": len(text), "pieces": pieces(text) + overhead, "chars/4": len(text) // 4 + overhead}
    if counter:
        result["tiktoken"] = sum(counter(m["content"]) for m in messages) + overhead
    return result


# An app refused by its database, as the lab's hosts report it (app_db_access_revoked): the
# request without and with the database's part (dependency_evidence), to measure what it adds.
_APP_ERROR = "GET http://127.0.0.1:8080/health returned 503, expected 200"
_APP_LOG = ('2026-01-01 10:00:01 sentinel-app[412]: health: database: connection to server at "127.0.0.1", port 5432 '
            'failed: FATAL:  pg_hba.conf rejects connection for host "127.0.0.1", user "sentinelapp", database '
            '"sentinelapp", no encryption; storage: ok')
_DB_LOG = "\n".join(["2026-01-01 09:58:00.101 UTC [81] LOG:  checkpoint starting: time",
                     "2026-01-01 09:58:02.512 UTC [81] LOG:  checkpoint complete: wrote 3 buffers (0.0%)",
                     "2026-01-01 10:00:00.990 UTC [77] LOG:  received SIGHUP, reloading configuration files"]
                    + ['2026-01-01 10:00:%02d.204 UTC [%d] sentinelapp@sentinelapp FATAL:  pg_hba.conf rejects '
                       'connection for host "127.0.0.1", user "sentinelapp", database "sentinelapp", no encryption'
                       % (n, 500 + n) for n in range(1, 9)])
_POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
             "ports": [5432], "runtime_paths": ["/var/run/postgresql"]}


def dependency_case(with_dependency: bool) -> dict:
    """The app's incident as the planner gets it, with or without its database's part."""
    evidence = {"init": "sysv", "logs": {"/var/log/sentinel-app/app.log": _APP_LOG},
                "dependencies": {"postgresql": "healthy: its own checks passed in this same check"},
                "processes": [{"pid": 412, "ppid": 1, "user": "sentinel-app", "state": "S", "comm": "sentinel-app",
                               "cmdline": "/usr/bin/python3 /usr/local/bin/sentinel-app", "ports": [8080]}]}
    if with_dependency:
        named = dependency_evidence.naming(_APP_ERROR, evidence, _POSTGRES)
        relevant = dependency_evidence.relevant_lines({"logs": {"/var/log/postgresql/postgresql-15-main.log": _DB_LOG}},
                                                      dependency_evidence.search_terms([line for line, _by in named]))
        evidence["dependencies"] = {"postgresql": evidence["dependencies"]["postgresql"] + "; "
                                    + dependency_evidence.suspect_note("sentinel-app", [by for _l, by in named])}
        part = dependency_evidence.section("sentinel-app", "postgresql", relevant)
        evidence["dependency_evidence"] = {"postgresql": part}
    return {"service": "sentinel-app", "error": _APP_ERROR, "evidence": evidence,
            "host_tools": {"present": ["service", "psql", "pg_ctlcluster", "sed", "kill"], "absent": []}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Prompt size of the planner per lab fault")
    parser.add_argument("--show", metavar="FAULT", help="print the full prompt of this fault")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args(argv)
    counter = tiktoken_counter()
    rows = []
    shown = None
    with LLMServer(default={"content": plan_content("bench", ["service nginx start"])}) as server:
        cases = [(fault, sample(fault)) for fault in FAULTS]
        cases += [("app_db_refused", dependency_case(False)), ("app_db_refused+dependency", dependency_case(True))]
        for fault, case in cases:
            server.reset()
            Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                    host_tools=case["host_tools"], failed_commands=["service %s restart" % case["service"]],
                    backend="llm", max_attempts=1,
                    llm_settings=resolve_settings({"base_url": server.url, "model": "bench", "max_retries": 0},
                                                  env={}, ini={})).run()
            if not server.chat_requests:  # an escalation runbook asks no LLM: build the prompt anyway
                continue
            messages = server.chat_requests[0]["messages"]
            row = {"fault": fault, **measure(messages, counter)}
            row["max"] = max(v for k, v in row.items() if k not in ("fault", "chars"))
            rows.append(row)
            if fault == args.show:
                shown = messages
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        method = "tiktoken o200k_base" if counter else "estimates (tiktoken encoding not available offline)"
        print(f"prompt tokens per lab fault, evidence included; counted with {method}")
        keys = ["chars", "pieces", "chars/4"] + (["tiktoken"] if counter else [])
        print(f"{'fault':28}" + "".join(f"{k:>10}" for k in keys) + f"{'budget':>9}")
        for row in rows:
            verdict = "ok" if row["max"] <= BUDGET else "OVER"
            print(f"{row['fault']:28}" + "".join(f"{row[k]:>10}" for k in keys) + f"{verdict:>9}")
    if shown:
        for message in shown:
            print(f"\n----- {message['role']} -----\n{message['content']}")
    return 0 if all(row["max"] <= BUDGET for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
