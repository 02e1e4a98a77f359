# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan shared by signature fits the receiving host's own evidence, or is not used there."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature
from ansible_collections.sentinel.remediation.plugins.plugin_utils import shared_plan_check as check

PG = {"name": "postgresql", "config_paths": ["/etc/postgresql/15/main"], "data_paths": ["/var/lib/postgresql/15/main"]}
ERROR = "port 5432: nothing listens"
HBA = {"logs": {"/var/log/postgresql/postgresql-15-main.log":
                'LOG:  invalid authentication method "scram-sha256"\nFATAL:  could not load pg_hba.conf'}}
LIB = {"logs": {"/var/log/postgresql/postgresql-15-main.log":
                'FATAL:  could not access file "pg_audit": No such file or directory'}}


def test_the_same_symptom_with_different_causes_has_different_signatures_and_causes():
    assert failure_signature("postgresql", ERROR, HBA) != failure_signature("postgresql", ERROR, LIB)
    assert check.causes("postgresql", ERROR, HBA) != check.causes("postgresql", ERROR, LIB)


def test_a_dependents_signature_holds_what_its_dependency_says():
    app = "GET http://127.0.0.1:8080/health returned 503, expected 200"
    down = {"dependencies": {"postgresql": "FAILING its own checks in this same check: port 5432: nothing listens "
                                           "(pid 17)"}}
    refuses = {"dependencies": {"postgresql": "healthy: its own checks passed in this same check; a SUSPECT"}}
    assert failure_signature("sentinel-app", app, down) != failure_signature("sentinel-app", app, refuses)
    # and not what differs between hosts of one fault
    other_host = {"dependencies": {"postgresql": "FAILING its own checks in this same check: "
                                                 "port 5432: nothing listens (pid 4242)"}}
    assert failure_signature("sentinel-app", app, down) == failure_signature("sentinel-app", app, other_host)


def test_a_plan_made_for_other_causes_does_not_fit():
    plan = {"commands": [{"command": "sed -i 's/scram-sha256/scram-sha-256/' /etc/postgresql/15/main/pg_hba.conf"}],
            "causes": check.causes("postgresql", ERROR, HBA)}
    assert check.recheck(plan, service="postgresql", error=ERROR, evidence=HBA, definition=PG) == []
    problems = check.recheck(plan, service="postgresql", error=ERROR, evidence=LIB, definition=PG)
    assert len(problems) == 1 and problems[0].startswith("it was made for other causes")


def test_a_plan_acting_on_a_path_this_host_does_not_show_does_not_fit():
    plan = {"commands": ["mv /srv/pgwal.broken /srv/pgwal", "systemctl start postgresql@15-main"]}
    problems = check.recheck(plan, service="postgresql", error=ERROR, evidence=LIB, definition=PG)
    assert problems == ["it acts on /srv/pgwal.broken, /srv/pgwal, which this host's evidence does not show"]
    # a path under a declared directory, or named in the evidence, is known here
    plan = {"commands": ["chmod 0700 /var/lib/postgresql/15/main", "rm -f /tmp/x.lock"]}
    evidence = dict(LIB, named_paths={"/tmp/x.lock": "regular file"})
    assert check.recheck(plan, service="postgresql", error=ERROR, evidence=evidence, definition=PG) == []


def test_the_targets_are_the_arguments_not_the_programs():
    assert check.targets(["/usr/sbin/nginx -t -c /etc/nginx/nginx.conf", "install --mode=0755 -d /run/sshd"]) == \
        ["/etc/nginx/nginx.conf", "/run/sshd"]


def test_the_approver_is_shown_this_hosts_causes_in_words():
    said = check.host_diagnosis("postgresql", ERROR, LIB)
    assert said and any("pg_audit" in line for line in said)
    assert check.host_diagnosis("postgresql", ERROR, None) == []
