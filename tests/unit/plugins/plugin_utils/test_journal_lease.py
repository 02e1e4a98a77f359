# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The incident journal and host leases: the bytes on disk, a torn line, a dead owner."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import journal
from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import Lease, LeaseBusy, process_start, target_key

CMDS = [{"command": "service nginx start", "argv": ["service", "nginx", "start"], "verdict": "allow", "become": True}]


def test_intent_without_result_is_found_and_a_result_closes_it(tmp_path):
    j = journal.Journal(str(tmp_path), "web1")
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "runbook", "nginx:abc"))
    lines = (tmp_path / "web1.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["commands"][0]["argv"] == ["service", "nginx", "start"]
    assert oct(os.stat(tmp_path / "web1.jsonl").st_mode & 0o777) == "0o600"
    found = journal.interrupted(j.records(), "nginx")
    assert found and found["run"] == "run-1" and found["attempt"] == 1
    assert journal.interrupted(j.records(), "redis-server") is None
    j.append(journal.result("run-1", "nginx", 1, [{"rc": 0}], True, ""))
    assert journal.interrupted(j.records(), "nginx") is None


def test_fixes_sent_with_a_health_check_count_as_run_until_resolved(tmp_path):
    """A run killed while remembered fixes were on their way: any of them may have run."""
    j = journal.Journal(str(tmp_path), "web1")
    redis = [{"command": "service redis-server start", "argv": ["service", "redis-server", "start"],
              "verdict": "allow", "become": True}]
    j.append(journal.conditional("run-1", {"nginx": [{"signature": "nginx:a", "commands": CMDS}],
                                           "redis-server": [{"signature": "redis-server:b", "commands": redis}]}))
    stored = json.loads((tmp_path / "web1.jsonl").read_text())
    assert stored["kind"] == "conditional" and stored["services"]["nginx"][0]["commands"][0]["argv"] == CMDS[0]["argv"]
    found = journal.interrupted(j.records(), "nginx")
    assert found["conditional"] is True and found["attempt"] == 1 and found["run"] == "run-1"
    assert [c["argv"] for c in found["commands"]] == [CMDS[0]["argv"]]
    assert journal.interrupted(j.records(), "cron") is None
    # Nothing ran for redis-server: resolved. nginx's fix ran: its own intent and result follow.
    j.append(journal.resolved("run-1", ["redis-server"]))
    assert journal.interrupted(j.records(), "redis-server") is None
    assert journal.interrupted(j.records(), "nginx")["conditional"] is True
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "memory", "nginx:a"))
    assert journal.interrupted(j.records(), "nginx").get("conditional") is None  # the plan that ran
    j.append(journal.result("run-1", "nginx", 1, [{"rc": 0}], True, ""))
    assert journal.interrupted(j.records(), "nginx") is None
    assert journal.unrecorded_success(j.records(), "nginx")[0]["source"] == "memory"
    # A resolution of another run does not close this run's pending fixes.
    j.append(journal.conditional("run-2", {"nginx": [{"signature": "nginx:a", "commands": CMDS}]}))
    j.append(journal.resolved("run-1", ["nginx"]))
    assert journal.interrupted(j.records(), "nginx")["run"] == "run-2"


def test_a_torn_last_line_is_skipped_not_fatal(tmp_path):
    j = journal.Journal(str(tmp_path), "web1")
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "llm", "nginx:abc"))
    with open(j.path, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "result", "run": "run-1", "serv')  # killed mid-write
    assert journal.interrupted(j.records(), "nginx")["source"] == "llm"


def test_a_closed_record_ends_an_interrupted_incident(tmp_path):
    j = journal.Journal(str(tmp_path), "web1")
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "llm", "nginx:abc"))
    j.append({"kind": "closed", "run": "run-2", "service": "nginx", "state": "healthy"})
    assert journal.interrupted(j.records(), "nginx") is None


def test_a_verified_heal_without_a_close_is_an_unrecorded_success(tmp_path):
    j = journal.Journal(str(tmp_path), "web1")
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "llm", "nginx:abc", "nginx is not running", "stopped"))
    assert journal.unrecorded_success(j.records(), "nginx") is None          # not verified yet
    j.append(journal.result("run-1", "nginx", 1, [{"rc": 0}], True, ""))
    start, result = journal.unrecorded_success(j.records(), "nginx")
    assert (start["error"], start["diagnosis"], result["healthy"]) == ("nginx is not running", "stopped", True)
    assert journal.unrecorded_success(j.records(), "redis-server") is None
    j.append({"kind": "closed", "run": "run-1", "service": "nginx", "state": "healed"})
    assert journal.unrecorded_success(j.records(), "nginx") is None          # the run finished its record
    j.append(journal.intent("run-2", "nginx", 1, CMDS, "none", "llm", "nginx:abc"))
    j.append(journal.result("run-2", "nginx", 1, [{"rc": 0}], False, "still down"))
    assert journal.unrecorded_success(j.records(), "nginx") is None          # it did not heal


