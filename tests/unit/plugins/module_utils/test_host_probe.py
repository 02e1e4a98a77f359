"""host_probe against this machine's real /proc, sockets, processes and files."""
from __future__ import annotations

import datetime
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe

# --- bounded text -------------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["tail", "head", "both"])
def test_clip_text_respects_the_limit_and_says_it_cut(keep: str) -> None:
    text = "".join(f"line {i} é\n" for i in range(200))
    clipped, cut = host_probe.clip_text(text, 300, keep)
    assert cut
    assert host_probe.byte_len(clipped) <= 300
    assert "bytes cut" in clipped
    if keep in ("tail", "both"):
        assert "line 199" in clipped
    if keep in ("head", "both"):
        assert clipped.startswith("line 0")


def test_clip_text_leaves_short_text_alone_and_handles_tiny_limits() -> None:
    assert host_probe.clip_text("short", 100) == ("short", False)
    tiny, cut = host_probe.clip_text("x" * 50, 10)
    assert cut and host_probe.byte_len(tiny) <= 10
    assert host_probe.clip_text("abc", 0) == ("", True)


def test_last_line_skips_blank_lines_and_shortens() -> None:
    assert host_probe.last_line("a\nb\n\n  \n") == "b"
    assert host_probe.last_line("") == ""
    assert host_probe.last_line("x" * 500, limit=20) == "x" * 17 + "..."


def test_tail_file_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("".join(f"entry {i}\n" for i in range(5000)))
    assert host_probe.tail_file(str(log), 3).splitlines() == ["entry 4997", "entry 4998", "entry 4999"]
    log.write_text("one\ntwo")  # no final newline
    assert host_probe.tail_file(str(log), 5) == "one\ntwo"
    assert host_probe.tail_file(str(log), 0) == ""


def test_tail_file_reads_a_bounded_amount(tmp_path: Path) -> None:
    log = tmp_path / "one-long-line.log"
    log.write_bytes(b"x" * 1_000_000)
    assert len(host_probe.tail_file(str(log), 10, max_read=4096)) == 4096


# --- tools and commands -------------------------------------------------------------------


def test_run_argv_uses_no_shell() -> None:
    rc, out, err = host_probe.run_argv(["echo", "$HOME;", "`id`"])
    assert (rc, out.strip(), err) == (0, "$HOME; `id`", "")


def test_run_argv_reports_missing_program_and_timeout() -> None:
    assert host_probe.run_argv(["no-such-tool-xyz"])[0] == 127
    started = time.monotonic()
    rc, _out, err = host_probe.run_argv(["sleep", "30"], timeout=1)
    assert rc == 124 and "timed out after 1s" in err
    assert time.monotonic() - started < 10


def test_find_tool_looks_in_sbin_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert host_probe.find_tool("sh") in ("/usr/bin/sh", "/bin/sh")
    assert host_probe.find_tool("no-such-tool-xyz") is None
    report = host_probe.tools_report(["sh", "no-such-tool-xyz", "sh"])
    assert report == {"present": ["sh"], "absent": ["no-such-tool-xyz"]}


def _fake_tool(directory: Path, name: str) -> None:
    tool = directory / name
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)


def test_detect_init_prefers_a_running_systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_tool(bin_dir, "systemctl")
    _fake_tool(bin_dir, "service")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(host_probe, "EXTRA_PATH", ())
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "no-systemd"))
    assert host_probe.detect_init() == "sysv"  # systemctl alone proves nothing
    (tmp_path / "systemd").mkdir()
    monkeypatch.setattr(host_probe, "SYSTEMD_MARKER", str(tmp_path / "systemd"))
    assert host_probe.detect_init() == "systemd"


def test_status_argv_per_init_system() -> None:
    assert host_probe.status_argv("nginx", "systemd") == ["systemctl", "is-active", "nginx"]
    assert host_probe.status_argv("nginx", "systemd", verbose=True)[:2] == ["systemctl", "status"]
    assert host_probe.status_argv("nginx", "sysv") == ["service", "nginx", "status"]
    assert host_probe.status_argv("nginx", "initd") == ["/etc/init.d/nginx", "status"]
    assert host_probe.status_argv("nginx", None) is None


# --- processes ----------------------------------------------------------------------------


def started(proc: subprocess.Popen, program: str) -> subprocess.Popen:
    """Wait for the child's exec: just after fork, /proc still shows the parent's name."""
    deadline = time.monotonic() + 5
    while Path(f"/proc/{proc.pid}/comm").read_text().strip() != program and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


@pytest.fixture()
def sleeper():
    proc = started(subprocess.Popen(["sleep", "37.25"]), "sleep")
    yield proc
    proc.kill()
    proc.wait()


