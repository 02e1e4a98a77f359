# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Similar-incident recall: memory.similar_incidents and what the planner, the attempt
engine and the report do with it. The model is the test LLM server (real openai client)."""
from __future__ import annotations

import copy
import json

import junitparser

from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory, report
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import resolve_settings
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature, key_facts
from fault_samples import sample
from llm_server import plan_content

OLD_CONF = "/etc/nginx/conf.d/zz-broken.conf"
NEW_CONF = "/etc/nginx/conf.d/yy-deploy.conf"
FIX = (f"mv {OLD_CONF} {OLD_CONF}.disabled", "nginx -t", "service nginx start")


def config_case(path: str = OLD_CONF, line: int = 3, host: int = 1) -> dict:
    case = copy.deepcopy(sample("nginx_config_syntax", host))
    case["evidence"]["config_test"] = case["evidence"]["config_test"].replace(OLD_CONF, path).replace(
        ".conf:3", f".conf:{line}")
    return case


def facts_of(case: dict) -> list[str]:
    return key_facts(case["service"], case["error"], case["evidence"])


def episode(case: dict, commands=FIX, success=True, host="web1", finished="2026-11-20T10:00:00Z",
            service="nginx") -> dict:
    return {"signature": failure_signature(service, case["error"], case["evidence"]), "service": service,
            "host": host, "error": case["error"], "facts": facts_of(case), "success": success,
            "finished": finished, "commands": [{"command": c, "source": "llm", "rc": 0 if success else 1}
                                               for c in commands]}


def recall(memories, case: dict, **extra) -> list[dict]:
    return memory.similar_incidents(
        memory.recall_index(memory.index(memories)), service=case["service"],
        signature=failure_signature(case["service"], case["error"], case["evidence"]), error=case["error"],
        facts=facts_of(case), **extra)


# ------------------------------------------------------------------ the similarity


def test_paths_line_numbers_and_pids_are_abstracted_so_another_file_is_similar():
    old, new = config_case(), config_case(NEW_CONF, line=7, host=2)  # host 2: other PIDs, names, times
    assert failure_signature("nginx", old["error"], old["evidence"]) != \
        failure_signature("nginx", new["error"], new["evidence"])
    assert memory.similarity(facts_of(new), new["error"], facts_of(old), old["error"], "nginx") == 1.0
    assert memory.fact_shape(f"missing {OLD_CONF}", "nginx")[0] == "missing <path:config:*.conf>"


def test_a_different_error_class_is_not_similar():
    config, log_dir = config_case(), sample("nginx_missing_log_dir")
    score = memory.similarity(facts_of(log_dir), log_dir["error"], facts_of(config), config["error"], "nginx")
    assert score < memory.RECALL_THRESHOLD
    assert recall([episode(config)], log_dir) == []
    # Only context in common (status, probed paths), no cause: never similar.
    assert memory.similarity(["status: x is not running", "path /run: directory"], "down",
                             ["status: x is not running", "path /run: directory", "disk full"], "down", "x") == 0.0


def test_the_directory_role_counts_a_data_path_is_not_a_log_path():
    definition = {"name": "app", "data_paths": ["/srv/app/data"], "log_paths": ["/srv/app/log"]}
    data = memory.fact_shape("denied /srv/app/data/uploads", "app", definition)[0]
    log = memory.fact_shape("denied /srv/app/log/uploads", "app", definition)[0]
    assert data == "denied <path:own-data:*>" and log == "denied <path:own-log:*>"
    assert memory.similarity(["denied /srv/app/data/a"], "", ["denied /srv/app/log/a"], "", "app", definition) == 0.0


def test_a_port_that_is_not_the_services_own_is_abstracted_its_own_stays():
    assert memory.fact_shape("port 8081 held by python3", "nginx")[0] == "port <port> held by python3"
    assert memory.fact_shape("port 80 held by python3", "nginx")[0] == "port 80 held by python3"
    assert memory.similarity(["port 80 held by python3"], "", ["port 443 held by python3"], "", "nginx") == 0.0


# ------------------------------------------------------------------ what is offered


def test_the_fix_comes_adapted_to_this_hosts_path_and_the_rest_as_it_was():
    old, new = config_case(), config_case(NEW_CONF, line=7, host=2)
    (found,) = recall([episode(old, FIX + ("sed -i 3d /etc/nginx/nginx.conf", "true 3"))], new, host="web2")
    assert found["host"] == "web1" and found["similarity"] == 1.0
    commands = {c["original"]: c for c in found["commands"]}
    assert commands[FIX[0]]["command"] == f"mv {NEW_CONF} {NEW_CONF}.disabled" and commands[FIX[0]]["changed"]
    assert commands["service nginx start"]["command"] == "service nginx start"
    # The line number differs (3 there, 7 here): a command holding it is shown as it was, with a note.
    assert commands["true 3"]["command"] == "true 3" and "7 here" in commands["true 3"]["note"]


def test_a_path_that_ends_alike_maps_its_directory_too():
    mapping, unmapped = memory.value_mapping(["missing /srv/b/cache/x.db"], "", ["missing /srv/a/cache/x.db"], "",
                                             "app")
    assert mapping == {"/srv/a/cache/x.db": "/srv/b/cache/x.db", "/srv/a": "/srv/b"} and not unmapped
    adapted = memory.adapt_command("mkdir -p /srv/a/cache", mapping)
    assert adapted["command"] == "mkdir -p /srv/b/cache"
    assert memory.adapt_command("ls /srv/ab /srv/a.old", mapping)["command"] == "ls /srv/ab /srv/b.old"


def test_a_value_with_two_counterparts_is_not_mapped():
    mine = ["missing /data/b/one.db", "missing /data/c/two.db"]
    theirs = ["missing /data/a/one.db", "missing /data/a/two.db"]
    mapping, unmapped = memory.value_mapping(mine, "", theirs, "", "app")
    assert mapping == {}  # each shape occurs twice: pairing them would be a guess
    assert memory.adapt_command("rm /data/a/one.db", mapping, unmapped)["changed"] is False


def test_another_service_is_not_offered():
    old = config_case()
    other = episode(old, service="apache2")
    assert recall([other], config_case(NEW_CONF)) == []


def test_a_fix_that_failed_or_was_demoted_is_not_offered():
    old, new = config_case(), config_case(NEW_CONF)
    assert recall([episode(old, success=False)], new) == []
    healed_then_failed = [episode(old, finished="2026-11-20T10:00:00Z"),
                          episode(old, success=False, finished="2026-11-21T10:00:00Z")]
    assert recall(healed_then_failed, new) == []
    # A plan holding a command that failed on this very failure is not offered either.
    assert recall([episode(old)], new, failed_commands=[f"mv {NEW_CONF} {NEW_CONF}.disabled"]) == []


def test_the_same_signature_is_memorys_exact_fix_not_a_recall():
    old = config_case()
    assert recall([episode(old)], old) == []


def test_recall_is_bounded_whatever_the_fleet():
    """100 hosts healed the same fault at 100 paths: one candidate; the best few offered."""
    memories = {f"web{i}": [episode(config_case(f"/etc/nginx/conf.d/deploy-{i}.conf"), host=f"web{i}",
                                    commands=[f"mv /etc/nginx/conf.d/deploy-{i}.conf /tmp/x", "service nginx start"],
                                    finished=f"2026-11-20T10:{i % 60:02d}:00Z")]
                for i in range(100)}
    candidates = memory.recall_index(memory.index(memories))
    assert len(candidates["nginx"]) == 1
    assert len(recall(memories, config_case(NEW_CONF), limit=2)) == 1


# ------------------------------------------------------------------ the planner, the outcome, the report


def settings(server):
    return resolve_settings({"base_url": server.url, "api_key": "sk-test-0123456789abcdef", "model": "m",
                             "timeout": 5, "max_retries": 0}, env={}, ini={})


def test_with_a_model_the_similar_fix_goes_into_the_prompt_adapted(llm_server):
    old, new = config_case(), config_case(NEW_CONF, host=2)
    recalled = recall([episode(old)], new, host="web2")
    answer = plan_content("a broken deploy file", [f"mv {NEW_CONF} {NEW_CONF}.off", "service nginx start"])
    llm_server.queue({"content": answer})
    result = Planner(service="nginx", error=new["error"], evidence=new["evidence"], host_tools=new["host_tools"],
                     llm_settings=settings(llm_server), backend="llm", recalled=recalled).run()
    prompt = llm_server.chat_requests[0]["messages"][1]["content"]
    assert prompt.startswith("Service: nginx\nFailure: ")
    assert "Worked before on a similar incident (not identical: adapt the values to this host, do not copy)" in prompt
    assert f"`mv {NEW_CONF} {NEW_CONF}.disabled` (there: `{FIX[0]}`)" in prompt
    assert "This host now: " in prompt and f"{NEW_CONF}:3" in prompt
    assert result["source"] == "llm" and result["recall"] == "offered"
    assert result["recalled"][0]["commands"][0] == {"command": f"mv {NEW_CONF} {NEW_CONF}.disabled",
                                                    "original": FIX[0]}


def test_without_a_model_it_is_a_hint_and_never_part_of_the_plan():
    old, new = config_case(), config_case(NEW_CONF, host=2)
    recalled = recall([episode(old)], new, host="web2")
    result = Planner(service="nginx", error=new["error"], evidence=new["evidence"], host_tools=new["host_tools"],
                     backend="memory", recalled=recalled).run()
    assert result["source"] == "none" and result["commands"] == []
    assert result["recall"] == "hint"
    assert f"mv {NEW_CONF} {NEW_CONF}.disabled" in result["msg"] and "not run" in result["msg"]


def test_an_exact_fix_is_planned_from_memory_and_says_so():
    old = config_case()
    result = Planner(service="nginx", error=old["error"], evidence=old["evidence"], host_tools=old["host_tools"],
                     successful_fixes=[{"commands": list(FIX)}], backend="memory",
                     recalled=recall([episode(old)], config_case(NEW_CONF))).run()
    assert result["source"] == "memory" and result["recall"] == "exact" and result["recalled"] == []


def test_the_escalation_reason_and_the_report_carry_the_hint(tmp_path):
    hint = {"signature": "nginx:0123456789abcdef", "host": "web1", "similarity": 0.9,
            "commands": [{"command": f"mv {NEW_CONF} {NEW_CONF}.disabled", "original": FIX[0]}]}
    incident = engine.Incident(host="web2", service="nginx", error="nginx is not running", state="escalated",
                               reason="no safe command to run", recalled=[hint],
                               attempts=[engine.Attempt(number=1, source="none", recall="hint")])
    outcome = engine.outcome(incident)
    assert outcome["recall"] == "hint" and outcome["recalled"] == [hint]
    assert "similar incident" in outcome["reason"] and NEW_CONF in outcome["reason"]
    built = report.build_report({"web2": [outcome]})
    line = report.render_text(built)
    assert "similar incident on web1 (0.90, hint only, not run)" in line and NEW_CONF in line
    assert json.loads(report.render_json(built))["outcomes"][0]["recalled"][0]["commands"][0]["original"] == FIX[0]
    path = tmp_path / "junit.xml"
    path.write_text(report.render_junit(built), encoding="utf-8")
    (suite,) = list(junitparser.JUnitXml.fromfile(str(path)))
    assert suite.tests == 1 and suite.failures == 1
