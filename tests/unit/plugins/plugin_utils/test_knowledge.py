# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The knowledge index: documents split at headings, retrieval that respects the service,
the content-keyed cache, and what reaches the planner's prompt and result."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import knowledge as kn
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import (
    KnowledgeError,
    KnowledgeIndex,
    load_knowledge,
    passage_label,
    passages_header,
    split_document,
)
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import RunbookError, load_runbooks
from fault_samples import sample

DATA = Path(__file__).resolve().parents[3] / "data" / "knowledge"
DOCS = DATA / "docs"
RUNBOOKS = DATA / "runbooks"
BILLING_ERROR = ("billing-api is not running; refusing to start: lock file /run/billing-api/worker.lock is held by "
                 "pid 4242")


@pytest.fixture()
def index() -> KnowledgeIndex:
    return KnowledgeIndex.build(load_runbooks([RUNBOOKS]), [DOCS])


def where(results) -> list[tuple[str, str]]:
    return [(r["file"], r["heading"]) for r in results]


# ---------------------------------------------------------------------- splitting documents

def test_markdown_sections_carry_their_heading_chain_and_front_matter() -> None:
    meta, sections = split_document((DOCS / "billing-api.md").read_text(), "billing-api.md")
    assert meta == {"title": "billing-api operations", "services": ["billing-api"]}
    assert [s["heading"] for s in sections] == [
        "billing-api", "billing-api > Stale worker lock after a crash", "billing-api > Database connection refused",
        "billing-api > Deploys"]
    assert "worker.lock" in sections[1]["text"] and "##" not in sections[1]["text"]


def test_setext_headings_and_code_blocks() -> None:
    meta, sections = split_document((DOCS / "web" / "nginx-tuning.md").read_text(), "nginx-tuning.md")
    assert meta["title"] == "nginx tuning notes"
    assert [s["heading"] for s in sections] == ["nginx tuning notes", "nginx tuning notes > Worker connections",
                                                "nginx tuning notes > Stale PID file after a crash"]
    # a '#' line inside a fenced block is code, not a heading
    assert "# not a heading" in sections[-1]["text"]


def test_text_files_with_man_page_headings_and_rst() -> None:
    _meta, sections = split_document((DOCS / "on-call.txt").read_text(), "on-call.txt")
    assert [s["heading"] for s in sections] == ["ON-CALL NOTES", "ESCALATION", "RESTARTING SERVICES"]
    _meta, sections = split_document((DOCS / "conventions.rst").read_text(), "conventions.rst")
    assert [s["heading"] for s in sections] == ["Runbook conventions", "Runbook conventions > Naming",
                                                "Runbook conventions > Reviews"]
    _meta, sections = split_document("just some notes\nwithout any heading\n", "notes.txt")
    assert sections == [{"heading": "notes", "text": "just some notes\nwithout any heading"}]


def test_long_sections_are_cut_at_paragraphs() -> None:
    body = "\n\n".join(f"paragraph {i} " + "word " * 60 for i in range(12))
    _meta, sections = split_document(f"# Big\n\n{body}\n", "big.md")
    assert len(sections) > 2 and all(len(s["text"]) <= kn.SECTION_CHARS for s in sections)
    assert all(s["heading"] == "Big" for s in sections)
    assert "paragraph 0" in sections[0]["text"] and "paragraph 11" in sections[-1]["text"]


def test_bad_front_matter_and_directories_are_named(tmp_path: Path) -> None:
    (tmp_path / "bad.md").write_text("---\nservices: [unclosed\n---\n# x\n")
    with pytest.raises(KnowledgeError, match=r"bad\.md: front matter is not valid YAML"):
        KnowledgeIndex.build([], [tmp_path])
    (tmp_path / "bad.md").write_text("---\nservices: {a: 1}\n---\n# x\n")
    with pytest.raises(KnowledgeError, match=r"bad\.md: front matter services: a list"):
        KnowledgeIndex.build([], [tmp_path])
    with pytest.raises(KnowledgeError, match="docs directory .*nope does not exist"):
        KnowledgeIndex.build([], [tmp_path / "nope"])


# ---------------------------------------------------------------------- retrieval and the service

def test_the_right_passage_for_a_service_the_collection_does_not_know(index: KnowledgeIndex) -> None:
    results = index.query(BILLING_ERROR, "billing-api", 3)
    assert where(results)[0] == ("docs/billing-api.md", "billing-api > Stale worker lock after a crash")
    assert all(not r["other_service"] for r in results)
    # the nginx and memcached "stale ... after a crash" sections share words, not the service
    assert not any("nginx" in r["file"] or "memcached" in r["file"] for r in results)
    assert not any(r["runbook"] and r["runbook"].startswith(("nginx", "redis")) for r in results)


