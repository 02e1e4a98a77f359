# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which drifted files a known-good restore puts back: the ones the failure names first."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.plugin_utils import known_good_plan

NGINX = {"name": "nginx", "units": ["nginx.service"], "config_paths": ["/etc/nginx"], "config_test": ["nginx", "-t"]}


def _item(path, change="modified"):
    return {"path": path, "change": change, "restore": "/var/lib/sentinel-remediation/known-good/restore/" + "ab" * 32,
            "aside": "cd" * 32, "diff": f"--- known-good {path}\n+++ now {path}\n-good\n+bad"}


def _evidence(test_output, *items, init="systemd"):
    return {"init": init, "config_test": f"$ nginx -t\n{test_output}",
            "known_good": {"recorded": 5, "files": 3, "drift": list(items)}}


def test_only_the_drifted_file_the_config_test_names_is_restored():
    evidence = _evidence("rc 1\nunknown directive \"x\" in /etc/nginx/nginx.conf:3", _item("/etc/nginx/nginx.conf"),
                         _item("/etc/nginx/conf.d/old.conf", "missing"))
    planned = known_good_plan.plan("nginx", "nginx is down", evidence, NGINX, tried=False)
    assert [c["command"].split()[-1] for c in planned["commands"]] == ["/etc/nginx/nginx.conf", "nginx.service"]
    assert planned["commands"][-1]["command"] == "systemctl restart nginx.service"
    assert [r["path"] for r in planned["restored"]] == ["/etc/nginx/nginx.conf"]


def test_a_failed_config_test_naming_no_file_restores_every_drifted_one():
    evidence = _evidence("rc 1\nsomething is wrong", _item("/etc/nginx/a.conf"), _item("/etc/nginx/b.conf", "missing"),
                         init="sysv")
    planned = known_good_plan.plan("nginx", "nginx is down", evidence, NGINX, tried=False)
    assert [r["path"] for r in planned["restored"]] == ["/etc/nginx/a.conf", "/etc/nginx/b.conf"]
    assert planned["commands"][-1]["command"] == "service nginx restart"


def test_a_new_file_or_one_without_a_staged_copy_is_never_restored():
    unstaged = dict(_item("/etc/nginx/nginx.conf"), restore="")
    evidence = _evidence("rc 1\nin /etc/nginx/nginx.conf", unstaged, _item("/etc/nginx/conf.d/new.conf", "new"))
    assert known_good_plan.plan("nginx", "down", evidence, NGINX, tried=False) is None


def test_the_human_is_told_each_file_where_its_bad_version_is_and_the_diff():
    package = "/etc/nginx/nginx.conf: differs from the package's default (nginx-common)"
    evidence = _evidence("rc 1\nin /etc/nginx/nginx.conf", dict(_item("/etc/nginx/nginx.conf"), package=package))
    text = known_good_plan.plan("nginx", "down", evidence, NGINX, tried=False)["diagnosis"]
    assert "/etc/nginx/nginx.conf drifted from its last known-good version" in text
    assert "sha256 " + "cd" * 32 in text and "-good\n+bad" in text and "nginx-common" in text
    record = known_good_plan.journal_record("run1", "nginx", 1, known_good_plan.plan("nginx", "down", evidence, NGINX,
                                                                                     tried=False))
    assert record["kind"] == "known_good" and record["restored"][0]["aside"] == "cd" * 32


def _drift(path, removed, added):
    return dict(_item(path), diff=f"--- known-good {path}\n+++ now {path}\n@@ -1 +1 @@\n-{removed}\n+{added}")


def test_a_drift_that_added_a_security_setting_is_never_restored_ahead_of_a_human():
    # A team turned on certificate verification; the failure is the expired certificate.
    # Going back to known-good would heal the app by no longer verifying its database.
    tightened = _drift("/etc/sentinel-app/app.conf", "dsn = host=127.0.0.1 dbname=app",
                       "dsn = host=127.0.0.1 dbname=app sslmode=verify-full sslrootcert=/etc/ca.crt")
    evidence = _evidence("rc 1\nerror in /etc/sentinel-app/app.conf", tightened)
    assert known_good_plan.plan("app", "app.conf: certificate verify failed", evidence, NGINX, tried=False) is None


def test_a_drift_of_a_plain_value_is_restored():
    moved = _drift("/etc/redis/redis.conf", "logfile /var/log/redis/redis-server.log", "logfile /var/log/redis-server.log")
    evidence = _evidence("rc 1\ncan't open /etc/redis/redis.conf logfile", moved)
    planned = known_good_plan.plan("redis", "redis.conf: can't open the log file", evidence, NGINX, tried=False)
    assert [r["path"] for r in planned["restored"]] == ["/etc/redis/redis.conf"]


def test_a_diff_that_cannot_be_read_whole_is_never_restored_ahead():
    for diff in ("binary file changed", "--- a\n+++ b\n-x\n+y\n... (diff cut at 4000 characters)", ""):
        evidence = _evidence("rc 1\nin /etc/nginx/nginx.conf", dict(_item("/etc/nginx/nginx.conf"), diff=diff))
        assert known_good_plan.plan("nginx", "nginx is down", evidence, NGINX, tried=False) is None, diff


def test_security_words_are_whole_words_of_the_added_lines_only():
    assert known_good_plan.weakens_security("--- a\n+++ b\n-x\n+PasswordAuthentication no")
    assert known_good_plan.weakens_security("--- a\n+++ b\n-x\n+allow 10.0.0.0/8;")
    assert not known_good_plan.weakens_security("--- a\n+++ b\n-ssl on\n+port 5433")  # only what the drift added
    assert not known_good_plan.weakens_security("--- a\n+++ b\n-x\n+worker_connections 512")
