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


def test_a_file_without_a_staged_copy_is_never_restored():
    unstaged = dict(_item("/etc/nginx/nginx.conf"), restore="")
    evidence = _evidence("rc 1\nin /etc/nginx/nginx.conf", unstaged)
    assert known_good_plan.plan("nginx", "down", evidence, NGINX, tried=False) is None


def test_drift_the_failure_does_not_name_goes_back_to_known_good_whole():
    # No config test failed and nothing names a file: the last healthy state is still the first fix.
    evidence = _evidence("rc 0\nsyntax is ok", _item("/etc/nginx/a.conf"), _item("/etc/nginx/b.conf", "missing"),
                         _item("/etc/nginx/conf.d/new.conf", "new"))
    planned = known_good_plan.plan("nginx", "nothing answers on port 80", evidence, NGINX, tried=False)
    assert [c["command"] for c in planned["commands"]] == [
        f"cp -p {_item('x')['restore']} /etc/nginx/a.conf", f"cp -p {_item('x')['restore']} /etc/nginx/b.conf",
        "rm -f /etc/nginx/conf.d/new.conf", "systemctl restart nginx.service"]
    assert "/etc/nginx/conf.d/new.conf is new since the last healthy pass; took it out" in planned["diagnosis"]
    assert "sha256 " + "cd" * 32 in planned["diagnosis"]


def test_a_named_drift_still_goes_first_alone():
    evidence = _evidence("rc 0", _item("/etc/nginx/a.conf"), _item("/etc/nginx/conf.d/new.conf", "new"))
    planned = known_good_plan.plan("nginx", "error in /etc/nginx/conf.d/new.conf line 1", evidence, NGINX, tried=False)
    assert [c["command"] for c in planned["commands"]] == ["rm -f /etc/nginx/conf.d/new.conf",
                                                           "systemctl restart nginx.service"]


def test_a_new_unit_drop_in_is_taken_out_and_systemd_reloaded_before_the_restart():
    path = "/etc/systemd/system/nginx.service.d/20-hook.conf"
    item = dict(_item(path, "new"), diff=f"--- known-good {path}\n+++ now {path}\n@@ -0,0 +1,2 @@\n+[Service]\n"
                                         "+ExecStartPre=/usr/local/sbin/render-upstreams")
    planned = known_good_plan.plan("nginx", "nginx.service failed", _evidence("rc 0", item), NGINX, tried=False)
    assert [c["command"] for c in planned["commands"]] == [
        f"rm -f {path}", "systemctl daemon-reload", "systemctl restart nginx.service"]
    assert planned["restored"][0]["change"] == "new" and planned["restored"][0]["aside"] == "cd" * 32


def test_a_new_file_whose_bytes_were_not_kept_is_never_taken_out():
    evidence = _evidence("rc 0", dict(_item("/etc/nginx/conf.d/big.conf", "new"), aside=""))
    assert known_good_plan.plan("nginx", "down", evidence, NGINX, tried=False) is None


def _new(path, *lines):
    body = "\n".join("+" + line for line in lines)
    return dict(_item(path, "new"), diff=f"--- known-good {path}\n+++ now {path}\n@@ -0,0 +1,{len(lines)} @@\n{body}")


def test_a_drift_that_holds_the_service_is_the_owners_and_nothing_is_restored():
    unit = "/etc/systemd/system/postgresql@15-main.service.d/50-freeze.conf"
    flag = "/etc/postgresql/15/main/FROZEN"
    freeze = _new(unit, "[Unit]", "# no start while the copy runs", f"ConditionPathExists=!{flag}")
    marker = _new(flag, "Frozen for the copy of the data directory.")
    other = _item("/etc/postgresql/15/main/postgresql.conf")
    evidence = _evidence("rc 0", freeze, marker, other)
    held = known_good_plan.holds("postgres is down", evidence)
    assert set(held) == {unit, flag}
    assert "ConditionPathExists" in held[unit] and "condition names it" in held[flag]
    assert known_good_plan.plan("postgres", "postgres is down", evidence, NGINX, tried=False) is None


def test_refusals_and_do_not_start_markers_are_holds_an_ordinary_start_step_is_not():
    refusal = _new("/etc/systemd/system/app.service.d/10-stop.conf", "[Service]", "ExecStartPre=/bin/false")
    guard = _new("/etc/systemd/system/app.service.d/11-stop.conf", "[Service]", "ExecStartPre=/bin/sh -c 'exit 1'")
    note = _new("/etc/app/MAINTENANCE", "Do not start the app until the migration is done (OPS-1)")
    hook = _new("/etc/systemd/system/app.service.d/20-hook.conf", "[Service]", "ExecStartPre=/usr/local/sbin/render")
    held = known_good_plan.holds("app is down", _evidence("rc 0", refusal, guard, note, hook))
    assert set(held) == {refusal["path"], guard["path"], note["path"]}
    # A path a unit condition names in the status is a hold too, whatever it says.
    flag = _new("/etc/app/flag", "x")
    status = dict(_evidence("rc 0", flag), status="Condition check resulted in ConditionPathExists=!/etc/app/flag")
    assert set(known_good_plan.holds("down", status)) == {"/etc/app/flag"}


