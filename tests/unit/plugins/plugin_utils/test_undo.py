# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of undo: the request sent with an attempt, and the host's answer read back."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import report
from ansible_collections.sentinel.remediation.plugins.plugin_utils.undo import absorb, journal_record, with_snapshots

OPTIONS = {"snapshot_max_bytes": 1000, "snapshot_max_age": 60, "undo_unhealed": True, "snapshot_dir": ""}


def test_each_command_carries_the_paths_its_verdict_declares_and_the_attempt_its_incident():
    args = {"commands": [{"argv": ["sed", "-i", "s/a/b/", "/etc/x.conf"]}, {"argv": ["service", "x", "start"]}]}
    checked = [{"effects": ["applies `s/a/b/` to /etc/x.conf"]}, {"effects": ["starts unit x.service"]}]
    sent = with_snapshots(args, checked, "x", "2026-11-28T06:00:00Z", 2, OPTIONS)
    assert sent["commands"][0]["keep"] == [{"path": "/etc/x.conf", "tree": False}]
    assert sent["commands"][1]["keep"] == []
    assert sent["snapshot"] == {"incident": "x-20261128T060000Z", "attempt": 2, "max_bytes": 1000, "max_age": 60,
                                "undo_unhealed": True}
    assert "dir" not in sent["snapshot"] and "keep" not in args["commands"][0]


def test_a_path_that_could_not_be_put_back_escalates_naming_it():
    record, problem = absorb({"snapshot": {"incident": "x-1", "rolled_back": True, "restored": ["/a"],
                                           "failed": [{"path": "/etc/b", "error": "read-only file system"}]}})
    assert record["restored"] == ["/a"]
    assert "/etc/b: read-only file system" in problem and "a human" in problem


def test_an_attempt_that_changed_nothing_declared_says_nothing():
    assert absorb({"snapshot": {"incident": "x-1", "changed": [], "restored": []}}) == ({}, "")
    assert absorb({"results": []}) == ({}, "")


def test_the_journal_and_the_report_say_what_was_restored():
    host = {"incident": "x-1", "rolled_back": True, "restored": ["/etc/a"],
            "changed": [{"path": "/etc/a", "diff": "-old\n+new"}]}
    record, problem = absorb({"snapshot": host})
    assert problem == ""
    line = journal_record("run-1", "x", 1, record)
    assert line["kind"] == "undo" and line["restored"] == ["/etc/a"] and line["changed"] == ["/etc/a"]
    assert "diff" not in repr(line)
    outcome = report.normalise_outcome("h", {"service": "x", "state": "healed", "undo_id": "x-1",
                                             "timeline": [{"attempt": 1, "undo": record}]})
    assert "attempt 1: restored /etc/a" in report.outcome_line(outcome)
