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
A client the service has not accepted yet is a client all the same (a restart drops it too):
the connections waiting in a listener's accept queue (a listening TCP socket's ``rx_queue``
in /proc/net/tcp{,6}), those still in their handshake (SYN_RECV rows on a port it listens
on) and the unix connections queued on its listening sockets (rows carrying the listener's
path that no process holds yet: connecting, inode 0) are counted, as ``queued``.

Anything that cannot be read (a process's descriptors without root, a table missing) makes
the answer ``unknown``, which callers must treat as "has clients".
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

TCP_ESTABLISHED = "01"
TCP_SYN_RECV = "03"
TCP_LISTEN = "0A"
UNIX_CONNECTING = "02"
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
    """[(local port, state, inode, rx_queue)] of the TCP tables of one network namespace (a
    listening socket's rx_queue is its accept queue: connections made, not accepted yet)."""
    rows = []
    for name in ("tcp", "tcp6"):
        path = os.path.join(net, name)
        if not os.path.exists(path):
            continue
        for fields in _rows(path):
            if len(fields) > 9 and ":" in fields[1] and ":" in fields[4]:
                rows.append((int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9],
                             int(fields[4].split(":", 1)[1], 16)))
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
    ports = set(port for port, state, inode, _queue in tcp if state == TCP_LISTEN and inode in owned)
    paths = set(path for flags, state, inode, path in unix if flags & UNIX_ACCEPTCON and inode in owned and path)
    by_endpoint = {}
    queued = 0

    def add(key, number=1):
        by_endpoint[key] = by_endpoint.get(key, 0) + number

    for port, state, inode, queue in tcp:
        if state == TCP_ESTABLISHED and inode in owned and port in ports:
            add("tcp :%d" % port)
        elif state == TCP_LISTEN and inode in owned and queue:
            add("tcp :%d" % port, queue)  # made, waiting in the accept queue
            queued += queue
        elif state == TCP_SYN_RECV and port in ports:
            add("tcp :%d" % port)  # still in its handshake with the listener
            queued += 1
    for flags, state, inode, path in unix:
        if flags & UNIX_ACCEPTCON or path not in paths:
            continue
        if state == UNIX_CONNECTED and inode in owned:
            add("unix %s" % path)
        elif state == UNIX_CONNECTING and inode == "0":
            add("unix %s" % path)  # queued on the listener, no process holds it yet
            queued += 1
    found = {"count": sum(by_endpoint.values())}
    if by_endpoint:
        found["by_endpoint"] = by_endpoint
    if queued:
        found["queued"] = queued
    return found


def summary(found):
    """One line for the evidence and the report."""
    if "unknown" in found:
        return "unknown: %s" % found["unknown"]
    if not found.get("count"):
        return "none open"
    text = "%d open: %s" % (found["count"], ", ".join("%s %d" % (k, v) for k, v in sorted(found["by_endpoint"].items())))
    if found.get("queued"):
        text += " (%d of them not accepted yet)" % found["queued"]
    return text
