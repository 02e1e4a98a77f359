# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a service runs as and runs, in its known-good baseline: its accounts' group memberships
and the mode and owner of its unit's programs and its directories, recorded while healthy and
compared at an incident with the values to put back. Real files, the real account database."""
from __future__ import annotations

import grp
import json
import os
import pwd
import stat

from ansible_collections.sentinel.remediation.plugins.module_utils import known_good

ME = pwd.getpwuid(os.getuid()).pw_name


def _service(tmp_path):
    conf = tmp_path / "etc" / "app"
    conf.mkdir(parents=True)
    (conf / "app.conf").write_text("listen 80;\n")
    hook = tmp_path / "sbin" / "render-upstreams"
    hook.parent.mkdir()
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    run_dir = tmp_path / "run" / "app"
    run_dir.mkdir(parents=True)
    run_dir.chmod(0o750)
    defn = {"name": "app", "units": ["app.service"], "config_paths": [str(conf)], "config_test": [],
            "runtime_paths": [str(run_dir)], "processes": []}
    return defn, hook, run_dir


def _systemctl(hook):
    """`systemctl show` of a unit whose drop-in adds an ExecStartPre (systemd merges drop-ins)."""
    def run(argv):
        if argv[:2] != ["systemctl", "show"]:
            return 1, ""
        if "User" in argv[argv.index("-p") + 1].split(","):
            return 0, ("User=%s\nExecStartPre={ path=%s ; argv[]=%s ; ignore_errors=no ; start_time=[n/a] ; "
                       "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nExecStart={ path=/bin/sh ; "
                       "argv[]=/bin/sh -c true ; ignore_errors=no }\nRuntimeDirectory=\n" % (ME, hook, hook))
        return 0, ""
    return run


def _pass(defn, root, healthy, hook):
    return known_good.record_or_compare(defn, healthy, str(root), "systemd", _systemctl(hook))


def test_a_healthy_pass_records_the_accounts_groups_and_the_programs_and_directories_modes(tmp_path):
    defn, hook, run_dir = _service(tmp_path)
    root = tmp_path / "kg"
    first = _pass(defn, root, True, hook)
    assert first.get("runs_as") is True
    running = known_good.Baselines(str(root)).manifest("app")["runs_as"]
    if ME != "root":  # root's memberships are never the service's
        assert running["accounts"] == {ME: known_good.memberships(ME)}
    assert running["paths"][str(hook)]["role"] == "program" and running["paths"][str(hook)]["mode"] == "0755"
    assert running["paths"]["/bin/sh"]["role"] == "program"
    assert running["paths"][str(run_dir)] == dict(role="directory", mode="0750", uid=os.getuid(), gid=os.getgid(),
                                                  owner="%s:%s" % (ME, grp.getgrgid(os.getgid()).gr_name))
    assert "runs_as" not in _pass(defn, root, True, hook)  # unchanged: nothing rewritten


def test_root_is_never_recorded_as_the_services_account(tmp_path):
    defn, hook, _run_dir = _service(tmp_path)
    running = known_good.runs_as(dict(defn, user="root"), "sysv", lambda argv: (1, ""))
    assert "root" not in running["accounts"]


def test_a_program_that_lost_its_exec_bit_is_drift_with_the_mode_to_put_back(tmp_path):
    defn, hook, run_dir = _service(tmp_path)
    root = tmp_path / "kg"
    _pass(defn, root, True, hook)
    hook.chmod(0o644)
    drift = _pass(defn, root, False, hook)
    assert drift["drift"] == []  # the configuration did not change
    [item] = drift["runs_as"]
    assert item["path"] == str(hook) and item["change"] == "attributes" and item["role"] == "program"
    assert item["mode"] == "0755" and "owner" not in item
    assert item["now"].startswith("mode 0644") and item["known_good"].startswith("mode 0755")
    assert stat.S_IMODE(os.stat(hook).st_mode) == 0o644  # the comparison changes nothing
    # The baseline is never rewritten by a failing pass, and the next look says the same.
    assert _pass(defn, root, False, hook)["runs_as"] == drift["runs_as"]
    hook.chmod(0o755)
    assert "runs_as" not in _pass(defn, root, False, hook)


def test_a_lost_group_membership_is_drift_naming_the_group_to_put_back(tmp_path):
    defn, hook, _run_dir = _service(tmp_path)
    root = tmp_path / "kg"
    baselines = known_good.Baselines(str(root))
    now = known_good.memberships(ME)
    # The account was in one more group while healthy (the identity sync took it away).
    baselines.record("app", {}, running={"accounts": {ME: sorted(now + ["sentinel-kg-lost"])}, "paths": {}})
    [item] = known_good.record_or_compare(defn, False, str(root), "systemd", _systemctl(hook))["runs_as"]
    assert item == dict(account=ME, change="groups", lost=["sentinel-kg-lost"], added=[],
                        known_good=sorted(now + ["sentinel-kg-lost"]), now=now)


def test_an_owner_change_gives_the_recorded_owner_by_name_and_a_vanished_path_no_values(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    me = "%s:%s" % (ME, grp.getgrgid(os.getgid()).gr_name)
    recorded = {"paths": {str(here): dict(role="directory", mode="0755", uid=os.getuid(), gid=os.getgid(), owner=me),
                          str(gone): dict(role="directory", mode="0755", uid=os.getuid(), gid=os.getgid(), owner=me)}}
    gone.rmdir()
    os.chmod(here, 0o700)
    by_path = {i["path"]: i for i in known_good.runs_as_drift(recorded)}
    assert by_path[str(gone)]["change"] == "missing" and "mode" not in by_path[str(gone)]
    assert by_path[str(here)]["mode"] == "0755"
    # An owner recorded under ids the names no longer stand for is put back by number.
    recorded["paths"][str(here)].update(uid=4242, gid=4343, owner="%s:nogroup-renamed" % ME)
    item = {i["path"]: i for i in known_good.runs_as_drift(recorded)}[str(here)]
    assert item["owner"] == "4242:4343"
    json.dumps(item)  # travels to the controller as JSON


def test_a_directory_systemd_makes_at_each_start_is_said_to_be_expected_missing_while_stopped(tmp_path, monkeypatch):
    runtime = tmp_path / "run"
    (runtime / "sshd").mkdir(parents=True)
    monkeypatch.setattr(known_good, "_UNIT_DIRECTORIES", (("RuntimeDirectory", str(runtime) + "/"),
                                                          ("StateDirectory", str(tmp_path / "lib") + "/")))
    (tmp_path / "lib" / "sshd").mkdir(parents=True)

    def run(argv):
        return 0, "User=\nExecStart=\nRuntimeDirectory=sshd\nStateDirectory=sshd\n"
    recorded = known_good.runs_as({"name": "ssh", "units": ["ssh.service"]}, "systemd", run)
    assert recorded["paths"][str(runtime / "sshd")]["made_at_start"] is True
    assert "made_at_start" not in recorded["paths"][str(tmp_path / "lib" / "sshd")]
    (runtime / "sshd").rmdir()  # the unit stopped: systemd removed its runtime directory
    (tmp_path / "lib" / "sshd").rmdir()  # a state directory systemd keeps: its loss is news
    by_path = {i["path"]: i for i in known_good.runs_as_drift(recorded)}
    assert by_path[str(runtime / "sshd")]["change"] == "missing"
    assert "expected, not a cause" in by_path[str(runtime / "sshd")]["note"]
    assert "note" not in by_path[str(tmp_path / "lib" / "sshd")]
