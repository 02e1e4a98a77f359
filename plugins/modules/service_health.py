#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: service_health
short_description: Check whether a service on a Linux host is healthy with typed checks
version_added: 0.1.0
author:
  - Sentinel Remediation maintainers (@sentinel-remediation)
description:
  - Runs a list of typed checks for one service on the target host and reports whether
    the service is healthy, with a short error text naming the first failing check.
  - An unhealthy service is a normal result, not a module failure; the module fails only
    on bad arguments or internal errors.
  - Processes and TCP listeners are read from C(/proc); the module does not need C(ss),
    C(lsof), C(fuser) or C(pgrep) on the host.
  - The init system is detected, not assumed. C(systemctl is-active) is used when systemd
    runs, else C(service NAME status), else C(/etc/init.d/NAME status).
notes:
  - Run it with O(ignore:become=true) (the C(sentinel.remediation.remediate) role does).
    Without root the module cannot see which process holds another user's socket. It then
    judges a O(checks[].process) condition on a C(port) check by the socket's owner (a process
    of that user with that name), and says so in the detail. The same happens as root inside
    containers without C(CAP_SYS_PTRACE) for processes of other users (redis, nginx workers).
  - The module only reads. C(command) checks run the given program in check mode too, so
    give it read-only commands.
requirements:
  - Linux (reads C(/proc)); Python 3.8 or later on the target.
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
      - Name of the service as the init system knows it (V(nginx), V(redis-server), V(ssh)).
    type: str
    required: true
  checks:
    description:
      - The checks to run, in order. All run, even after one fails.
      - When omitted, one check of type V(service) is run.
    type: list
    elements: dict
    suboptions:
      type:
        description:
          - V(service) asks the init system for the service's status.
          - V(process) looks for a process whose command line matches O(checks[].pattern).
          - V(port) checks that a TCP port is listening and, with O(checks[].process), who holds it.
          - V(http) requests O(checks[].url) and compares the status code.
          - V(command) runs O(checks[].argv) without a shell, compares the exit code with
            O(checks[].rc) and looks for O(checks[].indicator) in its output.
        type: str
        required: true
        choices: [service, process, port, http, command]
      pattern:
        description:
          - For V(process) checks, a Python regular expression searched for in each process's
            command line (arguments joined by spaces). Defaults to the service name.
          - The module's own process and its parents are not counted.
        type: str
      port:
        description:
          - For V(port) checks, the TCP port that must be in LISTEN state (IPv4 or IPv6).
          - Required when O(checks[].type=port).
        type: int
      process:
        description:
          - For V(port) checks, the name of the process that must hold the port (its kernel
            name as in C(/proc/PID/comm), or the basename of its program), for example V(nginx).
        type: str
      url:
        description:
          - For V(http) checks, the URL to request, normally on loopback (V(http://127.0.0.1/)).
          - Proxy variables in the environment are ignored and redirects are not followed.
          - Required when O(checks[].type=http).
        type: str
      status:
        description:
          - For V(http) checks, the expected HTTP status code.
        type: int
        default: 200
      argv:
        description:
          - For V(command) checks, the program and its arguments, run without a shell.
          - Required when O(checks[].type=command).
        type: list
        elements: str
      indicator:
        description:
          - For V(command) checks, a substring that must appear in the command's standard output.
        type: str
      rc:
        description:
          - For V(command) checks, the expected exit code.
        type: int
        default: 0
      timeout:
        description:
          - Seconds this check may take. Defaults to O(timeout).
        type: int
  timeout:
    description:
      - Default seconds each check may take.
    type: int
    default: 10
seealso:
  - module: sentinel.remediation.evidence
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

- name: Check redis answers PING
  sentinel.remediation.service_health:
    service: redis-server
    checks:
      - type: port
        port: 6379
        process: redis-server
      - type: command
        argv: [redis-cli, -h, 127.0.0.1, ping]
        indicator: PONG
  become: true
  register: redis_health

- name: Report the first failing check
  ansible.builtin.debug:
    msg: "nginx is failing: {{ nginx_health.error }}"
  when: not nginx_health.healthy
"""

RETURN = r"""
healthy:
  description: Whether every check passed.
  returned: always
  type: bool
  sample: false
error:
  description:
    - The detail of the first failing check, empty when the service is healthy.
    - Secrets in it are redacted.
  returned: always
  type: str
  sample: "port 80 is held by python3 (pid 123), not nginx"
checks:
  description: One entry per check, in the order given.
  returned: always
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
"""

import re
import traceback
import urllib.request as urllib_request
from urllib.error import HTTPError, URLError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

_DETAIL_LIMIT = 300
# Debian's LSB init functions decorate messages ("... failed!", "... done.") when not on a tty.
_LSB_SUFFIX = re.compile(r"(\s*\.\.\.\s*(failed!|done\.|ok\.?)?)?\.?\s*$", re.IGNORECASE)


def _check_service(service: str, check: dict) -> tuple:
    init = host_probe.detect_init()
    argv = host_probe.status_argv(service, init)
    if argv is None:
        return False, "service %s: no init tool found (no systemctl, service or /etc/init.d)" % service
    rc, out, err = host_probe.run_argv(argv, timeout=check["timeout"])
    said = host_probe.last_line(out) or host_probe.last_line(err) or "no output"
    said = _LSB_SUFFIX.sub("", said) or said  # "nginx is not running ... failed!" -> the words that matter
    return rc == 0, "%s: %s (rc %d)" % (" ".join(argv), said, rc)


def _check_process(service: str, check: dict) -> tuple:
    pattern = check["pattern"] or re.escape(service)
    shown = check["pattern"] or service
    found = host_probe.find_processes(pattern)
    if not found:
        return False, "no process matches %r" % shown
    pid_list = ", ".join(str(p["pid"]) for p in found[:5]) + (", ..." if len(found) > 5 else "")
    return True, "%d process(es) match %r (pid %s)" % (len(found), shown, pid_list)


def _unique(infos: list) -> list:
    seen = set()
    return [i for i in infos if not (i["pid"] in seen or seen.add(i["pid"]))]


def _check_port(service: str, check: dict) -> tuple:
    port, wanted = check["port"], check["process"]
    socks = host_probe.listeners([port])
    if not socks:
        return False, "port %d is not listening" % port
    holders = _unique([h for s in socks for h in s["holders"]])
    where = ", ".join(host_probe.format_address(s["address"], s["port"]) for s in socks)
    if not wanted:
        by = (" by " + host_probe.describe_holders(holders)) if holders else ""
        return True, "port %d is listening on %s%s" % (port, where, by)
    if not holders:
        # Not visible (another user's process without CAP_SYS_PTRACE): judge by the socket's owner.
        owners = [s["uid"] for s in socks]
        candidates = _unique([p for s in socks for p in host_probe.likely_holders(s)])
        matching = [p for p in candidates if wanted in host_probe.process_names(p)]
        user = host_probe.user_name(owners[0])
        if matching:
            return True, ("port %d is listening as user %s, who runs %s (the holding fd is not visible)"
                          % (port, user, host_probe.describe_holders(matching)))
        return False, ("port %d is listening as user %s, who runs no process named %s"
                       " (the holding fd is not visible; run with become)" % (port, user, wanted))
    matching = [h for h in holders if wanted in host_probe.process_names(h)]
    if matching:
        return True, "port %d is held by %s" % (port, host_probe.describe_holders(matching))
    return False, "port %d is held by %s, not %s" % (port, host_probe.describe_holders(holders), wanted)


def _check_http(service: str, check: dict) -> tuple:
    url, expected = check["url"], check["status"]
    if not re.match(r"^https?://", url, re.IGNORECASE):
        raise ValueError("checks[].url must be an http:// or https:// URL, got %r" % url)

    class _NoRedirect(urllib_request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib_request.build_opener(urllib_request.ProxyHandler({}), _NoRedirect())
    try:
        response = opener.open(url, timeout=check["timeout"])
        status = response.getcode()
        response.close()
    except HTTPError as exc:
        status = exc.code
    except URLError as exc:
        return False, "GET %s failed: %s" % (url, to_native(getattr(exc, "reason", exc)))
    except Exception as exc:  # socket.timeout, ConnectionResetError, http.client errors
        return False, "GET %s failed: %s" % (url, to_native(exc) or type(exc).__name__)
    if status == expected:
        return True, "GET %s returned %d" % (url, status)
    return False, "GET %s returned %d, expected %d" % (url, status, expected)


def _check_command(service: str, check: dict) -> tuple:
    argv, indicator, expected = check["argv"], check["indicator"], check["rc"]
    rc, out, err = host_probe.run_argv(argv, timeout=check["timeout"])
    shown = " ".join(argv)
    if rc != expected:
        said = host_probe.last_line(err) or host_probe.last_line(out) or "no output"
        return False, "%s exited %d, expected %d: %s" % (shown, rc, expected, said)
    if indicator and indicator not in out:
        return False, "%s output lacks %r: %s" % (shown, indicator, host_probe.last_line(out) or "no output")
    return True, "%s exited %d%s" % (shown, rc, (" with %r in its output" % indicator) if indicator else "")


_CHECKS = {
    "service": _check_service,
    "process": _check_process,
    "port": _check_port,
    "http": _check_http,
    "command": _check_command,
}


def run_checks(service: str, checks: list, default_timeout: int) -> list:
    """Run every check; each result is ``{"type", "ok", "detail"}`` with a redacted detail."""
    results = []
    for check in checks:
        check = dict(check)
        if not check.get("timeout"):
            check["timeout"] = default_timeout
        ok, detail = _CHECKS[check["type"]](service, check)
        detail = redact_text(detail)
        if len(detail) > _DETAIL_LIMIT:
            detail = detail[:_DETAIL_LIMIT - 3] + "..."
        results.append({"type": check["type"], "ok": bool(ok), "detail": detail})
    return results


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", required=True),
            checks=dict(
                type="list",
                elements="dict",
                options=dict(
                    type=dict(type="str", required=True, choices=sorted(_CHECKS)),
                    pattern=dict(type="str"),
                    port=dict(type="int"),
                    process=dict(type="str"),
                    url=dict(type="str"),
                    status=dict(type="int", default=200),
                    argv=dict(type="list", elements="str"),
                    indicator=dict(type="str"),
                    rc=dict(type="int", default=0),
                    timeout=dict(type="int"),
                ),
                required_if=[
                    ("type", "port", ("port",)),
                    ("type", "http", ("url",)),
                    ("type", "command", ("argv",)),
                ],
            ),
            timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    service = module.params["service"]
    checks = module.params["checks"] or [{"type": "service"}]
    for check in checks:
        if check.get("type") == "command" and not check.get("argv"):
            module.fail_json(msg="a command check needs a non-empty argv", healthy=False, error="", checks=[])
        if check.get("type") == "process" and check.get("pattern"):
            try:
                re.compile(check["pattern"])
            except re.error as exc:
                module.fail_json(msg="bad process pattern %r: %s" % (check["pattern"], exc),
                                 healthy=False, error="", checks=[])
        for key in ("pattern", "port", "process", "url", "status", "argv", "indicator", "rc", "timeout"):
            check.setdefault(key, {"status": 200, "rc": 0}.get(key))

    results = []
    try:
        for check in checks:
            results.extend(run_checks(service, [check], module.params["timeout"]))
    except ValueError as exc:
        module.fail_json(msg=to_native(exc), healthy=False, error="", checks=results)
    except Exception as exc:  # an internal error: keep what was found so far
        module.fail_json(msg="service_health failed on %s: %s" % (service, to_native(exc)),
                         exception=traceback.format_exc(), healthy=False, error="", checks=results)

    failing = [r for r in results if not r["ok"]]
    module.exit_json(changed=False, healthy=not failing, error=failing[0]["detail"] if failing else "",
                     checks=results)


if __name__ == "__main__":
    main()
