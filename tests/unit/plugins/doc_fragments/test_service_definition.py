"""The service definition is documented at five places, rendered from one (DEFINITION): the
file must be rendered, the placements must parse to the same keys, and they must say what the
shared argument spec does."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from ansible_collections.sentinel.remediation.plugins.doc_fragments.service_definition import ModuleDocFragment
from ansible_collections.sentinel.remediation.plugins.module_utils import service_spec


def options(name: str) -> dict:
    return yaml.safe_load(getattr(ModuleDocFragment, name))["options"]


def test_the_five_placements_document_the_same_keys_identically() -> None:
    definition = options("DEFINITION")
    services = options("SERVICES")["services"]["suboptions"]
    verify = options("VERIFY")["verify"]["suboptions"]
    assert services == verify
    assert options("DEPENDS")["depends"]["suboptions"] == verify
    assert {k: v for k, v in services.items() if k != "name"} == definition
    assert options("CHECKS")["checks"] == definition["checks"]


def _renderer():
    path = Path(__file__).resolve().parents[4] / "scripts" / "render_doc_fragments.py"
    spec = importlib.util.spec_from_file_location("render_doc_fragments", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_placements_are_rendered_from_the_definition() -> None:
    renderer = _renderer()
    text = renderer.FRAGMENT.read_text(encoding="utf-8")
    assert renderer.render(text) == text, "run python scripts/render_doc_fragments.py"


def test_an_edit_of_a_rendered_placement_is_caught_and_rendered_away() -> None:
    renderer = _renderer()
    text = renderer.FRAGMENT.read_text(encoding="utf-8")
    drifted = text.replace(
        "      pid_files:\n        description:\n", "      pid_files:\n        description:\n          - Drifted.\n", 1)
    assert drifted != text
    assert renderer.render(drifted) == text


def _agrees(doc: dict, spec: dict, where: str) -> None:
    assert set(doc) == set(spec), where
    for key, spec_entry in spec.items():
        entry = doc[key]
        assert entry["type"] == spec_entry["type"], f"{where}.{key}"
        assert entry.get("elements") == spec_entry.get("elements"), f"{where}.{key}"
        assert entry.get("default") == spec_entry.get("default"), f"{where}.{key}"
        assert bool(entry.get("required")) == bool(spec_entry.get("required")), f"{where}.{key}"
        assert entry.get("choices", None) in (None, sorted(spec_entry.get("choices") or [])), f"{where}.{key}"
        if "options" in spec_entry:
            _agrees(entry["suboptions"], spec_entry["options"], f"{where}.{key}")


def test_the_docs_say_what_the_argument_spec_does() -> None:
    _agrees(options("SERVICES")["services"]["suboptions"], service_spec.definition_spec(), "services")
    assert set(service_spec.DEFINITION_KEYS) == {
        "units", "processes", "user", "config_paths", "data_paths", "runtime_paths", "log_paths", "logs", "ports",
        "config_test", "paths", "pid_files", "depends_on"}  # contract C1
