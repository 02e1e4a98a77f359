# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Landlock confinement of one command: the kernel holds it to what the policy declared.

A *confinement* (built by the controller from the policy verdict's effects, see
``plugin_utils/confinement.py``) says which paths the command may change, in which
directories it may create or remove entries, which programs it may execute and whether
it may use TCP. ``Ruleset.build`` turns it into a Landlock ruleset in the parent (where
a missing path or an old kernel is a clear error); ``Ruleset.enter`` runs in the child
just before exec (after any privilege drop): ``PR_SET_NO_NEW_PRIVS`` then
``landlock_restrict_self``. Reads are not restricted by the kernel (the policy refuses
secrets; docs/policy.md, "Threat model"). Runs on targets: standard library only,
Python 3.9 compatible; plain system calls through ctypes, no privilege needed.
"""
from __future__ import annotations

import ctypes
import errno
import glob
import os
import platform
import stat
import struct

from ansible_collections.sentinel.remediation.plugins.module_utils import held_path
from ansible_collections.sentinel.remediation.plugins.module_utils.planted_links import planted_link

# Same numbers on every architecture that has Landlock (the unified syscall table).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13      # ABI 2
TRUNCATE = 1 << 14   # ABI 3
NET_BIND_TCP = 1 << 0      # ABI 4
NET_CONNECT_TCP = 1 << 1   # ABI 4

# What the kernel is asked to govern (everything but reads and device ioctls); what is not
# granted below is then denied.
_HANDLED_V1 = (EXECUTE | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
               | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
# Rights a rule on a regular file may carry (the others only make sense on directories).
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
CHANGE_FILE = WRITE_FILE | TRUNCATE
CREATE_IN = MAKE_REG | MAKE_DIR | MAKE_SYM | MAKE_FIFO | MAKE_SOCK | WRITE_FILE | TRUNCATE | REFER
REMOVE_IN = REMOVE_FILE | REMOVE_DIR | REFER
# Devices every tool may write to whatever it does (never device nodes it could create).
ALWAYS_WRITABLE = ("/dev/null", "/dev/tty")


class ConfinementError(Exception):
    """The confinement cannot be applied here (names what is missing and why)."""


class PlantedLink(ConfinementError):
    """A path the command may change goes through a symbolic link another account could have
    planted: a rule would follow it to whatever it points at (its target, not the declared path)."""


_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    return _LIBC


def _syscall(number: int, *args) -> int:
    result = _libc().syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


_ABI = None


def abi_version() -> int:
    """The Landlock ABI of this kernel, 0 when Landlock is missing or disabled (an old kernel,
    a kernel built without it, ``lsm=`` without landlock, a seccomp profile that blocks it)."""
    global _ABI
    if _ABI is None:
        if platform.system() != "Linux":
            _ABI = 0
        else:
            try:
                _ABI = _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
            except (OSError, AttributeError):
                _ABI = 0
    return _ABI


def unavailable_reason() -> str:
    """Why this host cannot confine commands, empty when it can."""
    if abi_version() > 0:
        return ""
    if platform.system() != "Linux":
        return "Landlock needs Linux"
    try:
        _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            return "this kernel (%s) has no Landlock (5.13 or later, or a seccomp profile blocks it)" % platform.release()
        if exc.errno == errno.EOPNOTSUPP:
            return "Landlock is built into this kernel but not enabled (boot parameter lsm=...,landlock)"
        return "Landlock is unavailable: %s" % exc.strerror
    return "Landlock is unavailable"


def _handled_fs(abi: int) -> int:
    handled = _HANDLED_V1
    if abi >= 2:
        handled |= REFER
    if abi >= 3:
        handled |= TRUNCATE
    return handled


def nearest_existing(path: str) -> str:
    """``path`` or its nearest ancestor that exists (rules attach to existing inodes)."""
    path = os.path.normpath(path) if path else "/"
    while not os.path.exists(path) and path != "/":
        path = os.path.dirname(path)
    return path


def _elf_interpreter(path: str) -> str | None:
    """The program interpreter (``PT_INTERP``, the dynamic loader) an ELF file names; the
    kernel opens it for execution too."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if header[:4] != b"\x7fELF" or len(header) < 64:
                return None
            wide, little = header[4] == 2, header[5] == 1
            order = "<" if little else ">"
            if wide:
                phoff, = struct.unpack(order + "Q", header[32:40])
                phentsize, phnum = struct.unpack(order + "HH", header[54:58])
            else:
                phoff, = struct.unpack(order + "I", header[28:32])
                phentsize, phnum = struct.unpack(order + "HH", header[42:46])
            for index in range(min(phnum, 64)):
                handle.seek(phoff + index * phentsize)
                entry = handle.read(phentsize)
                if len(entry) < phentsize or struct.unpack(order + "I", entry[:4])[0] != 3:  # PT_INTERP
                    continue
                if wide:
                    offset, size = struct.unpack(order + "Q", entry[8:16])[0], struct.unpack(order + "Q", entry[32:40])[0]
                else:
                    offset, size = struct.unpack(order + "I", entry[4:8])[0], struct.unpack(order + "I", entry[16:20])[0]
                handle.seek(offset)
                return handle.read(min(size, 4096)).rstrip(b"\0").decode("utf-8", "replace") or None
    except (OSError, struct.error):
        return None
    return None


