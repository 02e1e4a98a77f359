"""Unit tests for plugins/plugin_utils/memory.py (episodic memory records)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import memory

SIG = "nginx:0123456789abcdef"


def episode(success, *commands, signature=SIG, finished="2025-01-01T00:00:00Z", **extra):
    return {
        "signature": signature, "service": "nginx", "host": extra.pop("host", "web1"),
        "success": success, "finished": finished,
        "commands": [{"command": c, "source": "llm", "rc": rc} for c, rc in commands], **extra,
    }


def test_append_bounds_and_keeps_newest_last():
    mem = []
    for i in range(7):
        mem = memory.append_episode(mem, episode(False, (f"cmd {i}", 1)), max_episodes=5)
    assert len(mem) == 5
    assert [e["commands"][0]["command"] for e in mem] == [f"cmd {i}" for i in range(2, 7)]


def test_append_normalises_and_bounds_texts():
    rec = memory.append_episode(None, {"signature": SIG, "error": "x" * 5000, "approval": "bogus",
                                       "commands": ["service nginx start", 42, {"argv": ["kill", "1"]}],
                                       "attempts": "3", "extra": "dropped"})[0]
    assert len(rec["error"]) == 500
    assert rec["approval"] == "none"
    assert rec["attempts"] == 3
    assert [c["command"] for c in rec["commands"]] == ["service nginx start", "kill 1"]
    assert "extra" not in rec


def test_append_rejects_bad_input():
    with pytest.raises(memory.EpisodeError):
        memory.append_episode([], {"service": "nginx"})
    with pytest.raises(memory.EpisodeError):
        memory.append_episode([], episode(True), max_episodes=0)


@pytest.mark.parametrize("garbage", [None, "text", 3, {"a": 1}, [1, "x", {"no": "signature"}]])
def test_corrupt_memory_is_empty(garbage):
    assert memory.normalise_memory(garbage) == []
    assert memory.lookup(garbage, SIG)["episodes"] == 0


def test_lookup_fleet_failed_and_successes():
    web1 = [episode(False, ("service nginx start", 1), finished="2025-01-01T00:00:01Z"),
            episode(False, ("nginx -s reload", 1), ("kill 12", 0), finished="2025-01-01T00:00:02Z"),
            episode(True, ("kill 12", 0), ("service nginx start", 0), finished="2025-01-01T00:00:03Z")]
    web2 = [episode(True, ("rm -f /run/nginx.pid", 0), finished="2025-01-01T00:00:04Z", host="web2"),
            episode(False, ("other", 1), signature="redis:aaaa")]
    found = memory.lookup([web1, web2], SIG)
    assert found["episodes"] == 4
    # "service nginx start" healed later, so it is not a failed command
    assert found["failed_commands"] == ["nginx -s reload"]
    assert [s["commands"] for s in found["successes"]] == [["rm -f /run/nginx.pid"], ["kill 12", "service nginx start"]]
    assert found["successes"][0]["host"] == "web2"
    # a mapping host -> memory and one host's list work too
    assert memory.lookup({"web1": web1, "web2": web2}, SIG) == found
    assert memory.lookup(web1, SIG)["episodes"] == 3


def test_lookup_dedupes_successful_plans():
    mem = [episode(True, ("service nginx start", 0), finished=f"2025-01-01T00:00:0{i}Z") for i in range(3)]
    assert len(memory.lookup(mem, SIG)["successes"]) == 1


def test_lookup_needs_signature():
    with pytest.raises(memory.EpisodeError):
        memory.lookup([], "")


def test_corrupt_cache_files(tmp_path):
    (tmp_path / "s1_good").write_text(json.dumps({"__payload__": json.dumps({"sentinel_memory": []})}))
    (tmp_path / "plain").write_text(json.dumps({"ansible_facts": {}}))
    (tmp_path / "s1_bad").write_text("{garbage")
    (tmp_path / "s1_list").write_text(json.dumps({"__payload__": "[1, 2]"}))
    (tmp_path / "s1_old.corrupt").write_text("{garbage")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    assert memory.corrupt_cache_files(str(tmp_path)) == [str(tmp_path / n) for n in ("binary", "s1_bad", "s1_list")]
    assert memory.corrupt_cache_files(str(tmp_path / "missing")) == []


def test_a_diagnostic_that_exited_non_zero_is_no_failed_fix():
    # `dpkg -s pg-cron` exiting 1 means "not installed": an answer, not a fix that failed.
    read = {"command": "dpkg -s postgresql-15-cron", "source": "llm", "rc": 1, "read_only": True}
    fix = {"command": "service postgresql start", "source": "llm", "rc": 1}
    mem = memory.append_episode(None, dict(episode(False), commands=[read, fix]))
    assert mem[0]["commands"][0]["read_only"] is True and "read_only" not in mem[0]["commands"][1]
    assert memory.lookup([mem], SIG)["failed_commands"] == ["service postgresql start"]
