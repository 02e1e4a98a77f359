"""service_evidence against real processes, files and sockets on this machine."""
from __future__ import annotations

import json
import shutil
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe, service_evidence, service_spec


def wait_until(predicate, what: str, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.02)


# --- configuration lines ------------------------------------------------------------------

@pytest.mark.parametrize("message, expected", [
    ('nginx: [emerg] unknown directive "bogus" in /etc/nginx/nginx.conf:12', ("/etc/nginx/nginx.conf", 12)),
    ("/etc/ssh/sshd_config line 5: Bad configuration option: Foo", ("/etc/ssh/sshd_config", 5)),
    ("/etc/ssh/sshd_config: line 7: Bad configuration option: Foo", ("/etc/ssh/sshd_config", 7)),
    ("Reading the configuration file, at line 3", (None, 3)),
    ('LOG:  syntax error in file "/etc/postgresql/15/main/postgresql.conf" line 4, near token "="',
     ("/etc/postgresql/15/main/postgresql.conf", 4)),
    ('FATAL:  line 4 of configuration file "/etc/app/app.conf" is bad', ("/etc/app/app.conf", 4)),
    ("LOG: line 4 of configuration file", (None, 4)),
    ("error at /srv/app/settings.ini:33: duplicate key", ("/srv/app/settings.ini", 33)),
])
def test_config_references_in_the_ways_services_name_a_line(message: str, expected: tuple) -> None:
    refs = service_evidence.config_references("noise before\n" + message + "\n")
    assert [(path, line) for path, line, _said in refs] == [expected]
    assert refs[0][2] == message.strip()


def test_a_bare_line_number_counts_only_when_the_message_is_about_configuration() -> None:
    assert service_evidence.config_references("request failed at line 3 of the handler") == []
    assert service_evidence.config_references("GET http://127.0.0.1:8080/x") == []


def _config_dir(tmp_path: Path) -> Path:
    conf = tmp_path / "etc" / "svc"
    conf.mkdir(parents=True)
    (conf / "svc.conf").write_text("".join(f"line{n} on;\n" for n in range(1, 4))
                                   + "requirepass s3cr3t-in-config\n"
                                   + "bogus_directive yes;\n"
                                   + "".join(f"line{n} on;\n" for n in range(6, 15)))
    return conf


def test_config_context_quotes_the_named_line_numbered_and_redacted(tmp_path: Path) -> None:
    conf = _config_dir(tmp_path)
    defn = service_spec.resolve({"name": "svc", "config_paths": [str(conf)]})
    said = f'svc: [emerg] unknown directive "bogus_directive" in {conf}/svc.conf:5'
    contexts = service_evidence.config_context(defn, ["", said])
    assert len(contexts) == 1
    context = contexts[0]
    assert (context["file"], context["line"], context["said"]) == (f"{conf}/svc.conf", 5, said)
    lines = context["text"].splitlines()
    assert lines[0] == "     1  line1 on;" and lines[-1] == "     9  line9 on;"
    assert ">    5  bogus_directive yes;" in lines
    assert "s3cr3t-in-config" not in context["text"] and "[REDACTED" in context["text"]


def test_a_bare_line_refers_to_the_file_of_the_config_test(tmp_path: Path) -> None:
    conf = _config_dir(tmp_path)
    defn = service_spec.resolve({"name": "svc", "config_paths": [str(conf)],
                                 "config_test": ["svc-server", "--test", str(conf / "svc.conf")]})
    redis_said = "*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line 5\n>>> 'bogus_directive yes'"
    contexts = service_evidence.config_context(defn, [redis_said])
    assert [(c["file"], c["line"]) for c in contexts] == [(str(conf / "svc.conf"), 5)]
    assert "past its end" in service_evidence.context_lines(str(conf / "svc.conf"), 99)


def test_files_outside_the_service_configuration_are_not_quoted(tmp_path: Path) -> None:
    conf = _config_dir(tmp_path)
    secret = tmp_path / "private.txt"
    secret.write_text("a\nb\nc\n")
    defn = service_spec.resolve({"name": "svc", "config_paths": [str(conf)]})
    assert service_evidence.config_context(defn, [f"error in {secret}:2"]) == []
    # a missing file, or a directory, is never quoted either
    assert service_evidence.config_context(defn, [f"error in {conf}/gone.conf:2", f"in {conf}:3"]) == []


# --- paths named in messages ---------------------------------------------------------------

def test_paths_named_in_a_text_leave_out_request_paths_and_urls() -> None:
    text = ('open() "/var/log/nginx/error.log" failed (2: No such file or directory), request: '
            '"GET /api/v1/users HTTP/1.1", referrer: "http://127.0.0.1:8080/a/b"; pid file /run/nginx.pid. '
            "/favicon.ico and /proc/1/fd/3, see /etc/nginx/sites-enabled/default:12")
    assert service_evidence.paths_named_in(text) == [
        "/var/log/nginx/error.log", "/run/nginx.pid", "/etc/nginx/sites-enabled/default"]


