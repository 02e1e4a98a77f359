"""Plans shared across controllers through a real redis-server (Debian's package).

Two controllers (separate private data dirs, fact caches on one Redis, separate artifact
dirs) run playbooks/remediate.yml AT THE SAME TIME on disjoint halves of a lab whose four
hosts have the same fault. The test LLM server counts the requests: one signature, so one
request in total; the plan made by one controller is reused by the other and made right
for each host (each kills the impostor on ITS port 80). The lab's own check says healed.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading

import pytest

from llm_server import LLMServer, _text, plan_content
from redis_server import RedisServer, skip_or_fail_without_redis
from workflow_support import Workspace, require_docker

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HALVES = (["lab01", "lab02"], ["lab03", "lab04"])
_OWNER = re.compile(r":80 held by \S+ \(pid (\d+)\)")


class PortOwnerModel(LLMServer):
    """Answers like a model that read the evidence: it kills the PID the prompt names as
    holding port 80, then starts nginx (the PID differs on every host)."""

    def next_reply(self, body, handler=None):
        text = "\n".join(_text(m) for m in body.get("messages") or [])
        match = _OWNER.search(text)
        if not match:
            return {"status": 500, "error": "the prompt names no owner of port 80"}
        return {"content": plan_content("a stray program holds port 80",
                                        [f"kill {match.group(1)}", "service nginx start"]), "_source": "script"}


def test_two_controllers_share_one_plan_per_signature(lab_factory, tmp_path):
    require_docker()
    skip_or_fail_without_redis()
    lab = lab_factory(f"{os.environ.get('SENTINEL_LAB_PREFIX', 'sentinel-test')}-share", 4)
    inventory = lab.write_inventory(tmp_path / "hosts.yml")
    pids = {}
    for host in HALVES[0] + HALVES[1]:
        # Advance this host's PID counter past the impostors already started elsewhere, so
        # every host's impostor has its own PID (a plan reused as is would kill the wrong one).
        for _step in range(200):
            shell = subprocess.run(["docker", "exec", lab.container(host), "sh", "-c", "echo $$"],
                                   capture_output=True, text=True, check=True)
            if int(shell.stdout) > max([int(p) for p in pids.values()] or [0]) + 5:
                break
        lab.inject(host, "nginx_port_conflict")
        pids[host] = lab.port_owner_pid(host, 80)
    assert len(set(pids.values())) == 4, pids

    with RedisServer(tmp_path) as redis_server, PortOwnerModel() as model:
        env = {"ANSIBLE_CACHE_PLUGIN": "community.general.redis",
               "ANSIBLE_CACHE_PLUGIN_CONNECTION": redis_server.connection,
               "ANSIBLE_CACHE_PLUGIN_PREFIX": "share_test_"}
        controllers = []
        for number in (1, 2):
            root = tmp_path / f"controller{number}"
            root.mkdir()
            controllers.append(Workspace(root, inventory, llm_url=model.url, extra_env=env))
        runs = {}

        def run(index: int) -> None:
            runs[index] = controllers[index].run(extravars={
                "remediate_backend": "llm", "remediate_hosts": ",".join(HALVES[index]), "remediate_plan_wait": 120})

        threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=900)
        assert set(runs) == {0, 1}, "a controller's run did not finish"

        # One signature in the whole fleet: one request to the model, made by one controller.
        assert len(model.chat_requests) == 1, [model.prompt_text(i)[:300] for i in range(len(model.chat_requests))]
        assert sorted(r.report["llm"]["calls"] for r in runs.values()) == [0, 1]
        keys = [k.decode() for k in redis_server.client.keys("share_test_sentinel:plan:*")]
        assert len(keys) == 1 and not keys[0].endswith(":claim"), keys
        assert 0 < redis_server.client.ttl(keys[0]) <= 900

    for index, result in runs.items():
        assert result.status == "successful", result.stdout[-3000:]
        for host in HALVES[index]:
            outcome = result.outcomes()[(host, "nginx")]
            assert outcome["state"] == "healed", outcome
            commands = [c["command"] for c in outcome["commands"]]
            assert commands == [f"kill {pids[host]}", "service nginx start"], (host, commands, pids)
            assert {c["source"] for c in outcome["commands"]} == {"llm"}
    signatures = {r.outcomes()[(h, "nginx")]["signature"] for i, r in runs.items() for h in HALVES[i]}
    assert len(signatures) == 1, signatures
    for host in HALVES[0] + HALVES[1]:  # the lab's own check, from outside the collection
        assert lab.health(host)["nginx"].healthy, (host, lab.health(host)["nginx"].summary())
        assert lab.port_owner_pid(host, 80) != pids[host]
