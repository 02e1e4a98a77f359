# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Running a checked plan's commands on the host, with least privilege (execute_plan).

Each command is an argv run without a shell. A command that does not need root runs as
the user who invoked sudo (or a named account), with privileges dropped in the child
before exec; a command that signals PIDs runs only when each PID is still the process
the evidence showed (same start time and name). Runs on targets: standard library only,
Python 3.9 compatible.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time

from ansible_collections.sentinel.remediation.plugins.module_utils import (
    client_connections, command_aftermath, confine_run, held_copy, host_probe)
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text, redact_value

try:
    import pwd
except ImportError:  # pragma: no cover - not on Linux
    pwd = None

# After the command exits, output still arriving on its pipes is read this long: a daemon
# it started may hold them open for good.
DRAIN_SECONDS = 0.5
# Bytes kept beyond output_max before redaction, so a cut cannot split a secret the rules
# would have recognised.
REDACT_MARGIN = 1024


CONFINEMENT_MODES = confine_run.MODES


class PlanError(ValueError):
    """Arguments that cannot describe a plan (names what is wrong)."""


class Identity:
    """An account to run commands as."""

    def __init__(self, uid: int, gid: int, name: str, home: str = "/"):
        self.uid, self.gid, self.name, self.home = uid, gid, name, home or "/"

    def __repr__(self) -> str:
        return "Identity(%s, uid=%d, gid=%d)" % (self.name, self.uid, self.gid)

    @classmethod
    def of_uid(cls, uid: int, gid=None, name=None) -> "Identity":
        home = "/"
        try:
            entry = pwd.getpwuid(uid)
            name = name or entry.pw_name
            gid = entry.pw_gid if gid is None else gid
            home = entry.pw_dir
        except (KeyError, AttributeError):
            name = name or str(uid)
            gid = uid if gid is None else gid
        return cls(uid, gid, name, home)

    @classmethod
    def of_name(cls, name: str) -> "Identity":
        try:
            entry = pwd.getpwnam(name)
        except (KeyError, AttributeError):
            raise PlanError("unprivileged_user %r: no such user on this host" % name)
        return cls(entry.pw_uid, entry.pw_gid, entry.pw_name, entry.pw_dir)


def root_identity() -> Identity:
    return Identity.of_uid(0, 0)


def invoking_identity(environ=None, unprivileged_user=None) -> Identity:
    """The account a command without ``become`` runs as.

    ``unprivileged_user`` when given; else, when the module runs as root through sudo, the
    user who invoked sudo (``SUDO_UID``, ``SUDO_GID``, ``SUDO_USER``: Ansible's remote user);
    else the module's own user (a connection as root, or a task without become).
    """
    environ = os.environ if environ is None else environ
    if unprivileged_user:
        return Identity.of_name(unprivileged_user)
    euid = os.geteuid()
    sudo_uid = environ.get("SUDO_UID", "")
    if euid == 0 and sudo_uid.isdigit():
        sudo_gid = environ.get("SUDO_GID", "")
        return Identity.of_uid(int(sudo_uid), int(sudo_gid) if sudo_gid.isdigit() else None,
                               environ.get("SUDO_USER") or None)
    return Identity.of_uid(euid, os.getegid())


MAX_OUTPUT_PIDS = 256


def pid_starts(text: str, stat_reader=None, limit: int = MAX_OUTPUT_PIDS) -> dict:
    """``{pid: start}`` (clock ticks since boot) of each live process whose PID stands alone in
    a command's output, read when the output was made: a later command that signals one of them
    (a plan a human approved hours later) is checked to be that very process, not whoever has
    its PID now."""
    stat_reader = stat_reader or host_probe.read_stat
    found = {}
    for pid in host_probe.pids_in(text):
        if len(found) >= limit:
            break
        seen = stat_reader(pid)
        if seen is not None:
            found[str(pid)] = int(seen["start"])
    return found


