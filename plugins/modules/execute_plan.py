#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: execute_plan
short_description: Run a checked remediation plan and verify the service, in one round trip
version_added: 0.1.0
author:
  - Sentinel Remediation maintainers (@sentinel-remediation)
description:
  - Runs the commands of a plan that the policy (C(sentinel.remediation.policy_check)) has already
    checked, in order, each as its own argv without a shell (no variable expansion, no globbing,
    no chaining), then verifies the service with its health checks and, when it still fails,
    gathers evidence for the next attempt - all in one round trip.
  - Least privilege. Run the task with O(ignore:become=true); a command whose O(commands[].become)
    is false then runs as the user who invoked sudo (Ansible's remote user, from C(SUDO_UID),
    C(SUDO_GID) and C(SUDO_USER)) or O(unprivileged_user), with its groups, gid and uid set in
    the child before the program starts. When the module does not run as root, a command that
    needs root is not run and its result says why.
  - A command that signals processes (O(commands[].pids)) runs only if each PID is still the
    process the evidence showed - the same start time and name in C(/proc/PID/stat) as
    O(expect_pids) says. A PID that vanished or now names another process skips the command
    with the reason; nothing is signalled blindly.
  - Each result keeps the command's exit code and the redacted tails of its output. A failing
    command is a normal result, not a module failure; the module fails only on bad arguments
    or internal errors.
notes:
  - Commands run with a clean environment (C(PATH) with the sbin directories, C(HOME), C(USER),
    C(LOGNAME), C(LC_ALL=C), no pager) and C(/) as working directory.
  - O(commands[].become) is the engine's decision (the policy verdict's C(become)); a C(sudo)
    at the start of an argv is not interpreted, so leave it out.
requirements:
  - Linux (reads C(/proc)); Python 3.9 or later on the target.