def test_process_info_of_a_real_process(sleeper) -> None:
    info = host_probe.process_info(sleeper.pid)
    assert info["name"] == "sleep"
    assert info["cmdline"] == "sleep 37.25"
    assert info["uid"] == os.getuid() and info["ppid"] == os.getpid()
    assert host_probe.pid_alive(sleeper.pid)
    assert "sleep" in host_probe.process_names(info)


def test_a_dead_process_is_gone() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert host_probe.process_info(proc.pid) is None
    assert not host_probe.pid_alive(proc.pid)
    assert not host_probe.pid_alive(0)


def test_find_processes_matches_command_lines_but_not_its_own_lineage(sleeper) -> None:
    found = host_probe.find_processes(r"sleep 37\.25")
    assert [p["pid"] for p in found] == [sleeper.pid]
    assert os.getpid() in host_probe.own_lineage()
    own = " ".join(Path(f"/proc/{os.getpid()}/cmdline").read_text().split("\0")).strip()
    assert os.getpid() not in [p["pid"] for p in host_probe.find_processes(__import__("re").escape(own))]


# --- TCP listeners ------------------------------------------------------------------------

PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   100        0 30215 1 0 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 29472 1 0 100 0 0 10 0
   2: 0100007F:0050 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000     0        0 31000 1 0 20 4 30 10 -1
