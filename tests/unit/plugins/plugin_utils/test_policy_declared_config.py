# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A file the operating system owns can be a service's configuration: when the service
definition names it in ``config_paths`` (never by a guess from the name) a change needs
approval instead of being refused; how people log in and become root never changes."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy

JOURNALD = {"name": "systemd-journald", "units": ["systemd-journald.service"], "processes": ["systemd-journal"],
            "config_paths": ["/etc/systemd/journald.conf", "/etc/systemd/journald.conf.d"],
            "data_paths": ["/var/log/journal"]}
SSH_DECLARED = {"name": "ssh", "units": ["ssh.service"], "config_paths": ["/etc/ssh"]}
SSH_GUESSED = {"name": "ssh", "units": ["ssh.service"]}   # /etc/ssh only by the naming convention


@pytest.mark.parametrize("service, command, verdict", [
    (JOURNALD, "rm -f /etc/systemd/journald.conf.d/investigation.conf", "approval"),
    (JOURNALD, "sed -i 's/^SystemMaxUse=2G/SystemMaxUse=32M/' /etc/systemd/journald.conf", "approval"),
    (JOURNALD, "rm -rf /etc/systemd/journald.conf.d", "reject"),          # recursive: the whole config
    (JOURNALD, "rm -f /etc/systemd/system.conf", "reject"),               # not named by the definition
    (JOURNALD, "rm -f /etc/systemd/journald.conf.d/../system.conf", "reject"),
    (SSH_DECLARED, "mv /etc/ssh/sshd_config /tmp/sshd_config", "reject"),  # access paths stay protected
    (SSH_DECLARED, "sed -i 's/^PermitRootLogin no/PermitRootLogin yes/' /etc/ssh/sshd_config", "reject"),
    (SSH_GUESSED, "sed -i 's/a/b/' /etc/ssh/sshd_config", "reject"),
])
def test_declared_configuration_of_the_operating_system(service, command, verdict):
    checked = policy.classify(command, scope=policy.scope_from_service(service))
    assert checked["verdict"] == verdict, checked["reasons"]


def test_a_declared_file_without_an_incident_stays_protected():
    # Without an incident scope nothing is declared: the default scope guesses, never declares.
    assert policy.classify("rm -f /etc/systemd/journald.conf.d/investigation.conf")["verdict"] == "reject"


MONGO_EVIDENCE = {
    "service_pids": [812, 900],
    "unit": {"Id": "mongod.service", "User": "mongodb", "RuntimeDirectory": "mongodb", "PIDFile": "/run/mongodb/mongod.pid",
             "StateDirectory": "../../etc"},
    "processes": [{"pid": 812, "user": "mongodb", "comm": "mongod", "reasons": ["unit mongod.service"]},
                  {"pid": 900, "user": "dev", "comm": "python3", "reasons": ["holds port 27017"]}]}


@pytest.mark.parametrize("command, verdict", [
    ("chown -R mongodb:mongodb /var/lib/mongodb", "allow"),    # the account its own processes run as
    ("rm -f /run/mongodb/mongod.pid", "allow"),                # the unit's PIDFile= and RuntimeDirectory=
    ("mkdir -p /var/log/mongodb", "allow"),
    ("rm -f /var/lib/mongodb/mongod.lock", "approval"),        # its data: a deletion needs a human
    ("chown -R dev:dev /var/lib/dev", "approval"),             # a stray port holder's account is not the service's
    ("rm -f /etc/passwd", "reject"),                           # StateDirectory=../../etc is not a directory name
])
def test_an_undescribed_service_is_scoped_by_what_its_unit_and_processes_say(command, verdict):
    scope = policy.scope_from_service({"name": "mongod", "units": ["mongod.service"]}, evidence=MONGO_EVIDENCE)
    assert scope["user"] == "mongodb"
    assert "/var/lib/dev" not in scope["data_paths"] and "/etc" not in scope["data_paths"]
    assert policy.classify(command, scope=scope)["verdict"] == verdict


def test_a_definitions_own_paths_are_not_widened_by_process_names():
    scope = policy.scope_from_service({"name": "mongod", "units": ["mongod.service"], "data_paths": ["/srv/mongo"]},
                                      evidence=MONGO_EVIDENCE)
    assert scope["data_paths"] == ["/srv/mongo"]
