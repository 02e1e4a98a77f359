"""The fault catalogue lab/faults.yml: schema, host kinds, contract names, what issue 11
asks of its size, and the generated docs table."""
from __future__ import annotations

import copy
import json
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
    KINDS,
    SERVICES,
    SERVICES_OF_KIND,
    Fault,
    LabUsageError,
    catalogue_problems,
    load_catalogue,
    read_catalogue_document,
    render_catalogue_markdown,
    runbook_faults,
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


def test_each_service_runs_on_the_kinds_the_lab_gives_it() -> None:
    for service, spec in CATALOGUE.services.items():
        assert spec["kinds"] == [k for k in KINDS if service in SERVICES_OF_KIND[k]], service


def test_contract_faults_are_exactly_those_of_the_contract() -> None:
    contract = _contract_names()
    assert len(contract) >= 12
    assert sorted(n for n, f in CATALOGUE.faults.items() if f.contract) == sorted(contract)


def test_contract_faults_keep_one_inject_list_for_the_molecule_scenarios() -> None:
    for fault in DOCUMENT["faults"]:
        if fault.get("contract"):
            assert isinstance(fault["inject"], list), fault["name"]


def test_the_catalogue_is_as_large_as_issue_11_asks() -> None:
    faults = CATALOGUE.faults.values()
    assert len(CATALOGUE.faults) >= 24
    assert sum(f.needs_human for f in faults) >= 4
    assert sum(f.novel for f in faults) >= 10
    for kind in KINDS:
        assert len(CATALOGUE.names(kind)) >= 20, kind


def test_novel_faults_have_no_runbook() -> None:
    with_runbook = runbook_faults()
    assert with_runbook, "runbooks/*.yml name no fault at all: the check below would prove nothing"
    novel_with_runbook = {n: with_runbook[n] for n, f in CATALOGUE.faults.items() if f.novel and n in with_runbook}
    assert novel_with_runbook == {}, "a novel fault must stay without a runbook (or stop being novel)"
    assert sum(1 for n in CATALOGUE.faults if n not in with_runbook) >= 10


def test_the_systemd_kind_has_its_own_faults() -> None:
    systemd_only = {n for n, f in CATALOGUE.faults.items() if f.kinds == ("systemd",)}
    fixes = " ".join(c for n in systemd_only for c in CATALOGUE.get(n).fix["systemd"])
    for verb in ("unmask", "reset-failed", "daemon-reload"):
        assert f"systemctl {verb}" in fixes, verb
    assert any(CATALOGUE.get(n).service == "journald" for n in systemd_only)


def test_sysv_fixes_never_use_systemd_tools() -> None:
    for fault in CATALOGUE.faults.values():
        if "sysv" in fault.kinds:
            assert not any(c.startswith(("systemctl", "journalctl")) for c in fault.fix["sysv"]), fault.name


def test_fixes_run_without_a_shell() -> None:
    for fault in CATALOGUE.faults.values():
        for kind in fault.kinds:
            for command in fault.fix[kind]:
                words = shlex.split(command)
                assert words and not {"|", "&&", ";", ">", "<"} & set(words), (fault.name, kind, command)


def test_steps_of_a_kind_the_fault_does_not_name_are_refused() -> None:
    fault = CATALOGUE.get("redis_killed")
    assert fault.kinds == ("sysv",)
    with pytest.raises(LabUsageError, match="redis_killed happens on sysv hosts, not on a systemd host"):
        fault.steps("inject", "systemd")


def test_a_field_given_once_applies_to_every_kind() -> None:
    fault = Fault.from_mapping({
        "name": "cron_x", "service": "cron", "kinds": ["sysv", "systemd"], "description": "d",
        "inject": ["service cron stop"], "diagnose": [{"command": "c", "shows": "s"}],
        "fix": {"sysv": ["service cron start"], "systemd": ["systemctl start cron.service"]},
        "healthy": "h", "needs_human": False,
    })
    assert fault.steps("inject", "systemd") == ("service cron stop",)
    assert fault.steps("fix", "systemd") == ("systemctl start cron.service",)
    assert fault.steps("fix", "sysv") == ("service cron start",)
    assert not fault.contract and not fault.novel and not fault.reset_after


def test_scope_covers_dependencies_both_ways() -> None:
    assert CATALOGUE.scope("app") == {"app", "postgres"}
    assert CATALOGUE.scope("postgres") == {"postgres", "app"}
    assert CATALOGUE.scope("nginx") == {"nginx"}


def test_docs_table_is_current() -> None:
    doc = (REPO / "docs" / "lab.md").read_text(encoding="utf-8")
    assert DOC_BEGIN in doc and DOC_END in doc
    current = doc[doc.index(DOC_BEGIN): doc.index(DOC_END) + len(DOC_END)] + "\n"
    assert current == render_catalogue_markdown(CATALOGUE), "run `lab/lab faults --markdown` and update docs/lab.md"


def _first(document: dict) -> dict:
    return document["faults"][0]