"""

_ZERO6 = "0" * 32
PROC_NET_TCP6 = "\n".join([
    "  sl  local_address                         remote_address                        st tx_queue rx_queue"
    " tr tm->when retrnsmt   uid  timeout inode",
    f"   0: {_ZERO6}:0050 {_ZERO6}:0000 0A 00000000:00000000 00:00000000 00000000     0        0 29473 1 0 100 0 0 10 0",
    f"   1: {'0' * 24}01000000:1F90 {_ZERO6}:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 29474 1 0 100 0"
    " 0 10 0",
])


@pytest.mark.skipif(sys.byteorder != "little", reason="the samples are from a little-endian kernel")
def test_parse_proc_net_tcp_keeps_listeners_only() -> None:
    v4 = host_probe.parse_proc_net_tcp(PROC_NET_TCP)
    assert [(s["address"], s["port"], s["inode"], s["uid"]) for s in v4] == [
        ("127.0.0.1", 6379, 30215, 100), ("0.0.0.0", 80, 29472, 0)]
    v6 = host_probe.parse_proc_net_tcp(PROC_NET_TCP6, socket.AF_INET6)
    assert [(s["proto"], s["address"], s["port"]) for s in v6] == [("tcp6", "::", 80), ("tcp6", "::1", 8080)]
    assert host_probe.format_address("::", 80) == "[::]:80"
    assert host_probe.format_address("127.0.0.1", 80) == "127.0.0.1:80"


def test_listeners_finds_a_real_socket_and_this_process_holding_it() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        found = host_probe.listeners([port])
        assert [(s["address"], s["port"]) for s in found] == [("127.0.0.1", port)]
        assert os.getpid() in [h["pid"] for h in found[0]["holders"]]
        assert found[0]["uid"] == os.getuid()
        if found[0]["uid"] == os.getuid():
            assert os.getpid() in [p["pid"] for p in host_probe.likely_holders(found[0])]
    assert host_probe.listeners([port]) == []


def test_describe_holders_groups_by_name() -> None:
    holders = [{"pid": 57, "name": "nginx"}, {"pid": 55, "name": "nginx"}, {"pid": 90, "name": "python3"}]
    assert host_probe.describe_holders(holders) == "nginx (pid 55, 57), python3 (pid 90)"
    many = [{"pid": p, "name": "w"} for p in range(10)]
    assert host_probe.describe_holders(many, limit=2) == "w (pid 0, 1, ...)"


# --- files and filesystems ----------------------------------------------------------------


def test_describe_path_of_an_existing_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o750)
    data.chmod(0o750)
    text = host_probe.describe_path(str(data))
    assert text.startswith("directory, owner ")
    assert "mode 0750" in text and "% used" in text and "inodes" in text


def test_describe_path_of_a_missing_path_names_the_parent(tmp_path: Path) -> None:
    text = host_probe.describe_path(str(tmp_path / "gone" / "deeper"))
    assert text.startswith("missing (nearest existing parent %s: directory" % tmp_path)
    assert "filesystem at %s" % tmp_path in text


def test_filesystem_usage_is_a_percentage() -> None:
    usage = host_probe.filesystem_usage("/")
    assert 0 <= usage["used_pct"] <= 100
    assert usage["inodes_used_pct"] is None or 0 <= usage["inodes_used_pct"] <= 100
    assert host_probe.filesystem_usage("/no/such/dir")["path"] == "/"


def test_expand_globs_newest_first_skipping_compressed(tmp_path: Path) -> None:
    for index, name in enumerate(["a.log", "b.log", "c.log.gz"]):
        path = tmp_path / name
        path.write_text(name)
        os.utime(path, (1000 + index, 1000 + index))
    files, notes = host_probe.expand_globs(
        [str(tmp_path / "*.log*"), str(tmp_path / "missing.log"), str(tmp_path / "*.txt"), str(tmp_path)])
    assert files == [str(tmp_path / "b.log"), str(tmp_path / "a.log")]
    said = notes.pop(str(tmp_path))
    assert notes == {str(tmp_path / "missing.log"): "missing", str(tmp_path / "*.txt"): "no file matches"}
    # what it is instead, with its owner and mode, not only what it is not
    assert said.startswith("not a regular file: directory, owner ") and ", mode 0" in said
    assert host_probe.expand_globs([str(tmp_path / "*.log")], limit=1)[0] == [str(tmp_path / "b.log")]


def test_describe_path_of_a_symlink(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to("/nowhere")
    assert host_probe.describe_path(str(link)).startswith("symlink -> /nowhere, owner ")
    assert stat.S_ISLNK(os.lstat(link).st_mode)


def test_largest_files_lists_the_biggest_first(tmp_path):
    (tmp_path / "small.txt").write_bytes(b"x" * 10)
    (tmp_path / "ballast.bin").write_bytes(b"x" * 40000)
    (tmp_path / "sub").mkdir()
    largest = host_probe.largest_files(str(tmp_path), limit=1)
    assert largest == [(40000, str(tmp_path / "ballast.bin"))]
    assert host_probe._du_size(40000) == "40K"
    assert host_probe._du_size(16 * 1024 * 1024) == "16M"


def test_a_file_name_cannot_forge_lines_of_the_largest_files_listing(tmp_path, monkeypatch):
    # The service's own account names files in its directory: a name holding a line break and
    # a size line must show as one escaped line, never as a second entry (a name holds no "/").
    (tmp_path / "x\n  999G backup.tar.gz").write_bytes(b"x" * 4000)
    (tmp_path / "ballast\u202e.bin").write_bytes(b"x" * 40000)
    monkeypatch.setattr(host_probe, "filesystem_usage",
                        lambda path: {"path": path, "used_pct": 100, "free": "0 B", "inodes_used_pct": None})
    text = host_probe.describe_path(str(tmp_path))
    listing = text.split("\nlargest files:\n", 1)[1].splitlines()
    assert len(listing) == 2, text
    assert listing[0] == "  40K %s/ballast\\u202e.bin" % tmp_path
    assert listing[1] == "  4K %s/x\\n  999G backup.tar.gz" % tmp_path


# --- process state, start time, cgroups --------------------------------------------------

def test_parse_stat_counts_fields_after_the_last_parenthesis() -> None:
    # a comm may hold spaces and parentheses; field 22 is the start time
    fields = ["S", "41"] + [str(n) for n in range(5, 22)] + ["987654", "0", "0"]
    parsed = host_probe.parse_stat("1234 (odd) name)) " + " ".join(fields))
    assert parsed == {"comm": "odd) name)", "state": "S", "ppid": 41, "start": 987654}
    assert host_probe.parse_stat("garbage") is None
    assert host_probe.parse_stat("1 (short) S 0") is None


def test_state_names_say_what_the_letters_mean() -> None:
    assert [host_probe.state_name(c) for c in "RSDTZtI"] == [
        "running", "sleeping", "disk-sleep", "stopped", "zombie", "tracing-stop", "idle"]
    assert host_probe.state_name("?") == "?"


def test_a_process_stopped_by_sigstop_reads_as_stopped(sleeper) -> None:
    os.kill(sleeper.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while host_probe.read_stat(sleeper.pid)["state"] != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        record = host_probe.process_record(sleeper.pid)
    finally:
        os.kill(sleeper.pid, signal.SIGCONT)
    assert record["state"] == "stopped"
    assert record["comm"] == "sleep" and record["cmdline"] == "sleep 37.25"
    assert record["ppid"] == os.getpid() and record["user"] == host_probe.user_name(os.geteuid())


def test_a_zombie_reads_as_zombie_with_its_start_time() -> None:
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while (host_probe.read_stat(child.pid) or {}).get("state") != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        record = host_probe.process_record(child.pid)
        assert record["state"] == "zombie" and record["comm"] == "true" and record["cmdline"] == ""
        assert host_probe.process_info(child.pid) is None  # not a running process for the checks
    finally:
        child.wait()
    assert host_probe.process_record(child.pid) is None


def test_start_time_is_ticks_since_boot_and_an_iso_time(sleeper) -> None:
    record = host_probe.process_record(sleeper.pid)
    mine = host_probe.read_stat(os.getpid())["start"]
    assert record["start"] >= mine  # the sleeper started after this test process
    started = datetime.datetime.fromisoformat(record["started"])
    assert abs((datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()) < 120
    assert host_probe.started_iso(0, btime=0, hz=100) == "1970-01-01T00:00:00+00:00"
    assert host_probe.started_iso(360000, btime=86400, hz=100) == "1970-01-02T01:00:00+00:00"


def test_listening_ports_of_a_process_come_from_its_socket_fds() -> None:
    with socket.socket() as server, socket.socket(socket.AF_INET6) as server6:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server6.bind(("::1", 0))
        server6.listen(1)
        ports = sorted([server.getsockname()[1], server6.getsockname()[1]])
        found, visible = host_probe.listening_ports_of(os.getpid(), host_probe.listening_sockets())
    assert visible is True
    assert set(ports) <= set(found)
    assert host_probe.listening_ports_of(2 ** 22 + 7, []) == ([], False)


def test_in_unit_matches_the_unit_cgroup_and_below() -> None:
    paths = ["/docker/abc/system.slice/nginx.service", "/system.slice/redis.service/control"]
    assert host_probe.in_unit(paths, "nginx.service")
    assert host_probe.in_unit(paths, "redis.service")
    assert not host_probe.in_unit(paths, "nginx")
    assert not host_probe.in_unit(["/user.slice/x-nginx.service.scope"], "nginx.service")
    assert host_probe.cgroup_paths(os.getpid())  # every Linux process has one


def test_init_system_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_probe, "detect_init", lambda: "initd")
    assert host_probe.init_system() == "sysv"
    monkeypatch.setattr(host_probe, "detect_init", lambda: None)
    assert host_probe.init_system() == "other"
    monkeypatch.setattr(host_probe, "detect_init", lambda: "systemd")
    assert host_probe.init_system() == "systemd"


# --- what a path is ----------------------------------------------------------------------

def test_path_facts_of_files_directories_links_and_missing_paths(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    for name in ("b.conf", "a.conf", "c.conf"):
        (tmp_path / "conf" / name).write_text("x" * 10)
    (tmp_path / "conf").chmod(0o750)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "good").symlink_to(tmp_path / "conf")
    me = host_probe.user_name(os.geteuid())

    directory = host_probe.path_facts(str(tmp_path / "conf"), entries=2)
    assert directory == {"type": "directory", "mode": "0750", "owner": f"{me}:{host_probe.group_name(os.getegid())}",
                         "entries": ["a.conf", "b.conf"], "entries_total": 3}
    assert host_probe.path_facts(str(tmp_path / "conf" / "a.conf"))["size"] == 10
    assert host_probe.path_facts(str(tmp_path / "dangling"))["dangling"] is True
    assert host_probe.path_facts(str(tmp_path / "dangling"))["target"] == str(tmp_path / "nowhere")
    assert host_probe.path_facts(str(tmp_path / "good"))["dangling"] is False
    missing = host_probe.path_facts(str(tmp_path / "gone" / "deeper" / "x.log"))
    assert missing["type"] == "missing" and missing["existing_parent"] == str(tmp_path)
    assert missing["parent_mode"] == "%04o" % stat.S_IMODE(tmp_path.stat().st_mode)
    # a file component in the middle: ENOTDIR is "missing" too
    assert host_probe.path_facts(str(tmp_path / "conf" / "a.conf" / "x"))["type"] == "missing"


def test_access_for_judges_owner_group_and_other_bits(tmp_path: Path) -> None:
    def st(mode: int, uid: int = 100, gid: int = 200):
        return SimpleNamespace(st_mode=mode, st_uid=uid, st_gid=gid)

    data = st(stat.S_IFDIR | 0o750)
    assert host_probe.access_for(data, (100, 1, set())) == "rwx"  # the owner
    assert host_probe.access_for(data, (101, 1, {200})) == "r-x"  # a member of its group
    assert host_probe.access_for(data, (101, 1, {7})) == "---"  # anyone else
    assert host_probe.access_for(data, (0, 0, {0})) == "rwx"  # root
    assert host_probe.access_for(st(stat.S_IFREG | 0o640), (0, 0, {0})) == "rw-"  # root cannot run a non-executable
    target = tmp_path / "f"
    target.write_text("")
    target.chmod(0o640)
    nobody = host_probe.account("nobody")
    assert nobody is not None and nobody[0] != 0
    assert host_probe.path_facts(str(target), user="nobody")["user_access"] == "---"
    assert host_probe.account("no-such-user-xyz") is None
    assert host_probe.user_access_text(str(target), "nobody") == "; user nobody may ---"
    assert host_probe.user_access_text(str(target), None) == ""