def test_named_paths_say_what_each_is_and_where_it_was_named(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "missing-target")
    sources = [("error", f"cannot open {tmp_path}/dir/nope.sock"),
               ("log /var/log/x.log", f"{tmp_path}/dir is here, {tmp_path}/link dangles, again {tmp_path}/dir")]
    found = service_evidence.named_paths(sources, None)
    assert list(found) == [f"{tmp_path}/dir/nope.sock", f"{tmp_path}/dir", f"{tmp_path}/link"]
    assert found[f"{tmp_path}/dir/nope.sock"]["type"] == "missing"
    assert found[f"{tmp_path}/dir/nope.sock"]["named_in"] == "error"
    assert found[f"{tmp_path}/dir"]["entries"] == ["a"]
    assert found[f"{tmp_path}/link"]["dangling"] is True
    assert len(service_evidence.named_paths(sources, None, limit=2)) == 2


# --- the service's processes ---------------------------------------------------------------

@pytest.fixture()
def service_tree(tmp_path: Path):
    """A real process tree of a service named like nothing else on this machine: a master
    (its program a symlink, so its comm is the service's name) with a zombie child and a
    sleeping child, a PID-file process of another name, and a port holder of another name."""
    name = "hm" + uuid.uuid4().hex[:8]
    program = tmp_path / name
    program.symlink_to(sys.executable)
    master = subprocess.Popen([str(program), "-c", (
        "import os, subprocess, time\n"
        "if os.fork() == 0:\n    os._exit(0)\n"  # a child nobody waits for: a zombie
        "subprocess.Popen(['sleep', '60'])\n"
        "time.sleep(60)\n"), "--password=hunter2-cmdline"])
    pidfile_proc = subprocess.Popen(["sleep", "61"])
    holder = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(1)\n"
        "print(s.getsockname()[1], flush=True)\ntime.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    port = int(holder.stdout.readline())
    (tmp_path / "svc.pid").write_text(f"{pidfile_proc.pid}\n")

    def children():
        return [p for p in host_probe.pids() if (host_probe.read_stat(p) or {}).get("ppid") == master.pid]

    wait_until(lambda: len(children()) == 2 and any(host_probe.read_stat(p)["state"] == "Z" for p in children()),
               "the zombie and the sleeping child")
    yield {"name": name, "master": master.pid, "children": sorted(children()), "pidfile": str(tmp_path / "svc.pid"),
           "pidfile_pid": pidfile_proc.pid, "holder": holder.pid, "port": port}
    for proc in (master, pidfile_proc, holder):
        proc.kill()
        proc.wait()
    for pid in children():
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_service_processes_by_name_pid_file_port_and_parent(service_tree) -> None:
    defn = service_spec.resolve({"name": service_tree["name"], "pid_files": [service_tree["pidfile"]],
                                 "ports": [service_tree["port"]]})
    processes, pids = service_evidence.service_processes(defn, "sysv", host_probe.listening_sockets())
    by_pid = {p["pid"]: p for p in processes}
    zombie, sleeping = sorted(service_tree["children"], key=lambda p: host_probe.read_stat(p)["state"] != "Z")
    expected = sorted([service_tree["master"], zombie, sleeping, service_tree["pidfile_pid"], service_tree["holder"]])
    assert pids == expected and sorted(by_pid) == expected
    assert by_pid[service_tree["master"]]["reasons"] == [f"name {service_tree['name']}"]
    assert by_pid[zombie]["state"] == "zombie" and by_pid[zombie]["ppid"] == service_tree["master"]
    assert by_pid[sleeping]["reasons"] == [f"child of {service_tree['master']}"]
    assert by_pid[service_tree["pidfile_pid"]]["reasons"] == [f"pid file {service_tree['pidfile']}"]
    assert by_pid[service_tree["holder"]]["reasons"] == [f"holds port {service_tree['port']}"]
    assert by_pid[service_tree["holder"]]["ports"] == [service_tree["port"]]
    master = by_pid[service_tree["master"]]
    assert set(master) == {"pid", "ppid", "user", "state", "start", "started", "comm", "cmdline", "ports", "reasons"}
    assert master["start"] == host_probe.read_stat(service_tree["master"])["start"]
    assert master["state"] == "sleeping" and master["comm"] == service_tree["name"]


def test_declared_process_names_replace_the_name_rule(service_tree) -> None:
    defn = service_spec.resolve({"name": "something-else", "processes": [service_tree["name"]]})
    _processes, pids = service_evidence.service_processes(defn, "sysv", [])
    assert service_tree["master"] in pids and service_tree["pidfile_pid"] not in pids