def normalise_expectations(expect) -> dict:
    """``expect_pids`` with int keys: ``{pid: {"start": int, "comm": str | None}}``, or
    ``{pid: {"seen": True, "start": int | None}}`` for a PID read in a command's output
    (checked on the host to be one of the service's processes and, with the start its read
    found, that very process, :func:`pid_problem`)."""
    result = {}
    for key, value in (expect or {}).items():
        try:
            pid = int(key)
        except (TypeError, ValueError):
            raise PlanError("expect_pids: key %r is not a PID" % (key,))
        if isinstance(value, dict) and value.get("seen") is True:
            start = value.get("start")
            if start is not None and (not isinstance(start, int) or isinstance(start, bool)):
                raise PlanError("expect_pids[%s].start: %r is not an integer" % (key, start))
            result[pid] = {"start": start, "comm": None, "seen": True}
            continue
        if not isinstance(value, dict) or "start" not in value:
            raise PlanError("expect_pids[%s]: needs start (clock ticks since boot, from the evidence), got %r"
                            % (key, value))
        try:
            start = int(value["start"])
        except (TypeError, ValueError):
            raise PlanError("expect_pids[%s].start: %r is not an integer" % (key, value["start"]))
        comm = value.get("comm")
        if comm is not None and not isinstance(comm, str):
            raise PlanError("expect_pids[%s].comm: %r is not a string" % (key, comm))
        result[pid] = {"start": start, "comm": comm or None}
    return result


def _pids(command: dict, key: str, index: int) -> list:
    pids = []
    for pid in command.get(key) or []:
        try:
            pids.append(int(pid))
        except (TypeError, ValueError):
            raise PlanError("commands[%d].%s: %r is not a PID" % (index, key, pid))
    return pids


def normalise_commands(commands) -> list:
    if not commands:
        raise PlanError("commands: at least one command is needed")
    result = []
    for index, command in enumerate(commands):
        argv = command.get("argv") or []
        if not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
            raise PlanError("commands[%d].argv: a non-empty list of strings is needed, got %r" % (index, argv))
        pids = _pids(command, "pids", index)
        try:
            confine = confine_run.normalise(command.get("confine"), "commands[%d].confine" % index)
        except ValueError as exc:
            raise PlanError(str(exc))
        keep = []
        for change in command.get("keep") or []:
            path = change.get("path") if isinstance(change, dict) else None
            if not isinstance(path, str) or not path.startswith("/"):
                raise PlanError("commands[%d].keep: each item needs an absolute path, got %r" % (index, change))
            keep.append({"path": path, "tree": bool(change.get("tree", True)), "meta": bool(change.get("meta"))})
        idle = _pids(command, "idle_pids", index)
        session = command.get("session_check") or {}
        if session and not (isinstance(session.get("pid"), int) and session["pid"] > 0 and session.get("identity")
                            and session.get("dependency")):
            raise PlanError("commands[%d].session_check: a dependency, a PID and an identity are needed, got %r"
                            % (index, session))
        result.append({"argv": list(argv), "become": bool(command.get("become")), "pids": pids,
                       "label": command.get("label"), "approved": bool(command.get("approved")), "confine": confine,
                       "keep": keep, "idle_pids": idle, "session_check": dict(session) if session else None})
    return result


def pid_problem(pids: list, expect: dict, stat_reader=None, belongs=None):
    """Why the command must not signal ``pids`` now, or None when each PID is still the
    process the evidence showed (same start time and, when given, same ``comm``). A PID
    only seen in a command's output (``seen``) must be one of the service's processes now:
    ``belongs(pid)`` says why not, or None (without it such a PID is not signalled)."""
    stat_reader = stat_reader or host_probe.read_stat
    for pid in pids:
        if pid < 2:
            return "PID %d is never signalled (it is init or a process group)" % pid
        expected = expect.get(pid)
        if expected is None:
            return ("PID %d has no expected start time in expect_pids: it is not signalled blindly"
                    " (take start and comm from the evidence)" % pid)
        if expected.get("seen"):
            found = belongs(pid) if belongs is not None else (
                "PID %d was only read in a command's output and no service is given to check it against" % pid)
            if found:
                return found
            if expected.get("start") is None:
                continue
        seen = stat_reader(pid)
        what = expected["comm"] or "the process"
        if seen is None:
            return "PID %d is gone (it was %s started at tick %d): nothing to signal" % (pid, what, expected["start"])
        if seen["start"] != expected["start"]:
            return ("PID %d is another process now (%s started at tick %d, the evidence showed %s started at tick %d)"
                    % (pid, seen["comm"], seen["start"], what, expected["start"]))
        if expected["comm"] and seen["comm"] != expected["comm"]:
            return "PID %d runs %s, the evidence showed %s" % (pid, seen["comm"], expected["comm"])
    return None


