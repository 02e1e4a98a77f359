"""When a drifted file changed and what the host's records say of that window: package
operations (dpkg, apt) and privileged commands (sudo, su), bounded and redacted."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ansible_collections.sentinel.remediation.plugins.module_utils import change_records, known_good

HOUR = 3600
NOW = float(int(time.time()))
SINCE = NOW - 2 * HOUR            # the last healthy pass


def _local(moment: float, form: str) -> str:
    return time.strftime(form, time.localtime(moment))


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _logs(tmp_path: Path) -> dict:
    inside, before = NOW - HOUR, SINCE - HOUR
    dpkg = tmp_path / "dpkg.log"
    dpkg.write_text(
        f"{_local(before, '%Y-%m-%d %H:%M:%S')} upgrade redis-server:amd64 5:7.0.1-1 5:7.0.2-1\n"
        f"{_local(inside, '%Y-%m-%d %H:%M:%S')} status half-configured redis-server:amd64 5:7.0.3-1\n"
        f"{_local(inside, '%Y-%m-%d %H:%M:%S')} upgrade redis-server:amd64 5:7.0.2-1 5:7.0.3-1\n"
        f"{_local(inside + 5, '%Y-%m-%d %H:%M:%S')} conffile /etc/redis/redis.conf install\n"
        f"{_local(inside + 9, '%Y-%m-%d %H:%M:%S')} configure redis-server:amd64 5:7.0.3-1 <none>\n"
        + "".join(f"{_local(inside + 20 + n, '%Y-%m-%d %H:%M:%S')} configure other{n}:amd64 1 <none>\n"
                  for n in range(8)))
    apt = tmp_path / "history.log"
    apt.write_text(
        f"\nStart-Date: {_local(before, '%Y-%m-%d  %H:%M:%S')}\nCommandline: apt-get install -y curl\n"
        f"Install: curl:amd64 (7.88.1-10)\nEnd-Date: {_local(before + 9, '%Y-%m-%d  %H:%M:%S')}\n"
        f"\nStart-Date: {_local(inside, '%Y-%m-%d  %H:%M:%S')}\nCommandline: apt-get upgrade -y redis-server\n"
        f"Requested-By: alice (1000)\nUpgrade: redis-server:amd64 (5:7.0.2-1, 5:7.0.3-1)\n"
        f"End-Date: {_local(inside + 30, '%Y-%m-%d  %H:%M:%S')}\n")
    auth = tmp_path / "auth.log"
    auth.write_text(
        f"{_local(before, '%b %e %H:%M:%S')} web1 sudo:    bob : TTY=pts/0 ; PWD=/root ; USER=root ; "
        "COMMAND=/usr/bin/true\n"
        f"{_local(inside + 60, '%b %e %H:%M:%S')} web1 sudo:  alice : TTY=pts/1 ; PWD=/home/alice ; USER=root ; "
        "COMMAND=/usr/bin/sed -i s/^port 6379/port 6380/ /etc/redis/redis.conf\n"
        f"{_local(inside + 61, '%b %e %H:%M:%S')} web1 sshd[77]: Accepted publickey for alice\n"
        f"{_local(inside + 62, '%Y-%m-%dT%H:%M:%S')}.123456{time.strftime('%z', time.localtime(inside))[:3]}:"
        f"{time.strftime('%z', time.localtime(inside))[3:]} web1 sudo[90]:  alice : TTY=pts/1 ; PWD=/ ; USER=root ; "
        "COMMAND=/usr/bin/redis-cli -a s3cretpass CONFIG SET requirepass s3cretpass\n"
        f"{_local(inside + 63, '%b %e %H:%M:%S')} web1 su[91]: (to root) alice on pts/1\n"
        # the noise: PAM's sessions around each command, and the collection's own become
        f"{_local(inside + 64, '%b %e %H:%M:%S')} web1 sudo: pam_unix(sudo:session): session opened for user root\n"
        f"{_local(inside + 65, '%b %e %H:%M:%S')} web1 su[92]: pam_unix(su-l:session): session closed for user root\n"
        f"{_local(inside + 66, '%b %e %H:%M:%S')} web1 sudo: sentinel : TTY=pts/2 ; PWD=/home/sentinel ; USER=root ; "
        "COMMAND=/bin/sh -c echo BECOME-SUCCESS-abcdef ; /usr/bin/python3 /tmp/AnsiballZ_service_health.py\n")
    return {"dpkg": [str(dpkg)], "apt": [str(apt)], "auth": [str(auth)]}


def test_the_windows_package_operations_and_privileged_commands_those_naming_the_file_first(tmp_path):
    lines = change_records.window_records(SINCE, NOW, ["/etc/redis/redis.conf"], ["redis-server"],
                                          now=NOW, sources=_logs(tmp_path))
    text = "\n".join(lines)
    inside = NOW - HOUR
    # dpkg: the package's operations and the conffile decision in the window, at their UTC times
    assert f"{_iso(inside)} dpkg upgrade redis-server:amd64 5:7.0.2-1 5:7.0.3-1" in lines
    assert f"{_iso(inside + 5)} dpkg conffile /etc/redis/redis.conf install" in lines
    assert f"{_iso(inside + 9)} dpkg configure redis-server:amd64 5:7.0.3-1 <none>" in lines
    # status lines are noise; before the window is out; the others are bounded and counted
    assert "half-configured" not in text and "5:7.0.1-1" not in text and "curl" not in text
    assert sum(1 for line in lines if " dpkg " in line) == change_records.LINES
    assert "(6 more in the window)" in lines
    # apt: who asked, what ran, what it did
    assert (f"{_iso(inside)} apt commandline: apt-get upgrade -y redis-server; requested-by: alice (1000); "
            "upgrade: redis-server:amd64 (5:7.0.2-1, 5:7.0.3-1)") in lines
    # sudo and su, both time formats; a secret on a command line is redacted; sshd is not a privileged command
    assert (f"{_iso(inside + 60)} sudo: alice : TTY=pts/1 ; PWD=/home/alice ; USER=root ; "
            "COMMAND=/usr/bin/sed -i s/^port 6379/port 6380/ /etc/redis/redis.conf [auth.log]") in lines
    assert any(line.startswith(f"{_iso(inside + 62)} sudo[90]: alice") for line in lines), lines
    assert f"{_iso(inside + 63)} su[91]: (to root) alice on pts/1 [auth.log]" in lines
    assert "s3cretpass" not in text and "sshd" not in text and "bob" not in text
    assert "session" not in text and "BECOME-SUCCESS" not in text
    assert len(text.encode()) <= change_records.TOTAL_BYTES + 60


def test_without_an_auth_log_the_journal_is_asked_for_the_window(tmp_path):
    asked = []

    def run(argv):
        asked.append(argv)
        return 0, f"{_iso(NOW - 60).replace('Z', '+0000')} web1 sudo[5]:  carol : USER=root ; COMMAND=/usr/bin/vi\n"
    lines = change_records.privileged_commands(SINCE, NOW, [], logs=[str(tmp_path / "absent")], run=run, now=NOW)
    assert lines == [f"{_iso(NOW - 60)} sudo[5]: carol : USER=root ; COMMAND=/usr/bin/vi [journal]"]
    assert asked[0][:2] == ["journalctl", "--no-pager"] and f"@{int(SINCE) - 2}" in asked[0]
    assert "SYSLOG_IDENTIFIER=sudo" in asked[0] and "SYSLOG_IDENTIFIER=su" in asked[0]


def test_a_log_reached_through_a_link_another_account_planted_is_not_read(tmp_path):
    logs = _logs(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = shared / "auth.log"
    os.symlink(logs["auth"][0], link)
    os.lchown(link, 65534, 65534)
    assert change_records.privileged_commands(SINCE, NOW, [], logs=[str(link)], now=NOW) == []


def test_a_files_owner_from_dpkg(tmp_path):
    def run(argv):
        return (0, "redis-server: /etc/default/redis-server\n") if argv[-1] == "/etc/default/redis-server" \
            else (1, "")
    owners = change_records.owning_packages(["/etc/redis/redis.conf", "/etc/default/redis-server", "/etc/x"],
                                            {"/etc/redis/redis.conf": ("redis-tools", "abc")}, run)
    assert owners == {"/etc/redis/redis.conf": "redis-tools", "/etc/default/redis-server": "redis-server"}


def test_a_drifted_file_says_when_it_changed_and_the_window_since_the_last_seen_good(tmp_path):
    conf = tmp_path / "etc" / "app"
    conf.mkdir(parents=True)
    (conf / "app.conf").write_text("port 6379\n")
    defn = {"name": "app", "units": [], "config_paths": [str(conf)], "config_test": []}
    root = str(tmp_path / "kg")
    baselines = known_good.Baselines(root)
    current = known_good.fingerprint(known_good.watched_files(defn, "sysv", lambda argv: (1, "")))
    baselines.record("app", current, now=SINCE - HOUR)
    baselines.record("app", current, now=SINCE)      # unchanged: only the pass time moves
    (conf / "app.conf").write_text("port 6380\n")
    changed = NOW - HOUR + 60
    os.utime(conf / "app.conf", (changed, changed))
    logs = _logs(tmp_path)
    auth = tmp_path / "auth.log"
    auth.write_text(auth.read_text().replace("/etc/redis/redis.conf", str(conf / "app.conf")))
    now = known_good.fingerprint(known_good.watched_files(defn, "sysv", lambda argv: (1, "")))
    drift = baselines.drift("app", now, conffiles={}, at=NOW, record_sources=logs)
    [item] = drift["drift"]
    st = os.lstat(conf / "app.conf")
    assert item["mtime"] == _iso(changed) and item["ctime"] == _iso(st.st_ctime)
    assert drift["last_seen_good"] == _iso(SINCE)
    assert any(str(conf / "app.conf") in line and "sudo: alice" in line for line in drift["window_records"])
    assert "s3cretpass" not in json.dumps(drift)
    # a baseline with no window records keeps the section small: no empty key
    quiet = baselines.drift("app", now, conffiles={}, at=NOW, record_sources={"dpkg": [], "apt": [], "auth": []})
    assert "window_records" not in quiet and quiet["last_seen_good"] == _iso(SINCE)


def test_every_log_read_is_one_the_policy_lets_a_plan_read():
    """The host reads only what a planner's read-only command may read too: no secret store."""
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy
    loaded = policy.load_policy(None)
    for path in change_records.DPKG_LOGS + change_records.APT_HISTORY + change_records.AUTH_LOGS:
        assert policy.classify(f"tail -n 20 {path}", loaded)["verdict"] == "allow", path
