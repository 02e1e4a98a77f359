# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many clients a service's processes serve right now, from the kernel's socket tables.

A client connection is a socket a process of the service (or a child it forked, as a database
forks a backend per client) holds, that was accepted on an address the service listens on:
an ESTABLISHED TCP socket whose local port is one of the service's listening ports, or a
connected unix stream socket carrying the path of one of its listening unix sockets (the
kernel shows an accepted unix socket under its listener's path; a socketpair has none).
Sockets the service opened itself to other servers are not its clients and are not counted.

Anything that cannot be read (a process's descriptors without root, a table missing) makes
the answer ``unknown``, which callers must treat as "has clients".
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

TCP_ESTABLISHED = "01"
TCP_LISTEN = "0A"
UNIX_CONNECTED = "03"
UNIX_ACCEPTCON = 0x10000
MAX_PROCESSES = 4096


def _ppids(proc):
    """{pid: ppid} of every process readable now."""
    found = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat")) as handle:
                text = handle.read()
        except (IOError, OSError):
            continue  # gone meanwhile
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[1].isdigit():
            found[int(name)] = int(fields[1])
    return found


def family(pids, proc="/proc"):
    """``pids`` and every descendant of them alive now (sorted)."""
    parents = _ppids(proc)
    alive = set(p for p in pids if p in parents)
    changed = True
    while changed and len(alive) < MAX_PROCESSES:
        changed = False
        for pid, ppid in parents.items():
            if ppid in alive and pid not in alive:
                alive.add(pid)
                changed = True
    return sorted(alive)


def socket_inodes(pid, proc="/proc"):
    """The socket inodes ``pid`` holds. Raises OSError when its descriptors cannot be read."""
    fd_dir = os.path.join(proc, str(pid), "fd")
    inodes = set()
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target.endswith("]"):
            inodes.add(target[8:-1])
    return inodes


def _rows(path):
    with open(path) as handle:
        return [line.split() for line in handle.read().splitlines()[1:] if line.strip()]


def _tcp(net):
    """[(local port, state, inode)] of the TCP tables of one network namespace."""
    rows = []
    for name in ("tcp", "tcp6"):
        path = os.path.join(net, name)
        if not os.path.exists(path):
            continue
        for fields in _rows(path):
            if len(fields) > 9 and ":" in fields[1]:
                rows.append((int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]))
    return rows


def _unix(net):
    """[(flags, state, inode, path)] of the unix socket table (stream and seqpacket)."""
    rows = []
    for fields in _rows(os.path.join(net, "unix")):
        if len(fields) >= 7 and fields[4] in ("0001", "0005"):
            rows.append((int(fields[3], 16), fields[5], fields[6], fields[7] if len(fields) > 7 else ""))
    return rows


def count(pids, proc="/proc"):
    """``{"count": N, "by_endpoint": {"tcp :5432": 2, "unix /run/...": 1}}`` (``{"count": 0}``
    when none), or ``{"unknown": why}``. ``pids``: the service's processes (their children are added)."""
    pids = [int(p) for p in pids or []]
    if not pids:
        return {"unknown": "no process of the service is known"}
    members = family(pids, proc)
    if not members:
        return {"count": 0}
    owned = set()
    for pid in members:
        try:
            owned |= socket_inodes(pid, proc)
        except OSError as exc:
            if os.path.exists(os.path.join(proc, str(pid))):
                return {"unknown": "the sockets of pid %d cannot be read (%s)" % (pid, exc.strerror or exc)}
    net = os.path.join(proc, str(members[0]), "net")
    try:
        tcp = _tcp(net)
        unix = _unix(net)
    except (IOError, OSError, ValueError) as exc:
        return {"unknown": "the socket tables cannot be read (%s)" % exc}
    ports = set(port for port, state, inode in tcp if state == TCP_LISTEN and inode in owned)
    paths = set(path for flags, state, inode, path in unix if flags & UNIX_ACCEPTCON and inode in owned and path)
    by_endpoint = {}
    for port, state, inode in tcp:
        if state == TCP_ESTABLISHED and inode in owned and port in ports:
            key = "tcp :%d" % port
            by_endpoint[key] = by_endpoint.get(key, 0) + 1
    for flags, state, inode, path in unix:
        if state == UNIX_CONNECTED and not flags & UNIX_ACCEPTCON and inode in owned and path in paths:
            key = "unix %s" % path
            by_endpoint[key] = by_endpoint.get(key, 0) + 1
    found = {"count": sum(by_endpoint.values())}
    if by_endpoint:
        found["by_endpoint"] = by_endpoint
    return found


def summary(found):
    """One line for the evidence and the report."""
    if "unknown" in found:
        return "unknown: %s" % found["unknown"]
    if not found.get("count"):
        return "none open"
    return "%d open: %s" % (found["count"], ", ".join("%s %d" % (k, v) for k, v in sorted(found["by_endpoint"].items())))