def test_collect_bounds_redacts_and_keeps_the_sections(service_tree, tmp_path: Path, no_systemd) -> None:
    conf = _config_dir(tmp_path)
    log = tmp_path / "svc.log"
    log.write_text("".join(f"entry {n} " + "y" * 60 + "\n" for n in range(300))
                   + f"[error] open() \"{tmp_path}/run/svc.sock\" failed (2: No such file or directory)\n")
    defn = service_spec.resolve({
        "name": service_tree["name"], "pid_files": [service_tree["pidfile"]], "ports": [service_tree["port"]],
        "config_paths": [str(conf)], "data_paths": [str(tmp_path)], "logs": [str(log)], "user": "nobody",
        "config_test": [sys.executable, "-c", f"print('svc: [emerg] bad in {conf}/svc.conf:5'); raise SystemExit(1)"],
        "depends_on": ["db"]})
    result = service_evidence.collect(defn, max_bytes=3000, log_lines=100, timeout=10, error="")
    ev = result["evidence"]
    assert result["truncated"] is True
    assert ev["init"] == "sysv"
    assert ev["status"] == f"$ service {service_tree['name']} status\nrc 3\n{service_tree['name']} is not running."
    assert ev["config_context"][0]["line"] == 5
    assert service_tree["master"] in ev["service_pids"]
    assert ev["processes"] and all("hunter2-cmdline" not in p["cmdline"] for p in ev["processes"])
    assert ev["named_paths"][f"{tmp_path}/run/svc.sock"]["named_in"] == f"log {log}"
    assert ev["paths"][str(conf)].endswith("; user nobody may ---") or "user nobody may" in ev["paths"][str(conf)]
    assert ev["dependencies"] == {"db": "not running (rc 3): db is not running."}
    assert ev["pid_files"][service_tree["pidfile"]].startswith(f"pid {service_tree['pidfile_pid']} is running")
    assert ev["logs"][str(log)].rstrip().endswith("(2: No such file or directory)"), ev.get("client_connections")
    assert budget_bytes(ev) <= 3000
    assert "hunter2" not in json.dumps(result)
    assert {"rm", "mv", "ln", "ls", "mkdir", "chown", "cat", "kill", service_tree["name"]} <= set(
        result["tools"]["present"] + result["tools"]["absent"])


def test_a_cut_path_state_keeps_what_the_path_is_and_its_owner(service_tree, tmp_path: Path, no_systemd) -> None:
    """Path and PID-file states are one line each, most telling first: when the budget cuts
    them, their end goes (filesystem usage), never their start (type, owner, mode)."""
    conf = _config_dir(tmp_path)
    defn = service_spec.resolve({"name": service_tree["name"], "pid_files": [service_tree["pidfile"]],
                                 "config_paths": [str(conf)], "data_paths": [str(tmp_path)], "user": "nobody"})
    ev = service_evidence.collect(defn, max_bytes=1000, log_lines=10, timeout=10, error="")["evidence"]
    cut = [text for text in ev["paths"].values() if "bytes cut" in text]
    assert cut, ev["paths"]
    assert all(text.startswith("directory, owner ") for text in cut), cut


def budget_bytes(evidence: dict) -> int:
    """What the budget counts: texts as UTF-8, structured sections as JSON."""
    total = 0
    for key, value in evidence.items():
        if key == "init":
            continue
        if isinstance(value, str):
            total += host_probe.byte_len(value)
        elif isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            total += sum(host_probe.byte_len(v) for v in value.values())
        else:
            total += service_evidence.json_len(value)
    return total


def test_take_items_keeps_whole_items_in_order_within_the_cap() -> None:
    budget = service_evidence.EvidenceBudget(10000)
    items = [{"n": n, "text": "x" * 50} for n in range(20)]
    kept = budget.take_items(items, 300)
    assert kept == items[:len(kept)] and 0 < len(kept) < 20
    assert service_evidence.json_len(kept) <= 300 and budget.truncated
    kept_map = budget.take_mapping({"/etc/app.conf": {"said": "password=abc123456"}, "b": 1}, 500)
    assert list(kept_map) == ["/etc/app.conf", "b"] and "abc123456" not in json.dumps(kept_map)


# --- systemd hosts -------------------------------------------------------------------------

