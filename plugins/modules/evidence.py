#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: evidence
short_description: Collect bounded, redacted diagnostic evidence for a failing service
version_added: 0.1.0
author:
  - Sentinel Remediation maintainers (@sentinel-remediation)
description:
  - Gathers what a person (or a planner) needs to diagnose a failing service on the target
    host, as short texts, in one round trip - the init system's status output, processes of
    the service, listeners on its ports and who holds them, the output of a configuration
    test, owner, mode, disk and inode use of its paths, the facts behind its PID files,
    recent OOM kills, and the tails of its logs.
  - Every text is redacted of secrets on the host, with
    C(sentinel.remediation.plugins.module_utils.redact), before it is returned.
  - The whole is bounded by O(max_bytes); the short sections come first and each is
    bounded too, the log tails share what is left. RV(truncated) says whether anything was cut.
  - Processes and TCP listeners are read from C(/proc); no C(ss), C(lsof), C(fuser) or C(ps)
    is needed on the host.
notes:
  - Run it with O(ignore:become=true) (the C(sentinel.remediation.remediate) role does) to read
    root-only logs and to see which process holds a port.
  - O(config_test) runs in check mode too, since the module itself changes nothing; give it a
    command that only tests (V([nginx, -t]), V([sshd, -t])).
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
      - Name of the service as the init system knows it (V(nginx), V(redis-server)).
      - Its status is asked from the detected init system, and processes whose name or
        command line contains it are listed.
    type: str
    required: true
  logs:
    description:
      - Log files or shell-style globs (V(/var/log/nginx/*.log)). The last O(log_lines) lines
        of each are returned, at most ten files, newest first.
      - Compressed rotations (C(.gz), C(.xz), C(.bz2), C(.zst)) are skipped.
    type: list
    elements: path
    default: []
  log_lines:
    description:
      - How many lines to take from the end of each log.
    type: int
    default: 30
  ports:
    description:
      - TCP ports the service should listen on; the listeners on them and their holders are reported.
    type: list
    elements: int
    default: []
  config_test:
    description:
      - A command that tests the service's configuration, run without a shell, for example
        V([nginx, -t]). Its exit code and output are reported.
    type: list
    elements: str
  paths:
    description:
      - Data, log and run paths of the service. For each - whether it exists, type, owner, mode,
        and the disk and inode use of its filesystem (of the nearest existing parent when missing).
    type: list
    elements: path
    default: []
  pid_files:
    description:
      - PID files of the service. For each - its content, whether that PID is alive and what it runs.
    type: list
    elements: path
    default: []
  max_bytes:
    description:
      - Upper bound of all returned evidence text together, in UTF-8 bytes.
    type: int
    default: 6000
  tools:
    description:
      - Tool names to report as present or absent on the host (searched in C(PATH) and the
        sbin directories), so a planner proposes only commands that can run.
    type: list
    elements: str
    default: [service, systemctl, journalctl, ss, netstat, lsof, fuser, ps, pgrep, pkill, kill,
              curl, wget, nginx, redis-cli, redis-server, sshd, ip, df, du, find, tail, sudo, dpkg,
              apt-get, logrotate, chown, chmod, mkdir, truncate]
  timeout:
    description:
      - Seconds each command (status, configuration test, C(dmesg)) may take.
    type: int
    default: 15
seealso:
  - module: sentinel.remediation.service_health
"""

EXAMPLES = r"""
- name: Collect evidence for a failing nginx
  sentinel.remediation.evidence:
    service: nginx
    logs:
      - /var/log/nginx/error.log
    ports: [80]
    config_test: [nginx, -t]
    paths: [/var/log/nginx, /var/lib/nginx, /run]
    pid_files: [/run/nginx.pid]
  become: true
  register: nginx_evidence

- name: Collect evidence for redis, with a small bound
  sentinel.remediation.evidence:
    service: redis-server
    logs: [/var/log/redis/*.log]
    log_lines: 50
    ports: [6379]
    paths: [/var/lib/redis, /var/log/redis]
    pid_files: [/run/redis/redis-server.pid]
    max_bytes: 4000
  become: true
  register: redis_evidence

- name: Show what was found
  ansible.builtin.debug:
    var: nginx_evidence.evidence
"""

RETURN = r"""
evidence:
  description:
    - Diagnostic evidence by section; each value is a redacted, bounded text, or a dictionary
      of such texts (per log file, path or PID file). A section is present only when it applies.
  returned: always
  type: dict
  contains:
    status:
      description: The init system's status command, its exit code and output.
      type: str
      returned: always
      sample: "$ service nginx status\nrc 3\nnginx is not running."
    processes:
      description: Processes whose name or command line contains the service name (pid, user, command line).
      type: str
      returned: always
      sample: "pid 55 user root: nginx: master process /usr/sbin/nginx"
    listeners:
      description: For each of O(ports), the TCP listeners and the processes holding them.
      type: str
      returned: when O(ports) is not empty
      sample: "0.0.0.0:80 held by python3 (pid 310)"
    config_test:
      description: The configuration test command, its exit code and output.
      type: str
      returned: when O(config_test) is given
      sample: "$ nginx -t\nrc 1\nnginx: [alert] could not open error log file: open() \"/var/log/nginx/error.log\" failed (2: No such file or directory)"
    paths:
      description: Path to one line on it.
      type: dict
      returned: when O(paths) is not empty
      sample:
        /var/log/nginx: >-
          missing (nearest existing parent /var/log: directory, owner root:root, mode 0755);
          filesystem at /var/log: 12% used, 40.1 GiB free, inodes 3% used
    pid_files:
      description: PID file to what its PID is.
      type: dict
      returned: when O(pid_files) is not empty
      sample:
        /run/nginx.pid: "pid 4242 is not running (stale PID file)"
    oom:
      description: Recent OOM-killer lines from C(dmesg) or the kernel log files, or why they are unavailable.
      type: str
      returned: always
      sample: "unavailable: dmesg: read kernel buffer failed: Operation not permitted; no readable kernel log file"
    journal:
      description: The last O(log_lines) journal lines of the unit.
      type: str
      returned: when systemd runs and C(journalctl) exists
    logs:
      description: Log file (or a pattern that matched none) to its last lines.
      type: dict
      returned: when O(logs) is not empty
      sample:
        /var/log/redis/redis-server.log: "... CONFIG SET requirepass [REDACTED:requirepass]"
tools:
  description: Which of O(tools) the host has.
  returned: always
  type: dict
  contains:
    present:
      description: Tools found, sorted.
      type: list
      elements: str
      sample: [kill, nginx, ps, service, ss]
    absent:
      description: Tools not found, sorted.
      type: list
      elements: str
      sample: [curl, journalctl, lsof, systemctl]
truncated:
  description: Whether any evidence was cut or left out to stay within O(max_bytes) (or the ten log files).
  returned: always
  type: bool
  sample: false
"""

import re
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sentinel.remediation.plugins.module_utils import host_probe
from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text

MAX_LOG_FILES = 10
MAX_PROCESS_LINES = 15
OOM_LINES = 10
KERNEL_LOGS = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
_OOM_RE = re.compile(r"out of memory|oom-kill|oom_reaper|killed process|invoked oom-killer", re.IGNORECASE)
_OMITTED = "[omitted: max_bytes reached]"


class EvidenceBudget:
    """Hands out the ``max_bytes`` budget: each text is redacted, then cut to the smaller of
    its own cap and what is left of the total."""

    def __init__(self, total: int):
        self.remaining = max(0, total)
        self.truncated = False

    def take(self, text: str, cap: int, keep: str = "tail") -> str:
        text = redact_text(text)  # before cutting, so a cut cannot hide a secret from the rules
        limit = min(cap, self.remaining)
        if limit <= 0 and text:
            self.truncated = True
            return ""
        clipped, cut = host_probe.clip_text(text, limit, keep)
        self.truncated = self.truncated or cut
        self.remaining -= host_probe.byte_len(clipped)
        return clipped

    def take_all(self, texts: dict, cap: int, keep: str = "tail") -> dict:
        """Share ``cap`` between the entries; an entry's unused share passes to the next."""
        result = {}
        section_left = min(cap, self.remaining)
        items = list(texts.items())
        for index, (key, text) in enumerate(items):
            share = section_left // (len(items) - index)
            before = self.remaining
            result[key] = self.take(text, share, keep)
            section_left -= before - self.remaining
        return result


def _command_text(argv: list, timeout: int) -> str:
    rc, out, err = host_probe.run_argv(argv, timeout=timeout)
    output = "\n".join(part.rstrip("\n") for part in (out, err) if part.strip())
    return "$ %s\nrc %d\n%s" % (" ".join(argv), rc, output or "(no output)")


def status_section(service: str, timeout: int) -> str:
    init = host_probe.detect_init()
    argv = host_probe.status_argv(service, init, verbose=True)
    if argv is None:
        return "no init tool found (no systemctl, service or /etc/init.d)"
    return _command_text(argv, timeout)


def processes_section(service: str) -> str:
    skip = host_probe.own_lineage()
    lines = []
    for info in host_probe.processes():
        if info["pid"] in skip or not info["cmdline"]:
            continue
        if service in info["name"] or service in info["cmdline"]:
            lines.append("pid %d user %s: %s" % (info["pid"], host_probe.user_name(info["uid"]), info["cmdline"]))
    if not lines:
        return "no process named or running %s" % service
    if len(lines) > MAX_PROCESS_LINES:
        lines = lines[:MAX_PROCESS_LINES] + ["(%d more)" % (len(lines) - MAX_PROCESS_LINES)]
    return "\n".join(lines)


def listeners_section(ports: list) -> str:
    socks = host_probe.listeners(ports)
    lines = []
    for port in ports:
        on_port = [s for s in socks if s["port"] == port]
        if not on_port:
            lines.append("port %d: nothing listening" % port)
        for sock in on_port:
            where = host_probe.format_address(sock["address"], sock["port"])
            if sock["holders"]:
                lines.append("%s held by %s" % (where, host_probe.describe_holders(sock["holders"])))
            else:
                user = host_probe.user_name(sock["uid"])
                runs = host_probe.describe_holders(host_probe.likely_holders(sock)) or "no process"
                lines.append("%s listening as user %s (holder not visible; that user runs %s)" % (where, user, runs))
    return "\n".join(lines)


def pid_file_text(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(64).decode("utf-8", "replace").strip()
    except (IOError, OSError) as exc:
        return "missing" if getattr(exc, "errno", None) == 2 else "unreadable: %s" % (exc.strerror or exc)
    if not raw.isdigit():
        return "content %r is not a PID" % raw
    pid = int(raw)
    info = host_probe.process_info(pid) if host_probe.pid_alive(pid) else None
    if info is None:
        return "pid %d is not running (stale PID file)" % pid
    return "pid %d is running as user %s: %s" % (pid, host_probe.user_name(info["uid"]),
                                                 info["cmdline"] or info["name"])


def oom_section(timeout: int) -> str:
    notes = []
    rc, out, err = host_probe.run_argv(["dmesg"], timeout=timeout)
    source, text = None, None
    if rc == 0:
        source, text = "dmesg", out
    else:
        said = host_probe.last_line(err) or "rc %d" % rc
        notes.append(said if said.startswith("dmesg") else "dmesg: %s" % said)
        for path in KERNEL_LOGS:
            try:
                text = host_probe.tail_file(path, 5000)
            except (IOError, OSError):
                continue
            source = path
            break
    cgroup = _cgroup_oom_kills()
    if source is None:
        result = "unavailable: %s; no readable kernel log file (%s)" % ("; ".join(notes), ", ".join(KERNEL_LOGS))
    else:
        hits = [line for line in text.splitlines() if _OOM_RE.search(line)][-OOM_LINES:]
        result = ("OOM kills in %s:\n%s" % (source, "\n".join(hits))) if hits else "no OOM kill in %s" % source
    if cgroup is not None:
        result += "\ncgroup memory.events oom_kill: %d" % cgroup
    return result


def _cgroup_oom_kills():
    try:
        with open("/sys/fs/cgroup/memory.events") as handle:
            for line in handle:
                name, _sep, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (IOError, OSError, ValueError):
        return None
    return None


def log_texts(patterns: list, lines: int) -> tuple:
    files, notes = host_probe.expand_globs(patterns, limit=MAX_LOG_FILES + 1)
    more = len(files) > MAX_LOG_FILES
    texts = {}
    for path in files[:MAX_LOG_FILES]:
        try:
            texts[path] = host_probe.tail_file(path, lines) or "(empty)"
        except (IOError, OSError) as exc:
            texts[path] = "unreadable: %s" % (exc.strerror or exc)
    texts.update(notes)
    return texts, more


def collect(params: dict) -> dict:
    service, timeout = params["service"], params["timeout"]
    budget = EvidenceBudget(params["max_bytes"])
    # The short sections come first, each capped, so a long log cannot crowd them out.
    cap = max(200, params["max_bytes"] // 5)
    evidence = {}
    evidence["status"] = budget.take(status_section(service, timeout), cap)
    if params["config_test"]:
        evidence["config_test"] = budget.take(_command_text(params["config_test"], timeout), cap, keep="both")
    if params["ports"]:
        evidence["listeners"] = budget.take(listeners_section(params["ports"]), cap, keep="head")
    if params["pid_files"]:
        evidence["pid_files"] = budget.take_all(dict((p, pid_file_text(p)) for p in params["pid_files"]), cap)
    if params["paths"]:
        evidence["paths"] = budget.take_all(dict((p, host_probe.describe_path(p)) for p in params["paths"]), cap)
    evidence["processes"] = budget.take(processes_section(service), cap, keep="head")
    evidence["oom"] = budget.take(oom_section(timeout), cap)
    if host_probe.detect_init() == "systemd" and host_probe.find_tool("journalctl"):
        argv = ["journalctl", "--no-pager", "-n", str(params["log_lines"]), "-u", service]
        evidence["journal"] = budget.take(_command_text(argv, timeout), cap)
    if params["logs"]:
        texts, more = log_texts(params["logs"], params["log_lines"])
        evidence["logs"] = budget.take_all(texts, budget.remaining)
        budget.truncated = budget.truncated or more
    _mark_omitted(evidence, budget)
    return {"evidence": evidence, "tools": host_probe.tools_report(params["tools"]),
            "truncated": budget.truncated}


def _mark_omitted(section: dict, budget: EvidenceBudget) -> None:
    """Say so where the budget left a text empty, while the budget has room for saying it."""
    for key, value in section.items():
        if isinstance(value, dict):
            _mark_omitted(value, budget)
        elif value == "" and budget.truncated and budget.remaining >= len(_OMITTED):
            section[key] = _OMITTED
            budget.remaining -= len(_OMITTED)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", required=True),
            logs=dict(type="list", elements="path", default=[]),
            log_lines=dict(type="int", default=30),
            ports=dict(type="list", elements="int", default=[]),
            config_test=dict(type="list", elements="str"),
            paths=dict(type="list", elements="path", default=[]),
            pid_files=dict(type="list", elements="path", default=[]),
            max_bytes=dict(type="int", default=6000),
            tools=dict(type="list", elements="str", default=[
                "service", "systemctl", "journalctl", "ss", "netstat", "lsof", "fuser", "ps", "pgrep",
                "pkill", "kill", "curl", "wget", "nginx", "redis-cli", "redis-server", "sshd", "ip", "df",
                "du", "find", "tail", "sudo", "dpkg", "apt-get", "logrotate", "chown", "chmod", "mkdir",
                "truncate"]),
            timeout=dict(type="int", default=15),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["max_bytes"] < 200:
        module.fail_json(msg="max_bytes must be at least 200, got %d" % params["max_bytes"])
    if params["log_lines"] < 0:
        module.fail_json(msg="log_lines must not be negative")
    if params["ports"] and any(not 0 < p < 65536 for p in params["ports"]):
        module.fail_json(msg="ports must be between 1 and 65535, got %s" % params["ports"])
    try:
        result = collect(params)
    except Exception as exc:  # an internal error, never a half-redacted answer
        module.fail_json(msg="evidence failed on %s: %s" % (params["service"], to_native(exc)),
                         exception=traceback.format_exc(), evidence={}, tools={}, truncated=False)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
