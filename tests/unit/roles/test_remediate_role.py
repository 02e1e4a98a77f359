"""Static checks of roles/remediate: argument specs match defaults, no shell anywhere."""
from __future__ import annotations

from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "remediate"


def test_argument_spec_defaults_equal_role_defaults():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert set(specs["main"]["options"]) == set(defaults) - {"remediate_approve", "remediate_reject"}
    for entry in specs.values():
        for name, option in entry["options"].items():
            assert option.get("default") == defaults[name], name
            assert option.get("description"), name


def test_no_shell_and_internal_names_prefixed():
    for path in (ROLE / "tasks").glob("*.yml"):
        text = path.read_text()
        assert "ansible.builtin.shell" not in text and "\n  shell:" not in text, path
        for task in yaml.safe_load(text) or []:
            assert task.get("name"), f"{path.name}: unnamed task"
            register = task.get("register")
            assert register is None or register.startswith("_remediate_"), f"{path.name}: {register}"