def command_env(identity: Identity) -> dict:
    """A clean environment: no variable of the module's (nor sudo's) leaks into a command."""
    return {
        "PATH": host_probe.search_path(), "HOME": identity.home, "USER": identity.name,
        "LOGNAME": identity.name, "LC_ALL": "C", "LANG": "C", "TERM": "dumb",
        "PAGER": "cat", "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0",
    }


def _drop_to(identity: Identity):
    """The preexec function that makes the child ``identity`` (groups, gid, then uid).

    The account is looked up before the fork: the child only makes system calls."""
    named = _has_account(identity)

    def drop():
        if named:
            os.initgroups(identity.name, identity.gid)
        else:
            os.setgroups([identity.gid])
        os.setgid(identity.gid)
        os.setuid(identity.uid)
    return drop


def _has_account(identity: Identity) -> bool:
    try:
        return pwd.getpwnam(identity.name).pw_uid == identity.uid
    except (KeyError, AttributeError):
        return False


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


def _read_tails(proc, timeout: float, keep: int) -> tuple:
    """Read both pipes to the end (or the deadline) keeping the first ``keep // 2`` and the
    last ``keep`` bytes of each (a diagnostic's first lines are often the ones that matter,
    an error's last); ``(stdout, stderr, timed_out)``, each cut in the middle when longer."""
    tails = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    heads = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    seen = {proc.stdout: 0, proc.stderr: 0}
    selector = selectors.DefaultSelector()
    for stream in tails:
        selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    drain_until = None
    timed_out = False
    try:
        while selector.get_map():
            now = time.monotonic()
            if proc.poll() is not None and drain_until is None:
                drain_until = now + DRAIN_SECONDS
            limit = drain_until if drain_until is not None else deadline
            if now >= limit:
                timed_out = drain_until is None
                break
            for key, _mask in selector.select(min(limit - now, 0.2)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                head, tail = heads[key.fileobj], tails[key.fileobj]
                seen[key.fileobj] += len(chunk)
                if len(head) < keep // 2:
                    head.extend(chunk[:keep // 2 - len(head)])
                tail.extend(chunk)
                if len(tail) > keep:
                    del tail[:len(tail) - keep]
    finally:
        selector.close()

    def joined(stream) -> bytes:
        head, tail, total = bytes(heads[stream]), bytes(tails[stream]), seen[stream]
        start = total - len(tail)  # where the kept tail begins in the stream
        if start <= len(head):     # nothing lost: the head and the tail overlap or touch
            return head[:start] + tail
        return head + b"\n[... %d bytes cut ...]\n" % (start - len(head)) + tail
    return joined(proc.stdout), joined(proc.stderr), timed_out


def _tail_text(data: bytes, output_max: int, keep: str = "tail") -> str:
    text = redact_text(data.decode("utf-8", "replace"))
    return host_probe.clip_text(text, output_max, keep)[0]


def run_as(argv: list, identity: Identity, timeout: int, output_max: int, ruleset=None) -> dict:
    """Run ``argv`` (no shell) as ``identity``; ``{"rc", "stdout", "stderr", "seconds"}`` and
    ``reason`` when it did not run or was killed. rc 127: not found, 126: cannot run,
    124: timed out (as coreutils ``timeout`` says it). ``ruleset``: a Landlock ruleset the
    child enters after the privilege drop, just before exec (``landlock.Ruleset``)."""
    started = time.monotonic()
    result = {"rc": None, "stdout": "", "stderr": "", "seconds": 0.0, "reason": ""}
    program = host_probe.find_tool(argv[0])
    if program is None:
        result.update(rc=127, stderr="%s: command not found" % argv[0], reason="command not found")
        return result
    switch = identity.uid != os.geteuid()
    try:
        proc = subprocess.Popen(
            [program] + argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=command_env(identity), cwd="/", close_fds=True, start_new_session=True,
            preexec_fn=confine_run.child_setup(_drop_to(identity) if switch else None, ruleset),
            pass_fds=(ruleset.fd,) if ruleset is not None else ())
    except (OSError, subprocess.SubprocessError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        result.update(rc=126, stderr="%s: %s" % (argv[0], why), reason="could not start as %s: %s" % (identity.name, why),
                      seconds=round(time.monotonic() - started, 3))
        return result
    out, err, timed_out = _read_tails(proc, timeout, output_max + REDACT_MARGIN)
    if timed_out:
        _kill(proc)
    try:
        rc = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        _kill(proc)
        rc = proc.wait()
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    result.update(rc=124 if timed_out else rc, stdout=_tail_text(out, output_max, "both"), stderr=_tail_text(err, output_max),
                  seconds=round(time.monotonic() - started, 3))
    if timed_out:
        result["reason"] = "timed out after %ds and was killed" % timeout
    return result


def _between_check_and_use(command: dict) -> None:
    """Nothing; a seam the tests use to change the host after every check of a command, just
    before it runs (the moment another account would pick to swap a path for a link)."""


def plan_identities(commands: list, invoker: Identity) -> list:
    """For each command, ``(identity, problem)``: who it runs as, or why it cannot run."""
    is_root = os.geteuid() == 0
    found = []
    for command in commands:
        if command["become"]:
            if is_root:
                found.append((root_identity(), None))
            else:
                found.append((None, "needs root, but the module runs as %s (uid %d): run the task with become"
                              % (invoker.name, os.geteuid())))
        else:
            if not is_root and invoker.uid != os.geteuid():
                found.append((None, "cannot run as %s: the module runs as uid %d, not root" % (invoker.name, os.geteuid())))
            else:
                found.append((invoker, None))
    return found


def _shown_argv(argv: list) -> list:
    return redact_value(list(argv))


def clients_now(pids: list, proc: str = "/proc", current=None) -> dict:
    """The client connections a restart whose cost was waived would drop now
    (``client_connections.count``). ``pids``: the service's processes the evidence showed;
    ``current``: a function that finds its processes now (``service_evidence.current_pids``),
    counted with them, so a server started since (a restart earlier in the plan) and its
    clients are not missed."""
    pids = list(pids)
    if current is not None:
        try:
            pids = sorted(set(pids) | set(current()))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            return {"unknown": "the service's processes cannot be found now to count them (%s)" % exc}
    return client_connections.count(pids, proc)


def clients_reason(found: dict):
    """Why a waived restart must not run with ``found`` clients (or an unknown count), or None."""
    if "unknown" in found or found.get("count"):
        return ("needs a human's approval: it would drop client connections, and it was allowed only because the "
                "service served none (clients now: %s)" % client_connections.summary(found))
    return None


def clients_problem(pids: list, proc: str = "/proc", current=None):
    """Why a restart whose cost was waived (its service served no client) must not run now:
    the service serves clients again, or they cannot be counted; None when it still serves none."""
    return clients_reason(clients_now(pids, proc, current))


def preview(commands: list, expect: dict, invoker: Identity, belongs=None) -> list:
    """check mode: what would run, as whom, and what would be refused; runs nothing."""
    would = []
    for command, (identity, problem) in zip(commands, plan_identities(commands, invoker)):
        problem = problem or pid_problem(command["pids"], expect, belongs=belongs)
        item = {"argv": _shown_argv(command["argv"]), "become": command["become"],
                "user": identity.name if identity else None, "pids": command["pids"],
                "runnable": problem is None, "reason": problem or ""}
        if command["label"] is not None:
            item["label"] = command["label"]
        would.append(item)
    return would


def run_plan(commands: list, expect: dict, invoker: Identity, stop_on_failure: bool = True,
             timeout: int = 60, output_max: int = 2000, confinement: str = "off", snapshots=None,
             belongs=None, service_pids=None, session_problem=None) -> dict:
    """Run the commands in order: ``{"results", "stopped_at", "ran"}``.

    A command fails when it exits non-zero or is refused (needs root the module lacks, a
    PID that is not the expected process). ``stopped_at`` is the index of the first failing
    command (None when none failed); with ``stop_on_failure`` the commands after it are not
    run, without it they run all the same. ``confinement`` (required | preferred | off): how
    each command's ``confine`` is enforced (``confine_run``); a confinement denial fails the
    command and its result says so (``denied``). ``snapshots`` (a ``snapshot.Session``):
    each command's ``keep`` paths are kept before it runs; a command whose paths cannot
    all be kept runs only when a human approved it (it could not be undone). ``belongs``:
    see :func:`pid_problem`. ``service_pids``: see :func:`clients_problem` (``current``).
    ``session_problem(expected, approved)``: why a command that ends the database session
    ``expected`` (its ``session_check``) must not run now, or None
    (``server_sessions.idle_session_problem``); without it such a command is not run.
    """
    results = []
    stopped_at = first_failure = None
    ran = 0
    for index, (command, (identity, problem)) in enumerate(zip(commands, plan_identities(commands, invoker))):
        item = {"argv": _shown_argv(command["argv"]), "become": command["become"],
                "user": identity.name if identity else None, "rc": None, "stdout": "", "stderr": "",
                "seconds": 0.0, "skipped": False, "reason": ""}
        if command["label"] is not None:
            item["label"] = command["label"]
        if stopped_at is not None:
            item.update(skipped=True, reason="not run: command %d failed and stop_on_failure is true" % stopped_at)
            results.append(item)
            continue
        # checked just before running, so the PID is as fresh as it can be
        problem = problem or pid_problem(command["pids"], expect, belongs=belongs)
        if not problem and command["idle_pids"] and not command["approved"]:
            clients = clients_now(command["idle_pids"], current=service_pids)
            problem = clients_reason(clients)
            if problem:
                item["clients"] = clients  # the controller holds the plan for a human with this count
        if not problem and command["session_check"]:
            problem = (session_problem(command["session_check"], command["approved"]) if session_problem else
                       "the database session it ends cannot be checked on this host")
        ruleset = None
        if not problem:
            ruleset, record, problem = confine_run.prepare(command, confinement)
            item.update(record)
        if not problem and snapshots is not None and command["keep"]:
            unkept = snapshots.keep(command["keep"])
            if unkept and not command["approved"]:
                problem = "needs a human's approval: it could not be undone (%s)" % "; ".join(unkept)
                if ruleset is not None:
                    ruleset.close()
                    ruleset = None
            elif unkept:
                item["unkept"] = unkept
        if problem:
            item.update(skipped=True, reason=redact_text(problem))
        else:
            ran += 1
            try:
                ending = command_aftermath.snapshot(command_aftermath.ending_targets(command["argv"], command["pids"]))
                _between_check_and_use(command)
                # root's copy of one file: done here through held descriptors, not by a cp that
                # looks its target up by name after every check was made (held_copy)
                copy = held_copy.parse(command["argv"]) if identity.uid == 0 else None
                if copy:
                    item.update(held_copy.run(*copy))
                    if item.get("confined"):  # the rules were built for cp; the runner's copy did not enter them
                        item["confinement"] += "; the copy made by the runner, which writes %s only" % copy[1]
                else:
                    item.update(run_as(command["argv"], identity, timeout, output_max, ruleset))
                starts = pid_starts(item.get("stdout") or "")
                if starts:
                    item["pid_starts"] = starts
                item.update(confine_run.denial(item, ruleset, identity.uid == 0))
                # judged on the host, not by the exit code: a signalled process gone, a start that started
                after = [command_aftermath.wait_gone(ending)] if item["rc"] == 0 and ending else []
                if item["rc"] == 0:
                    after.append(command_aftermath.start_note(command["argv"]))
                if any(after):
                    item["afterwards"] = redact_text("; ".join(note for note in after if note))
            except Exception as exc:  # pylint: disable=broad-exception-caught
                # keep the record of what ran before; this command's outcome is unknown
                item["reason"] = "internal error while running it: %s" % exc
            finally:
                if ruleset is not None:
                    ruleset.close()
        results.append(item)
        if (item["skipped"] or item["rc"] != 0 or item.get("denied")) and first_failure is None:
            first_failure = index
            if stop_on_failure:
                stopped_at = index
    return {"results": results, "stopped_at": first_failure, "ran": ran}