def test_a_new_file_that_adds_a_security_setting_stays_for_a_human():
    tls = _new("/etc/nginx/conf.d/tls.conf", "ssl_verify_client on;")
    assert known_good_plan.plan("nginx", "down", _evidence("rc 0", tls), NGINX, tried=False) is None


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


def test_a_hold_is_marked_in_the_evidence_for_the_model_and_the_human():
    freeze = _new("/etc/systemd/system/nginx.service.d/50-freeze.conf", "[Unit]", "ConditionPathExists=!/etc/nginx/FROZEN")
    evidence = _evidence("rc 0", freeze, _item("/etc/nginx/nginx.conf"))
    assert set(known_good_plan.mark_holds("down", evidence)) == {freeze["path"]}
    (held,) = evidence["known_good"]["holds"]
    assert held["path"] == freeze["path"] and "owner's hold" in held["note"]
    plain = _evidence("rc 0", _item("/etc/nginx/nginx.conf"))
    assert known_good_plan.mark_holds("down", plain) == {} and "holds" not in plain["known_good"]


def test_a_hold_waiting_on_a_file_whose_writer_is_gone_says_the_file_is_stale_and_the_hold_stays():
    guard = _new("/etc/systemd/system/db.service.d/10-guard.conf", "[Unit]", "ConditionPathExists=!/var/lib/db/IN_PROGRESS")
    evidence = _evidence("rc 0", guard)
    evidence["conditions"] = {"ConditionPathExists=!/var/lib/db/IN_PROGRESS":
                              "NOT met now: /var/lib/db/IN_PROGRESS exists (file); writer gone: pid 41877 is not running"}
    assert set(known_good_plan.mark_holds("down", evidence)) == {guard["path"]}
    (held,) = evidence["known_good"]["holds"]
    assert "leave this file in place" in held["note"] and "(/var/lib/db/IN_PROGRESS) is stale state" in held["note"]
    assert "writer_records" in held["note"] and "escalate" in held["note"]
    # The same hold while its writer runs (or names no process) keeps the plain note.
    evidence["conditions"] = {"ConditionPathExists=!/var/lib/db/IN_PROGRESS": "NOT met now: /var/lib/db/IN_PROGRESS exists"}
    known_good_plan.mark_holds("down", evidence)
    assert evidence["known_good"]["holds"][0]["note"] == known_good_plan.HOLD_NOTE


def test_a_comment_on_a_changed_line_is_not_a_security_setting():
    port = "--- a\n+++ b\n@@ -64 +64 @@\n-port = 5432\t\t\t\t# (change requires restart)\n" \
           "+port = 5433\t\t\t\t# (change requires restart)"
    assert not known_good_plan.weakens_security(port)
    assert not known_good_plan.weakens_security("--- a\n+++ b\n+# the auth team asked for this\n+workers = 4")
    assert known_good_plan.weakens_security("--- a\n+++ b\n+ssl = on  # verify clients")
    assert known_good_plan.weakens_security("--- a\n+++ b\n+dsn = host=db sslmode=verify-full")


def test_a_file_named_for_security_is_a_humans_whatever_its_lines_say():
    hba = "--- known-good /etc/postgresql/15/main/pg_hba.conf\n+++ now /etc/postgresql/15/main/pg_hba.conf\n" \
          "@@ -0,0 +1 @@\n+host  sentinelapp  sentinelapp  127.0.0.1/32  reject  # SEC-2291"
    assert known_good_plan.weakens_security(hba)
    assert known_good_plan.weakens_security(hba.replace("reject  # SEC-2291", "md5").replace("pg_hba", "pg_access"))
    plain = "--- known-good /etc/redis/redis.conf\n+++ now /etc/redis/redis.conf\n@@ -1 +1 @@\n-logfile /a\n+logfile /b"
    assert not known_good_plan.weakens_security(plain)


def test_the_owner_s_note_keeps_known_good_from_going_back_too():
    evidence = _evidence("rc 0", _item("/etc/nginx/conf.d/new.conf", "new"))
    assert known_good_plan.plan("nginx", "nginx is down", evidence, NGINX, tried=False) is not None
    evidence["operator_notes"] = {"/etc/motd": "*** WEB-12 ***\nnginx is stopped ON PURPOSE for the migration."}
    assert known_good_plan.plan("nginx", "nginx is down", evidence, NGINX, tried=False) is None
    evidence["operator_notes"] = {"/etc/motd": "nginx serves the status pages"}  # a note that holds nothing
    assert known_good_plan.plan("nginx", "nginx is down", evidence, NGINX, tried=False) is not None
