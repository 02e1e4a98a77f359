# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils.plan_parse import (
    MAX_ANSWER_CHARS,
    PlanParseError,
    parse_plan,
    plan_schema,
)


def test_strict_json():
    plan = parse_plan(json.dumps({"diagnosis": "d", "commands": ["service nginx start"], "rationale": "r"}))
    assert (plan.diagnosis, plan.commands, plan.rationale, plan.mode) == ("d", ["service nginx start"], "r", "json")


def test_json_variants():
    assert parse_plan('{"commands": [{"command": "ls /"}, ["ss", "-ltnp"]]}').commands == ["ls /", "ss -ltnp"]
    assert parse_plan('["service cron start"]').commands == ["service cron start"]
    assert parse_plan('{"plan": "service cron start"}').commands == ["service cron start"]


def test_sudo_prompts_backticks_and_duplicates_are_cleaned():
    plan = parse_plan('{"commands": ["sudo service nginx start", "$ `ss -ltnp`", "service nginx start"]}')
    assert plan.commands == ["service nginx start", "ss -ltnp"]


def test_fenced_and_prose_wrapped_json():
    text = 'Here you go:\n```json\n{"diagnosis": "x", "commands": ["a b"]}\n```\nBye'
    plan = parse_plan(text)
    assert plan.commands == ["a b"] and plan.mode == "json_embedded"
    inline = 'The plan is {"diagnosis": "y {curly}", "commands": ["c d"]} as asked.'
    assert parse_plan(inline).commands == ["c d"]


def test_shell_fence():
    plan = parse_plan("Do this:\n```bash\n# comment\n$ mkdir -p /var/log/nginx\nservice nginx start\n```")
    assert plan.commands == ["mkdir -p /var/log/nginx", "service nginx start"] and plan.mode == "text"


def test_numbered_list_with_and_without_code():
    text = "Problem: the log dir is gone.\n1. Create it: `mkdir -p /var/log/nginx`\n2. service nginx start\n3. Watch it."
    plan = parse_plan(text)
    assert plan.diagnosis == "the log dir is gone."
    assert plan.commands == ["mkdir -p /var/log/nginx", "service nginx start"]


def test_known_tools_widen_plain_items():
    assert parse_plan("- frobnicate --now", known_tools=["frobnicate"]).commands == ["frobnicate --now"]
    with pytest.raises(PlanParseError):
        parse_plan("- frobnicate --now")


@pytest.mark.parametrize("answer, kind", [
    (None, "empty"), ("   ", "empty"),
    ("x" * (MAX_ANSWER_CHARS + 1), "oversize"),
    ('{"diagnosis": "cut', "invalid"),
    ('{"diagnosis": "no commands here"}', "invalid"),
    ("I'm sorry, but I can't help with that.", "refusal"),
    ("The service seems broken, hard to say why.", "no_commands"),
])
def test_unusable(answer, kind):
    with pytest.raises(PlanParseError) as info:
        parse_plan(answer)
    assert info.value.kind == kind


def test_refusal_field_wins():
    with pytest.raises(PlanParseError) as info:
        parse_plan('{"commands": ["ls"]}', refusal="no")
    assert info.value.kind == "refusal"


def test_escalate_allows_empty_commands():
    plan = parse_plan('{"diagnosis": "ESCALATE: binary missing", "commands": []}')
    assert plan.escalate and plan.commands == []


def test_overlong_commands_are_dropped():
    plan = parse_plan(json.dumps({"commands": ["ls " + "a" * 600, "ls /"]}))
    assert plan.commands == ["ls /"] and plan.notes


def test_schema_is_strict():
    schema = plan_schema(3)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["commands"]["minItems"] == 1 and schema["properties"]["commands"]["maxItems"] == 3


@pytest.mark.parametrize("answer", [
    {"diagnosis": "The data file is corrupt; repairing it loses writes.", "commands": ["ls -l /var/lib/redis"],
     "rationale": "a human decides", "escalate": True},
    {"diagnosis": "The package's binary was deleted.", "commands": [], "needs_human": True},
    {"diagnosis": "The certificate expired; a new one must be issued.", "action": "escalate"},
    {"diagnosis": "ESCALATE: the database password was rotated.", "commands": ["cat /etc/app/app.conf"]},
])
def test_the_ways_a_model_hands_over_to_a_human(answer: dict) -> None:
    plan = parse_plan(json.dumps(answer))
    assert plan.escalate is True
    assert plan.commands == answer.get("commands", [])


def test_escalate_false_is_an_ordinary_plan() -> None:
    plan = parse_plan(json.dumps({"diagnosis": "nginx stopped", "commands": ["service nginx start"],
                                  "rationale": "start it", "escalate": False, "needs_human": "no"}))
    assert plan.escalate is False and plan.commands == ["service nginx start"]
    assert plan_schema(3)["required"] == ["diagnosis", "commands", "rationale", "escalate"]
