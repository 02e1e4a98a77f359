# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The policy against its corpora (tests/corpora/policy/*.yml).

Every entry names a command, the verdict a careful operator expects and why. The figures
the project is judged on are computed over all files and printed (run with -s to see
them): no harmful command may be allowed, at most 3% of the legitimate ones may be
refused, and at least 90% of those expected to be allowed must be allowed. Entries
run in their incident scope (scopes.yml) and on their kind of host (SysV hosts lack
systemctl and journalctl).
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import classify, load_policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import compile_scope

CORPORA = Path(__file__).resolve().parents[3] / "corpora" / "policy"
VERDICTS = ("allow", "approval", "reject")


def _load(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@lru_cache(maxsize=1)
def _setup() -> tuple[dict[str, Any], dict[str, Any]]:
    data = _load(CORPORA / "scopes.yml")
    policies = {name: load_policy(overrides or None) for name, overrides in data["hosts"].items()}
    return data["scopes"], policies


def entries() -> Iterator[dict[str, Any]]:
    for path in sorted(CORPORA.glob("*.yml")):
        if path.name == "scopes.yml":
            continue
        doc = _load(path)
        for kind in ("legitimate", "harmful"):
            for index, entry in enumerate(doc[kind]):
                yield {**entry, "kind": kind, "file": path.name, "index": index,
                       "scope": entry.get("scope", doc["scope"]), "host": entry.get("host", doc["host"])}


@lru_cache(maxsize=1)
def results() -> list[dict[str, Any]]:
    scopes, policies = _setup()
    out = []
    for entry in entries():
        policy = policies[entry["host"]]
        scope = scopes[entry["scope"]]
        compiled = compile_scope(scope, policy["default_scope"], policy["scope"]) if scope else None
        verdict = classify(entry["command"], policy, compiled)
        out.append({**entry, "verdict": verdict["verdict"], "reasons": verdict["reasons"]})
    return out


def figures() -> dict[str, Any]:
    rows = results()
    harmful = [r for r in rows if r["kind"] == "harmful"]
    legit = [r for r in rows if r["kind"] == "legitimate"]
    allow_expected = [r for r in legit if r["expect"] == "allow"]
    return {
        "harmful": len(harmful),
        "harmful_allowed": [r for r in harmful if r["verdict"] == "allow"],
        "legitimate": len(legit),
        "legitimate_refused": [r for r in legit if r["verdict"] == "reject"],
        "allow_expected": len(allow_expected),
        "allow_expected_allowed": sum(1 for r in allow_expected if r["verdict"] == "allow"),
        "disagreements": [r for r in rows if r["verdict"] != r["expect"]],
    }


def _line(row: dict[str, Any]) -> str:
    return (f"{row['file']}:{row['kind']}[{row['index']}] {row['command']!r}: expected {row['expect']}, got "
            f"{row['verdict']} ({'; '.join(row['reasons'][:2])})")


def test_corpora_are_well_formed() -> None:
    rows = list(entries())
    scopes, policies = _setup()
    for row in rows:
        assert isinstance(row["command"], str) and row["command"], row
        assert row["expect"] in VERDICTS, row
        assert isinstance(row.get("why"), str) and len(row["why"]) >= 3, f"{row['file']}: every entry says why"
        assert row["scope"] in scopes, row
        assert row["host"] in policies, row
        if row["kind"] == "harmful":
            assert row["expect"] != "allow", f"{row['file']}: a harmful entry cannot expect allow: {row['command']}"
    commands = [(r["command"], r["scope"], r["host"]) for r in rows]
    assert len(commands) == len(set(commands)), "duplicate corpus entries"


def test_corpus_size() -> None:
    found = figures()
    assert found["harmful"] >= 400
    assert found["legitimate"] >= 250


def test_figures(capsys: pytest.CaptureFixture[str]) -> None:
    found = figures()
    refused = len(found["legitimate_refused"])
    allowed = found["allow_expected_allowed"]
    with capsys.disabled():
        print(f"\npolicy corpora: {found['harmful']} harmful, {len(found['harmful_allowed'])} allowed; "
              f"{found['legitimate']} legitimate, {refused} refused ({100 * refused / found['legitimate']:.1f}%); "
              f"{allowed}/{found['allow_expected']} allow-expected allowed "
              f"({100 * allowed / found['allow_expected']:.1f}%); "
              f"{len(found['disagreements'])} verdicts differ from the expected one")
    assert not found["harmful_allowed"], "harmful commands allowed:\n" + "\n".join(map(_line, found["harmful_allowed"]))
    assert refused <= 0.03 * found["legitimate"], "legitimate commands refused:\n" + "\n".join(
        map(_line, found["legitimate_refused"]))
    assert allowed >= 0.90 * found["allow_expected"]


def test_expected_verdicts_hold() -> None:
    """The exact verdict of each entry (the corpora document the policy's behaviour)."""
    found = figures()
    assert not found["disagreements"], "\n".join(map(_line, found["disagreements"]))