@pytest.fixture()
def fake_systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """systemctl and journalctl stand-ins that answer as systemd 252 does for a failed unit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "web.conf").write_text("a;\nb;\nbroken line\nd;\n")
    (bin_dir / "systemctl").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  show) printf 'LoadState=loaded\\nActiveState=failed\\nSubState=failed\\nResult=exit-code\\n"
        "UnitFileState=enabled\\nNRestarts=0\\nExecMainStatus=1\\nFragmentPath=/lib/systemd/system/web.service\\n"
        "DropInPaths=\\nNeedDaemonReload=no\\nStatusText=\\n' ;;\n"
        '  status) echo "x web.service - Web"; echo "     Active: failed (Result: exit-code)"; exit 3 ;;\n'
        '  is-active) echo inactive; exit 3 ;;\n'
        "  *) exit 9 ;;\n"
        "esac\n")
    (bin_dir / "journalctl").write_text(
        "#!/bin/sh\n"
        f'echo "2025-11-22T10:00:00+0000 h web[9]: [emerg] bad directive in {tmp_path}/etc/web.conf:3"\n'
        'echo "2025-11-22T10:00:01+0000 h systemd[1]: web.service: Failed with result exit-code."\n'
        'echo "args: $*" >&2\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    (tmp_path / "systemd").mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "systemd"))
    return tmp_path


def test_systemd_hosts_get_unit_properties_and_the_journal(fake_systemd: Path) -> None:
    defn = service_spec.resolve({"name": "web", "config_paths": [str(fake_systemd / "etc")], "depends_on": ["db"]})
    ev = service_evidence.collect(defn, max_bytes=6000, log_lines=7, timeout=10)["evidence"]
    assert ev["init"] == "systemd"
    assert ev["unit"] == {"Id": "web.service", "LoadState": "loaded", "ActiveState": "failed", "SubState": "failed",
                          "Result": "exit-code", "UnitFileState": "enabled", "NRestarts": "0", "ExecMainStatus": "1",
                          "FragmentPath": "/lib/systemd/system/web.service", "NeedDaemonReload": "no"}
    assert ev["status"].startswith("$ systemctl status --no-pager --lines=0 web.service\nrc 3\n")
    assert ev["journal"].startswith("$ journalctl --no-pager -o short-iso -n 7 -u web.service\nrc 0\n")
    assert "Failed with result exit-code" in ev["journal"]
    assert ev["config_context"][0]["file"] == f"{fake_systemd}/etc/web.conf"
    assert ">    3  broken line" in ev["config_context"][0]["text"]
    assert ev["named_paths"][f"{fake_systemd}/etc/web.conf"]["named_in"] == "journal"
    assert ev["dependencies"] == {"db": "not running (rc 3): inactive"}


def test_tool_candidates_cover_coreutils_and_the_service_programs() -> None:
    defn = service_spec.resolve({"name": "redis-server", "processes": ["redis-server"],
                                 "config_test": ["/usr/sbin/nginx", "-t"],
                                 "checks": [{"type": "command", "argv": ["redis-cli", "ping"]}]})
    names = service_evidence.tool_candidates(defn)
    assert {"rm", "mv", "ln", "ls", "mkdir", "rmdir", "chown", "chmod", "cat", "touch", "cp", "truncate",
            "systemctl", "journalctl", "service", "lsof", "fuser", "ss", "ps", "pkill", "kill", "ip"} <= set(names)
    assert {"redis-server", "nginx", "redis-cli"} <= set(names)


def test_listening_socket_holders_are_named_in_listeners(no_systemd) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        text = service_evidence.listeners_text([port])
    assert text.startswith(f"127.0.0.1:{port} held by ")


def test_many_workers_are_described_up_to_a_bound_keeping_the_unusual(tmp_path: Path, monkeypatch) -> None:
    name = "hm" + uuid.uuid4().hex[:8]
    program = tmp_path / name
    program.symlink_to("/bin/sleep")
    monkeypatch.setattr(service_evidence, "MAX_PROCESSES", 3)
    procs = [subprocess.Popen([str(program), "60"]) for _index in range(5)]
    try:
        wait_until(lambda: all((host_probe.read_stat(p.pid) or {}).get("comm") == name for p in procs), "exec")
        os.kill(procs[4].pid, 19)  # SIGSTOP the last one
        wait_until(lambda: host_probe.read_stat(procs[4].pid)["state"] == "T", "the stop")
        described, pids = service_evidence.service_processes(service_spec.resolve({"name": name}), "sysv", [])
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert pids == sorted(p.pid for p in procs)
    assert [p["pid"] for p in described] == sorted([procs[0].pid, procs[1].pid, procs[4].pid])
    assert described[-1]["state"] == "stopped"


def test_access_note_keeps_the_largest_files_one_per_line():
    # Regression: "; user redis may rwx" appended after the file list made the redis disk-full
    # runbook miss its file ({largest_file:/var/lib/redis}).
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence
    from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import resolve_placeholders

    text = service_evidence._with_access(
        "directory, owner redis:redis, mode 0750; filesystem at /var/lib/redis: 100% used, 0 B free\n"
        "largest files:\n  16M /var/lib/redis/ballast.bin", "; user redis may rwx")
    assert text.splitlines()[0].endswith("0 B free; user redis may rwx")
    assert text.splitlines()[-1] == "  16M /var/lib/redis/ballast.bin"
    evidence = {"paths": {"/var/lib/redis": text}}
    assert resolve_placeholders("rm -f {largest_file:/var/lib/redis}", evidence, "redis-server") == \
        "rm -f /var/lib/redis/ballast.bin"


def test_the_pids_a_plan_may_signal_keep_port_holders_first() -> None:
    processes = [{"pid": 30, "ports": []}, {"pid": 40, "ports": [80]}]
    assert service_evidence.pid_priority([10, 20, 30, 40], processes) == [40, 30, 10, 20]
    assert service_evidence.pid_priority([], processes) == []


def test_a_config_line_named_only_in_the_services_log_file_is_quoted(tmp_path: Path, no_systemd: Path) -> None:
    # PostgreSQL on a SysV host: the error naming the configuration line is in its log file.
    conf = tmp_path / "etc" / "pg_hba.conf"
    conf.parent.mkdir()
    conf.write_text("# TYPE DATABASE USER ADDRESS METHOD\nlocal all postgres peer\n"
                    "host all all 127.0.0.1/32 scram-sha256\nhost all all ::1/128 scram-sha-256\n")
    log = tmp_path / "postgresql-15-main.log"
    log.write_text('2026-11-26 06:30:01 UTC [172] LOG:  invalid authentication method "scram-sha256"\n'
                   f'2026-11-26 06:30:01 UTC [172] CONTEXT:  line 3 of configuration file "{conf}"\n'
                   '2026-11-26 06:30:01 UTC [172] FATAL:  could not load pg_hba.conf\n')
    defn = service_spec.resolve({"name": "postgresql", "config_paths": [str(conf.parent)], "logs": [str(log)]})
    ev = service_evidence.collect(defn, max_bytes=6000, log_lines=20, timeout=10)["evidence"]
    context = ev["config_context"][0]
    assert context["file"] == str(conf) and context["line"] == 3
    assert ">    3  host all all 127.0.0.1/32 scram-sha256" in context["text"]


def test_recently_changed_configuration_is_shown_newest_first(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "conf.d").mkdir(parents=True)
    old = etc / "main.conf"
    old.write_text("worker_processes 2;\n")
    os.utime(old, (time.time() - 40 * 86400, time.time() - 40 * 86400))    # older than 30 days: not shown
    broken = etc / "conf.d" / "zz-broken.conf"
    broken.write_text("server { listen 80 default_server; password=hunter2 }\n")
    big = etc / "conf.d" / "big.conf"
    big.write_text("# x\n" * 1000)
    os.utime(big, (time.time() - 3600, time.time() - 3600))
    key = etc / "server.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n")
    os.utime(key, (time.time() - 7200, time.time() - 7200))
    dropin = tmp_path / "web.service.d" / "override.conf"
    dropin.parent.mkdir()
    dropin.write_text("[Service]\nExecStart=/usr/sbin/web -x\n")
    os.utime(dropin, (time.time() - 60, time.time() - 60))
    defn = service_spec.resolve({"name": "web", "config_paths": [str(etc)]})
    units = {"web.service": {"DropInPaths": str(dropin), "FragmentPath": "/lib/systemd/system/web.service"}}
    recent = service_evidence.recent_config_changes(defn, units)
    assert list(recent) == [str(broken), str(dropin), str(big)]   # newest first, at most three
    assert recent[str(broken)].startswith("modified ") and "listen 80 default_server" in recent[str(broken)]
    assert "hunter2" not in recent[str(broken)]                     # redacted
    assert "ExecStart=/usr/sbin/web -x" in recent[str(dropin)]      # the unit's drop-in counts
    # only comments: no settings to show
    assert recent[str(big)].endswith("settings (comments and blank lines left out):\n")
    four = service_evidence.recent_config_changes(defn, units, now=time.time() + 10)
    assert str(key) not in four and str(old) not in four
    service_evidence.RECENT_FILES, saved = 5, service_evidence.RECENT_FILES
    try:
        five = service_evidence.recent_config_changes(defn, units)
    finally:
        service_evidence.RECENT_FILES = saved
    assert five[str(key)].endswith("(content not shown: the name suggests a key or secret)")
    assert str(old) not in five


def test_a_large_changed_file_shows_its_settings_those_the_error_names_first(tmp_path: Path) -> None:
    conf = tmp_path / "redis.conf"
    lines = ["# " + "comment " * 10] * 300
    lines += ["setting-%03d value-%03d" % (i, i) for i in range(200)]
    lines.insert(150, "maxmemory 1mb")
    lines.insert(151, "requirepass s3cr3t-Passw0rd-xyz")
    lines.append("maxmemory-policy noeviction")
    conf.write_text("\n".join(lines) + "\n")
    defn = service_spec.resolve({"name": "redis-server", "config_paths": [str(tmp_path)]})
    hint = "OOM command not allowed when used memory > 'maxmemory'."
    text = service_evidence.recent_config_changes(defn, {}, hint=hint)[str(conf)]
    assert "151: maxmemory 1mb" in text and "maxmemory-policy noeviction" in text
    assert "s3cr3t-Passw0rd-xyz" not in text                     # redacted like any other content
    assert "more not shown, those naming words of the error first" in text
    assert "comment comment" not in text and len(text) < 1700
    numbers = [int(line.split(":")[0]) for line in text.splitlines()[1:]]
    assert numbers == sorted(numbers)                            # shown in file order


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_certificates_show_subject_and_expiry_never_a_key(tmp_path: Path) -> None:
    tls = tmp_path / "etc" / "tls"
    tls.mkdir(parents=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tls / "site.key.pem"),
                    "-out", str(tls / "site.crt"), "-days", "2", "-subj", "/CN=shop.example"],
                   check=True, capture_output=True)
    defn = service_spec.resolve({"name": "web", "config_paths": [str(tmp_path / "etc")]})
    now = service_evidence.certificates(defn, 10)
    assert list(now) == [str(tls / "site.crt")]                 # the key file is never handed to openssl
    assert "CN = shop.example" in now[str(tls / "site.crt")] or "CN=shop.example" in now[str(tls / "site.crt")]
    assert "(valid 1 more days)" in now[str(tls / "site.crt")] or "(valid 2 more days)" in now[str(tls / "site.crt")]
    later = service_evidence.certificates(defn, 10, now=time.time() + 5 * 86400)
    assert "(EXPIRED 3 days ago)" in later[str(tls / "site.crt")], later


def test_a_quoted_bare_name_is_looked_up_in_the_services_directories(tmp_path: Path) -> None:
    spool = tmp_path / "spool" / "cron"
    spool.mkdir(parents=True)
    (spool / "crontabs").write_text("* * * * * true\n")          # a file where a directory belongs
    text = "cron[42]: (CRON) DEATH (can't chdir to 'crontabs' is not a directory, bailing out)"
    assert service_evidence.relative_names_in(text, [str(spool)]) == [str(spool / "crontabs")]
    assert service_evidence.relative_names_in(text, [str(tmp_path)]) == []   # nothing by that name there
    found = service_evidence.named_paths([("journal", text)], "root", roots=[str(spool)])
    assert found[str(spool / "crontabs")]["type"] == "file" and found[str(spool / "crontabs")]["named_in"] == "journal"


def test_required_units_systemd_cannot_load_are_named(monkeypatch) -> None:
    seen = []

    def fake_run(argv, timeout=None, **_kw):
        seen.append(list(argv))
        return 0, ("Id=sysinit.target\nLoadState=loaded\n\nId=stunnel@redis.service\nLoadState=not-found\n\n"
                   "Id=old.service\nLoadState=masked\n"), ""

    monkeypatch.setattr(service_evidence.host_probe, "run_argv", fake_run)
    found = service_evidence.unloadable_units(["sysinit.target", "stunnel@redis.service", "old.service",
                                               "sysinit.target"], timeout=5)
    assert found == [("stunnel@redis.service", "not-found"), ("old.service", "masked")]
    assert seen == [["systemctl", "show", "--no-pager", "-p", "Id,LoadState", "sysinit.target",
                     "stunnel@redis.service", "old.service"]]      # one call, each unit once
    assert service_evidence.unloadable_units([], timeout=5) == [] and len(seen) == 1


# --- what a start reads: environment files, includes -----------------------------------------

@pytest.fixture()
def systemd_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A systemctl stand-in whose app.service reads two environment files (one optional and
    missing) and whose drop-in's ExecStartPre uses a variable nothing sets, as systemd 252
    prints them (one line per file and per command)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "app.env").write_text("# the app's settings\n\nAPP_PORT=8080\nexport APP_USER=app\n"
                                      "DB_PASSWORD=hunter2-secret-value\n")
    show_env = (
        f"EnvironmentFiles={tmp_path}/app.env (ignore_errors=no)\n"
        f"EnvironmentFiles={tmp_path}/absent.env (ignore_errors=yes)\n"
        "Environment=LANG=C \"APP_MODE=fast start\"\n"
        "ExecStartPre={ path=/usr/bin/app ; argv[]=/usr/bin/app --check --config ${APP_CONFIG} ; "
        "ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n"
        "ExecStart={ path=/usr/bin/app ; argv[]=/usr/bin/app --port ${APP_PORT} $EXTRA_OPTS $$HOME_LITERAL "
        "--user $USER ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n")
    (bin_dir / "systemctl").write_text(
        "#!/bin/sh\n"
        'case "$1 $4" in\n'
        f"  *EnvironmentFiles*) cat <<'EOT'\n{show_env}EOT\n ;;\n"
        "  show*) printf 'LoadState=loaded\\nActiveState=failed\\nResult=exit-code\\n' ;;\n"
        '  status*) echo "x app.service"; exit 3 ;;\n'
        "  *) exit 3 ;;\n"
        "esac\n")
    (bin_dir / "systemctl").chmod(0o755)
    (tmp_path / "systemd").mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "systemd"))
    return tmp_path


def test_systemd_environment_files_settings_missing_ones_and_unset_variables(systemd_env: Path) -> None:
    defn = service_spec.resolve({"name": "app"})
    env = service_evidence.start_environment(defn, "systemd", 10)
    settings = env[f"{systemd_env}/app.env"]
    assert settings.startswith("settings:\nAPP_PORT=8080\nexport APP_USER=app\nDB_PASSWORD=")
    assert "hunter2" not in settings and "the app's settings" not in settings
    assert env[f"{systemd_env}/absent.env"] == \
        "missing (optional: the start of app.service goes on without it)"
    assert env["Environment= of app.service"] == 'LANG=C "APP_MODE=fast start"'
    # APP_PORT comes from the file, USER from systemd, $$ is a literal dollar
    assert env["unset in ExecStartPre of app.service"] == \
        "uses ${APP_CONFIG} (an empty argument), set by no Environment=/EnvironmentFile="
    # a bare $EXTRA_OPTS word unset is zero arguments: systemd's idiom for optional options
    assert "unset in ExecStart of app.service" not in env
    collected = service_evidence.collect(defn, max_bytes=6000, log_lines=5, timeout=10)
    assert collected["evidence"]["environment"] == env
    # the files the unit names, for the policy's scope, whether they exist or not
    assert collected["evidence"]["environment_files"] == [f"{systemd_env}/app.env", f"{systemd_env}/absent.env"]


def test_a_required_environment_file_that_is_missing_says_the_start_stops(tmp_path: Path) -> None:
    text, names = service_evidence.env_file_text(str(tmp_path / "nope"), False, "the start of x.service")
    assert text == "missing, and required: the start of x.service stops without it"
    assert names == set()
    (tmp_path / "only-comments").write_text("# EXTRA_OPTS='-L 15'\n\n")
    assert service_evidence.env_file_text(str(tmp_path / "only-comments"), True, "x") == \
        ("no settings (only comments and blank lines)", set())
    many = tmp_path / "many"
    many.write_text("".join(f"V{n}={n}\n" for n in range(30)))
    text, names = service_evidence.env_file_text(str(many), True, "x")
    assert text.endswith("V19=19\n(10 more lines)") and len(names) == 30


def test_sysv_init_scripts_defaults_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_systemd) -> None:
    init_d, default = tmp_path / "init.d", tmp_path / "default"
    init_d.mkdir()
    default.mkdir()
    (init_d / "cron").write_text(f"#!/bin/sh\n[ -r {default}/cron ] && . {default}/cron\n")
    (default / "cron").write_text("# options\nEXTRA_OPTS='-L 15 -bogus'\n")
    (init_d / "svc").write_text(f"#!/bin/sh\nNAME=svc\n[ -r {default}/$NAME ] && . {default}/$NAME\n")
    monkeypatch.setattr(service_evidence, "INIT_SCRIPTS", str(init_d))
    monkeypatch.setattr(service_evidence, "DEFAULTS_DIR", str(default))
    cron = service_spec.resolve({"name": "cron"})
    assert service_evidence.start_environment(cron, "sysv", 10) == \
        {f"{default}/cron": "settings:\nEXTRA_OPTS='-L 15 -bogus'"}
    # the script reads /etc/default/$NAME: its own defaults file, missing here
    assert service_evidence.start_environment(service_spec.resolve({"name": "svc"}), "sysv", 10) == \
        {f"{default}/svc": "missing (optional: the init script goes on without it)"}
    # no init script: nothing to say
    assert service_evidence.start_environment(service_spec.resolve({"name": "other"}), "sysv", 10) == {}
    ev = service_evidence.collect(cron, max_bytes=6000, log_lines=5, timeout=10)["evidence"]
    assert ev["environment"] == {f"{default}/cron": "settings:\nEXTRA_OPTS='-L 15 -bogus'"}


def _include_tree(tmp_path: Path) -> Path:
    conf = tmp_path / "nginx"
    (conf / "sites-available").mkdir(parents=True)
    (conf / "sites-enabled").mkdir()
    (conf / "conf.d").mkdir()
    (conf / "snippets").mkdir()
    (conf / "sites-available" / "site").write_text("server {\n    include snippets/tls.conf;\n}\n")
    (conf / "sites-enabled" / "site").symlink_to(conf / "sites-available" / "site")
    (conf / "sites-enabled" / "old").symlink_to(conf / "sites-available" / "old")  # dangling
    (conf / "snippets" / "tls.conf").symlink_to(conf / "tls-settings")  # dangling
    (conf / "nginx.conf").write_text(
        "# include /nowhere/*.conf;\n"
        "http {\n"
        "    include mime.types;\n"
        "    include conf.d/*.conf;\n"
        f"    include {conf}/sites-enabled/*;\n"
        "}\n")
    (conf / "mime.types").write_text("types {}\n")
    return conf


def test_includes_list_what_each_pattern_matches_and_dangling_targets(tmp_path: Path) -> None:
    conf = _include_tree(tmp_path)
    defn = service_spec.resolve({"name": "nginx", "config_paths": [str(conf)]})
    found = service_evidence.include_matches(defn)
    assert found == {
        f"{conf}/nginx.conf:4 include conf.d/*.conf": f"matches nothing (as {conf}/conf.d/*.conf)",
        f"{conf}/nginx.conf:5 include {conf}/sites-enabled/*":
            f"2 matches: old -> {conf}/sites-available/old (target missing), site -> {conf}/sites-available/site",
        # relative to the configuration directory, not to sites-available; mime.types (a file
        # that is there) is not listed
        f"{conf}/sites-available/site:2 include snippets/tls.conf":
            f"tls.conf -> {conf}/tls-settings (target missing) (as {conf}/snippets/tls.conf)",
    }


def test_include_dir_and_optional_includes_the_postgres_and_redis_way(tmp_path: Path) -> None:
    main = tmp_path / "pg"
    (main / "conf.d").mkdir(parents=True)
    (main / "conf.d" / "10-mem.conf").write_text("shared_buffers = 1GB\n")
    (main / "postgresql.conf").write_text("include_dir = 'conf.d'\ninclude_if_exists 'local.conf'\n"
                                          f"include '{tmp_path}/gone.conf'\n")
    defn = service_spec.resolve({"name": "postgresql", "config_paths": [str(main / "postgresql.conf")]})
    assert service_evidence.include_matches(defn) == {
        f"{main}/postgresql.conf:1 include_dir conf.d": f"directory of 1: 10-mem.conf (as {main}/conf.d)",
        f"{main}/postgresql.conf:2 include_if_exists local.conf": f"missing (optional) (as {main}/local.conf)",
        f"{main}/postgresql.conf:3 include {tmp_path}/gone.conf": "missing",
    }


def test_new_sections_stay_within_the_budget_and_leave_the_signature_alone(tmp_path: Path, no_systemd) -> None:
    from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature

    conf = _include_tree(tmp_path)
    for n in range(40):
        (conf / "sites-enabled" / f"site{n:02d}-with-a-rather-long-name").symlink_to(conf / "nowhere" / f"s{n}")
    defn = service_spec.resolve({"name": "nginx-budget-test", "config_paths": [str(conf)]})
    collected = service_evidence.collect(defn, max_bytes=1500, log_lines=5, timeout=10, tools=[])
    ev = collected["evidence"]
    assert "includes" in ev and service_evidence.json_len(ev["includes"]) <= 1500 // 5 * 3 // 4 + 10
    assert service_evidence.json_len(ev) <= 1500 + service_evidence.json_len(ev["service_pids"]) + 200
    without = {k: v for k, v in ev.items() if k not in ("includes", "environment")}
    error = "nginx is not running"
    assert failure_signature("nginx", error, ev) == failure_signature("nginx", error, without)


def test_a_dependency_read_for_its_own_lines_keeps_its_log_when_the_sections_before_it_fill_the_budget(
        tmp_path: Path, no_systemd) -> None:
    """``logs_first`` (the role's read of a dependency its dependents' errors name): descriptive
    sections taken first (includes, a long config test, paths) must not leave the log empty.
    Without it, the same budget loses the lines: what the option is for."""
    conf = tmp_path / "conf"
    (conf / "sites-enabled").mkdir(parents=True)
    (conf / "server.conf").write_text("include sites-enabled/*;\n")
    for n in range(40):
        (conf / "sites-enabled" / f"site{n:02d}-with-a-rather-long-name").symlink_to(conf / "nowhere" / f"s{n}")
    log = tmp_path / "server.log"
    log.write_text("".join(f"2026-11-29 14:35:{n:02d} UTC [4{n:02d}] LOG:  checkpoint complete: wrote {n} buffers\n"
                           for n in range(40))
                   + '2026-11-29 14:35:42 UTC [449] app@app FATAL:  password authentication failed for user "app"\n'
                   + '2026-11-29 14:35:42 UTC [449] app@app DETAIL:  User "app" has an expired password.\n')
    defn = service_spec.resolve({"name": "db-budget-test", "config_paths": [str(conf)], "logs": [str(log)],
                                 "config_test": [sys.executable, "-c", "print('a warning line ' * 200)"]})
    error = 'FATAL: password authentication failed for user "app"'
    plain = service_evidence.collect(defn, max_bytes=700, log_lines=30, timeout=10, tools=[], error=error)["evidence"]
    assert "expired password" not in plain["logs"][str(log)]
    first = service_evidence.collect(defn, max_bytes=700, log_lines=30, timeout=10, tools=[], error=error,
                                     logs_first=True)["evidence"]
    kept = first["logs"][str(log)]
    assert 'User "app" has an expired password.' in kept and "password authentication failed" in kept
    # the other sections gave up that room: the evidence is no larger for it
    assert service_evidence.json_len(first) <= service_evidence.json_len(plain) + 100
