# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's policy (the operator's plus the tools that host lacks) is the operator's policy
with ``absent_tools`` replaced, not a second merge, validation and compile (issue 29, stop 36):
the same policy, the same verdicts, the same errors as building it from scratch."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as policy_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy import PolicyError, classify, load_policy

LACKS = ["journalctl", "lsof", "netstat", "systemctl"]
OPERATOR = {"protected_services": ["billing"], "absent_tool_hints": {"lsof": "use ss -ltnp"}}
COMMANDS = ["lsof -i :80", "systemctl restart nginx", "service nginx start", "ss -ltnp", "rm -rf /etc",
            "netstat -tlnp", "service billing restart"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    policy_mod._CACHE.clear()
    yield
    policy_mod._CACHE.clear()


@pytest.mark.parametrize("operator", [{}, OPERATOR], ids=["default", "operator-overrides"])
def test_host_policy_from_the_built_one_equals_a_full_build(operator):
    overrides = dict(operator, absent_tools=LACKS)
    derived = load_policy(overrides)
    built = policy_mod._build_policy(overrides)
    assert dict(derived) == dict(built)
    assert set(derived.compiled) == set(built.compiled)
    assert derived.compiled["absent"] == built.compiled["absent"] == frozenset(LACKS)
    for command in COMMANDS:
        assert classify(command, derived) == classify(command, built), command


def test_host_policy_leaves_the_operators_policy_as_it_was():
    base = load_policy(OPERATOR)
    load_policy(dict(OPERATOR, absent_tools=LACKS))
    assert base["absent_tools"] == [] and base.compiled["absent"] == frozenset()
    assert classify("lsof -i :80", base)["verdict"] != "reject"
    assert classify("lsof -i :80", load_policy(dict(OPERATOR, absent_tools=LACKS)))["verdict"] == "reject"


@pytest.mark.parametrize("absent", [[""], ["lsof", 3], "lsof"], ids=["empty-name", "not-a-string", "not-a-list"])
def test_bad_absent_tools_still_named_by_the_full_check(absent):
    with pytest.raises(PolicyError, match="absent_tools"):
        load_policy({"absent_tools": absent})


def test_bad_operator_policy_is_reported_even_with_host_tools():
    with pytest.raises(PolicyError):
        load_policy({"absent_tools": ["lsof"], "tools": {"frob": {"rule": "no-such-rule"}}})
