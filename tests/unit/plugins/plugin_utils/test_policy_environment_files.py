"""The environment files of a service's start are its configuration when the host names them
(evidence ``environment_files``), whatever the distribution calls their directory; Debian's
/etc/default/UNIT is assumed only for evidence that holds no such reading."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy

REDIS = {"name": "redis-server", "units": ["redis-server.service"], "processes": ["redis-server"],
         "config_paths": ["/etc/redis"], "data_paths": ["/var/lib/redis"]}
OWN = "an edit of the service's configuration"
OTHER = "outside the incident's scope"


def _edit(path: str, evidence: dict) -> dict:
    return policy.classify(f"sed -i s/16/65536/ {path}", policy.load_policy(None),
                           scope=policy.scope_from_service(REDIS, [], evidence))


@pytest.mark.parametrize("path", ["/etc/sysconfig/redis", "/etc/conf.d/redis", "/opt/redis/env"])
def test_a_file_the_host_says_the_start_reads_is_the_services_configuration(path: str) -> None:
    verdict = _edit(path, {"environment_files": [path]})
    assert verdict["verdict"] == "approval" and OWN in verdict["reasons"][0], verdict


def test_the_debian_guess_holds_only_without_the_hosts_reading() -> None:
    guess = "/etc/default/redis-server"
    # older evidence, no reading: Debian's convention
    assert OWN in _edit(guess, {})["reasons"][0]
    # the host read the unit and the init script: they name another file, or none
    for evidence in ({"environment_files": ["/etc/sysconfig/redis"]}, {"environment_files": []}):
        verdict = _edit(guess, evidence)
        assert verdict["verdict"] == "approval" and OTHER in verdict["reasons"][0], verdict


def test_another_services_file_and_the_operating_systems_stay_out() -> None:
    evidence = {"environment_files": ["/etc/default/redis-server", "/etc/environment", "/etc/default/grub"]}
    assert OTHER in _edit("/etc/default/nginx", evidence)["reasons"][0]
    # the OS's files stay refused even when a unit names them
    assert _edit("/etc/environment", evidence)["verdict"] == "reject"
    assert _edit("/etc/default/grub", evidence)["verdict"] == "reject"


@pytest.mark.parametrize("junk", ["relative/env", "/etc/*.env", "/etc/../etc/shadow", 7, None])
def test_a_path_that_is_not_plain_is_left_out_of_the_scope(junk) -> None:
    scope = policy.scope_from_service(REDIS, [], {"environment_files": [junk, "/etc/sysconfig/redis"]})
    assert [p for p in scope["config_paths"] if p not in ("/etc/redis",)] == ["/etc/sysconfig/redis"]
