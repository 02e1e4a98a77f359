"""The fault catalogue lab/faults.yml: schema, contract names, the generated docs table."""
from __future__ import annotations

import copy
import re
import shlex
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab"))

import sentinel_lab  # noqa: E402
from sentinel_lab import (  # noqa: E402
    DOC_BEGIN,
    DOC_END,
    FAULT_FIELDS,
    SERVICES,
    catalogue_problems,
    load_catalogue,
    read_catalogue_document,
    render_catalogue_markdown,
)

DOCUMENT = read_catalogue_document()
CATALOGUE = load_catalogue()


def _contract_names() -> list[str]:
    text = (REPO / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = text.split("## Fault catalogue", 1)[1].split("\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`([a-z][a-z0-9_]*)`", section)


def test_catalogue_is_valid() -> None:
    assert catalogue_problems(DOCUMENT) == []


def test_every_fault_has_every_field() -> None:
    for fault in DOCUMENT["faults"]:
        assert set(FAULT_FIELDS) <= set(fault), fault.get("name")


def test_names_are_unique_and_services_known() -> None:
    names = [f["name"] for f in DOCUMENT["faults"]]
    assert len(names) == len(set(names))
    assert set(DOCUMENT["services"]) == set(SERVICES)
    assert {f["service"] for f in DOCUMENT["faults"]} <= set(SERVICES)


def test_contract_faults_are_exactly_those_of_the_contract() -> None:
    contract = _contract_names()
    assert len(contract) >= 12
    assert sorted(n for n, f in CATALOGUE.faults.items() if f.contract) == sorted(contract)


def test_only_the_missing_binary_needs_a_human() -> None:
    assert [n for n, f in CATALOGUE.faults.items() if f.needs_human] == ["nginx_binary_missing"]


def test_fixes_run_without_a_shell() -> None:
    for fault in CATALOGUE.faults.values():
        for command in fault.fix:
            words = shlex.split(command)
            assert words and not {"|", "&&", ";", ">", "<"} & set(words), (fault.name, command)


def test_docs_table_is_current() -> None:
    doc = (REPO / "docs" / "lab.md").read_text(encoding="utf-8")
    assert DOC_BEGIN in doc and DOC_END in doc
    current = doc[doc.index(DOC_BEGIN): doc.index(DOC_END) + len(DOC_END)] + "\n"
    assert current == render_catalogue_markdown(CATALOGUE), "run `lab/lab faults --markdown` and update docs/lab.md"


def _first(document: dict) -> dict:
    return document["faults"][0]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: _first(d).pop("fix"), "lacks fix"),
        (lambda d: d["faults"].append(copy.deepcopy(_first(d))), "defined twice"),
        (lambda d: _first(d).update(service="postgres"), "not in `services`"),
        (lambda d: _first(d).update(fix=["rm -f /run/nginx.pid && service nginx start"]), "shell syntax"),
        (lambda d: _first(d).update(fix=["kill {pid_of:nginx}"]), "unknown placeholder"),
        (lambda d: _first(d).update(needs_human="no"), "needs_human"),
        (lambda d: _first(d).update(diagnose=[{"command": "ps"}]), "diagnose"),
        (lambda d: _first(d).update(inject=[]), "inject"),
        (lambda d: _first(d).update(surprise=1), "unknown keys surprise"),
        (lambda d: d["services"].update(postfix={"init": "postfix", "checks": "x"}), "service 'postfix'"),
    ],
)
def test_schema_problems_are_named(mutate, expected: str) -> None:
    document = copy.deepcopy(DOCUMENT)
    mutate(document)
    problems = catalogue_problems(document)
    assert any(expected in p for p in problems), problems


def test_unknown_fault_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert sentinel_lab.main(["inject", "lab01", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lab: unknown fault 'nope'; known: nginx_stopped,")
    assert "Traceback" not in err


def test_faults_listing_needs_no_docker(capsys: pytest.CaptureFixture[str]) -> None:
    assert sentinel_lab.main(["faults"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in CATALOGUE.names())