def test_wrong_service_passages_are_kept_out(index: KnowledgeIndex) -> None:
    results = index.query("memcached failed to listen on TCP port 11211: Address already in use", "memcached", 3)
    files = [r["file"] for r in results]
    assert "docs/memcached/troubleshooting.md" in files
    assert ("docs/memcached/troubleshooting.md", "Troubleshooting > Port 11211 already in use") in where(results)
    assert not any("billing" in f or "nginx" in f for f in files)
    nginx = index.query("nginx is not running; stale pid file /run/nginx.pid after a crash", "nginx", 4)
    assert ("docs/web/nginx-tuning.md", "nginx tuning notes > Stale PID file after a crash") in where(nginx)
    assert not any("memcached" in r["file"] or "billing" in r["file"] for r in nginx)


def test_other_services_only_when_nothing_closer_and_then_flagged(index: KnowledgeIndex) -> None:
    # General documents (about no service) are closer than another service's.
    general = index.query("inventory-svc crashed twice, restart it?", "inventory-svc", 3)
    assert general and all(not r["other_service"] for r in general)
    assert ("docs/on-call.txt", "RESTARTING SERVICES") in where(general)
    assert not any("billing" in r["file"] or "memcached" in r["file"] for r in general)
    # Nothing about payments-db nor general scores: the billing section is offered, flagged.
    flagged = index.query("payments-db connection refused", "payments-db", 3)
    assert flagged and all(r["other_service"] for r in flagged)
    assert where(flagged)[0] == ("docs/billing-api.md", "billing-api > Database connection refused")
    assert passages_header(flagged, "payments-db").startswith("Knowledge passages: NOTHING")
    assert "OTHER services" in passages_header(flagged, "payments-db")


def test_at_most_two_passages_of_one_file(index: KnowledgeIndex) -> None:
    results = index.query("billing-api lock crash database deploy settings", "billing-api", 5)
    assert sum(r["file"] == "docs/billing-api.md" for r in results) <= 2


def test_labels_for_the_prompt() -> None:
    assert passage_label({"source": "runbook", "runbook": "nginx_port_conflict", "kind": "steps"}) == \
        "[nginx_port_conflict/steps]"
    assert passage_label({"source": "doc", "file": "docs/billing-api.md", "heading": "billing-api > Deploys"}) == \
        "[docs/billing-api.md § billing-api > Deploys]"


# ---------------------------------------------------------------------- built once, cached by content

def test_built_once_then_memory_then_cache_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    cache = tmp_path / "cache"
    kn._MEMORY.clear()
    first = load_knowledge([RUNBOOKS], [docs], cache_dir=cache)
    assert first.origin == "built" and len(list(cache.glob("knowledge-*.json"))) == 1
    again = load_knowledge([RUNBOOKS], [docs], cache_dir=cache)
    assert again.origin == "memory" and again.index is first.index
    kn._MEMORY.clear()  # a new worker process: only the file cache is left
    loaded = load_knowledge([RUNBOOKS], [docs], cache_dir=cache)
    assert loaded.origin == "cache" and loaded.key == first.key
    assert loaded.query(BILLING_ERROR, "billing-api", 3) == first.query(BILLING_ERROR, "billing-api", 3)
    # a changed document is a new content: a new key, built again
    page = docs / "billing-api.md"
    page.write_text(page.read_text() + "\n## Certificates\n\nRenew with the PKI team.\n")
    os.utime(page, ns=(page.stat().st_atime_ns, page.stat().st_mtime_ns + 10 ** 9))
    changed = load_knowledge([RUNBOOKS], [docs], cache_dir=cache)
    assert changed.origin == "built" and changed.key != first.key
    assert any(p["heading"] == "billing-api > Certificates" for p in changed.index.passages)


def test_a_corrupt_cache_file_is_rebuilt(tmp_path: Path) -> None:
    kn._MEMORY.clear()
    built = load_knowledge([RUNBOOKS], [DOCS], cache_dir=tmp_path)
    path = next(tmp_path.glob("knowledge-*.json"))
    path.write_text("{not json")
    kn._MEMORY.clear()
    assert load_knowledge([RUNBOOKS], [DOCS], cache_dir=tmp_path).origin == "built"
    assert json.loads(path.read_text())["format"] == kn.FORMAT
    assert built.key in path.name or path.name == f"knowledge-{built.key[:32]}.json"