extends_documentation_fragment:
  - sentinel.remediation.service_definition.verify
  - sentinel.remediation.service_definition.depends
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode no command runs and nothing is verified; RV(would_run) says what would run, as whom, and what would be refused.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  commands:
    description:
      - The commands to run, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      argv:
        description:
          - The program and its arguments, run without a shell. The program is looked up in C(PATH)
            and the sbin directories.
        type: list
        elements: str
        required: true
      become:
        description:
          - Whether the command runs as root. When false it runs as the invoking user (see the
            description).
        type: bool
        default: false
      pids:
        description:
          - The PIDs the command signals (the policy verdict's C(pids)). Each must be in
            O(expect_pids) and still be that process, else the command is not run.
        type: list
        elements: int
        default: []
      label:
        description:
          - A text returned with the command's result (for example the command as the planner
            wrote it), to match results with their source.
        type: str
      confine:
        description:
          - What the policy verdict declared the command does, as the kernel is to hold it to
            (Landlock, see O(confinement)); the C(sentinel.remediation.heal) action derives it
            from the verdict's effects. Keys C(write) (paths whose content may change; a path
            that does not exist yet may be created in its directory), C(create) and C(remove)
            (directories beneath which entries may be made or removed), C(exec) (the programs of
            the argv it may execute, by name; default its program), C(tcp) (true for a network
            read, whose TCP connect and bind stay allowed), C(bind) (true for a config test, which
            binds the daemon's listen sockets but may not connect), C(exception) (why it runs without a
            ruleset, for service control whose init scripts start daemons, which must not inherit
            one), C(unconfinable) (why no ruleset can hold it; treated as on a host without
            Landlock) and C(rules) (the same in words).
          - Without it the command is not confined, and its result says so.
        type: dict
      approved:
        description:
          - Whether a human approved this command. With O(confinement=preferred), a command that
            cannot be confined on this host runs only when approved.
        type: bool
        default: false
      idle_pids:
        description:
          - A restart, stop or kill of a stateful service that the engine allowed because the service
            served no client connection. Just before running it the module counts again the client
            connections these processes, the service's processes found now as the evidence finds them
            (from O(verify) - a server restarted since has new PIDs) and their children serve, from the
            kernel's socket tables, clients still in a listener's queue included; finding one, or
            unable to count, it does not run the command unless O(commands[].approved).
        type: list
        elements: int
        default: []
      session_check:
        description:
          - A command that ends one database session by its PID (C(pg_terminate_backend)). Just before
            running it the module reads the server's own session view again and runs it only while that
            PID is still the session the evidence showed (same backend and transaction start,
            O(commands[].session_check.identity)); with O(commands[].session_check.min_idle), and unless
            O(commands[].approved), only while the session is still idle in its transaction for at least
            that long and still blocks another session. Otherwise the command is not run, and its result
            says why.
        type: dict
        suboptions:
          dependency:
            description: The name of the server in O(depends) whose session it is.
            type: str
            required: true
          pid:
            description: The session's backend PID.
            type: int
            required: true
          identity:
            description: When the session's backend and its transaction started, as the evidence read them.
            type: str
            required: true
          min_idle:
            description: Seconds the session must still have been idle in its transaction.
            type: int
      keep:
        description:
          - The paths the policy verdict declares this command changes (written, created, removed,
            moved from or to, its mode or owner changed, linked), kept before it runs when
            O(snapshot) is given; the C(sentinel.remediation.heal) action derives them from the
            verdict's effects. A path whose state cannot be kept makes the command need a human's
            approval (it could not be undone).
        type: list
        elements: dict
        default: []
        suboptions:
          path:
            description: An absolute path.
            type: str
            required: true
          tree:
            description: Whether a directory's contents are kept too (for what removes, moves or recursively changes it).
            type: bool
            default: true
          meta:
            description:
              - Only the path's mode and owner change; they alone are kept and put back. Its bytes are
                neither read nor copied, so a private key whose mode is tightened leaves no copy of the key.
            type: bool
            default: false
  confinement:
    description:
      - How O(commands[].confine) is enforced. Each confined command enters a Landlock ruleset
        in the child just before exec (after the privilege drop), with C(PR_SET_NO_NEW_PRIVS);
        file changes only where declared, execution of its own program only, no TCP unless a
        network read. Reads are not restricted by the kernel.
      - V(required) refuses a command that cannot be confined here (a kernel without Landlock,
        a seccomp profile that blocks it); V(preferred) runs it only when a human approved it
        (O(commands[].approved)); V(off) confines nothing.
      - A command refused by its ruleset fails; its result names the refused path or action
        (RV(results[].denied)).
    type: str
    choices: [required, preferred, "off"]
    default: preferred
  expect_pids:
    description:
      - For each PID that a command may signal, the process the evidence showed - C(start) (its
        start time in clock ticks since boot, RV(sentinel.remediation.evidence#module:evidence.processes)
        C(start)) and C(comm) (its name). Keys are PIDs.
      - Or C(seen=true) for a PID read only in a command's output during the incident, whose start
        time is not known. Just before the command, the host reads the process from C(/proc) and
        signals it only if it is one of O(verify)'s processes (its name, program or executable is
        one of the service's C(processes), or it sits in one of its systemd units). Without
        O(verify) such a PID is not signalled.
    type: dict
    default: {}
  stop_on_failure:
    description:
      - Stop at the first command that exits non-zero or is refused; the later ones are
        reported as not run. When false every command runs.
    type: bool
    default: true
  command_timeout:
    description:
      - Seconds each command may take; then it (and its process group) is killed and its rc is V(124).
    type: int
    default: 60
  output_max:
    description:
      - Bytes of standard output and of standard error kept per command (their ends).
    type: int
    default: 2000
  unprivileged_user:
    description:
      - The account that runs commands whose O(commands[].become) is false. Defaults to the user
        who invoked sudo, else the module's own user.
    type: str
  settle:
    description:
      - After the commands, the checks of O(verify) are run again every second until the service
        is healthy or this many seconds passed (a service just started may need a moment).
      - When no command ran, the checks run once.
    type: int
    default: 5
  timeout:
    description:
      - Default seconds each health check, and each command of the evidence, may take.
    type: int
    default: 10
  evidence:
    description:
      - When the service still fails after O(settle), gather its evidence (as
        M(sentinel.remediation.evidence) does) in the same call, for the next attempt.
    type: bool
    default: false
  evidence_max_bytes:
    description:
      - Upper bound of the evidence, in UTF-8 bytes.
    type: int
    default: 6000
  evidence_log_lines:
    description:
      - Lines taken from the end of each log and of the journal for the evidence.
    type: int
    default: 30
  holder:
    description:
      - Who runs this plan (run, controller, service). When set, the module holds the host's remediation
        lock (an exclusive C(flock) on C(/run/sentinel-remediation/host.lock), per user without root) from
        before the first command until it ends, so that the commands of two runs never act on the host at
        once, even after the controller that sent them died. A plan that finds the lock held waits up to
        O(lock_wait) seconds, then runs nothing and returns RV(busy).
    type: str
  lock_wait:
    description: Seconds to wait for the host's remediation lock before answering busy.
    type: int
    default: 0
  snapshot:
    description:
      - Keep each O(commands[].keep) path before the command that changes it runs - a file's bytes,
        mode, owner and group, a link's target, a directory's tree, or the fact that it did not
        exist - in a content-addressed store readable by root only (O(snapshot.dir)), and record
        the attempt under O(snapshot.incident) for a later undo (M(sentinel.remediation.undo)).
      - The bytes never leave the host; the result carries paths, sizes, SHA-256 digests and a
        redacted diff (RV(snapshot)).
    type: dict
    suboptions:
      incident:
        description: The incident the attempt belongs to (letters, digits, C(_ . @ -)).
        type: str
        required: true
      attempt:
        description: The attempt's number within the incident.
        type: int
        default: 1
      dir:
        description: The store's directory on the host (created C(0700)); default C(/var/lib/sentinel-remediation) as root.
        type: str
      max_bytes:
        description: Upper bound of the store's content, in bytes; the least recently kept goes first.
        type: int
        default: 268435456
      max_age:
        description: Seconds a kept state and an incident's undo record are kept.
        type: int
        default: 1209600
      undo_unhealed:
        description:
          - When O(verify) is given and the service is still failing after O(settle), put every kept
            path back as it was before the first command (removing what the commands created,
            restoring what they changed, removed or moved) before gathering evidence.
        type: bool
        default: true
seealso:
  - module: sentinel.remediation.service_health
  - module: sentinel.remediation.evidence
"""

EXAMPLES = r"""
- name: Free port 80 from a stray server, start nginx, verify, and gather evidence if still failing
  sentinel.remediation.execute_plan:
    commands:
      - argv: [kill, "4242"]
        become: true
        pids: [4242]
        label: kill 4242
      - argv: [service, nginx, start]
        become: true
      - argv: [curl, -sS, -o, /dev/null, http://127.0.0.1/]
    expect_pids:
      "4242": {start: 183225, comm: python3}
    verify:
      name: nginx
      checks:
        - type: port
          port: 80
          process: nginx
      logs: [/var/log/nginx/error.log]
      ports: [80]
      config_test: [nginx, -t]
    evidence: true
  become: true
  register: attempt

- name: Say how it went
  ansible.builtin.debug:
    msg: >-
      {{ 'healed' if attempt.verify.healthy else 'still failing: ' ~ attempt.verify.error }};
      stopped at {{ attempt.stopped_at }}
"""

RETURN = r"""
busy:
  description: The host's remediation lock was held by another plan (the message says whose); nothing ran.
  returned: when the lock was held
  type: bool
  sample: true
results:
  description: One entry per command of O(commands), in order (empty in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    argv:
      description: The argv (secrets redacted).
      type: list
      elements: str
      sample: [service, nginx, start]
    become:
      description: Whether it was to run as root.
      type: bool
    user:
      description: The account it ran (or was to run) as; null when it could not run as anyone.
      type: str
      sample: root
    rc:
      description: Its exit code; V(127) not found, V(126) could not start, V(124) timed out; null when not run.
      type: int
      sample: 0
    stdout:
      description: The end of its standard output (at most O(output_max) bytes, redacted).
      type: str
    stderr:
      description: The end of its standard error (at most O(output_max) bytes, redacted).
      type: str
    seconds:
      description: How long it ran.
      type: float
      sample: 0.084
    afterwards:
      description:
        - What the host showed after the command, when its exit code alone would mislead; only present then.
        - After a start that exited 0 and did not start the service (systemd skipped it on a condition, named;
          the unit is not active; the init script's status says it is not running).
        - After a command that sent a terminating signal, how long the next command waited for the signalled
          processes to exit, or which are still there.
      type: str
      returned: when there is something to say
      sample: "the start exited 0, but ssh.service is inactive/dead: systemd SKIPPED the start, a condition was not met"
    skipped:
      description: True when it was not run (refused, or after a failure with O(stop_on_failure)).
      type: bool
      sample: false
    reason:
      description: Why it was not run (or was killed); empty otherwise.
      type: str
      sample: "PID 4242 is another process now (sleep started at tick 9120, the evidence showed python3 started at tick 8000)"
    pid_starts:
      description:
        - The start time (clock ticks since boot) of each live process whose PID stands alone in the
          command's output, read right after it ran. A later command that signals such a PID (a plan
          approved later) is run only while it is that very process (O(expect_pids) C(seen) with C(start)).
      type: dict
      returned: when the output showed PIDs of live processes
      sample: {"4242": 1234567}
    clients:
      description:
        - For a command with O(commands[].idle_pids) not run because its service serves client connections
          again (or they could not be counted) - the count, as C(client_connections) in the evidence. The
          controller holds the plan for a human's approval with it.
      type: dict
      returned: when such a command was not run for its clients
      sample: {count: 1, by_endpoint: {"tcp :5432": 1}}
    label:
      description: O(commands[].label), when given.
      type: str
      returned: when O(commands[].label) is given
    confined:
      description: Whether it ran (or was to run) inside a Landlock ruleset.
      type: bool
      returned: when it reached its turn to run
    confinement:
      description: The rules it ran under, in words, or why it was not confined.
      type: str
      returned: when it reached its turn to run
      sample: "Landlock ABI 7; exec only /usr/bin/rm, /lib64/ld-linux-x86-64.so.2; changes only: remove /run/; no TCP connect or bind"
    held:
      description:
        - For a root C(cp) of one file (C(cp [-p] SOURCE TARGET), the known-good restore's form) - how it was done.
          The runner copies it itself, as C(cp) would, with both paths opened one component at a time from C(/)
          through held directory descriptors (C(openat), C(O_NOFOLLOW)) - a symbolic link another account could
          have planted on either path, or a TARGET with hard links where another account may add names, is
          refused (rc 1, RV(results[].reason) says which), whenever it was swapped in.
      type: str
      returned: when the command was such a copy
      sample: "copied by the runner through held directory descriptors (no link another account could plant followed)"
    denied:
      description: The error line of a command its ruleset refused (the path or action it tried).
      type: str
      returned: when the confinement refused an action
      sample: "sed: couldn't open temporary file /etc/sedX1b2c3: Permission denied"
stopped_at:
  description:
    - Index of the first command that failed or was refused; null when none did. With
      O(stop_on_failure) the commands after it did not run.
  returned: always
  type: int
  sample: 1
snapshot:
  description:
    - What the attempt changed, kept and (when it did not heal) put back. Paths, states in a few
      fields and redacted diffs only; the content stays on the host.
  returned: when O(snapshot) is given and not in check mode
  type: dict
  contains:
    incident:
      description: O(snapshot.incident).
      type: str
    changed:
      description:
        - Each kept path that the commands changed - C(path), C(before) and C(after) (C(kind), C(size),
          C(digest), C(mode), C(uid), C(gid), C(target)) and C(diff).
      type: list
      elements: dict
    rolled_back:
      description: Whether the kept paths were put back (the service was still failing).
      type: bool
    restored:
      description: Paths put back as they were.
      type: list
      elements: str
    failed:
      description: Paths that could not be put back, each with C(path) and C(error).
      type: list
      elements: dict
    unkept:
      description: Paths whose state could not be kept (their commands ran only when approved).
      type: list
      elements: str
    error:
      description: Why the snapshot store could not be used (nothing was kept); empty otherwise.
      type: str
verify:
  description: The service's health after the commands, as M(sentinel.remediation.service_health) reports it.
  returned: when O(verify) is given and not in check mode
  type: dict
  contains:
    healthy:
      description: Whether every check passed.
      type: bool
    error:
      description: The detail of the first failing check, empty when healthy.
      type: str
    checks:
      description: Each check's C(type), C(ok) and C(detail) (of the last round).
      type: list
      elements: dict
    rounds:
      description: How many times the checks ran.
      type: int
    seconds:
      description: Time spent verifying.
      type: float
evidence:
  description: Evidence of the still failing service, as RV(sentinel.remediation.evidence#module:evidence).
  returned: when O(evidence=true) and the service is still failing
  type: dict
evidence_truncated:
  description: Whether that evidence was cut to stay within O(evidence_max_bytes).
  returned: with RV(evidence)
  type: bool
would_run:
  description: In check mode, per command, what would happen - C(argv), C(become), C(user), C(pids), C(runnable) and C(reason).
  returned: in check mode
  type: list
  elements: dict
  sample:
    - argv: [kill, "4242"]
      become: true
      user: root
      pids: [4242]
      runnable: false
      reason: "PID 4242 is gone (it was python3 started at tick 8000): nothing to signal"
"""

import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sentinel.remediation.plugins.module_utils import (
    health_checks,
    host_lock,
    option_bounds,
    pid_membership,
    plan_runner,
    service_spec,
    snapshot,
)


def argument_spec() -> dict:
    return dict(
        commands=dict(type="list", elements="dict", required=True, options=dict(
            argv=dict(type="list", elements="str", required=True),
            become=dict(type="bool", default=False),
            pids=dict(type="list", elements="int", default=[]),
            label=dict(type="str"),
            confine=dict(type="dict"),
            approved=dict(type="bool", default=False),
            idle_pids=dict(type="list", elements="int", default=[]),
            session_check=dict(type="dict", options=dict(
                dependency=dict(type="str", required=True),
                pid=dict(type="int", required=True),
                identity=dict(type="str", required=True),
                min_idle=dict(type="int"),
            )),
            keep=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="str", required=True),
                tree=dict(type="bool", default=True),
                meta=dict(type="bool", default=False),
            )),
        )),
        confinement=dict(type="str", choices=list(plan_runner.CONFINEMENT_MODES), default="preferred"),
        expect_pids=dict(type="dict", default={}),
        stop_on_failure=dict(type="bool", default=True),
        command_timeout=dict(type="int", default=60),
        output_max=dict(type="int", default=2000),
        unprivileged_user=dict(type="str"),
        verify=dict(type="dict", options=service_spec.definition_spec()),
        settle=dict(type="int", default=5),
        timeout=dict(type="int", default=10),
        evidence=dict(type="bool", default=False),
        depends=dict(type="list", elements="dict", default=[], options=service_spec.definition_spec()),
        evidence_max_bytes=dict(type="int", default=6000),
        evidence_log_lines=dict(type="int", default=30),
        holder=dict(type="str"),
        lock_wait=dict(type="int", default=0),
        snapshot=dict(type="dict", options=dict(
            incident=dict(type="str", required=True),
            attempt=dict(type="int", default=1),
            dir=dict(type="str"),
            max_bytes=dict(type="int", default=256 * 1024 * 1024),
            max_age=dict(type="int", default=14 * 24 * 3600),
            undo_unhealed=dict(type="bool", default=True),
        )),
    )


def _check_numbers(params: dict) -> None:
    problems = option_bounds.below_minimum(params)
    if problems:
        raise plan_runner.PlanError("; ".join(problems))
    kept = params["snapshot"]
    if kept and (kept["max_bytes"] < 0 or kept["max_age"] < 0 or kept["attempt"] < 1):
        raise plan_runner.PlanError("snapshot: max_bytes and max_age must not be negative and attempt is at least 1, "
                                    "got %d, %d, %d" % (kept["max_bytes"], kept["max_age"], kept["attempt"]))


def _belongs(definition):
    """How a PID read in a command's output is checked: one of O(verify)'s processes now."""
    if definition is None:
        return None
    return lambda pid: pid_membership.problem(pid, definition)


def _service_pids(definition):
    """How a waived restart finds O(verify)'s processes now, to count their clients with the
    evidence's (``commands[].idle_pids``): as the evidence found them."""
    if definition is None:
        return None

    def current():
        # Imported only here, as for the evidence below: most plans carry no waived restart.
        from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence  # noqa: E501 pylint: disable=import-outside-toplevel
        return service_evidence.current_pids(definition)
    return current


def _session_problem(depends: list):
    """How a command that ends a database session checks it is still the session the evidence
    showed (``commands[].session_check``), on the server of O(depends) it names."""
    by_name = {str(d.get("name")): d for d in depends}

    def problem(expected: dict, approved: bool):
        from ansible_collections.sentinel.remediation.plugins.module_utils import server_sessions  # noqa: E501 pylint: disable=import-outside-toplevel
        server = by_name.get(str(expected.get("dependency")))
        if server is None:
            return "the database session's server %s is not among this plan's dependencies" % expected.get("dependency")
        return server_sessions.idle_session_problem(server, expected, approved)
    return problem


def _resolve_depends(raw: list) -> list:
    resolved = []
    for index, item in enumerate(raw or []):
        try:
            resolved.append(service_spec.resolve(item))
        except service_spec.DefinitionError as exc:
            raise service_spec.DefinitionError("depends[%d]: %s" % (index, exc))
    return resolved


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    empty = dict(results=[], stopped_at=None)
    try:
        _check_numbers(params)
        commands = plan_runner.normalise_commands(params["commands"])
        expect = plan_runner.normalise_expectations(params["expect_pids"])
        invoker = plan_runner.invoking_identity(unprivileged_user=params["unprivileged_user"])
        definition = service_spec.resolve(params["verify"]) if params["verify"] else None
        depends = _resolve_depends(params["depends"])
    except (plan_runner.PlanError, service_spec.DefinitionError) as exc:
        module.fail_json(msg=to_native(exc), **empty)

    if module.check_mode:
        would = plan_runner.preview(commands, expect, invoker, belongs=_belongs(definition))
        module.exit_json(changed=any(item["runnable"] for item in would), would_run=would, **empty)

    result = dict(empty)
    if params["holder"]:
        try:
            # Held until this process ends: a plan of another run waits for these commands.
            held = host_lock.hold(params["holder"], wait=params["lock_wait"])  # noqa: F841 pylint: disable=unused-variable
        except host_lock.HostBusy as exc:
            module.exit_json(changed=False, busy=True, msg=to_native(exc), **empty)
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot take the host's remediation lock: %s" % to_native(exc), **empty)
    session, store_error = snapshot.open_session(params["snapshot"]) if params["snapshot"] else (None, "")
    try:
        ran = plan_runner.run_plan(commands, expect, invoker, stop_on_failure=params["stop_on_failure"],
                                   timeout=params["command_timeout"], output_max=params["output_max"],
                                   confinement=params["confinement"], snapshots=session,
                                   belongs=_belongs(definition), service_pids=_service_pids(definition),
                                   session_problem=_session_problem(depends))
        result.update(results=ran["results"], stopped_at=ran["stopped_at"])
        if definition is not None:
            settle = params["settle"] if ran["ran"] else 0
            result["verify"] = health_checks.settle_health(definition, params["timeout"], settle)
        if session is not None:
            # Put back before the evidence: the next attempt starts from the host as it was.
            result["snapshot"] = snapshot.settle(session, store_error, (result.get("verify") or {}).get("healthy"),
                                                 params["snapshot"]["undo_unhealed"])
        if definition is not None:
            if params["evidence"] and not result["verify"]["healthy"]:
                checked = dict((d["name"], health_checks.service_health(d, params["timeout"]))
                               for d in depends if d["name"] in definition["depends_on"])
                # Imported only here: the module is compiled from its zip on every call, and most
                # plans verify healthy and need no evidence.
                from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence  # noqa: E501 pylint: disable=import-outside-toplevel

                collected = service_evidence.collect(
                    definition, max_bytes=params["evidence_max_bytes"], log_lines=params["evidence_log_lines"],
                    timeout=params["timeout"], error=result["verify"]["error"], checked=checked)
                result.update(evidence=collected["evidence"], evidence_truncated=collected["truncated"])
        changed = ran["ran"] > 0
    except Exception as exc:  # an internal error: keep what already ran in the record
        module.fail_json(msg="execute_plan failed: %s" % to_native(exc), exception=traceback.format_exc(),
                         changed=any(not r["skipped"] for r in result["results"]), **result)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
