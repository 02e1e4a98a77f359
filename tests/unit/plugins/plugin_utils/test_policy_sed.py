# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sed rule (plugins/plugin_utils/policy_sed.py): scripts that only edit text pass, any
way of running a program or touching another file is refused, however it is written."""
from __future__ import annotations

import pytest

from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils.policy_sed import SedScriptError, parse_script

REDIS = policy.scope_from_service({"name": "redis-server", "units": ["redis-server.service"],
                                   "config_paths": ["/etc/redis"], "data_paths": ["/var/lib/redis"]})


@pytest.mark.parametrize("script", [
    "s/a/b/", "s/a/b/g", "s|/var/lib|/srv|2", "s#x#y#I", r"s/a\/b/c/", "s/^port = 5433$/port = 5432/",
    "/^locale-collate/d", "1d", "$d", "2,5d", "/start/,/end/d", "10,$p", "0~2d", r"\%^#%d", "/x/I,+3d",
    "$a requirepass [REDACTED]", "1i # managed", "/^bind/c bind 127.0.0.1", "y/abc/xyz/", "s/a/b/;s/c/d/",
    "s/a/b/\ns/c/d/", "/x/!d", "=", "q", "q5", ":a;N;$!ba;s/\\n/ /g", "s/a;b/c/",
])
def test_text_edits_parse(script):
    assert parse_script(script)


@pytest.mark.parametrize("script, words", [
    ("s/a/b/e", "runs the result"),
    ("s/a/b/ge", "runs the result"),
    ("1e id", "runs a shell command"),
    ("e", "runs a shell command"),
    ("$e touch /tmp/x", "runs a shell command"),
    ("s/a/b/w /tmp/out", "writes to another file"),
    ("s/a/b/gw /etc/cron.d/x", "writes to another file"),
    ("w /tmp/copy", "writes to another file"),
    ("/x/W /tmp/copy", "writes to another file"),
    ("r /etc/shadow", "reads another file"),
    ("1R /root/.ssh/id_rsa", "reads another file"),
    ("/x/{s/a/b/;e id\n}", "blocks"),
    ("s/a/b", "not closed"),
    ("s/a", "not closed"),
    ("", "empty"),
    ("k", "not a sed command"),
    ("s/a/b/ x", "unexpected"),
    ("s/a/b/;s/c/d/e", "runs the result"),
])
def test_scripts_that_run_or_reach_other_files_are_refused(script, words):
    with pytest.raises(SedScriptError, match=words):
        parse_script(script)


@pytest.mark.parametrize("command, verdict", [
    ("sed -i 's/^locale-collate /# locale-collate /' /etc/redis/redis.conf", "approval"),   # own config
    ("sed --in-place=.orig -e '/^rename-command/d' /etc/redis/redis.conf", "approval"),
    ("sed -n '2270,2290p' /etc/redis/redis.conf", "allow"),                                # a read
    ("sed -i 's/a/b/' /etc/nginx/nginx.conf", "approval"),                                 # another service's
    ("sed -i 's/a/b/' /etc/passwd", "reject"),                                             # the OS's
    ("sed -n p /etc/shadow", "reject"),                                                    # a secret
    ("sed -i 's/a/b/e' /etc/redis/redis.conf", "reject"),
    ("sed --expression='1e id' /etc/redis/redis.conf", "reject"),
    ("sed -i -e 's/a/b/' -e 'w /tmp/x' /etc/redis/redis.conf", "reject"),                  # the second script
    ("sed -f /tmp/x.sed /etc/redis/redis.conf", "reject"),
    ("sed -i 's/a/b/'", "reject"),                                                         # no file
    ("sed -i.d/../../x 's/a/b/' /etc/redis/redis.conf", "reject"),                         # a suffix with a path
    ("sed -n '1p' /var/lib/redis/dump.rdb", "approval"),                                   # dumps data
])
def test_sed_commands_are_judged_by_what_they_do_to_what(command, verdict):
    checked = policy.classify(command, scope=REDIS)
    assert checked["verdict"] == verdict, checked["reasons"]


def test_an_edit_names_its_script_for_the_approver_and_runs_as_root():
    checked = policy.classify("sed -i 's/^port 6380/port 6379/' /etc/redis/redis.conf", scope=REDIS)
    assert checked["effects"] == ["applies `s/^port 6380/port 6379/` to /etc/redis/redis.conf"]
    assert checked["become"] is True
    assert checked["argv"] == ["sed", "-i", "s/^port 6380/port 6379/", "/etc/redis/redis.conf"]