def _script_interpreter(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    return words[0] if words else None


def executables(program: str) -> list:
    """The files the kernel executes to run ``program``: the program, its ELF loader, and
    for a script its interpreter (and that one's loader)."""
    found = []

    def add(path):
        if path and os.path.isfile(path) and os.path.realpath(path) not in found:
            found.append(os.path.realpath(path))
            add(_elf_interpreter(path))
            add(_script_interpreter(path))
    add(program)
    # A link to a dispatcher script of another name (Debian's pg_wrapper behind psql, pg_dump,
    # pg_ctlcluster) runs the versioned program of the link's own name, which the distribution
    # keeps in a bin directory under /usr/lib (/usr/lib/postgresql/15/bin/psql).
    name = os.path.basename(program)
    real = os.path.realpath(program)
    if name and os.path.basename(real) != name and _script_interpreter(real):
        for candidate in sorted(glob.glob("/usr/lib/*/*/bin/" + name) + glob.glob("/usr/lib/*/bin/" + name)):
            add(candidate)
    return found


def _open_path(path: str) -> int:
    """The inode a rule attaches to, opened one component at a time (``held_path``): a rule made by
    name would follow a link swapped in since the check to whatever it points at, and grant that."""
    try:
        return held_path.open_path(path)
    except held_path.UnsafePath as exc:
        raise PlantedLink("%s: a rule there would follow it to what it points at" % exc)


def _between_check_and_use(paths: list) -> None:
    """Nothing; a seam the tests use to swap a declared path after it was checked, before its rule
    is made."""


class Ruleset:
    """A built Landlock ruleset (its fd) and the words that say what it allows."""

    def __init__(self, fd: int, abi: int, rules: list, tcp: bool):
        self.fd, self.abi, self.rules, self.tcp = fd, abi, rules, tcp
        self.bind = False

    @classmethod
    def build(cls, confinement: dict, programs: list) -> "Ruleset":
        """Build the ruleset of one command: ``confinement`` with ``write`` (paths whose content
        may change), ``create`` (directories beneath which entries may be made), ``remove``
        (directories beneath which entries may be removed), ``tcp`` (bool); ``programs``: the
        resolved paths of the programs it may execute."""
        for path in (confinement.get("write") or []) + (confinement.get("create") or []) + \
                (confinement.get("remove") or []):
            why = planted_link(path)  # first: with or without a kernel to confine, never written through
            if why:
                raise PlantedLink("%s: writing there would follow it to what it points at" % why)
        _between_check_and_use((confinement.get("write") or []) + (confinement.get("create") or [])
                               + (confinement.get("remove") or []))
        abi = abi_version()
        if abi < 1:
            raise ConfinementError(unavailable_reason())
        handled = _handled_fs(abi)
        net = 0
        if abi >= 4 and not confinement.get("tcp"):
            # ``bind``: a config test binds the daemon's listen sockets to test them; it still never connects.
            net = NET_CONNECT_TCP if confinement.get("bind") else NET_BIND_TCP | NET_CONNECT_TCP
        if abi >= 6:
            attr = struct.pack("=QQQ", handled, net, 0)
        elif abi >= 4:
            attr = struct.pack("=QQ", handled, net)
        else:
            attr = struct.pack("=Q", handled)
        buffer = ctypes.create_string_buffer(attr, len(attr))
        try:
            fd = _syscall(_SYS_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
        except OSError as exc:
            raise ConfinementError("landlock_create_ruleset failed: %s" % exc.strerror)
        ruleset = cls(fd, abi, [], bool(confinement.get("tcp")) or abi < 4)
        ruleset.bind = bool(confinement.get("bind"))
        try:
            for path in programs:
                for name in executables(path):
                    ruleset._allow(name, EXECUTE, "exec")
            for path in ALWAYS_WRITABLE:
                if os.path.exists(path):
                    ruleset._allow(path, CHANGE_FILE, None)
            for path in confinement.get("write") or []:
                if os.path.exists(path):
                    ruleset._allow(path, CHANGE_FILE, "write")
                else:  # a file the command makes: where it appears
                    ruleset._allow(nearest_existing(os.path.dirname(path)), CREATE_IN, "create")
            for path in confinement.get("create") or []:
                ruleset._allow(nearest_existing(path), CREATE_IN, "create")
            for path in confinement.get("remove") or []:
                ruleset._allow(nearest_existing(path), REMOVE_IN, "remove")
        except Exception:
            os.close(fd)
            raise
        return ruleset

    def _allow(self, path: str, rights: int, word) -> None:
        try:
            target = _open_path(path)
        except PlantedLink:
            raise
        except OSError as exc:
            raise ConfinementError("cannot open %s for the ruleset: %s" % (path, exc.strerror or exc))
        # what the descriptor is, not what the name is now: the rule is made on the descriptor
        is_dir = stat.S_ISDIR(os.fstat(target).st_mode)
        rights &= _handled_fs(self.abi)
        if not is_dir:
            rights &= _FILE_RIGHTS
        if not rights:
            os.close(target)
            return
        try:
            attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, target), 12)
            _syscall(_SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH), attr, ctypes.c_uint32(0))
        except OSError as exc:
            raise ConfinementError("landlock_add_rule on %s failed: %s" % (path, exc.strerror))
        finally:
            os.close(target)
        if word:
            shown = "%s %s%s" % (word, path, "/" if is_dir and word != "exec" and path != "/" else "")
            if shown not in self.rules:
                self.rules.append(shown)

    def describe(self) -> str:
        """The rules in words, for the journal and the report."""
        parts = ["Landlock ABI %d" % self.abi]
        execs = [r[5:] for r in self.rules if r.startswith("exec ")]
        parts.append("exec only " + ", ".join(execs) if execs else "no exec")
        changes = [r for r in self.rules if not r.startswith("exec ")]
        parts.append("changes only: " + ", ".join(changes) if changes else "no file changes")
        if self.abi < 4:
            parts.append("TCP not restricted (ABI < 4)")
        else:
            parts.append("TCP allowed (a network read)" if self.tcp
                         else "TCP bind only (a config test), no connect" if self.bind else "no TCP connect or bind")
        parts.append("reads not restricted")
        return "; ".join(parts)

    def enter(self) -> None:
        """In the child, after any privilege drop and just before exec."""
        libc = _libc()
        if libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
