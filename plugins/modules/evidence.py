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
    host, in one round trip - the init system (and on systemd hosts the units' properties and
    journal), the service's processes with their state, parent, user, start time and ports,
    listeners on its ports, the output of its configuration test and the lines it names,
    what each path named in an error or log line is, owner, mode, disk and inode use of its
    paths, its PID files, its dependencies, recent OOM kills, the tails of its logs, and the
    tools the host has.
  - Takes every key of a service definition (the items of the C(remediate_services) role
    option) as an option, so a definition is passed as it is.
  - Every text is redacted of secrets on the host, with
    C(sentinel.remediation.plugins.module_utils.redact), before it is returned.
  - The whole is bounded by O(max_bytes); the short sections come first and each is
    bounded too, the log tails share what is left. RV(truncated) says whether anything was cut.
  - Processes and TCP listeners are read from C(/proc); no C(ss), C(lsof), C(fuser) or C(ps)
    is needed on the host.
notes:
  - Run it with O(ignore:become=true) (the C(sentinel.remediation.remediate) role does) to read
    root-only logs, the journal, and to see which process holds a port.
  - O(config_test) runs in check mode too, since the module itself changes nothing; give it a
    command that only tests (V([nginx, -t]), V([sshd, -t])).
requirements:
  - Linux (reads C(/proc)); Python 3.9 or later on the target.
