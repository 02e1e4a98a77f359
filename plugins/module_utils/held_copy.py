# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Root's copy of one file, done by the plan runner itself through held descriptors.

``cp [-p] SOURCE TARGET`` run as root (the known-good restore is ``cp -p <staged copy> <file>``)
opens TARGET by name when it runs, after every check the runner made: the service's account can
swap TARGET, or a directory above it, for a link in between, and ``cp`` follows it. So the runner
does such a copy itself, as ``cp`` would (the bytes; with ``-p`` the mode, owner and times of
SOURCE; without it an existing TARGET keeps its own), with both paths opened by
``held_path.open_file``: one component at a time, no link another account could plant followed,
a hard-linked TARGET refused where another account may add names. The argv the policy judged and
the human approved is still what is done; only the lookup differs. Any other form of ``cp`` runs
as a program. Standard library only, Python 3.9 compatible.
"""
from __future__ import annotations

import os
import stat
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import held_path

_PRESERVE = ("-p", "--preserve", "--preserve=mode,ownership,timestamps")
NOTE = "copied by the runner through held directory descriptors (no link another account could plant followed)"


def parse(argv: list):
    """``(source, target, preserve)`` when ``argv`` copies one file with ``cp`` and at most ``-p``;
    None for any other command (it runs as a program)."""
    if not argv or os.path.basename(argv[0]) != "cp":
        return None
    operands, preserve, options_done = [], False, False
    for word in argv[1:]:
        if not options_done and word == "--":
            options_done = True
        elif not options_done and word.startswith("-") and word != "-":
            if word not in _PRESERVE:
                return None
            preserve = True
        else:
            operands.append(word)
    if len(operands) != 2 or not all(o.startswith("/") for o in operands):
        return None
    return operands[0], operands[1], preserve


def _copy(source: str, target: str, preserve: bool) -> None:
    # O_NONBLOCK: a FIFO swapped in for either path must not hang the runner (regular files ignore it)
    src = held_path.open_file(source, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            raise OSError("%s is not a regular file" % source)
        with held_path.hold(target) as held:
            try:
                if stat.S_ISDIR(os.stat(held.name, dir_fd=held.fd, follow_symlinks=False).st_mode):
                    target = os.path.join(held.where, os.path.basename(source))  # cp into a directory
            except FileNotFoundError:
                pass
        try:
            out = held_path.open_file(target, os.O_WRONLY | os.O_NONBLOCK)
            created = False
        except FileNotFoundError:
            out = held_path.open_file(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                      stat.S_IMODE(info.st_mode) & ~_umask())
            created = True
        try:
            if not stat.S_ISREG(os.fstat(out).st_mode):
                raise OSError("%s is not a regular file" % target)
            os.ftruncate(out, 0)
            while True:
                block = os.read(src, 1 << 20)
                if not block:
                    break
                while block:
                    block = block[os.write(out, block):]
            if preserve:
                os.fchown(out, info.st_uid, info.st_gid)  # before the mode: chown clears set-id bits
                os.fchmod(out, stat.S_IMODE(info.st_mode))
                os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
            elif created:
                os.fchmod(out, stat.S_IMODE(info.st_mode) & ~_umask())
        finally:
            os.close(out)
    finally:
        os.close(src)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def run(source: str, target: str, preserve: bool) -> dict:
    """Copy as ``cp`` would; the result as ``plan_runner.run_as`` gives one (rc 1 and cp's way of
    saying why on error output when refused or failed), with ``held`` saying how it was done."""
    started = time.monotonic()
    try:
        _copy(source, target, preserve)
    except OSError as exc:
        why = str(exc) if isinstance(exc, held_path.UnsafePath) else (exc.strerror or str(exc))
        refused = isinstance(exc, held_path.UnsafePath)
        return {"rc": 1, "stdout": "", "stderr": "cp: %s%s" % ("refused: " if refused else "", why),
                "seconds": round(time.monotonic() - started, 3), "held": NOTE,
                "reason": ("refused: %s; root never writes through a link another account could have planted" % why
                           if refused else "")}
    return {"rc": 0, "stdout": "", "stderr": "", "seconds": round(time.monotonic() - started, 3), "held": NOTE,
            "reason": ""}