def test_an_unwritable_journal_is_an_error_naming_the_file(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(journal.JournalError, match="incident journal"):
        journal.Journal(str(blocked / "journal"), "web1").append({"kind": "intent"})


def test_host_names_cannot_escape_the_journal_directory(tmp_path):
    j = journal.Journal(str(tmp_path), "../../etc/passwd")
    assert os.path.dirname(j.path) == str(tmp_path)


def test_a_lease_excludes_a_second_owner_until_released_or_expired(tmp_path):
    key = target_key({"ansible_connection": "community.docker.docker", "ansible_host": "lab-01"})
    first = Lease(str(tmp_path), key, "run-a", ttl=100)
    second = Lease(str(tmp_path), key, "run-b", ttl=100)
    first.acquire(now=1000)
    with pytest.raises(LeaseBusy, match="run-a"):
        second.acquire(now=1050)
    second.acquire(now=1101)  # run-a's lease lapsed (a dead controller)
    with pytest.raises(LeaseBusy, match="run-b"):
        first.acquire(now=1102)
    second.release()
    first.acquire(now=1103)


def test_two_inventory_names_of_one_target_share_a_lease():
    a = target_key({"inventory_hostname": "web1", "ansible_host": "10.0.0.5", "ansible_connection": "ssh"})
    b = target_key({"inventory_hostname": "web1.example.com", "ansible_host": "10.0.0.5", "ansible_connection": "ssh"})
    assert a == b


def test_a_lease_of_a_killed_run_on_this_controller_lapses_at_once(tmp_path):
    key = target_key({"ansible_connection": "community.docker.docker", "ansible_host": "lab-01"})
    dead = subprocess.Popen(["sleep", "60"])
    killed = Lease(str(tmp_path), key, "run-killed", ttl=1000, process=(dead.pid, process_start(dead.pid)))
    killed.acquire()
    live = Lease(str(tmp_path), key, "run-live", ttl=1000, process=(os.getpid(), process_start(os.getpid())))
    with pytest.raises(LeaseBusy, match="run-killed"):
        live.acquire()  # its owner still runs
    dead.kill()
    dead.wait()
    live.acquire()  # the owner is gone: the lease lapsed before its expiry
    with pytest.raises(LeaseBusy, match="run-live"):
        Lease(str(tmp_path), key, "run-other", ttl=1000).acquire()


def test_a_torn_tail_is_kept_aside_and_never_swallows_the_next_intent(tmp_path):
    """A writer killed mid-record leaves no newline: the next intent starts its own line
    (it would otherwise be glued to the fragment and lost), and the fragment is kept aside."""
    j = journal.Journal(str(tmp_path), "web1")
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "llm", "nginx:abc"))
    with open(j.path, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "result", "run": "run-1", "serv')  # killed mid-write
    j.append(journal.intent("run-2", "redis-server", 1, CMDS, "none", "runbook", "redis-server:x"))
    found = journal.interrupted(j.records(), "redis-server")
    assert found and found["run"] == "run-2"
    assert journal.interrupted(j.records(), "nginx")["run"] == "run-1"   # still accounted for
    raw = (tmp_path / "web1.jsonl").read_bytes()
    assert raw.endswith(b"\n") and b'"serv\n{' in raw
    kept = [json.loads(line) for line in (tmp_path / "web1.jsonl.torn").read_text().splitlines()]
    assert kept[0]["bytes"] == '{"kind": "result", "run": "run-1", "serv'
    assert raw[kept[0]["offset"]:].startswith(b'{"kind": "result", "run": "run-1", "serv')


def test_a_line_whose_checksum_does_not_match_is_not_a_record(tmp_path):
    j = journal.Journal(str(tmp_path), "web1")
    j.append(journal.intent("run-1", "nginx", 1, CMDS, "none", "llm", "nginx:abc"))
    line = json.loads((tmp_path / "web1.jsonl").read_text())
    assert line["sum"] == journal.checksum(line)
    # Garbage that parses: a result for run-1 with a made-up sum would close the intent.
    forged = {"kind": "result", "run": "run-1", "service": "nginx", "attempt": 1, "healthy": True, "sum": "0" * 16}
    with open(j.path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(forged) + "\n")
    assert journal.interrupted(j.records(), "nginx")["run"] == "run-1"
    # A record written before sums existed is read as it is.
    legacy = {"kind": "result", "run": "run-1", "service": "nginx", "attempt": 1, "healthy": True}
    with open(j.path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(legacy) + "\n")
    assert journal.interrupted(j.records(), "nginx") is None


def test_a_run_knows_when_another_run_took_its_lease(tmp_path):
    first = Lease(str(tmp_path), "docker://web1:", owner="run-1", ttl=60)
    first.acquire(now=1000.0)
    assert first.holds()
    second = Lease(str(tmp_path), "docker://web1:", owner="run-2", ttl=60)
    second.acquire(now=2000.0)          # the first lapsed: taken for dead
    assert not first.holds() and second.holds()
    first.release()                     # a late release leaves the new owner's lease alone
    assert second.holds()
