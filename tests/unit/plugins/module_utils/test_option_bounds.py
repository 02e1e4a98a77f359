"""One bounds table (module_utils/option_bounds) for the options the heal action, the remediate
role and the host modules share: the role's documented bounds are the table's, and a value the
action accepts is one the host modules accept too."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sentinel.remediation.plugins.module_utils.option_bounds import (
    MINIMUMS,
    ROLE_VARIABLES,
    below_minimum,
)
from ansible_collections.sentinel.remediation.plugins.modules import execute_plan, service_health

ROOT = Path(__file__).resolve().parents[4]
AT_LEAST = re.compile(r"^At least (-?\d+)\.$")


def _role_options() -> dict:
    specs = yaml.safe_load((ROOT / "roles" / "remediate" / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"]


def _stated_minimum(option: dict) -> int | None:
    found = [int(m.group(1)) for line in option.get("description") or [] for m in [AT_LEAST.match(str(line))] if m]
    assert len(found) <= 1, option
    return found[0] if found else None


def test_the_role_argument_specs_state_exactly_the_tables_minimums() -> None:
    options = _role_options()
    stated = {name: _stated_minimum(doc) for name, doc in options.items()}
    expected = {ROLE_VARIABLES[name]: low for name, low in MINIMUMS.items() if name in ROLE_VARIABLES}
    assert {name: low for name, low in stated.items() if low is not None} == expected


def test_every_role_variable_of_the_table_is_an_option_of_the_role_and_the_heal_action() -> None:
    options = _role_options()
    heal_doc = yaml.safe_load((ROOT / "plugins" / "modules" / "heal.py").read_text().split('DOCUMENTATION = r"""')[1]
                              .split('"""')[0])
    for name, variable in ROLE_VARIABLES.items():
        assert variable in options, variable
        assert options[variable]["type"] == "int" and heal_doc["options"][name]["type"] == "int", name


def test_the_roles_defaults_are_within_the_table() -> None:
    defaults = yaml.safe_load((ROOT / "roles" / "remediate" / "defaults" / "main.yml").read_text())
    values = {name: defaults[variable] for name, variable in ROLE_VARIABLES.items()}
    assert below_minimum(values) == []


def _run(module, capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("module, args", [
    (execute_plan, {"commands": [{"argv": ["true"]}]}),
    (service_health, {"service": "x", "checks": [{"type": "port", "port": 1}]}),
])
@pytest.mark.parametrize("option", ["output_max", "command_timeout", "evidence_max_bytes", "settle"])
def test_a_host_module_refuses_one_below_the_minimum_and_names_it(module, args, option, capsys) -> None:
    result = _run(module, capsys, dict(args, **{option: MINIMUMS[option] - 1}))
    assert result["failed"] is True
    assert f"{option} must be at least {MINIMUMS[option]}, got {MINIMUMS[option] - 1}" in result["msg"]


@pytest.mark.parametrize("module, args", [
    (execute_plan, {"commands": [{"argv": ["true"]}], "verify": None}),
    (service_health, {"service": "x", "checks": [{"type": "port", "port": 1}], "settle": 0}),
])
def test_a_host_module_takes_the_minimum_output_max_the_role_accepts(module, args, capsys) -> None:
    result = _run(module, capsys, dict(args, output_max=MINIMUMS["output_max"]))
    assert "must be at least" not in str(result.get("msg", "")), result


def test_below_minimum_names_each_bad_option_in_table_order() -> None:
    assert below_minimum({"settle": -1, "output_max": 50, "max_commands": 3}) == [
        "output_max must be at least 100, got 50", "settle must be at least 0, got -1"]
    assert below_minimum({"output_max": 50}, names=["settle"]) == []
