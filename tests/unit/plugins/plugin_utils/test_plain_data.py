# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Templated (tagged) values as plain data for the argument-spec checks (plain_data.py)."""
from __future__ import annotations

import copy

from ansible._internal._datatag._tags import Origin
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.template import trust_as_template

from ansible_collections.sentinel.remediation.plugins.plugin_utils.plain_data import plain

SPEC = {"services": {"type": "list", "elements": "dict", "required": True},
        "max_attempts": {"type": "int", "default": 3},
        "policy": {"type": "dict", "default": {}},
        "mode": {"type": "str", "choices": ["heal", "monitor"]}}


def _tagged(value):
    return Origin(path="/inventory/group_vars/all.yml", line_num=4).tag(value)


def _types(value) -> set:
    found = {type(value)}
    if isinstance(value, dict):
        for key, item in value.items():
            found |= _types(key) | _types(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found |= _types(item)
    return found


def test_tagged_values_become_the_exact_builtin_types_with_the_same_values():
    service = _tagged({"name": trust_as_template("nginx"), "port": _tagged(80)})
    tagged = _tagged({trust_as_template("services"): _tagged([service]),
                      "ratio": _tagged(0.5), "on": True, "none": None, "pair": ("a", _tagged("b"))})
    assert any(t.__module__ != "builtins" for t in _types(tagged))
    out = plain(tagged)
    assert out == tagged
    assert _types(out) <= {dict, list, tuple, str, int, float, bool, type(None)}
    assert copy.deepcopy(out) == out


def test_a_spec_says_the_same_of_the_plain_copy_as_of_the_tagged_values():
    bad = _tagged({"services": _tagged([_tagged({"name": trust_as_template("nginx")})]),
                   "max_attempts": trust_as_template("three"), "mode": trust_as_template("fix")})
    good = _tagged({"services": _tagged([_tagged({"name": trust_as_template("nginx")})]),
                    "max_attempts": trust_as_template("2"), "mode": trust_as_template("monitor")})
    for given in (bad, good):
        tagged = ArgumentSpecValidator(SPEC).validate(given)
        untagged = ArgumentSpecValidator(SPEC).validate(plain(given))
        assert untagged.error_messages == tagged.error_messages
        assert untagged.validated_parameters == tagged.validated_parameters
    assert ArgumentSpecValidator(SPEC).validate(plain(bad)).error_messages
    assert ArgumentSpecValidator(SPEC).validate(plain(good)).validated_parameters["max_attempts"] == 2


def test_a_value_of_another_type_is_left_for_the_check_to_name():
    odd = object()
    out = plain({"services": odd, "others": {1, 2}})
    assert out["services"] is odd and out["others"] == {1, 2}
    assert "services" in " ".join(ArgumentSpecValidator(SPEC).validate(out).error_messages)
