# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Approval records: sealed by the controller's key, bound to their incident, used once."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval

CMDS = [{"command": "service nginx start", "argv": ["service", "nginx", "start"], "verdict": "approval",
         "become": True}]


def record(**over):
    return {"id": "0123456789abcdef", "host": "web1", "target": "ssh://10.0.0.5:", "service": "nginx",
            "signature": "nginx:abc", "error": "nginx is not running", "commands": CMDS, **over}


@pytest.fixture()
def key_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(approval.KEY_ENV, raising=False)
    directory = tmp_path / "approval"
    monkeypatch.setenv(approval.DIR_ENV, str(directory))
    return directory


def test_the_key_is_created_once_private_to_the_user_and_reused(key_dir):
    first = approval.controller_key()
    assert len(first) == 32 and approval.controller_key() == first
    path = key_dir / "approval.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700


def test_a_key_file_others_could_read_is_refused_with_its_path(key_dir):
    approval.controller_key()
    os.chmod(key_dir / "approval.key", 0o644)
    with pytest.raises(approval.ApprovalRefused, match="approval.key must belong to this user with mode 0600"):
        approval.controller_key()


def test_a_key_from_the_environment_must_be_long_hex(key_dir):
    with pytest.raises(approval.ApprovalRefused, match="not hexadecimal"):
        approval.controller_key(environ={approval.KEY_ENV: "not-hex"})
    with pytest.raises(approval.ApprovalRefused, match="at least 32"):
        approval.controller_key(environ={approval.KEY_ENV: "ab" * 8})
    assert approval.controller_key(environ={approval.KEY_ENV: "ab" * 32}) == bytes.fromhex("ab" * 32)
    assert not (key_dir / "approval.key").exists()


def test_a_sealed_record_reads_back_from_its_bytes(key_dir):
    key = approval.controller_key()
    sealed = approval.seal(record(), key)
    raw = approval.dumps(sealed)
    back = approval.parse(raw, key, "0123456789abcdef")
    assert back["commands"] == CMDS and back["format"] == approval.FORMAT


@pytest.mark.parametrize("change", [
    lambda r: r["commands"][0].update(argv=["service", "postgresql", "stop"]),
    lambda r: r["commands"][0].update(become=False),
    lambda r: r.update(host="web2"),
    lambda r: r.update(signature="nginx:other"),
    lambda r: r["commands"].append({"command": "truncate -s0 /var/log/x", "argv": ["truncate", "-s0", "/var/log/x"]}),
])
def test_any_change_to_a_sealed_record_is_refused(key_dir, change):
    key = approval.controller_key()
    sealed = json.loads(approval.dumps(approval.seal(record(), key)))
    change(sealed)
    with pytest.raises(approval.ApprovalRefused, match="changed after the controller wrote it"):
        approval.parse(json.dumps(sealed).encode(), key, "0123456789abcdef")


def test_a_record_without_a_mac_or_under_another_id_is_refused(key_dir):
    key = approval.controller_key()
    with pytest.raises(approval.ApprovalRefused, match="carries no controller MAC"):
        approval.parse(json.dumps(record()).encode(), key, "0123456789abcdef")
    with pytest.raises(approval.ApprovalRefused, match="not JSON"):
        approval.parse(b"{torn", key, "0123456789abcdef")
    other = approval.dumps(approval.seal(record(id="fedcba9876543210"), key))
    with pytest.raises(approval.ApprovalRefused, match="authentic but not the one named"):
        approval.parse(other, key, "0123456789abcdef")
    with pytest.raises(approval.ApprovalRefused, match="another key.*must share the key: SENTINEL_APPROVAL_KEY"):
        approval.parse(approval.dumps(approval.seal(record(), b"k" * 32)), key, "0123456789abcdef")


def test_a_pending_file_showing_other_commands_than_its_sealed_ones_is_refused(key_dir):
    key = approval.controller_key()
    raw = approval.dumps(approval.seal(record(), key))
    shown = json.dumps([{"command": "systemctl status nginx", "argv": ["systemctl", "status", "nginx"]}])
    # An earlier duplicate "commands" key: a person reading the file sees it first, the parser keeps
    # the sealed (last) one, so the MAC still matches.
    two_lists = raw.replace(b'{\n', b'{\n  "commands": ' + shown.encode() + b',\n', 1)
    assert json.loads(two_lists)["commands"] == CMDS
    with pytest.raises(approval.ApprovalRefused, match="duplicate key, added text or reformatting"):
        approval.parse(two_lists, key, "0123456789abcdef")
    for edited in (raw + b"\n" * 40 + b" " * 4, raw.replace(b"nginx", b"ngin\\u0078"),
                   json.dumps(json.loads(raw)).encode()):
        with pytest.raises(approval.ApprovalRefused, match="it was edited after it was written"):
            approval.parse(edited, key, "0123456789abcdef")
    assert approval.parse(raw, key, "0123456789abcdef")["commands"] == CMDS


def test_a_record_binds_its_host_and_its_failure(key_dir):
    r = record()
    assert approval.binding_problem(r, "web1", "ssh://10.0.0.5:") == ""
    assert "made for web1" in approval.binding_problem(r, "web2", "ssh://10.0.0.6:")
    assert "made for web1" in approval.binding_problem(r, "web1", "ssh://10.9.9.9:")
    assert approval.incident_change(r, "nginx:abc", "x") == ""
    assert "the failure changed" in approval.incident_change(r, "nginx:def", "port 80 taken")


