# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whose files a plan touches, as the approver is shown them."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils.file_ownership import owners_in, plan_ownership, plan_writer_records

EVIDENCE = {
    "ownership": {"/etc/ssh/sshd_config.d/50-security.conf": "says: line 1: # Owned by the security team, SEC-1042"},
    "named_paths": {"/etc/nginx/conf.d": {"type": "directory", "managed_by": ["says: line 1: # Puppet managed"]},
                    "/etc/app.conf": {"type": "file"}},
}


def test_the_owned_paths_come_from_the_ownership_section_and_the_named_paths():
    assert set(owners_in(EVIDENCE)) == {"/etc/ssh/sshd_config.d/50-security.conf", "/etc/nginx/conf.d"}
    assert owners_in(None) == {}


def test_a_plan_is_shown_the_owners_of_the_files_it_names_or_writes_beneath():
    commands = [{"argv": ["mv", "/etc/ssh/sshd_config.d/50-security.conf", "/root/50-security.conf.off"]},
                {"command": "sed -i 's/a/b/' /etc/nginx/conf.d/site.conf"},
                {"argv": ["systemctl", "restart", "ssh.service"]}]
    owned = plan_ownership(EVIDENCE, commands)
    assert owned == {"/etc/ssh/sshd_config.d/50-security.conf": "says: line 1: # Owned by the security team, SEC-1042",
                     "/etc/nginx/conf.d": "says: line 1: # Puppet managed"}
    assert plan_ownership(EVIDENCE, [{"argv": ["systemctl", "start", "nginx.service"]}]) == {}


MARKER = "/var/lib/postgresql/15/main/RESTORE_IN_PROGRESS"
RECORD = ("marker /var/lib/postgresql/15/main/RESTORE_IN_PROGRESS (states 2026-11-27T23:10:02Z)\n"
          "pgrestore-drill log /var/log/pgrestore-drill/drill.log (last written 2026-11-27T23:31:55Z), last 1 line(s):\n"
          "  2026-11-27T23:31:55Z cleaning up")


def test_a_plan_that_removes_a_marker_is_shown_its_writers_last_record():
    evidence = {"writer_records": {MARKER: RECORD}}
    commands = [{"argv": ["rm", MARKER]}, {"argv": ["systemctl", "start", "postgresql@15-main.service"]}]
    assert plan_writer_records(evidence, commands) == {MARKER: RECORD}
    assert plan_writer_records(evidence, [{"argv": ["systemctl", "start", "postgresql@15-main.service"]}]) == {}
    assert plan_writer_records({"writer_records": "not a mapping"}, commands) == {}
    assert plan_writer_records(None, commands) == {}
