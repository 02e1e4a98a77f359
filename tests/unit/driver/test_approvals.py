"""Pending plans listed and shown from the role's JSON files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from sentinel_remediate import approvals as a

PLAN = {
    "id": "59a32ea8ba4a",
    "host": "lab01",
    "service": "nginx",
    "signature": "nginx:b8c2652a0da263f1",
    "attempt": "1",
    "error": "service nginx status: nginx is not running (rc 3)",
    "diagnosis": "A broken snippet in /etc/nginx/conf.d stops nginx from starting.",
    "plan_hash": "3e9c",
    "requested": "2026-01-01T00:00:00Z",
    "commands": [
        {"command": "mv /etc/nginx/conf.d/zz-broken.conf /tmp/x\x1b]0;pwned\x07", "verdict": "approval",
         "reasons": ["`mv` renames or replaces files; a human should confirm the paths"],
         "argv": ["mv", "/etc/nginx/conf.d/zz-broken.conf", "/tmp/x"], "become": True, "source": "llm",
         "display": "mv /etc/nginx/conf.d/zz-broken.conf '/tmp/x\\x1b]0;pwned\\x07'", "pids": [],
         "effects": ["moves away /etc/nginx/conf.d/zz-broken.conf", "moves to /tmp/x"]},
        {"command": "service nginx start", "verdict": "allow", "reasons": ["allowed"],
         "argv": ["service", "nginx", "start"], "become": True, "source": "runbook", "display": "service nginx start",
         "pids": [], "effects": ["starts unit nginx.service"]},
    ],
}


@pytest.fixture
def approvals_dir(tmp_path: Path) -> Path:
    pending = tmp_path / "pending"
    pending.mkdir()
    (pending / f"{PLAN['id']}.json").write_text(json.dumps(PLAN))
    (pending / "0badf11e0000.json").write_text("{not json")
    return tmp_path


def test_list_shows_display_and_reasons(approvals_dir: Path) -> None:
    text = a.render_list(a.load_pending(approvals_dir))
    assert "59a32ea8ba4a  lab01  nginx  2 command(s), 1 need approval" in text
    assert "[approval] mv /etc/nginx/conf.d/zz-broken.conf '/tmp/x\\x1b]0;pwned\\x07'" in text
    assert "a human should confirm the paths" in text
    assert "0badf11e0000" in text  # an unreadable file is listed, not hidden
    assert "\x1b" not in text and "\x07" not in text


def test_show_and_prefix_lookup(approvals_dir: Path) -> None:
    plan = a.find_pending(approvals_dir, "59a3")
    text = a.render_show(plan)
    assert "diagnosis  A broken snippet" in text
    assert "1. [approval] mv" in text and "(from llm, as root)" in text
    assert "effect: moves to /tmp/x" in text
    assert "sentinel-remediate approvals approve 59a32ea8ba4a" in text
    assert "_path" not in a.public(plan)


@pytest.mark.parametrize("bad", ["../../etc/passwd", "a/b", "", "x"])
def test_bad_ids_are_refused(approvals_dir: Path, bad: str) -> None:
    with pytest.raises(a.ApprovalError):
        a.find_pending(approvals_dir, bad)


def test_unknown_id_lists_the_known_ones(approvals_dir: Path) -> None:
    with pytest.raises(a.ApprovalError, match="pending: .*59a32ea8ba4a"):
        a.find_pending(approvals_dir, "ffffffffffff")


def test_no_pending_dir(tmp_path: Path) -> None:
    assert a.load_pending(tmp_path) == []
    assert a.render_list([]) == "no plan waits for approval\n"


def test_show_says_who_manages_the_files_the_plan_touches() -> None:
    plan = dict(PLAN, ownership={"/etc/nginx/conf.d/zz-broken.conf": "says: line 1: # Managed by Puppet\x1b[2J; DO NOT EDIT"})
    text = a.render_show(plan)
    owned = [line for line in text.splitlines() if line.startswith("owned ")]
    assert len(owned) == 1 and "/etc/nginx/conf.d/zz-broken.conf: says: line 1: # Managed by Puppet" in owned[0]
    assert "\x1b" not in text
    assert text.index("owned ") < text.index("commands (as the policy displays them")
    assert "owned " not in a.render_show(PLAN)


def test_show_gives_the_last_record_of_the_writer_of_a_marker_the_plan_removes() -> None:
    record = ("marker /var/lib/pg/RESTORE_IN_PROGRESS (states 2026-11-27T23:10:02Z)\n"
              "pgrestore-drill log /var/log/pgrestore-drill/drill.log (last written 2026-11-27T23:31:55Z), last 1 line(s):\n"
              "  2026-11-27T23:31:55Z cleaning up\x1b[2J")
    text = a.render_show(dict(PLAN, writer_records={"/var/lib/pg/RESTORE_IN_PROGRESS": record}))
    lines = text.splitlines()
    head = lines.index("writer     /var/lib/pg/RESTORE_IN_PROGRESS: its writer's last record:")
    assert "2026-11-27T23:31:55Z cleaning up" in lines[head + 3]
    assert "\x1b" not in text
    assert head < text.splitlines().index("commands (as the policy displays them; approving runs exactly these, as argv, without a shell):")
    assert "writer     " not in a.render_show(PLAN)
