# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner inside an incident: spent sources, forbidden repeats, the history the model sees.
The model is the test LLM server, reached by the real openai client."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils.incident import Attempt, CommandRun, Incident
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import resolve_settings
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner
from fault_samples import sample
from llm_server import plan_content


def settings(server):
    return resolve_settings({"base_url": server.url, "api_key": "sk-test-0123456789abcdef", "model": "m",
                             "timeout": 5, "max_retries": 0}, env={}, ini={})


def answer(*commands):
    return {"content": plan_content("cause", list(commands))}


def ran_without_healing(number, source, *commands, rc=0, error_after="port 80 is not listening"):
    return Attempt(number=number, source=source, healthy=False, error_after=error_after, gate="execute",
                   commands=[CommandRun(command=c, rc=rc, source=source, stderr="boom" if rc else "")
                             for c in commands])


def planner(server, case, incident, **extra):
    return Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                   host_tools=case["host_tools"], llm_settings=settings(server), incident=incident, **extra)


def test_a_runbook_that_did_not_heal_is_not_applied_again_the_model_is_asked(llm_server):
    case = sample("nginx_stopped")
    first = Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                    host_tools=case["host_tools"]).run()
    assert first["source"] == "runbook"
    incident = Incident(host="web1", service="nginx", error=case["error"],
                        attempts=[ran_without_healing(1, "runbook", *[c["command"] for c in first["commands"]])])
    llm_server.queue(answer("mkdir -p /var/log/nginx", "service nginx start"))
    second = planner(llm_server, case, incident).run()
    assert second["source"] == "llm"
    assert [c["command"] for c in second["commands"]] == ["mkdir -p /var/log/nginx", "service nginx start"]
    prompt = llm_server.chat_requests[0]["messages"][1]["content"]
    assert "Attempt 1 (plan from runbook)" in prompt
    assert f"`{first['commands'][0]['command']}` exit 0" in prompt
    assert "STILL FAILING after it: port 80 is not listening" in prompt


def test_the_model_repeating_an_ineffective_plan_is_sent_back_with_the_reason(llm_server):
    case = sample("nginx_stopped")
    incident = Incident(host="web1", service="nginx", error=case["error"],
                        attempts=[ran_without_healing(1, "llm", "service nginx start", rc=1)])
    llm_server.queue(answer("service nginx start"), answer("mkdir -p /var/lib/nginx", "service nginx start"))
    result = planner(llm_server, case, incident, backend="llm").run()
    assert len(llm_server.chat_requests) == 2
    feedback = llm_server.chat_requests[1]["messages"][-1]["content"]
    assert "already ran in attempt 1" in feedback or "nothing new runs before it" in feedback
    assert [c["command"] for c in result["commands"]] == ["mkdir -p /var/lib/nginx", "service nginx start"]


def test_without_a_model_a_spent_runbook_leaves_only_the_fallback():
    case = sample("nginx_stopped")
    first = Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                    host_tools=case["host_tools"]).run()
    incident = Incident(host="web1", service="nginx", error=case["error"],
                        attempts=[ran_without_healing(1, "runbook", *[c["command"] for c in first["commands"]])])
    second = Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                     host_tools=case["host_tools"], incident=incident, fallback_restart=True).run()
    assert second["source"] in ("fallback", "none")
    assert [c["command"] for c in second["commands"]] != [c["command"] for c in first["commands"]]
    assert second["order"] == ["memory", "fallback"]


def test_the_fallback_restart_is_off_unless_asked_and_the_reason_says_so():
    case = sample("nginx_stopped")
    first = Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                    host_tools=case["host_tools"]).run()
    incident = Incident(host="web1", service="nginx", error=case["error"],
                        attempts=[ran_without_healing(1, "runbook", *[c["command"] for c in first["commands"]])])
    off = Planner(service=case["service"], error=case["error"], evidence=case["evidence"],
                  host_tools=case["host_tools"], incident=incident).run()
    assert off["source"] == "none" and off["commands"] == [] and off["order"] == ["memory"]
    restart = "systemctl restart nginx" if "systemctl" in (case["host_tools"].get("present") or []) \
        else "service nginx restart"
    assert f"The fallback restart (`{restart}` as root) is off: set remediate_fallback_restart: true" in off["msg"]
