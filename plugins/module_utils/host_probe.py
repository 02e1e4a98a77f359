# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read-only probes of a Linux host, shared by the service_health and evidence modules.

Runs on targets, so: standard library only, Python 3.8 compatible syntax (hosts run 3.9+).  Nothing here
depends on ss, lsof, fuser, pgrep or ps: processes and TCP listeners are read from
/proc.  Seeing which process holds another user's socket needs root (the fds under
/proc/PID/fd are private), which is why the role runs these modules with become.
"""
from __future__ import absolute_import, division, print_function

import datetime
import errno
import glob
import os
import re
import shutil
import socket
import stat
import subprocess
import sys

__metaclass__ = type

try:
    import grp
    import pwd
except ImportError:  # pragma: no cover - not on Linux
    grp = pwd = None

PROC = "/proc"
# systemd creates this directory when it runs as PID 1; a systemctl binary alone proves nothing
# (containers often ship one with no systemd running).
SYSTEMD_MARKER = "/run/systemd/system"
# Non-root PATHs on Debian lack the sbin directories, where service, nginx and ss live.
EXTRA_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

_TCP_LISTEN = "0A"
_TRUNCATION_MARK = "[...%d bytes cut...]"


# ---------------------------------------------------------------------------------------
# Bounded text

def byte_len(text):
    return len(text.encode("utf-8", "replace"))


def clip_text(text, limit, keep="tail"):
    """Return ``(text, clipped)`` with ``text`` cut to at most ``limit`` UTF-8 bytes.

    ``keep`` says which end survives: ``tail`` (logs, status output: the newest lines
    matter), ``head`` or ``both``.  A short marker saying how much was cut is included
    in the limit, so the result never exceeds it.
    """
    text = text or ""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text, False
    if limit <= 0:
        return "", True
    mark = _TRUNCATION_MARK % (len(data) - limit)
    seps = 2 if keep == "both" else 1
    if len(mark) + seps + 8 > limit:
        mark, seps = "", 0
    room = limit - len(mark) - seps
    if keep == "head":
        result = data[:room].decode("utf-8", "ignore") + ("\n" + mark if mark else "")
    elif keep == "both":
        head = data[:room // 2].decode("utf-8", "ignore")
        tail = data[len(data) - (room - room // 2):].decode("utf-8", "ignore")
        result = head + ("\n" + mark + "\n" if mark else "") + tail
    else:
        kept = data[len(data) - room:]
        # Whole lines only: a log line cut at its start reads as another message.
        newline = kept.find(b"\n")
        if 0 <= newline < len(kept.rstrip(b"\n")) - 1:
            kept = kept[newline + 1:]
            mark = (_TRUNCATION_MARK % (len(data) - len(kept))) if mark else ""
        result = (mark + "\n" if mark else "") + kept.decode("utf-8", "ignore")
    # Dropping a split multi-byte character can only shorten the text; this is a guard.
    while byte_len(result) > limit:
        result = result[1:] if keep == "tail" else result[:-1]
    return result, True


def last_line(text, limit=200):
    """The last non-empty line of ``text``, cut to ``limit`` characters."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= limit else line[:limit - 3] + "..."


def tail_file(path, lines, max_read=262144):
    """The last ``lines`` lines of a file, reading at most ``max_read`` bytes from its end."""
    block = 8192
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        pos = end
        data = b""
        while pos > 0 and data.count(b"\n") <= lines and end - pos < max_read:
            step = min(block, pos, max_read - (end - pos))
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + data
    text = data.decode("utf-8", "replace")
    kept = text.splitlines()[-lines:] if lines > 0 else []
    return "\n".join(kept)


# ---------------------------------------------------------------------------------------
# Tools and commands

def search_path():
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    for extra in EXTRA_PATH:
        if extra not in parts:
            parts.append(extra)
    return os.pathsep.join(parts)