def test_a_command_that_did_not_finish_in_one_look_does_not_void_the_approval():
    """The plan was made while the host was loaded and its status or config test was killed at
    the timeout; at resume they ran. The looks are compared without every command section that
    did not finish in either; two finished looks that differ, or another failure, still void it
    (computed from real evidence, not hand-made keys)."""
    from ansible_collections.sentinel.remediation.plugins.module_utils.signature import (
        failure_signature, settled_signature, settled_signatures, unfinished_sections)

    base = {"status": "$ service app status\nrc 3\napp is not running ... failed!",
            "logs": {"/var/log/app.log": "fatal: /etc/app/app.conf: File contains no section headers."}}
    killed = dict(base, config_test="$ app --check\nrc 124\ntimed out after 10s")
    ran = dict(base, config_test="$ app --check\nrc 1\napp: /etc/app/app.conf: File contains no section headers.")
    slow_status = dict(ran, status="$ service app status\nrc 124\napp: down\ntimed out after 10s")
    error = "app is not running"

    def plan(evidence):
        return dict(record(), signature=failure_signature("app", error, evidence),
                    settled=settled_signatures("app", error, evidence), unfinished=unfinished_sections(evidence))

    def now(evidence):
        return (failure_signature("app", error, evidence), error,
                lambda left_out: settled_signature("app", error, evidence, left_out), unfinished_sections(evidence))
    assert unfinished_sections(killed) == ["config_test"] and unfinished_sections(slow_status) == ["status"]
    assert failure_signature("app", error, killed) != failure_signature("app", error, ran)
    assert approval.incident_change(plan(killed), *now(ran)) == ""          # the plan's look did not finish
    assert approval.incident_change(plan(ran), *now(killed)) == ""          # this look did not finish
    assert approval.incident_change(plan(slow_status), *now(killed)) == ""  # each look lost another command
    other = dict(ran, config_test="$ app --check\nrc 1\napp: /etc/app/app.conf: line 3: unknown key")
    assert "the failure changed" in approval.incident_change(plan(ran), *now(other))  # both finished, differ
    moved = dict(killed, logs={"/var/log/app.log": "fatal: cannot bind 127.0.0.1:8080: Address already in use"})
    assert "the failure changed" in approval.incident_change(plan(ran), *now(moved))  # another failure


def test_the_policy_change_check_compares_argv_and_privilege():
    r = record()
    same = [{"command": "service nginx start", "argv": ["service", "nginx", "start"], "become": True, "verdict": "allow"}]
    assert approval.policy_change(r, same) == ""
    assert "now rejects" in approval.policy_change(r, [dict(same[0], verdict="reject")])
    assert "other argv" in approval.policy_change(r, [dict(same[0], become=False)])


def test_ids_are_unique():
    assert len({approval.new_id() for _n in range(1000)}) == 1000
    assert approval.ID_RE.match(approval.new_id())


_CLAIM = """
import sys
from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval
directory, who = sys.argv[1:3]
try:
    approval.claim(directory, "0123456789abcdef", who, "run-" + who)
    print("won")
except approval.ApprovalRefused as exc:
    print(exc)
"""


def test_of_concurrent_claims_exactly_one_wins_and_the_others_learn_who(tmp_path):
    # Twelve separate interpreters, not forks of this one: a fork of a pytest-xdist worker
    # (threads of its own) could hang on a lock held at the fork, and a whole CI run with it.
    directory = str(tmp_path / "approval")
    root = Path(approval.__file__).parents[5]  # the collections root above ansible_collections/
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    claims = [subprocess.Popen([sys.executable, "-c", _CLAIM, directory, f"op{n}"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in range(12)]
    outputs = [claim.communicate(timeout=60) for claim in claims]
    assert all(claim.returncode == 0 for claim in claims), outputs
    results = [out.strip() for out, _err in outputs]
    assert results.count("won") == 1, results
    losers = [r for r in results if r != "won"]
    assert all("was already used (by op" in r and "nothing ran again" in r for r in losers), losers


def test_a_pending_file_is_never_overwritten_and_is_retired_aside(tmp_path, key_dir):
    key = approval.controller_key()
    pending = str(tmp_path / "pending")
    sealed = approval.seal(record(), key)
    path = approval.write_pending(pending, sealed)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(FileExistsError):
        approval.write_pending(pending, approval.seal(record(service="redis"), key))
    assert approval.parse(approval.read_pending(pending, sealed["id"]), key, sealed["id"])["service"] == "nginx"
    approval.retire(pending, sealed["id"], "used")
    assert not os.path.exists(path) and os.path.exists(os.path.join(pending, "used", f"{sealed['id']}.json"))
    with pytest.raises(approval.ApprovalRefused, match="has no pending file"):
        approval.read_pending(pending, sealed["id"])


def test_a_used_approval_says_by_whom(tmp_path):
    directory = str(tmp_path / "approval")
    assert approval.used_note(directory, "0123456789abcdef") == ""
    approval.claim(directory, "0123456789abcdef", "alice", "run-1")
    assert "already used (by alice in run run-1 at " in approval.used_note(directory, "0123456789abcdef")