extends_documentation_fragment:
  - sentinel.remediation.service_definition.definition
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
    type: str
    required: true
    aliases: [name]
  error:
    description:
      - The service's health error (RV(sentinel.remediation.service_health#module:error)). Paths and
        configuration lines it names are evidence too.
    type: str
    default: ""
  log_lines:
    description:
      - How many lines to take from the end of each log, and of the journal.
    type: int
    default: 30
  max_bytes:
    description:
      - Upper bound of all returned evidence together, in UTF-8 bytes (texts, and the
        structured sections as JSON).
    type: int
    default: 6000
  tools:
    description:
      - Tool names to report as present or absent on the host (searched in C(PATH) and the
        sbin directories), so a planner proposes only commands that can run.
      - When omitted, a broad list (coreutils such as C(rm), C(mv), C(ln), C(ls), C(mkdir), C(chown);
        C(systemctl), C(journalctl), C(service), C(ss), C(lsof), C(fuser), C(ps), C(pkill), C(kill),
        C(ip), C(curl) and more) and the service's own programs (its processes, its
        configuration test and check commands).
    type: list
    elements: str
  timeout:
    description:
      - Seconds each command (status, configuration test, C(journalctl), C(dmesg)) may take.
    type: int
    default: 15
  logs_first:
    description:
      - The journal and the log tails keep up to half of O(max_bytes) whatever the descriptive sections
        before them take (unit, configuration, paths).
      - The C(sentinel.remediation.remediate) role asks for it of a dependency its dependents' errors name,
        to read that dependency's own lines on their failure.
    type: bool
    default: false
  sessions:
    description:
      - Also read the server's own view of its client sessions and who blocks whom (RV(evidence.sessions)),
        with its own client, read only. Only for a server with such a view (PostgreSQL, by the name of its
        processes or units, with C(psql) on the host); others are left as they are.
      - The C(sentinel.remediation.remediate) role asks for it of the watched dependencies of a service whose
        checks time out while it runs (slow, alive), where what it waits on is.
    type: bool
    default: false
  objects:
    description:
      - Names of database objects a dependent's errors say do not exist (a relation, a schema, a function).
        Also read where objects of those names are, in every database of the server that takes connections
        (at most eight), and what decides how sessions resolve unqualified names (the server's C(search_path),
        and the settings C(ALTER ROLE) or C(ALTER DATABASE) ... C(SET) left), with the server's own client, read
        only (RV(evidence.objects)). Only for a server with such a view (PostgreSQL); names that are not plain
        identifiers are left out.
      - The C(sentinel.remediation.remediate) role asks for it of a watched dependency when a dependent's
        errors say an object of its database does not exist.
    type: list
    elements: str
    default: []
  access:
    description:
      - What a dependent's client was refused by this database server. C(privileges) (a list of C(kind) and
        C(name) - a table, relation, view, sequence, schema, function or database the errors say
        C(permission denied for)), C(connections) (a list of C(kind) - C(database) or C(role) - and C(name) - a
        database not accepting connections, too many connections for a role or database), C(roles) and
        C(databases) (the client's login role and database, when its errors name them).
      - Also read, with the server's own client and read only (RV(evidence.access)), each such object's owner
        and who holds which privilege on it, the members of the roles that hold them, the login roles (the
        ones named, and the C(user@database) prefix of the server's own log lines that state the refusal)
        with the roles they are members of, and each database's and role's connection settings and current
        connections. Only for a server with such a view (PostgreSQL); names that are not plain identifiers
        are left out.
    type: dict
    default: {}
seealso:
  - module: sentinel.remediation.service_health
  - module: sentinel.remediation.execute_plan
"""

EXAMPLES = r"""
- name: Collect evidence for a failing nginx
  sentinel.remediation.evidence:
    service: nginx
    error: "service nginx status: nginx is not running (rc 3)"
    processes: [nginx]
    user: www-data
    config_paths: [/etc/nginx]
    logs:
      - /var/log/nginx/error.log
    ports: [80]
    config_test: [nginx, -t]
    runtime_paths: [/run/nginx.pid]
    paths: [/var/log/nginx, /var/lib/nginx]
    pid_files: [/run/nginx.pid]
  become: true
  register: nginx_evidence

- name: Collect evidence for redis, with a small bound
  sentinel.remediation.evidence:
    service: redis-server
    processes: [redis-server]
    user: redis
    logs: [/var/log/redis/*.log]
    log_lines: 50
    ports: [6379]
    data_paths: [/var/lib/redis]
    pid_files: [/run/redis/redis-server.pid]
    max_bytes: 4000
  become: true
  register: redis_evidence

- name: Show the processes of nginx and their state
  ansible.builtin.debug:
    msg: "{{ nginx_evidence.evidence.processes | map(attribute='state') | list }}"
"""

RETURN = r"""
evidence:
  description:
    - Diagnostic evidence by section, redacted and bounded. A section is present only when it applies.
  returned: always
  type: dict
  contains:
    init:
      description: The host's init system.
      type: str
      returned: always
      sample: systemd
    status:
      description: The init system's status command, its exit code and output.
      type: str
      returned: always
      sample: "$ service nginx status\nrc 3\nnginx is not running."
    unit:
      description:
        - The first unit's C(systemctl show) properties (C(ActiveState), C(SubState), C(Result),
          C(LoadState), C(UnitFileState), C(NRestarts), C(ExecMainStatus), C(FragmentPath),
          C(DropInPaths), C(NeedDaemonReload), C(MainPID), C(StatusText)...), empty ones left out,
          and C(Id), the unit's name.
      type: dict
      returned: when systemd runs
      sample: {Id: nginx.service, ActiveState: failed, SubState: failed, Result: exit-code, NRestarts: "0"}
    other_units:
      description: The same properties for the service's further units, by unit name.
      type: dict
      returned: when systemd runs and O(units) names more than one unit
    config_test:
      description: The configuration test command, its exit code and output.
      type: str
      returned: when O(config_test) is given
      sample: "$ nginx -t\nrc 1\nnginx: [emerg] unknown directive \"bogus\" in /etc/nginx/nginx.conf:12"
    config_context:
      description:
        - For each place in a configuration file that the configuration test (or the error,
          the status or the journal) names, the lines around it, numbered, the named line
          marked with C(>). At most three.
        - A message naming only a line (C(at line 3)) refers to the file the same output
          names, else the test's command line, else a file of O(config_paths).
        - Only files under O(config_paths) (or C(/etc) when none is given) or named in the
          test's command line are quoted.
      type: list
      elements: dict
      returned: when a configuration line is named
      sample:
        - file: /etc/nginx/nginx.conf
          line: 12
          said: "nginx: [emerg] unknown directive \"bogus\" in /etc/nginx/nginx.conf:12"
          text: "     10  http {\n     11      sendfile on;\n>    12      bogus on;\n     13  }"
    processes:
      description:
        - The service's processes (see RV(evidence.service_pids)), by PID, each with C(pid),
          C(ppid), C(user), C(state) (V(running), V(sleeping), V(disk-sleep), V(stopped),
          V(tracing-stop), V(zombie), V(idle)...), C(start) (start time in clock ticks since
          boot, field 22 of C(/proc/PID/stat) - with the PID it names one process for good),
          C(started) (the same as an ISO 8601 UTC time), C(comm), C(cmdline), C(ports)
          (TCP ports it listens on) and C(reasons) (why it belongs to the service).
      type: list
      elements: dict
      returned: always
      sample:
        - pid: 55
          ppid: 1
          user: root
          state: stopped
          start: 183225
          started: "2025-11-22T10:00:03+00:00"
          comm: nginx
          cmdline: "nginx: master process /usr/sbin/nginx"
          ports: [80]
          reasons: [name nginx, pid file /run/nginx.pid, holds port 80]
    service_pids:
      description:
        - PIDs that belong to the service - its programs (O(processes)), the PIDs of its PID
          files, the processes of its systemd units (cgroups), the holders of its O(ports), and
          their children.
      type: list
      elements: int
      returned: always
      sample: [55, 56, 57]
    client_connections:
      description:
        - The client connections those processes and their children serve, from the kernel's socket
          tables - ESTABLISHED TCP sockets on a port they listen on and accepted unix connections on their
          listening sockets, and those not accepted yet (in a listener's accept queue, a handshake in
          progress, a unix connection queued on a listening socket). C(count), C(by_endpoint) and C(queued)
          (how many of them are not accepted yet, when any), or C(unknown) with why they could not be counted.
      type: dict
      returned: when a process of the service is known
      sample: {count: 1, by_endpoint: {"tcp :5432": 1}}
    listeners:
      description: For each of O(ports), the TCP listeners and the processes holding them.
      type: str
      returned: when O(ports) is not empty
      sample: "0.0.0.0:80 held by python3 (pid 310)"
    named_paths:
      description:
        - For each absolute path named in O(error), the configuration test output, the journal
          or the log tails (at most twelve, the newest lines first), what it is - C(type)
          (V(missing), V(file), V(directory), V(symlink), V(socket), V(fifo), V(device),
          V(inaccessible)), C(mode), C(owner), a file's C(size), a directory's first C(entries)
          and C(entries_total), a link's C(target) and whether it is C(dangling), a missing
          path's C(existing_parent) with its C(parent_mode) and C(parent_owner); with O(user),
          C(user_access) (or C(parent_user_access)); C(filesystem) when it is 90% full or more;
          and C(named_in), where it was named.
        - A regular file's C(first_lines) (three, unless its name suggests a secret) and, for a file,
          directory or link, C(managed_by) - what the host says about who manages it (a configuration
          management header, a ticket or team in a comment, a dpkg conffile, a deploy tool's tree).
        - Ranked before the budget cuts whole entries - missing or inaccessible paths named by O(error) or
          the configuration test first, then other broken ones, then other paths those name, then the rest.
      type: dict
      returned: when a path is named
      sample:
        /var/log/nginx/error.log:
          type: missing
          existing_parent: /var/log
          parent_mode: "0755"
          parent_owner: root:root
          named_in: config_test
    named_paths_left_out:
      description: The named paths the budget left out, and how to ask for them.
      type: str
      returned: when the budget left one out
    ownership:
      description:
        - The incident's files of which the host says who manages them (the files the errors name, the recently
          changed ones, the units' drop-ins, the start's environment files, the configuration files), path to
          notes. A dpkg conffile as its package installed it is not listed here (it is in C(named_paths)).
      type: dict
      returned: when a file of the incident has an owner
      sample:
        /etc/ssh/sshd_config.d/50-hardening.conf: "says: line 1: # Managed by the security team (SEC-1042); DO NOT EDIT"
    writer_records:
      description:
        - For a guard, marker or lock file that names its writer (a program name before its PID or after
          C(written by)/C(owner:) in its first lines, or in the comment of the unit drop-in whose condition
          names it), what that writer last recorded, found by its name - the newest three of its log files
          under C(/var/log) (C(/var/log/NAME/*), C(/var/log/NAME.log), C(/var/log/NAME*.log); never a file whose
          name suggests a secret, never one a link leads out of C(/var/log)), their last ten lines, and its last
          journal lines (its syslog identifier, process name or unit), redacted, with absolute times and how its
          newest line stands against the time the marker states; or that no log of it was found.
        - The files are the unmet path conditions of the unit and the named paths that name a writer; at most two.
      type: dict
      returned: when such a file names its writer
      sample:
        /var/lib/postgresql/15/main/RESTORE_IN_PROGRESS: "marker /var/lib/postgresql/15/main/RESTORE_IN_PROGRESS
          (states 2026-11-27T23:10:02Z, file written 2026-11-27T23:10:02Z)\npgrestore-drill log
          /var/log/pgrestore-drill/drill.log (last written 2026-11-27T23:31:55Z, 21 min 53 s after the marker file),
          last 1 line(s):\n  2026-11-27T23:31:55Z cleaning up"
    tls:
      description:
        - When the health error, the config test, the status, the journal or the logs say a TLS handshake failed
          (C(handshake failure), C(no shared cipher), C(wrong version number), C(unsupported protocol), an SSL or
          TLS alert), the TLS directives in effect, one C(FILE:LINE name value) a line, read from the service's
          main configuration file through its includes in reading order (a directive is TLS's by its name,
          C(ssl*) or C(tls*)); then each key file a directive names, by path, owner and mode only (never read).
          The certificates in C(certificates) then also show their public key and signature algorithm.
      type: str
      returned: when a TLS handshake failed and the main configuration file was found
      sample: "TLS directives in effect (file:line, read from /etc/nginx/nginx.conf through its includes, in reading
        order):\n/etc/nginx/nginx.conf:36 ssl_protocols TLSv1.2 TLSv1.3\n/etc/nginx/sites-enabled/default:26
        ssl_certificate /etc/nginx/tls/lab.crt\nkey file /etc/nginx/tls/lab.key: file, owner root:root, mode 0600
        (content not read)"
    collected_at:
      description: When the evidence was collected (UTC, ISO 8601); the times of C(recent_changes) compare with it.
      type: str
      returned: always
      sample: "2026-11-28T06:30:00Z"
    pid_files:
      description: PID file to what its PID is.
      type: dict
      returned: when O(pid_files) is not empty
      sample:
        /run/nginx.pid: "pid 4242 is not running (stale PID file)"
    paths:
      description:
        - Each path of O(config_paths), O(data_paths), O(runtime_paths), O(log_paths) and O(paths)
          to one line on it, with what O(user) may do there.
      type: dict
      returned: when any of those is not empty
      sample:
        /var/lib/redis: "directory, owner root:root, mode 0700; filesystem at /var/lib/redis: 3% used, 15.2 MiB free; user redis may ---"
    data_markers:
      description:
        - The small regular files (at most 256 bytes) at the top level of the service's data directories
          (O(data_paths) and its units' C(StateDirectory=)), at most twenty, path to owner, mode, size, time and
          content (redacted; a name that suggests a secret is listed unread) - a version stamp, a PID file, a
          signal or lock a tool left. Links are not followed; larger files and subdirectories are left out.
      type: dict
      returned: when a data directory holds such a file
      sample:
        /var/lib/postgresql/15/main/PG_VERSION: "owner postgres:postgres, mode 0600, 3 bytes, modified 2026-11-29T03:04:00Z: 14"
    environment_files:
      description:
        - The environment files the host says the service's start reads - the paths its units name in
          C(EnvironmentFile=), or the files its init script sources under C(/etc) - for the policy's scope.
      type: list
      elements: str
      returned: when systemd describes one of its units, or it has an init script
      sample: [/etc/sysconfig/redis-server]
    dependencies:
      description: For each of O(depends_on), what the init system says of it.
      type: dict
      returned: when O(depends_on) is not empty
      sample:
        postgresql: "not running (rc 3): inactive"
    dependency_up:
      description:
        - For each of O(depends_on), the same verdict as data, for the engine (which never parses the
          sentences of RV(evidence.dependencies)) - V(true) up, V(false) down, V(null) unknown.
      type: dict
      returned: when O(depends_on) is not empty
      sample:
        postgresql: false
    journal:
      description: The last O(log_lines) journal lines of the service's units.
      type: str
      returned: when systemd runs and C(journalctl) exists
    oom:
      description: Recent OOM-killer lines from C(dmesg) or the kernel log files, or why they are unavailable.
      type: str
      returned: always
      sample: "unavailable: dmesg: read kernel buffer failed: Operation not permitted; no readable kernel log file"
    logs:
      description: Log file (or a pattern that matched none) to its last lines.
      type: dict
      returned: when O(logs) is not empty
      sample:
        /var/log/redis/redis-server.log: "... CONFIG SET requirepass [REDACTED:requirepass]"
    sessions:
      description:
        - With O(sessions), the server's client sessions (PostgreSQL's C(pg_stat_activity) with
          C(pg_blocking_pids)) - C(server), C(max_connections), C(reserved) (for superusers),
          C(client_sessions), C(sessions) (at most twenty, those that block others first, each with
          C(pid), C(user), C(database), C(application), C(client), C(state), C(wait), C(transaction_s),
          C(state_s), C(blocked_by), C(blocks) and its redacted C(query)) and C(left_out); or C(server)
          and C(error) when it could not be read.
      returned: when O(sessions) is true and the server has a session view
      type: dict
      sample: {server: postgresql, max_connections: 100, reserved: 3, client_sessions: 4, left_out: 0,
               sessions: [{pid: 4242, user: postgres, database: app, application: psql, client: local,
                           state: idle in transaction, wait: "Client:ClientRead", transaction_s: 310, state_s: 309,
                           blocked_by: [], blocks: 3, query: ALTER TABLE visits ADD COLUMN referrer text}]}
    objects:
      description:
        - With O(objects), where objects of those names are - C(server), C(names), C(found) (each with
          C(database), C(schema), C(name), C(kind) and C(owner)), C(search_path) (C(value), C(source)),
          C(name_settings) (each with C(role), C(database) - empty for every one - and C(settings)) and
          C(databases_left_out); or C(error) when it could not be read.
      returned: when O(objects) names a plain identifier and the server has such a view
      type: dict
      sample: {server: postgresql, names: [visits], found: [{database: app, schema: public, name: visits,
               kind: table, owner: app}], search_path: {value: '"$user", public', source: default},
               name_settings: [{role: app, database: '', settings: search_path=reporting}], databases_left_out: 0}
    access:
      description:
        - With O(access), who may use what the client was refused - C(server), C(objects) (each with
          C(database), C(schema), C(name), C(kind), C(owner) and C(grants), each grant a C(holder) and its
          C(privileges)), C(holders) (the members of each role holding a grant), C(roles) (C(name),
          C(can_login), C(connlimit), C(inherit), C(connections), C(member_of)), C(roles_missing),
          C(databases) (C(name), C(allow_connections), C(connlimit), C(connections), C(owner), C(grants)),
          C(logins) (the C(user@database) prefixes of the log lines stating the refusal), C(max_connections),
          C(reserved) and C(client_sessions); or C(error) when it could not be read.
      returned: when O(access) names something and the server has such a view
      type: dict
      sample: {server: postgresql, logins: [app@app], objects: [{database: app, schema: public, name: visits,
               kind: table, owner: app_owner, grants: [{holder: app_owner, privileges: [SELECT]},
               {holder: app_rw, privileges: [SELECT]}]}], holders: {app_owner: [], app_rw: [reporting]},
               roles: [{name: app, can_login: true, connlimit: -1, inherit: true, connections: 0, member_of: []}],
               roles_missing: [], databases: [{name: app, allow_connections: true, connlimit: -1, connections: 0,
               owner: app, grants: [{holder: PUBLIC, privileges: [CONNECT, TEMPORARY]}]}],
               max_connections: 100, reserved: 3, client_sessions: 1}
tools:
  description: Which of the tools (O(tools), or the default list) the host has.
  returned: always
  type: dict
  contains:
    present:
      description: Tools found, sorted.
      type: list
      elements: str
      sample: [cat, chown, kill, ln, ls, mkdir, mv, nginx, ps, rm, service, ss]
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

import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.sentinel.remediation.plugins.module_utils import server_sessions, service_evidence, service_spec
from ansible_collections.sentinel.remediation.plugins.module_utils.evidence_text import evidence_texts


def argument_spec() -> dict:
    spec = service_spec.definition_spec()
    del spec["name"]
    spec.update(
        service=dict(type="str", required=True, aliases=["name"]),
        error=dict(type="str", default=""),
        log_lines=dict(type="int", default=30),
        max_bytes=dict(type="int", default=6000),
        tools=dict(type="list", elements="str"),
        timeout=dict(type="int", default=15),
        sessions=dict(type="bool", default=False),
        objects=dict(type="list", elements="str", default=[]),
        access=dict(type="dict", default={}),
        logs_first=dict(type="bool", default=False),
    )
    return spec


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    empty = dict(evidence={}, tools={}, truncated=False)
    if params["max_bytes"] < 200:
        module.fail_json(msg="max_bytes must be at least 200, got %d" % params["max_bytes"], **empty)
    if params["log_lines"] < 0:
        module.fail_json(msg="log_lines must not be negative", **empty)
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be positive, got %d" % params["timeout"], **empty)
    try:
        definition = service_spec.resolve(params)
    except service_spec.DefinitionError as exc:
        module.fail_json(msg=to_native(exc), **empty)
    try:
        result = service_evidence.collect(definition, max_bytes=params["max_bytes"], log_lines=params["log_lines"],
                                          timeout=params["timeout"], error=params["error"], tools=params["tools"],
                                          logs_first=params["logs_first"])
        if params["sessions"]:
            view = server_sessions.read(definition, params["timeout"])
            if view is not None:
                result["evidence"]["sessions"] = view
        if params["objects"]:
            where = server_sessions.objects(definition, params["objects"], params["timeout"])
            if where is not None:
                result["evidence"]["objects"] = where
        if params["access"]:
            # the server's own log lines: the user@database prefix of a refusal names the login
            logs = "\n".join(text for key, text in evidence_texts(result["evidence"]).items()
                             if key.split(".", 1)[0].split("[", 1)[0] in ("logs", "log", "journal"))
            held = server_sessions.access(definition, params["access"], logs, params["timeout"])
            if held is not None:
                result["evidence"]["access"] = held
    except Exception as exc:  # an internal error, never a half-redacted answer
        module.fail_json(msg="evidence failed on %s: %s" % (params["service"], to_native(exc)),
                         exception=traceback.format_exc(), **empty)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