def find_tool(name):
    """Full path of an executable, also looking in the sbin directories; None when absent."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name, path=search_path())


def tools_report(names):
    """``{"present": [...], "absent": [...]}`` for the tool names, each list sorted."""
    present, absent = [], []
    for name in sorted(set(names)):
        (present if find_tool(name) else absent).append(name)
    return {"present": present, "absent": absent}


def run_argv(argv, timeout=10):
    """Run ``argv`` without a shell; return ``(rc, stdout, stderr)``.

    Never raises for the usual ways a command fails: a missing program gives rc 127,
    a timeout rc 124 (as coreutils ``timeout`` does), with the reason in stderr.
    """
    argv = [str(a) for a in argv]
    program = find_tool(argv[0])
    if program is None:
        return 127, "", "%s: command not found" % argv[0]
    env = dict(os.environ, LC_ALL="C", LANG="C", PATH=search_path())
    try:
        proc = subprocess.Popen([program] + argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, close_fds=True, start_new_session=True)
    except OSError as exc:
        return 126, "", "%s: %s" % (argv[0], exc.strerror or exc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return 124, _decode(out), (_decode(err) + "\n" if err else "") + "timed out after %ss" % timeout
    return proc.returncode, _decode(out), _decode(err)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        proc.kill()


def _decode(data):
    return (data or b"").decode("utf-8", "replace")


def init_system():
    """The host's init system as evidence names it: ``systemd`` (systemd runs as PID 1),
    ``sysv`` (a ``service`` tool or /etc/init.d scripts) or ``other``."""
    init = detect_init()
    if init == "systemd":
        return "systemd"
    if init in ("sysv", "initd"):
        return "sysv"
    return "other"


def detect_init():
    """``systemd`` when systemd runs and systemctl exists, else ``sysv`` when ``service``
    exists, else ``initd`` when only /etc/init.d scripts exist, else ``None``."""
    if os.path.isdir(SYSTEMD_MARKER) and find_tool("systemctl"):
        return "systemd"
    if find_tool("service"):
        return "sysv"
    if os.path.isdir("/etc/init.d"):
        return "initd"
    return None


def status_argv(service, init, verbose=False):
    """The argv asking the init system about ``service``; None when there is no init tool.

    ``verbose`` asks systemd for the long status (with recent journal lines) instead of
    the one-word ``is-active`` answer.
    """
    if init == "systemd":
        if verbose:
            return ["systemctl", "status", "--no-pager", "--lines=10", service]
        return ["systemctl", "is-active", service]
    if init == "sysv":
        return ["service", service, "status"]
    if init == "initd":
        return [os.path.join("/etc/init.d", service), "status"]
    return None


# ---------------------------------------------------------------------------------------
# Processes

def _read(path, mode="r"):
    with open(path, mode) as handle:
        return handle.read()


def process_info(pid):
    """``{"pid", "name", "cmdline", "uid", "ppid"}`` for a live process, else None.

    ``name`` is the kernel's short name (``comm``: ``nginx``, ``python3``); ``cmdline``
    the arguments joined by spaces (empty for kernel threads).
    """
    base = os.path.join(PROC, str(pid))
    try:
        comm = _read(os.path.join(base, "comm")).strip()
        raw = _read(os.path.join(base, "cmdline"), "rb")
        status = _read(os.path.join(base, "status"))
    except (IOError, OSError):
        return None
    cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    uid = ppid = None
    state = ""
    for line in status.splitlines():
        if line.startswith("Uid:"):
            uid = int(line.split()[1])
        elif line.startswith("PPid:"):
            ppid = int(line.split()[1])
        elif line.startswith("State:"):
            state = line.split()[1]
    if state == "Z":  # a zombie has exited already; it holds nothing and runs nothing
        return None
    return {"pid": int(pid), "name": comm, "cmdline": cmdline, "uid": uid, "ppid": ppid}


# /proc/PID/stat state letters (proc(5)) as words.
STATE_NAMES = {
    "R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop",
    "Z": "zombie", "X": "dead", "x": "dead", "I": "idle", "K": "wakekill", "W": "waking", "P": "parked",
}


def parse_stat(text):
    """``{"comm", "state", "ppid", "start"}`` from the text of /proc/PID/stat, else None.

    ``comm`` sits in parentheses and may itself hold spaces and parentheses, so the
    fields are counted from the last ``)``. ``start`` is field 22: the start time in
    clock ticks since boot, which with the PID names one process for good (a PID is
    reused, a (PID, start) pair is not).
    """
    head, sep, rest = (text or "").rpartition(")")
    if not sep or "(" not in head:
        return None
    comm = head.split("(", 1)[1]
    fields = rest.split()
    if len(fields) < 20:
        return None
    try:
        return {"comm": comm, "state": fields[0], "ppid": int(fields[1]), "start": int(fields[19])}
    except ValueError:
        return None


# A whole number standing alone (not part of a time, an address, a path, a size or a word).
_PID_TEXT = re.compile(r"(?<![\w./:@-])([1-9][0-9]{0,6})(?![\w./:@-])")
_PID_MAX = 4194304


def pids_in(text):
    """The numbers of ``text`` that could be PIDs (2 .. the kernel's largest), in order, once each:
    how both the host (the start of each, with a command's output) and the controller (the PIDs an
    incident's reads showed) read a command's output, so the two name the same PIDs."""
    found = []
    for match in _PID_TEXT.finditer(text or ""):
        number = int(match.group(1))
        if 1 < number <= _PID_MAX and number not in found:
            found.append(number)
    return found


def read_stat(pid):
    """:func:`parse_stat` of a live (or zombie) process; None when it is gone."""
    try:
        return parse_stat(_read(os.path.join(PROC, str(pid), "stat")))
    except (IOError, OSError):
        return None


def state_name(letter):
    return STATE_NAMES.get(letter, letter or "unknown")


def clock_ticks():
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - always defined on Linux
        return 100


def boot_time():
    """Seconds since the epoch at which the kernel booted (``btime`` in /proc/stat), or None."""
    try:
        for line in _read(os.path.join(PROC, "stat")).splitlines():
            if line.startswith("btime "):
                return int(line.split()[1])
    except (IOError, OSError, ValueError):
        return None
    return None


def started_iso(start_ticks, btime=None, hz=None):
    """The wall-clock time (UTC, ISO 8601, seconds) of a start time in ticks since boot."""
    btime = boot_time() if btime is None else btime
    if btime is None or start_ticks is None:
        return None
    moment = btime + float(start_ticks) / (hz or clock_ticks())
    return datetime.datetime.fromtimestamp(int(moment), tz=datetime.timezone.utc).isoformat()


def process_record(pid, btime=None):
    """Everything evidence says about one process, zombies included, else None when gone:
    ``{"pid", "ppid", "uid", "user", "state", "start", "started", "comm", "cmdline"}``."""
    base = os.path.join(PROC, str(pid))
    stat_fields = read_stat(pid)
    if stat_fields is None:
        return None
    try:
        raw = _read(os.path.join(base, "cmdline"), "rb")
    except (IOError, OSError):
        raw = b""
    uid = None
    try:
        for line in _read(os.path.join(base, "status")).splitlines():
            if line.startswith("Uid:"):
                uid = int(line.split()[2])  # the effective uid: what the process may do
                break
    except (IOError, OSError, ValueError, IndexError):
        pass
    cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return {
        "pid": int(pid), "ppid": stat_fields["ppid"], "uid": uid, "user": user_name(uid),
        "state": state_name(stat_fields["state"]), "start": stat_fields["start"],
        "started": started_iso(stat_fields["start"], btime), "comm": stat_fields["comm"],
        "cmdline": cmdline,
    }


def cgroup_paths(pid):
    """The cgroup paths of a process (one per hierarchy) from /proc/PID/cgroup."""
    try:
        text = _read(os.path.join(PROC, str(pid), "cgroup"))
    except (IOError, OSError):
        return []
    return [line.split(":", 2)[2] for line in text.splitlines() if line.count(":") >= 2]


def in_unit(cgroups, unit):
    """True when one of the cgroup paths is the unit's own cgroup or below it
    (``.../system.slice/nginx.service``, ``.../nginx.service/control``)."""
    for path in cgroups:
        parts = path.split("/")
        if unit in parts:
            return True
    return False


def pids():
    try:
        return sorted(int(entry) for entry in os.listdir(PROC) if entry.isdigit())
    except OSError:
        return []


def processes():
    """Every live process as from :func:`process_info`, by ascending PID."""
    result = []
    for pid in pids():
        info = process_info(pid)
        if info is not None:
            result.append(info)
    return result


def own_lineage():
    """This process and its ancestors: their command lines often hold the pattern looked for
    (``sh -c ... nginx``), so process searches leave them out."""
    lineage = set()
    pid = os.getpid()
    while pid and pid not in lineage:
        lineage.add(pid)
        info = process_info(pid)
        pid = info["ppid"] if info else None
    return lineage


def find_processes(pattern):
    """Processes whose command line (or, for kernel threads, name) matches the regular
    expression ``pattern`` (``re.search``), leaving out this module's own lineage."""
    regex = re.compile(pattern)
    skip = own_lineage()
    found = []
    for info in processes():
        if info["pid"] in skip:
            continue
        if regex.search(info["cmdline"] or info["name"]):
            found.append(info)
    return found


# States in which a process holds its PID (and its ports) but serves nothing: stopped by a
# signal or a debugger, or exited and not reaped.
FROZEN_STATES = ("T", "t", "Z", "X", "x")


def frozen_text(pids):
    """What the processes ``pids`` are when none of them can serve (each stopped or a
    zombie): ``pid 12 stopped, pid 13 zombie``; "" when one of them is alive or none is left."""
    states = []
    for pid in pids:
        seen = read_stat(pid)
        if seen is not None:
            states.append((int(pid), seen["state"]))
    if not states or any(state not in FROZEN_STATES for _pid, state in states):
        return ""
    shown = ", ".join("pid %d %s" % (pid, state_name(state)) for pid, state in states[:5])
    return shown + (", and %d more" % (len(states) - 5) if len(states) > 5 else "")


def named_pids(names):
    """PIDs of the processes (zombies too) answering to one of ``names`` (:func:`process_names`;
    a zombie by its kernel name), leaving out this module's own lineage."""
    wanted = set(names)
    skip = own_lineage()
    found = []
    for pid in pids():
        if pid in skip:
            continue
        seen = read_stat(pid)
        if seen is None:
            continue
        if seen["state"] in ("Z", "X", "x"):
            if seen["comm"] in wanted:
                found.append(pid)
            continue
        info = process_info(pid)
        if info is not None and (info["cmdline"] or seen["state"] in FROZEN_STATES) and wanted & process_names(info):
            found.append(pid)
    return found


def process_names(info):
    """The names a process answers to: its ``comm`` and the basename of its program
    (``nginx: master process /usr/sbin/nginx`` answers to ``nginx``)."""
    names = set()
    if info.get("name"):
        names.add(info["name"])
    cmd = info.get("cmdline") or ""
    if cmd:
        first = cmd.split(None, 1)[0].rstrip(":")
        names.add(os.path.basename(first))
    try:
        names.add(os.path.basename(os.readlink(os.path.join(PROC, str(info["pid"]), "exe"))))
    except (OSError, KeyError):
        pass
    return names


def user_name(uid):
    if uid is None:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name if pwd else str(uid)
    except KeyError:
        return str(uid)


def group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name if grp else str(gid)
    except KeyError:
        return str(gid)


def pid_alive(pid):
    """True when a process with this PID exists (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno != errno.EPERM:
            return False
    return process_info(pid) is not None


# ---------------------------------------------------------------------------------------
# TCP listeners from /proc/net/tcp and /proc/net/tcp6

def _decode_address(hex_addr, family):
    """Decode a /proc/net/tcp address: the kernel prints each 32-bit word in host order."""
    raw = bytes.fromhex(hex_addr)
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, raw)


def parse_proc_net_tcp(text, family=socket.AF_INET):
    """Listening sockets in the text of /proc/net/tcp (or tcp6 with ``AF_INET6``).

    Returns dicts ``{"proto", "address", "port", "inode", "uid"}``.
    """
    proto = "tcp6" if family == socket.AF_INET6 else "tcp"
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        addr_hex, port_hex = fields[1].split(":")
        try:
            address = _decode_address(addr_hex, family)
        except (ValueError, OSError):
            continue
        found.append({"proto": proto, "address": address, "port": int(port_hex, 16),
                      "inode": int(fields[9]), "uid": int(fields[7])})
    return found


def listening_sockets():
    """Every TCP socket in LISTEN state in this network namespace."""
    found = []
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            text = _read(os.path.join(PROC, "net", name))
        except (IOError, OSError):
            continue
        found.extend(parse_proc_net_tcp(text, family))
    return found


def socket_holders(inodes):
    """Map socket inodes to the processes holding them: ``{inode: [process_info, ...]}``.

    Walks /proc/PID/fd; fds of other users' processes are only visible to root, so an
    inode without holders usually means "not visible", not "held by nobody".
    """
    wanted = set(inodes)
    holders = dict((inode, []) for inode in wanted)
    if not wanted:
        return holders
    for pid in pids():
        fd_dir = os.path.join(PROC, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        seen = set()
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in wanted and inode not in seen:
                    seen.add(inode)
                    info = process_info(pid)
                    if info is not None:
                        holders[inode].append(info)
    return holders


def socket_inodes(pid):
    """``(inodes, visible)``: the socket inodes a process holds, and whether its fds
    could be read at all (another user's fds are private without CAP_SYS_PTRACE)."""
    fd_dir = os.path.join(PROC, str(pid), "fd")
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return set(), False
    found = set()
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            try:
                found.add(int(target[8:-1]))
            except ValueError:
                continue
    return found, True


def listening_ports_of(pid, socks):
    """``(ports, visible)``: the TCP ports ``pid`` listens on, from the LISTEN sockets
    ``socks`` (as :func:`listening_sockets` gives) and the process's socket fds."""
    inodes, visible = socket_inodes(pid)
    ports = sorted(set(s["port"] for s in socks if s["inode"] in inodes))
    return ports, visible


def listeners(ports=None):
    """TCP listeners (optionally only on ``ports``), each with ``holders``: the processes
    holding the socket (empty when they cannot be seen)."""
    found = listening_sockets()
    if ports is not None:
        wanted = set(int(p) for p in ports)
        found = [s for s in found if s["port"] in wanted]
    holders = socket_holders(s["inode"] for s in found)
    for sock in found:
        sock["holders"] = holders.get(sock["inode"], [])
    return found


def likely_holders(sock):
    """Processes of the user owning ``sock``: the candidates when its holder is not visible.

    Inside containers without CAP_SYS_PTRACE even root cannot read the fds of another
    user's process (nginx workers, redis), but /proc/net/tcp still names the socket's uid.
    """
    return [p for p in processes() if p["uid"] == sock["uid"] and p["cmdline"]]


def describe_holders(holders, limit=4):
    """``nginx (pid 55, 56, 57)`` / ``python3 (pid 90)`` from a list of process infos."""
    by_name = {}
    for info in holders:
        by_name.setdefault(info["name"], []).append(info["pid"])
    parts = []
    for name in sorted(by_name, key=lambda n: min(by_name[n])):
        pid_list = sorted(by_name[name])
        shown = ", ".join(str(p) for p in pid_list[:limit])
        if len(pid_list) > limit:
            shown += ", ..."
        parts.append("%s (pid %s)" % (name, shown))
    return ", ".join(parts)


def format_address(address, port):
    return "[%s]:%d" % (address, port) if ":" in address else "%s:%d" % (address, port)


# ---------------------------------------------------------------------------------------
# Files and filesystems

def _human(size):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return ("%d %s" % (size, unit)) if unit == "B" else ("%.1f %s" % (size, unit))
        size /= 1024.0
    return "%d B" % size  # pragma: no cover


def filesystem_usage(path):
    """Disk and inode use of the filesystem holding ``path`` (or its nearest existing
    parent): ``{"path", "used_pct", "free", "inodes_used_pct"}`` or None."""
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        vfs = os.statvfs(probe or "/")
    except OSError:
        return None
    total = vfs.f_blocks * vfs.f_frsize
    free_root = vfs.f_bfree * vfs.f_frsize
    avail = vfs.f_bavail * vfs.f_frsize
    used = total - free_root
    # df's definition: used / (used + available to unprivileged users)
    used_pct = int(round(100.0 * used / (used + avail))) if used + avail else 0
    inodes_pct = None
    if vfs.f_files:
        inodes_pct = int(round(100.0 * (vfs.f_files - vfs.f_ffree) / vfs.f_files))
    return {"path": probe, "used_pct": used_pct, "free": _human(avail), "inodes_used_pct": inodes_pct}


def describe_path(path):
    """One line on ``path``: type, owner, mode, and its filesystem's disk and inode use;
    for a missing path, the nearest existing parent's owner and mode."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        text = "missing" if exc.errno == errno.ENOENT else "not accessible: %s" % exc.strerror
        parent = os.path.dirname(path.rstrip("/"))
        while parent and not os.path.exists(parent) and parent != "/":
            parent = os.path.dirname(parent)
        if parent and exc.errno == errno.ENOENT:
            text += " (nearest existing parent %s: %s)" % (parent, _stat_line(parent))
    else:
        text = _kind(st)
        if stat.S_ISLNK(st.st_mode):
            try:
                text += " -> %s" % os.readlink(path)
            except OSError:
                pass
        text += ", " + _owner_mode(st)
    usage = filesystem_usage(path)
    if usage:
        text += "; filesystem at %s: %d%% used, %s free" % (usage["path"], usage["used_pct"], usage["free"])
        if usage["inodes_used_pct"] is not None:
            text += ", inodes %d%% used" % usage["inodes_used_pct"]
        # On a nearly full filesystem, say what fills the directory: a human (or the
        # planner) needs the culprit's name, not only "100% used".
        if usage["used_pct"] >= 90 and os.path.isdir(path) and not os.path.islink(path):
            largest = largest_files(path)
            if largest:
                text += "\nlargest files:\n" + "\n".join("  %s %s" % (_du_size(size), listed_name(name)) for size, name in largest)
    return text


def listed_name(name):
    """A file name as one line of a listing: a name with a line break or another character that
    does not print (bidi overrides, escapes) is shown escaped, so a name cannot forge the lines
    after it ("x\\n  9G /var/lib/redis/backup") or hide what it is."""
    if all(char.isprintable() for char in name):
        return name
    return name.encode("unicode_escape").decode("ascii")


def largest_files(directory, limit=5, scan_limit=2000):
    """The ``limit`` largest regular files directly in ``directory`` as (bytes, path),
    largest first; at most ``scan_limit`` entries are looked at, symlinks are skipped."""
    found = []
    try:
        entries = os.scandir(directory)
    except OSError:
        return []
    with entries:
        for count, entry in enumerate(entries):
            if count >= scan_limit:
                break
            try:
                if entry.is_file(follow_symlinks=False):
                    found.append((entry.stat(follow_symlinks=False).st_size, entry.path))
            except OSError:
                continue
    found.sort(key=lambda item: (-item[0], item[1]))
    return found[:limit]


def _du_size(size):
    """Size as du -h prints it: an integer and a one-letter unit (16M, 512K, 37)."""
    for unit in ("", "K", "M", "G", "T"):
        if size < 1024 or unit == "T":
            return "%d%s" % (size, unit)
        size = (size + 1023) // 1024
    return "%d" % size  # pragma: no cover


def _kind(st):
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if stat.S_ISREG(st.st_mode):
        return "file (%s)" % _human(st.st_size)
    if stat.S_ISSOCK(st.st_mode):
        return "socket"
    return "special file"


def _owner_mode(st):
    return "owner %s:%s, mode %04o" % (user_name(st.st_uid), group_name(st.st_gid), stat.S_IMODE(st.st_mode))


def _stat_line(path):
    try:
        st = os.stat(path)
    except OSError as exc:
        return "not accessible: %s" % exc.strerror
    return "%s, %s" % (_kind(st), _owner_mode(st))


def expand_globs(patterns, limit=10):
    """Expand paths and globs; newest files first, at most ``limit`` in all.

    Returns ``(files, notes)``: ``notes`` maps a pattern that matched no file to why.
    Compressed rotations (``.gz``, ``.xz``, ...) are skipped: their tails are not text.
    """
    files, notes = [], {}
    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            matches = [m for m in glob.glob(pattern) if os.path.isfile(m)
                       and not m.endswith((".gz", ".xz", ".bz2", ".zst"))]
            if not matches:
                notes[pattern] = "no file matches"
            matches.sort(key=_mtime, reverse=True)
            files.extend(m for m in matches if m not in files)
        elif os.path.isfile(pattern):
            if pattern not in files:
                files.append(pattern)
        elif os.path.exists(pattern):
            notes[pattern] = "not a regular file: %s" % _stat_line(pattern)
        else:
            notes[pattern] = "missing"
    return files[:limit], notes


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------
# What a path is, as data

def account(name):
    """``(uid, gid, group ids)`` of a user name, or None when the host has no such user."""
    if pwd is None or not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    try:
        groups = set(os.getgrouplist(name, entry.pw_gid))
    except (OSError, AttributeError):  # pragma: no cover - getgrouplist is on every Linux
        groups = set([entry.pw_gid])
    return entry.pw_uid, entry.pw_gid, groups


def access_for(st, who):
    """``rwx``-style access of the account ``who`` (from :func:`account`) to a file with
    stat result ``st``, judged from its owner, group and mode bits as the kernel does
    (ACLs aside). Root reads and writes everything and executes what anyone may."""
    uid, _gid, groups = who
    mode = stat.S_IMODE(st.st_mode)
    if uid == 0:
        executable = stat.S_ISDIR(st.st_mode) or bool(mode & 0o111)
        return "rw" + ("x" if executable else "-")
    if st.st_uid == uid:
        bits = (mode >> 6) & 7
    elif st.st_gid in groups:
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return "".join(flag if bits & mask else "-" for flag, mask in (("r", 4), ("w", 2), ("x", 1)))


def _owner(st):
    return "%s:%s" % (user_name(st.st_uid), group_name(st.st_gid))


def path_facts(path, entries=8, user=None):
    """What ``path`` is, as a dict: ``type`` (``missing``, ``file``, ``directory``,
    ``symlink``, ``socket``, ``fifo``, ``device``, ``inaccessible``) and the facts that go
    with it: size, mode and owner; a directory's first ``entries`` names; a link's target
    and whether it dangles; for a missing path its nearest existing parent. With ``user``
    (a service account), ``user_access`` says what that account may do (``r-x``).
    """
    facts = {"type": "missing"}
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT and exc.errno != errno.ENOTDIR:
            return {"type": "inaccessible", "error": exc.strerror or str(exc)}
        parent = os.path.dirname(path.rstrip("/")) or "/"
        while parent != "/" and not os.path.lexists(parent):
            parent = os.path.dirname(parent) or "/"
        facts["existing_parent"] = parent
        try:
            pst = os.stat(parent)
            facts["parent_mode"] = "%04o" % stat.S_IMODE(pst.st_mode)
            facts["parent_owner"] = _owner(pst)
            who = account(user) if user else None
            if who is not None:
                facts["parent_user_access"] = access_for(pst, who)
        except OSError:
            pass
        return facts
    facts = {"mode": "%04o" % stat.S_IMODE(st.st_mode), "owner": _owner(st)}
    if stat.S_ISLNK(st.st_mode):
        facts["type"] = "symlink"
        try:
            facts["target"] = os.readlink(path)
        except OSError:
            facts["target"] = None
        facts["dangling"] = not os.path.exists(path)
        del facts["mode"]
        return facts
    if stat.S_ISDIR(st.st_mode):
        facts["type"] = "directory"
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            facts["entries_error"] = exc.strerror or str(exc)
        else:
            facts["entries"] = names[:entries]
            facts["entries_total"] = len(names)
    elif stat.S_ISREG(st.st_mode):
        facts["type"] = "file"
        facts["size"] = st.st_size
    elif stat.S_ISSOCK(st.st_mode):
        facts["type"] = "socket"
    elif stat.S_ISFIFO(st.st_mode):
        facts["type"] = "fifo"
    else:
        facts["type"] = "device"
    who = account(user) if user else None
    if who is not None:
        facts["user_access"] = access_for(st, who)
    usage = filesystem_usage(path)
    if usage and (usage["used_pct"] >= 90 or (usage["inodes_used_pct"] or 0) >= 90):
        facts["filesystem"] = "%s %d%% used, %s free, inodes %s%% used" % (
            usage["path"], usage["used_pct"], usage["free"], usage["inodes_used_pct"])
    return facts


def user_access_text(path, user):
    """``; user redis may r-x`` for :func:`describe_path` lines, or "" when not applicable."""
    who = account(user) if user else None
    if who is None:
        return ""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return "; user %s may %s" % (user, access_for(st, who))
