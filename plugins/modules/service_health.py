#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: service_health
short_description: Check whether services on a Linux host are healthy with typed checks
version_added: 0.1.0
author:
  - Sentinel Remediation maintainers (@sentinel-remediation)
description:
  - Runs typed checks for one service (O(service) and O(checks)) or for many (O(services), one
    round trip per host) on the target host and reports whether each is healthy, with a short
    error text naming the first failing check.
  - With O(evidence=true), evidence (as M(sentinel.remediation.evidence) collects it) is gathered
    in the same call for each service that fails, so a monitor needs no second round trip.
  - An unhealthy service is a normal result, not a module failure; the module fails only
    on bad arguments or internal errors.
  - Processes and TCP listeners are read from C(/proc); the module does not need C(ss),
    C(lsof), C(fuser) or C(pgrep) on the host.
  - The init system is detected, not assumed. When systemd runs as PID 1, C(systemctl show) of
    the service's units is asked; else C(service NAME status), else C(/etc/init.d/NAME status).
notes:
  - Run it with O(ignore:become=true) (the C(sentinel.remediation.remediate) role does).
    Without root the module cannot see which process holds another user's socket. It then
    judges a O(checks[].process) condition on a C(port) check by the socket's owner (a process
    of that user with that name), and says so in the detail. The same happens as root inside
    containers without C(CAP_SYS_PTRACE) for processes of other users (redis, nginx workers).
  - The module only reads. C(command) checks and configuration tests run the given program in
    check mode too, so give it read-only commands.
requirements:
  - Linux (reads C(/proc)); Python 3.9 or later on the target.