def test_an_unwritable_cache_costs_time_not_correctness(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    kn._MEMORY.clear()
    result = load_knowledge([RUNBOOKS], [DOCS], cache_dir=blocker / "cache")
    assert result.origin == "built" and len(result.index) > 20


def test_bad_operator_runbooks_stop_loading_with_the_file_named(tmp_path: Path) -> None:
    (tmp_path / "broken.yml").write_text("id: x\nmatch: {facts: [nope]}\nsteps: [{command: service x start}]\n")
    with pytest.raises(RunbookError, match=r"broken\.yml: match\.facts\[0\]: unknown fact 'nope'"):
        load_knowledge([tmp_path], cache_dir=False)
    with pytest.raises(RunbookError, match="does not exist"):
        load_knowledge([tmp_path / "nope"], cache_dir=False)


# ---------------------------------------------------------------------- through the planner

BILLING = {"service": "billing-api", "error": BILLING_ERROR, "evidence": {
    "status": "billing-api is not running",
    "logs": {"/var/log/billing-api/app.log": "refusing to start: lock file /run/billing-api/worker.lock is held by "
                                             "pid 4242"}}}


def _llm(server) -> dict:
    return {"base_url": server.url, "api_key": "sk-test-NOT-A-REAL-KEY-0123456789abcdef", "model": "test-model",
            "timeout": 5, "max_retries": 0}


def test_the_right_passage_reaches_the_prompt_and_the_result(run_plan, llm_server) -> None:
    from llm_server import plan_content

    llm_server.queue({"content": plan_content("a dead worker left its lock",
                                              ["rm -f /run/billing-api/worker.lock", "service billing-api start"])})
    result = run_plan({**BILLING, "backend": "llm", "llm": _llm(llm_server), "docs_dirs": [str(DOCS)],
                       "runbook_dirs": [str(RUNBOOKS)]})
    prompt = llm_server.prompt_text(0)
    assert "[docs/billing-api.md § billing-api > Stale worker lock after a crash]" in prompt
    assert "memcached" not in prompt and "nginx-tuning" not in prompt and "[nginx_" not in prompt
    assert {"file": "docs/billing-api.md", "heading": "billing-api > Stale worker lock after a crash",
            "source": "doc", "other_service": False}.items() <= result["passages"][0].items()


def test_the_prompt_says_when_passages_are_about_other_services(run_plan, llm_server) -> None:
    from llm_server import plan_content

    llm_server.queue({"content": plan_content("unknown", ["service payments-db restart"])})
    result = run_plan({"service": "payments-db", "error": "payments-db connection refused", "backend": "llm",
                       "llm": _llm(llm_server), "docs_dirs": [str(DOCS / "memcached"), str(DOCS)]})
    prompt = llm_server.prompt_text(0)
    assert "NOTHING in the runbooks or the operator's documents is about payments-db" in prompt
    assert result["passages"] and all(p["other_service"] for p in result["passages"])


def test_an_operator_runbook_plans_without_a_model(run_plan) -> None:
    result = run_plan({**BILLING, "runbook_dirs": [str(RUNBOOKS)], "docs_dirs": [str(DOCS)]})
    assert result["source"] == "runbook" and result["runbook"]["id"] == "billing_api_stale_lock"
    assert [c["command"] for c in result["commands"]] == ["rm -f /run/billing-api/worker.lock",
                                                          "service billing-api start"]
    case = sample("nginx_stopped")
    result = run_plan({k: case[k] for k in ("service", "error", "evidence")} | {"runbook_dirs": [str(RUNBOOKS)]})
    assert [c["command"] for c in result["commands"]] == ["nginx -t", "service nginx start"]


def test_a_bad_operator_runbook_fails_the_task_with_its_name(run_plan, tmp_path: Path) -> None:
    from ansible.errors import AnsibleActionFail

    (tmp_path / "oops.yml").write_text("id: oops\nmatch: {any: ['(']}\nsteps: [{command: service x start}]\n")
    with pytest.raises(AnsibleActionFail, match=r"sentinel\.remediation\.plan: .*oops\.yml: match\.any\[0\]: bad pattern"):
        run_plan({**BILLING, "runbook_dirs": [str(tmp_path)]})


def test_bm25_from_cached_frequencies_scores_like_rank_bm25_from_tokens() -> None:
    from rank_bm25 import BM25Okapi

    from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import tokenize

    index = KnowledgeIndex.build(load_runbooks([RUNBOOKS]), [DOCS])
    reference = BM25Okapi([tokenize(f"{p['heading']}\n{p['text']}") for p in index.passages])
    query = [t for t in dict.fromkeys(tokenize(BILLING_ERROR)) if t in reference.idf]
    assert list(index.bm25.get_scores(query)) == pytest.approx(list(reference.get_scores(query)))
    assert index.bm25.idf == pytest.approx(reference.idf)


def test_a_link_loop_in_a_docs_directory_is_not_followed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "team").mkdir(parents=True)
    (docs / "team" / "notes.md").write_text("# notes\n\nrestart the billing worker\n")
    (docs / "team" / "loop").symlink_to(docs)
    kn._MEMORY.clear()
    knowledge = load_knowledge([], [docs], cache_dir=False)
    assert [p["file"] for p in knowledge.index.passages if p["source"] == "doc"] == ["docs/team/notes.md"]
