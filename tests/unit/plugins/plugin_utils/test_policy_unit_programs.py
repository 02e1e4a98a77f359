# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A program the incident's own unit runs (its Exec*= lines, as the host reports them) may have
its mode or owner changed with a human's approval even where the operating system's files
are; nothing else about it, and no other program, changes."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils.health_checks import parse_show
from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy

NGINX = {"name": "nginx", "units": ["nginx.service"], "config_paths": ["/etc/nginx"]}
EVIDENCE = {"unit": {"Id": "nginx.service", "Programs": "/usr/sbin/nginx /usr/local/sbin/render-upstreams"}}


def judged(command: str, evidence: dict | None = None) -> dict:
    evidence = EVIDENCE if evidence is None else evidence
    return policy.classify(command, scope=policy.scope_from_service(NGINX, (), evidence))


@pytest.mark.parametrize("command", [
    "chmod 0755 /usr/local/sbin/render-upstreams",
    "chmod +x /usr/local/sbin/render-upstreams",
    "chmod u+x,go+rx /usr/local/sbin/render-upstreams",
    "chown root:root /usr/local/sbin/render-upstreams",
])
def test_the_mode_or_owner_of_a_program_its_unit_runs_needs_approval(command):
    checked = judged(command)
    assert checked["verdict"] == "approval", checked["reasons"]
    assert any("own unit runs" in r for r in checked["reasons"]), checked["reasons"]


@pytest.mark.parametrize("command", [
    "rm -f /usr/local/sbin/render-upstreams",                       # removing it
    "cp /tmp/x /usr/local/sbin/render-upstreams",                    # replacing its bytes
    "sed -i s/a/b/ /usr/local/sbin/render-upstreams",                # editing it
    "chmod -R 0755 /usr/local/sbin",                                 # its whole directory
    "chmod 0755 /usr/local/sbin/other-tool",                         # a program the unit does not run
    "chmod 4755 /usr/local/sbin/render-upstreams",                   # set-user-ID root
    "chmod 0755 /usr/local/sbin/../sbin/render-upstreams",           # a path written around it
])
def test_anything_else_about_it_or_another_program_is_refused(command):
    assert judged(command)["verdict"] == "reject", command


def test_without_the_hosts_word_the_program_stays_the_operating_systems():
    assert judged("chmod 0755 /usr/local/sbin/render-upstreams", evidence={})["verdict"] == "reject"


def test_every_exec_line_of_a_unit_is_kept_when_systemctl_repeats_the_key():
    shown = parse_show("ExecStartPre={ path=/bin/true ; argv[]=/bin/true ; ignore_errors=no }\n"
                       "ExecStartPre={ path=/usr/local/bin/x ; argv[]=/usr/local/bin/x ; ignore_errors=no }\n"
                       "MainPID=0\n")
    assert "/bin/true" in shown["ExecStartPre"] and "/usr/local/bin/x" in shown["ExecStartPre"]
    assert shown["MainPID"] == "0"