extends_documentation_fragment:
  - sentinel.remediation.service_definition.checks
  - sentinel.remediation.service_definition.services
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
options:
  service:
    description:
      - Name of the service as the init system knows it (V(nginx), V(redis-server), V(ssh)),
        checked with O(checks).
      - Exactly one of O(service) and O(services) is required.
    type: str
  timeout:
    description:
      - Default seconds each check, and each command of the evidence, may take.
    type: int
    default: 10
  evidence:
    description:
      - Collect evidence for each failing service in the same call (RV(services[].evidence), or
        RV(evidence) with O(service)).
    type: bool
    default: false
  evidence_max_bytes:
    description:
      - Upper bound of one failing service's evidence, in UTF-8 bytes (as
        O(sentinel.remediation.evidence#module:max_bytes)).
    type: int
    default: 6000
  evidence_log_lines:
    description:
      - Lines taken from the end of each log and of the journal for the evidence.
    type: int
    default: 30
  evidence_max_services:
    description:
      - At most this many failing services get evidence in one call, in the order of O(services);
        the others say why they have none (RV(services[].skipped)).
    type: int
    default: 8
  defer_evidence:
    description:
      - Failing services (named as in O(services)) whose evidence is left for a later round trip
        (RV(services[].evidence_deferred)) - the C(sentinel.remediation.heal) action's health phase
        names the services memory holds fixes for, whose heal-phase re-check carries those fixes and
        reads the evidence once, there. A service waiting for a failing dependency
        (RV(services[].blocked_by)) or slow (RV(services[].degraded)) gets its evidence here all the
        same, as it is healed from this call's rows.
    type: list
    elements: str
    default: []
  remembered:
    description:
      - Remembered fixes the caller has already judged (the C(sentinel.remediation.heal) action
        sends the plans its safety policy allows without approval). For a failing service that
        has evidence and whose dependencies are healthy, the module computes the failure's
        signature from the evidence it is about to return; when it equals the O(remembered[].signature)
        of a fix for that service, the fix's commands run in order (as
        M(sentinel.remediation.execute_plan) runs them, stopping at the first failure) and the
        service is checked again, in the same round trip (RV(services[].remembered)).
      - Ignored in check mode and without O(evidence).
    type: list
    elements: dict
    default: []
    suboptions:
      service:
        description: The service the fix is for, as named in O(services).
        type: str
        required: true
      signature:
        description: The failure signature the fix healed.
        type: str
        required: true
      commands:
        description: The fix, one argv per command, each with whether it runs as root.
        type: list
        elements: dict
        required: true
        suboptions:
          argv:
            description: The program and its arguments.
            type: list
            elements: str
            required: true
          become:
            description: Run as root (else as the user the connection logged in as).
            type: bool
            default: false
          label:
            description: The command as the policy judged it, for the record.
            type: str
          confine:
            description:
              - What the kernel holds the command to, as
                M(sentinel.remediation.execute_plan) O(sentinel.remediation.execute_plan#module:commands[].confine) says.
            type: dict
          keep:
            description:
              - The paths the command's verdict declares it changes, kept before it runs when
                O(snapshot) is given, as M(sentinel.remediation.execute_plan)
                O(sentinel.remediation.execute_plan#module:commands[].keep) says.
            type: list
            elements: dict
            default: []
            suboptions:
              path:
                description: An absolute path.
                type: str
                required: true
              tree:
                description: Whether a directory's contents are kept too.
                type: bool
                default: true
              meta:
                description: Only the path's mode and owner change; they alone are kept, never its bytes.
                type: bool
                default: false
      incident:
        description:
          - The incident the fix would be attempt 1 of (letters, digits, C(_ . @ -)). With O(snapshot), what
            it changes is kept under it, put back if the service is still failing, and can be undone
            later (M(sentinel.remediation.undo)). Without it, nothing is kept.
        type: str
  snapshot:
    description:
      - Keep what a remembered fix changes before it runs, as an attempt run through
        M(sentinel.remediation.execute_plan) O(sentinel.remediation.execute_plan#module:snapshot) does, under
        each fix's O(remembered[].incident); its result is the C(snapshot) key of RV(services[].remembered).
    type: dict
    suboptions:
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
        description: Put every kept path back when the service is still failing after the fix.
        type: bool
        default: true
  confinement:
    description:
      - How the commands of a remembered fix are confined, as
        M(sentinel.remediation.execute_plan) O(sentinel.remediation.execute_plan#module:confinement) says
        (remembered fixes are never approved by a human, so with V(preferred) a command that cannot be
        confined on this host is not run).
    type: str
    choices: [required, preferred, "off"]
    default: preferred
  hostnames:
    description:
      - Names of the host that may appear in the evidence; the signature leaves them out (as the
        controller computes it).
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds each command of a remembered fix may run.
    type: int
    default: 60
  output_max:
    description: Characters of each command's output kept.
    type: int
    default: 2000
  settle:
    description: Seconds a service is given to become healthy after a remembered fix ran.
    type: int
    default: 5
  confirm_attempts:
    description:
      - With O(services), how many times a failing service is checked again before its failure
        counts (a service's own O(services[].confirm_attempts) wins). V(0) takes one failure as it is.
    type: int
    default: 0
  confirm_interval:
    description: Seconds between those re-checks (a service's own O(services[].confirm_interval) wins).
    type: int
    default: 2
  confirm_max_seconds:
    description: No re-check starts later than this many seconds after the first check of the call.
    type: int
    default: 30
  known_good:
    description:
      - With O(services), keep each service's known-good configuration baseline on the host. A healthy
        service's configuration files (its O(services[].config_paths), the C(/etc) files its config test names, its
        unit file, drop-ins, environment files and the C(/etc) files its start command names under systemd,
        its init script and C(/etc/default) file under SysV) are hashed; the baseline is rewritten, and a
        file's content stored, only when something changed. An unhealthy service's baseline is never touched.
      - The baseline also holds what the service runs as and runs - its accounts (O(services[].user), its units'
        C(User=), its processes' owners; never root) with their group memberships, and the mode and owner of the
        programs its units execute (every C(Exec*=) line, drop-ins included), of its processes' executables and of
        its runtime, data and log directories.
      - For a failing service with evidence, the C(known_good) section of RV(services[].evidence) says what
        drifted from the baseline, with a redacted diff, whether each file is still the package's default (dpkg), the digest
        under which the bad version is kept aside in the host's content store, and where the known-good version
        is staged for a restore. The file contents never leave the host; only the redacted diff does.
      - Its C(runs_as) list names a group membership an account lost or gained, and a program or directory whose
        mode or owner changed (with the recorded C(mode) and C(owner) to put back) since the last healthy pass.
      - Each drifted file also has its C(mtime) and C(ctime) (UTC) and, when dpkg knows it, C(package_of);
        C(last_seen_good) is the last healthy pass that still saw the known-good versions (each healthy pass records
        its time), and C(window_records) what the host's own records say of the time since - dpkg's log, apt's
        history, and the C(sudo)/C(su) lines of the authentication log or the journal - redacted, at most five lines
        of each and 1500 bytes in all, those naming a drifted file or its package first.
      - Nothing is recorded in check mode (the comparison still runs).
    type: bool
    default: true
  snapshot_dir:
    description:
      - The root-only directory of the host's content store, shared with the snapshots of
        M(sentinel.remediation.execute_plan); the baselines live in its C(known-good) subdirectory.
      - Empty means C(/var/lib/sentinel-remediation) as root, else a private directory under the temporary directory.
    type: str
    default: ""
seealso:
  - module: sentinel.remediation.evidence
  - module: sentinel.remediation.execute_plan
"""

EXAMPLES = r"""
- name: Is nginx running? (the init system's answer only)
  sentinel.remediation.service_health:
    service: nginx
  become: true
  register: nginx_health

- name: Check nginx thoroughly
  sentinel.remediation.service_health:
    service: nginx
    checks:
      - type: service
      - type: process
        pattern: "nginx: master process"
      - type: port
        port: 80
        process: nginx
      - type: http
        url: http://127.0.0.1/
        status: 200
        timeout: 5
  become: true
  register: nginx_health

- name: Check every watched service in one round trip, with evidence for those that fail
  sentinel.remediation.service_health:
    services:
      - name: nginx
        checks:
          - type: port
            port: 80
            process: nginx
        processes: [nginx]
        logs: [/var/log/nginx/error.log]
        ports: [80]
        config_test: [nginx, -t]
        pid_files: [/run/nginx.pid]
      - name: redis-server
        checks:
          - type: command
            argv: [redis-cli, -h, 127.0.0.1, ping]
            indicator: PONG
        ports: [6379]
        data_paths: [/var/lib/redis]
    evidence: true
  become: true
  register: fleet_health

- name: Name the failing services
  ansible.builtin.debug:
    msg: "{{ fleet_health.services | rejectattr('healthy') | map(attribute='name') | list }}"
"""

RETURN = r"""
landlock_abi:
  description:
    - The Landlock ABI version of the host's kernel (0 when it cannot confine commands), for the
      caller to know before a plan is sent whether its commands can be confined there.
  returned: always
  type: int
  sample: 7
healthy:
  description: Whether every check passed (of every service, with O(services)).
  returned: always
  type: bool
  sample: false
error:
  description:
    - The detail of the first failing check, empty when healthy. With O(services), prefixed
      with the failing service's name and a colon.
    - Secrets in it are redacted.
  returned: always
  type: str
  sample: "port 80 is held by python3 (pid 123), not nginx"
checks:
  description: One entry per check of O(checks), in the order given.
  returned: with O(service)
  type: list
  elements: dict
  contains:
    type:
      description: The check's type.
      type: str
      sample: port
    ok:
      description: Whether the check passed.
      type: bool
      sample: false
    detail:
      description: What the check saw, in one short line (secrets redacted).
      type: str
      sample: "port 80 is held by python3 (pid 123), not nginx"
  sample:
    - {type: service, ok: true, detail: "service nginx status: nginx is running (rc 0)"}
    - {type: port, ok: false, detail: "port 80 is held by python3 (pid 123), not nginx"}
evidence:
  description: Evidence of the failing service, as RV(sentinel.remediation.evidence#module:evidence).
  returned: with O(service), O(evidence=true) and the service failing
  type: dict
services:
  description: One entry per item of O(services), in the order given.
  returned: with O(services)
  type: list
  elements: dict
  contains:
    name:
      description: The service's name.
      type: str
      sample: nginx
    healthy:
      description: Whether every check of the service passed.
      type: bool
      sample: false
    error:
      description: The detail of its first failing check, empty when healthy.
      type: str
      sample: "nginx.service is failed/failed (result exit-code; unit file enabled)"
    checks:
      description: One entry per check (C(type), C(ok), C(detail)), as RV(checks).
      type: list
      elements: dict
    evidence:
      description: Its evidence, as RV(sentinel.remediation.evidence#module:evidence).
      type: dict
      returned: when O(evidence=true) and the service fails (unless RV(services[].skipped))
    truncated:
      description: Whether its evidence was cut to stay within O(evidence_max_bytes).
      type: bool
      returned: with RV(services[].evidence)
    skipped:
      description: Why a failing service has no evidence (O(evidence_max_services) reached, or the collection failed).
      type: str
      returned: when O(evidence=true) and a failing service has no evidence
      sample: "no evidence: evidence_max_services (8) reached"
    evidence_deferred:
      description: Why a failing service named in O(defer_evidence) has no evidence in this call.
      type: str
      returned: when O(evidence=true) and the failing service is in O(defer_evidence)
      sample: "evidence deferred: memory holds fixes for this service; the heal phase reads it with them"
    known_good:
      description:
        - What the known-good baseline pass did for a healthy service (O(known_good)) - V(files) hashed and
          the V(changed) paths recorded (V(runs_as=true) when what it runs as or runs changed), or an V(error).
      type: dict
      returned: when O(known_good) recorded a change or could not run
      sample: {"files": 12, "changed": ["/etc/nginx/nginx.conf"]}
    blocked_by:
      description:
        - The services of its O(services[].depends_on) that fail in this same call; fix those
          first.
      type: list
      elements: str
      returned: when the service fails and a service it depends on fails too
      sample: [postgresql]
    confirmation:
      description:
        - How a failure was confirmed (O(confirm_attempts)) - V(checks) (how many times the
          service was checked), V(seconds) (from the first check to the last), V(first_error) (what
          the first check said) and V(recovered) (a re-check passed - the service is healthy now).
      type: dict
      returned: when the first check of the service failed
      sample: {"checks": 3, "seconds": 4.2, "first_error": "pg_isready exited 2", "recovered": true}
    timed_out:
      description: Every failing check went unanswered within its timeout (none said the service is down).
      type: bool
      returned: when so
    degraded:
      description:
        - The service is slow, not down - its failing checks timed out while its processes run,
          and its O(services[].on_timeout) is V(escalate). No remembered fix runs for it.
      type: bool
      returned: when so
    frozen:
      description: Its failing checks timed out and every process of the service is stopped (SIGSTOP).
      type: bool
      returned: when so
    remembered:
      description:
        - What became of the O(remembered) fixes for this failing service. V(signature) is the
          failure's signature computed here; V(ran) says whether a fix of that signature ran.
          When it ran, V(results) and V(stopped_at) are as
          RV(sentinel.remediation.execute_plan#module:results) and
          RV(sentinel.remediation.execute_plan#module:stopped_at), V(verify) is the health check
          after it, and V(evidence) is gathered again when the service still fails. With
          O(snapshot) and the fix's O(remembered[].incident), V(snapshot) is what it changed and
          what was put back, as RV(sentinel.remediation.execute_plan#module:snapshot).
      type: dict
      returned: when O(remembered) names the failing service
      sample: {"signature": "nginx:0123456789abcdef", "ran": false}
tools:
  description:
    - Which tools the host has (RV(sentinel.remediation.evidence#module:tools)), over the default
      list and every service's own programs.
  returned: with O(services)
  type: dict
  contains:
    present:
      description: Tools found, sorted.
      type: list
      elements: str
    absent:
      description: Tools not found, sorted.
      type: list
      elements: str
"""

import json
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sentinel.remediation.plugins.module_utils import (
    failure_confirmation,
    health_checks,
    host_probe,
    landlock,
    operator_notes,
    option_bounds,
    service_spec,
)

# The evidence, the signature and the plan runner are imported where they are needed: a module
# is compiled from its zip on every call, and a pass where every service is healthy (most of
# them) needs none of them.


def argument_spec() -> dict:
    return dict(
        service=dict(type="str"),
        checks=service_spec.checks_spec(),
        services=dict(type="list", elements="dict", options=service_spec.definition_spec()),
        timeout=dict(type="int", default=10),
        evidence=dict(type="bool", default=False),
        evidence_max_bytes=dict(type="int", default=6000),
        evidence_log_lines=dict(type="int", default=30),
        evidence_max_services=dict(type="int", default=8),
        defer_evidence=dict(type="list", elements="str", default=[]),
        remembered=dict(type="list", elements="dict", default=[], options=dict(
            service=dict(type="str", required=True),
            signature=dict(type="str", required=True),
            commands=dict(type="list", elements="dict", required=True, options=dict(
                argv=dict(type="list", elements="str", required=True),
                become=dict(type="bool", default=False),
                label=dict(type="str"),
                confine=dict(type="dict"),
                keep=dict(type="list", elements="dict", default=[], options=dict(
                    path=dict(type="str", required=True),
                    tree=dict(type="bool", default=True),
                    meta=dict(type="bool", default=False),
                )),
            )),
            incident=dict(type="str"),
        )),
        snapshot=dict(type="dict", options=dict(
            dir=dict(type="str"),
            max_bytes=dict(type="int", default=256 * 1024 * 1024),
            max_age=dict(type="int", default=14 * 24 * 3600),
            undo_unhealed=dict(type="bool", default=True),
        )),
        confinement=dict(type="str", choices=["required", "preferred", "off"], default="preferred"),
        hostnames=dict(type="list", elements="str", default=[]),
        command_timeout=dict(type="int", default=60),
        output_max=dict(type="int", default=2000),
        settle=dict(type="int", default=5),
        confirm_attempts=dict(type="int", default=0),
        confirm_interval=dict(type="int", default=2),
        confirm_max_seconds=dict(type="int", default=30),
        known_good=dict(type="bool", default=True),
        snapshot_dir=dict(type="str", default=""),
    )


def _evidence(defn: dict, error: str, params: dict, checked=None) -> dict:
    from ansible_collections.sentinel.remediation.plugins.module_utils import service_evidence  # noqa: E501 pylint: disable=import-outside-toplevel

    return service_evidence.collect(defn, max_bytes=params["evidence_max_bytes"],
                                    log_lines=params["evidence_log_lines"], timeout=params["timeout"],
                                    error=error, tools=[], checked=checked)


def _known_good(defn: dict, healthy: bool, params: dict) -> dict:
    from ansible_collections.sentinel.remediation.plugins.module_utils import known_good  # noqa: E501 pylint: disable=import-outside-toplevel

    def run(argv):
        rc, out, _err = host_probe.run_argv(argv, timeout=params["timeout"])
        return rc, out or ""

    return known_good.record_or_compare(defn, healthy, params["snapshot_dir"], host_probe.init_system(), run)


def _plan_runner():
    from ansible_collections.sentinel.remediation.plugins.module_utils import plan_runner  # noqa: E501 pylint: disable=import-outside-toplevel

    return plan_runner


DEFERRED = "evidence deferred: memory holds fixes for this service; the heal phase reads it with them"


def check_services(definitions: list, params: dict) -> dict:
    """The one-round-trip form: every service's health, evidence for those failing."""
    results = []
    for defn in definitions:
        health = health_checks.service_health(defn, params["timeout"])
        results.append(dict(name=defn["name"], **health))
    failure_confirmation.confirm(definitions, results, lambda d: health_checks.service_health(d, params["timeout"]),
                                 params)
    failure_confirmation.classify_timeouts(definitions, results, health_checks.processes_stopped)
    failing = set(r["name"] for r in results if not r["healthy"])
    by_name = dict((r["name"], r) for r in results)
    given_evidence = 0
    for defn, result in zip(definitions, results):
        if result["healthy"]:
            continue
        blocked = [d for d in defn["depends_on"] if d in failing and d != defn["name"]]
        if blocked:
            result["blocked_by"] = blocked
        if not params["evidence"]:
            continue
        if result["name"] in (params.get("defer_evidence") or ()) and not blocked and not result.get("degraded"):
            result["evidence_deferred"] = DEFERRED
            continue
        if given_evidence >= params["evidence_max_services"]:
            result["skipped"] = "no evidence: evidence_max_services (%d) reached" % params["evidence_max_services"]
            continue
        given_evidence += 1
        try:
            collected = _evidence(defn, result["error"], params, checked=by_name)
        except Exception as exc:  # one service's evidence must not cost the others theirs
            result["skipped"] = "no evidence: collection failed: %s" % to_native(exc)
            continue
        result["evidence"] = collected["evidence"]
        result["truncated"] = collected["truncated"]
        if params.get("known_good"):
            drift = _known_good(defn, False, params)
            if drift.get("files"):
                # A baseline exists: the diff from it leads; file times cannot tell a change from an install.
                result["evidence"].pop("recent_changes", None)
            if drift:
                result["evidence"]["known_good"] = drift
    if params.get("known_good") and not params.get("check_mode"):
        # The baseline is written on healthy passes only: what a failing service runs with now is
        # never taken for known-good.
        for defn, result in zip(definitions, results):
            if result["healthy"]:
                recorded = _known_good(defn, True, params)
                if recorded.get("changed") or recorded.get("error"):
                    result["known_good"] = recorded
    if params["remembered"] and params["evidence"]:
        run_remembered(definitions, results, params)
    names = []
    for defn in definitions:
        names.extend(service_spec.tool_candidates(defn))
    first = next((r for r in results if not r["healthy"]), None)
    return dict(services=results, healthy=first is None,
                error="%s: %s" % (first["name"], first["error"]) if first else "",
                tools=host_probe.tools_report(names))


def _snapshots(fix: dict, params: dict):
    """The snapshot session of a remembered fix (attempt 1 of its incident), or (None, "")."""
    kept = params["snapshot"]
    if not kept or not fix.get("incident"):
        return None, ""
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot
    return snapshot.open_session(dict(kept, incident=fix["incident"], attempt=1))


def run_remembered(definitions: list, results: list, params: dict) -> None:
    """Run a remembered fix where this failure is the one it healed (the same signature,
    computed from the very evidence returned), then check the service again. Services
    whose dependencies fail, or that have no evidence, are left to the caller."""
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.sentinel.remediation.plugins.module_utils.signature import failure_signature

    fixes = {}
    for fix in params["remembered"]:
        fixes.setdefault(fix["service"], {}).setdefault(fix["signature"], fix)
    invoker = None
    for defn, result in zip(definitions, results):
        mine = fixes.get(defn["name"])
        if result["healthy"] or not mine or result.get("blocked_by") or result.get("degraded") \
                or "evidence" not in result:
            continue
        if operator_notes.hold_line(result["evidence"].get("operator_notes"))[1]:
            continue  # the owner's note says to keep hands off the service: no fix runs ahead of a human
        error = str(result.get("error") or result.get("msg") or "health check failed")
        # The evidence as the caller will read it (JSON types), so both compute one signature.
        evidence = json.loads(json.dumps(result["evidence"]))
        signature = failure_signature(defn["name"], error, evidence, params["hostnames"])
        fix = mine.get(signature)
        if fix is None:
            result["remembered"] = dict(signature=signature, ran=False)
            continue
        runner = _plan_runner()
        if invoker is None:
            invoker = runner.invoking_identity()
        commands = runner.normalise_commands(fix["commands"])
        session, store_error = _snapshots(fix, params)
        ran = runner.run_plan(commands, {}, invoker, stop_on_failure=True,
                              timeout=params["command_timeout"], output_max=params["output_max"],
                              confinement=params["confinement"], snapshots=session)
        verify = health_checks.settle_health(defn, params["timeout"], params["settle"] if ran["ran"] else 0)
        record = dict(signature=signature, ran=True, results=ran["results"], stopped_at=ran["stopped_at"],
                      verify=verify)
        if session is not None:
            # Put back before the evidence, as execute_plan does: the next attempt starts from
            # the host as it was.
            from ansible_collections.sentinel.remediation.plugins.module_utils import snapshot  # noqa: E501 pylint: disable=import-outside-toplevel
            record["snapshot"] = snapshot.settle(session, store_error, verify["healthy"],
                                                 params["snapshot"]["undo_unhealed"])
        if not verify["healthy"]:
            # Its dependencies as their own checks judged them in this call (all healthy: it runs
            # only when none of them failed).
            collected = _evidence(defn, verify["error"], params, checked=dict((r["name"], r) for r in results))
            record.update(evidence=collected["evidence"], truncated=collected["truncated"])
        result["remembered"] = record


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[("service", "services"), ("checks", "services")],
        required_one_of=[("service", "services")],
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(healthy=False, error="", checks=[])
    params["check_mode"] = module.check_mode
    if module.check_mode:
        params["remembered"] = []  # check mode changes nothing
    problems = option_bounds.below_minimum(params)
    if problems:
        module.fail_json(msg="; ".join(problems), **empty)
    if params["remembered"] and params["services"] is None:
        module.fail_json(msg="remembered needs services (the one-round-trip form)", **empty)
    runner = _plan_runner() if params["remembered"] else None
    for index, fix in enumerate(params["remembered"]):
        try:
            runner.normalise_commands(fix["commands"])
        except runner.PlanError as exc:
            module.fail_json(msg="remembered[%d]: %s" % (index, to_native(exc)), **empty)
    try:
        if params["services"] is not None:
            definitions = [service_spec.resolve(item) for item in params["services"]]
            names = [d["name"] for d in definitions]
            twice = sorted(set(n for n in names if names.count(n) > 1))
            if twice:
                raise service_spec.DefinitionError("services: each name once, got %s more than once" % ", ".join(twice))
        else:
            definitions = [service_spec.resolve({"name": params["service"], "checks": params["checks"]})]
    except service_spec.DefinitionError as exc:
        module.fail_json(msg=to_native(exc), **empty)

    name = params["service"] or ", ".join(d["name"] for d in definitions)
    try:
        if params["services"] is not None:
            result = check_services(definitions, params)
        else:
            result = health_checks.service_health(definitions[0], params["timeout"])
            if params["evidence"] and not result["healthy"]:
                collected = _evidence(definitions[0], result["error"], params)
                result.update(evidence=collected["evidence"], truncated=collected["truncated"])
    except Exception as exc:  # an internal error
        module.fail_json(msg="service_health failed on %s: %s" % (name, to_native(exc)),
                         exception=traceback.format_exc(), **empty)
    module.exit_json(changed=False, landlock_abi=landlock.abi_version(), **result)


if __name__ == "__main__":
    main()