def _named(document: dict, name: str) -> dict:
    return next(f for f in document["faults"] if f["name"] == name)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: _first(d).pop("fix"), "lacks fix"),
        (lambda d: _first(d).pop("kinds"), "lacks kinds"),
        (lambda d: d["faults"].append(copy.deepcopy(_first(d))), "defined twice"),
        (lambda d: _first(d).update(service="postfix"), "not in `services`"),
        (lambda d: _first(d).update(fix=["rm -f /run/nginx.pid && service nginx start"]), "shell syntax"),
        (lambda d: _first(d).update(fix={"sysv": ["kill {pid_of:nginx}"], "systemd": ["true"]}), "unknown placeholder"),
        (lambda d: _first(d).update(needs_human="no"), "needs_human"),
        (lambda d: _first(d).update(novel="yes"), "`novel` must be true or false"),
        (lambda d: _first(d).update(batch="Batch 32"), "`batch` must be a short lower-case name"),
        (lambda d: _first(d).update(batch=True), "`batch` must be a short lower-case name"),
        (lambda d: _first(d).update(diagnose=[{"command": "ps"}]), "diagnose"),
        (lambda d: _first(d).update(inject=[]), "inject"),
        (lambda d: _first(d).update(surprise=1), "unknown keys surprise"),
        (lambda d: _first(d).update(kinds=["upstart"]), "`kinds` must be a non-empty list"),
        (lambda d: _first(d).update(kinds=["sysv", "sysv"]), "without repeats"),
        (lambda d: _first(d).update(fix={"sysv": ["service nginx start"]}), "must name exactly the fault's kinds"),
        (lambda d: _first(d).update(fix={"sysv": ["x"], "systemd": []}), "`fix` for systemd must be"),
        (lambda d: _named(d, "journald_disk_full").update(kinds=["sysv", "systemd"]),
         "journald does not run on sysv hosts"),
        (lambda d: d["services"]["app"].update(depends_on=["mysql"]), "depends on 'mysql'"),
        (lambda d: d["services"]["journald"].update(kinds=["sysv", "systemd"]), "`kinds` must be ['systemd']"),
        (lambda d: d["services"].update(postfix={"init": "postfix", "kinds": ["sysv"], "checks": "x"}),
         "service 'postfix'"),
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
    assert "needs human" in out and "novel" in out and "runbook" in out


def test_faults_of_one_kind_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert sentinel_lab.main(["faults", "--kind", "systemd", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {f["name"] for f in listed} == set(CATALOGUE.names("systemd"))
    assert "redis_killed" not in {f["name"] for f in listed}
    masked = next(f for f in listed if f["name"] == "nginx_unit_masked")
    assert masked["kinds"] == ["systemd"] and masked["fix"]["systemd"][0] == "systemctl unmask nginx.service"


def test_faults_of_one_batch_are_listed_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert sentinel_lab.main(["faults", "--batch", "s32", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {f["name"] for f in listed} == {n for n, f in CATALOGUE.faults.items() if f.batch == "s32"}
    assert listed and all(f["batch"] == "s32" for f in listed)


def test_an_unknown_batch_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert sentinel_lab.main(["faults", "--batch", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lab: no fault of batch 'nope'; batches: ") and "s32" in err


def test_batch_s32_has_the_mix_production_has() -> None:
    """Issue 28: a new batch written without reading the planner, novel, on systemd hosts
    mostly, in PostgreSQL and the app above all, about a third of it for a human only."""
    batch = [f for f in CATALOGUE.faults.values() if f.batch == "s32"]
    assert len(batch) >= 10
    assert all(f.novel for f in batch)
    assert sum("systemd" in f.kinds for f in batch) == len(batch)
    assert sum(f.service in ("postgres", "app") for f in batch) >= len(batch) * 2 // 3
    human = sum(f.needs_human for f in batch)
    assert len(batch) // 4 <= human <= len(batch) // 2, human


@pytest.mark.parametrize("scenario, kind", [("default", "sysv"), ("systemd", "systemd")])
def test_molecule_heals_every_fixable_runbook_fault_of_its_kind(scenario: str, kind: str) -> None:
    """Issue 13: the default scenario (SysV hosts) and the systemd scenario inject every fault
    of their kind that a bundled runbook fixes and no human must take over."""
    import yaml

    config = yaml.safe_load((REPO / "molecule" / scenario / "molecule.yml").read_text(encoding="utf-8"))
    host_vars = config["provisioner"]["inventory"]["host_vars"]
    platforms = {p["name"] for p in config["platforms"]}
    assert set(host_vars) <= platforms
    injected = [f for h in host_vars.values() for f in h["molecule_faults"]]
    # one fault per service and host: two faults of one service on one host would hide each other
    for name, variables in host_vars.items():
        services = [CATALOGUE.get(f).service for f in variables["molecule_faults"]]
        assert len(services) == len(set(services)), name
    wanted = {n for n, f in CATALOGUE.faults.items()
              if n in runbook_faults() and kind in f.kinds and not f.needs_human}
    assert wanted, "no runbook fault of this kind: the check would prove nothing"
    assert wanted <= set(injected), sorted(wanted - set(injected))
