# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduled jobs that act on a service, read from real crontab, script and timer files
(in a temporary tree standing for /etc/cron.d, /etc/cron.daily, /etc/systemd/system...)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import scheduled_jobs

POSTGRES = {"name": "postgresql", "units": ["postgresql@15-main.service"], "processes": ["postgres"],
            "config_paths": ["/etc/postgresql/15/main"], "data_paths": ["/var/lib/postgresql/15/main"],
            "runtime_paths": ["/run/postgresql"], "log_paths": ["/var/log/postgresql"], "pid_files": [], "paths": []}
SSH = {"name": "ssh", "units": ["ssh.service"], "processes": ["sshd"], "config_paths": ["/etc/ssh"],
       "runtime_paths": ["/run/sshd"]}


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A tree of job files; the module's directories point into it."""
    dirs = {name: tmp_path / name for name in ("crontab", "cron.d", "spool", "cron.daily", "system", "bin")}
    for path in dirs.values():
        path.mkdir()
    monkeypatch.setattr(scheduled_jobs, "CRONTABS", (str(dirs["crontab"] / "crontab"),))
    monkeypatch.setattr(scheduled_jobs, "CRONTAB_DIRS", (str(dirs["cron.d"]), str(dirs["spool"])))
    monkeypatch.setattr(scheduled_jobs, "SCRIPT_DIRS", (str(dirs["cron.daily"]),))
    monkeypatch.setattr(scheduled_jobs, "TIMER_DIRS", (str(dirs["system"]),))
    monkeypatch.setattr(scheduled_jobs, "UNIT_DIRS", (str(dirs["system"]),))
    return dirs


def _script(path, *lines):
    path.write_text("#!/bin/sh\n" + "\n".join(lines) + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_clean_up_job_under_the_directory_holding_the_services_socket_is_shown_with_its_script(host):
    script = _script(host["bin"] / "clean-stale-runtime", "# free disk space",
                     'echo "$(date) clean-up" >> /var/log/clean.log',
                     "find /tmp /var/tmp /run -xdev -mindepth 2 -mtime +7 ! -type d -print -delete")
    (host["cron.d"] / "clean-stale-runtime").write_text(f"# OPS-2290\n10 4 * * * root {script}\n")
    (host["cron.d"] / "e2scrub_all").write_text("30 3 * * 0 root test -e /run/systemd/system || /sbin/e2scrub_all\n")
    jobs = scheduled_jobs.by_file(POSTGRES)
    text = jobs[str(host["cron.d"] / "clean-stale-runtime")]
    assert text.startswith("changed 20")
    assert f"2: 10 4 * * * root {script}" in text
    assert "-mtime +7 ! -type d -print -delete" in text and "clean.log" not in text
    # naming /run/systemd/system, which holds nothing of postgres, without acting on it: not shown
    assert str(host["cron.d"] / "e2scrub_all") not in jobs


def test_a_reaper_that_finds_the_services_processes_on_one_line_and_kills_them_on_the_next(host):
    script = _script(host["bin"] / "reap", "for pid in $(pgrep -O 28800 -x sshd); do", '  kill "$pid"', "done")
    (host["crontab"] / "crontab").write_text(f"SHELL=/bin/sh\n*/15 * * * * root {script}\n")
    text = scheduled_jobs.by_file(SSH)[str(host["crontab"] / "crontab")]
    assert "pgrep -O 28800 -x sshd" in text and 'kill "$pid"' in text
    # the same loop about another program is not this service's
    assert scheduled_jobs.by_file(dict(SSH, processes=["sshd-other"], name="sshx", units=["sshx.service"])) == {}


def test_a_users_crontab_a_daily_script_and_a_local_timer_that_act_on_the_service(host):
    (host["spool"] / "postgres").write_text("0 2 * * * rsync -a --delete /var/lib/postgresql/15/main/ /backup/pg/\n")
    _script(host["cron.daily"] / "restart-db", "systemctl restart postgresql@15-main.service")
    (host["system"] / "vacuum.timer").write_text("[Timer]\nOnCalendar=daily\nUnit=pg-vacuum.service\n")
    (host["system"] / "pg-vacuum.service").write_text(
        "[Service]\nExecStart=/usr/bin/pkill -HUP postgres\nUser=root\n")
    jobs = scheduled_jobs.by_file(POSTGRES)
    assert "rsync -a --delete /var/lib/postgresql/15/main/" in jobs[str(host["spool"] / "postgres")]
    assert "systemctl restart postgresql@15-main.service" in jobs[str(host["cron.daily"] / "restart-db")]
    timer = jobs[str(host["system"] / "vacuum.timer")]
    assert f"runs {host['system'] / 'pg-vacuum.service'}" in timer and "pkill -HUP postgres" in timer


def test_jobs_that_only_mention_the_service_or_act_elsewhere_are_left_out(host):
    (host["cron.d"] / "report").write_text("0 6 * * * root echo postgres is fine | mail -s report ops\n"
                                           "5 6 * * * root find /var/cache/man -mtime +6 -delete\n"
                                           "# 0 1 * * * root rm -rf /run/postgresql\n")
    (host["cron.d"] / ".hidden").write_text("* * * * * root rm -f /run/postgresql/x\n")
    assert scheduled_jobs.by_file(POSTGRES) == {}


def test_the_most_recently_changed_job_file_comes_first_and_the_output_is_bounded(host):
    for index in range(12):
        path = host["cron.d"] / f"job{index:02d}"
        path.write_text("".join(f"{m} * * * * root rm -f /run/postgresql/stale{m}\n" for m in range(20)))
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    jobs = scheduled_jobs.by_file(POSTGRES)
    assert len(jobs) == 8 and list(jobs)[0].endswith("job11")
    assert all(len(text.splitlines()) <= 1 + 12 for text in jobs.values())


def test_a_shared_directory_a_definition_names_as_its_own_counts_only_where_a_job_acts_on_it(host):
    nginx = {"name": "nginx", "units": ["nginx.service"], "processes": ["nginx"], "config_paths": ["/etc/nginx"],
             "runtime_paths": ["/run/nginx.pid"], "paths": ["/run"]}
    _script(host["cron.daily"] / "dpkg", "if [ -d /run/systemd/system ]; then", "  exit 0", "fi",
            "/usr/libexec/dpkg/dpkg-db-backup")
    assert scheduled_jobs.by_file(nginx) == {}
    (host["cron.d"] / "sweep").write_text("0 4 * * * root find /run -mtime +7 -delete\n")
    assert list(scheduled_jobs.by_file(nginx)) == [str(host["cron.d"] / "sweep")]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the crontab to another account needs root")
def test_a_users_crontab_is_not_followed_into_a_script_its_owner_cannot_read(host):
    """The module reads as root: a crontab line an unprivileged account wrote must not make it
    read a root-only script for that account (only lines the account could read are shown)."""
    secret = _script(host["bin"] / "root-only", "systemctl restart postgresql@15-main.service")
    os.chmod(secret, 0o700)
    readable = _script(host["bin"] / "shared", "systemctl restart postgresql@15-main.service")
    crontab = host["spool"] / "alice"
    crontab.write_text(f"0 1 * * * {secret}\n0 2 * * * {readable}\n")
    os.chown(crontab, 4242, 4242)
    text = scheduled_jobs.by_file(POSTGRES)[str(crontab)]
    assert f"{readable}:2: systemctl restart" in text and "root-only:" not in text
    os.chown(crontab, 0, 0)  # root's own crontab: root reads it all
    assert "root-only:2: systemctl restart" in scheduled_jobs.by_file(POSTGRES)[str(crontab)]
