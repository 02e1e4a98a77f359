# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of a service definition (contract C1) and its health checks.

The same keys are options at five places: the top level of the evidence module
(DEFINITION), the items of service_health's ``services`` (SERVICES, with the single-service
``checks`` as CHECKS), execute_plan's ``verify`` (VERIFY) and the items of its ``depends``
(DEPENDS). The argument spec they document is plugins/module_utils/service_spec.py.

DEFINITION is the one source. ansible-test reads a fragment's strings as literals and
ansible-doc composes fragments only at the top level of ``options``, so the other four are
written out by scripts/render_doc_fragments.py (edit DEFINITION, or a placement's head above
its ``checks``, then run it); a unit test fails when they are not rendered.
"""
from __future__ import annotations


class ModuleDocFragment:
    # The checks of service_health's single-service form.
    # Rendered from DEFINITION by scripts/render_doc_fragments.py: do not edit the keys here.
    CHECKS = r"""
options:
  checks:
    description:
      - The service's health checks, run in order. All run, even after one fails.
      - When omitted, one check of type V(service) is run.
    type: list
    elements: dict
    suboptions:
      type:
        description:
          - V(service) asks the init system for the service's status. On hosts where systemd runs
            as PID 1, C(systemctl show) of each of the service's units (active means healthy);
            elsewhere C(service NAME status).
          - V(process) looks for a process whose command line matches C(pattern). Processes
            stopped by a signal (C(SIGSTOP)) do not count as running when all of them are stopped.
          - V(port) checks that a TCP port is listening and, with C(process), who holds it.
          - V(http) requests C(url) and compares the status code.
          - V(command) runs C(argv) without a shell, compares the exit code with
            C(rc) and looks for C(indicator) in its output.
        type: str
        required: true
        choices: [command, http, port, process, service]
      pattern:
        description:
          - For V(process) checks, a Python regular expression searched for in each process's
            command line (arguments joined by spaces). Defaults to the service name.
          - The module's own process and its parents are not counted.
        type: str
      port:
        description:
          - For V(port) checks, the TCP port that must be in LISTEN state (IPv4 or IPv6).
          - Required when C(type=port).
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
          - Required when C(type=http).
        type: str
      status:
        description:
          - For V(http) checks, the expected HTTP status code.
        type: int
        default: 200
      argv:
        description:
          - For V(command) checks, the program and its arguments, run without a shell.
          - Required when C(type=command).
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
          - Seconds this check may take. Defaults to the module's O(timeout).
        type: int

"""

    # A whole service definition but its name, as top-level options (the evidence module).
    DEFINITION = r"""
options:
  checks:
    description:
      - The service's health checks, run in order. All run, even after one fails.
      - When omitted, one check of type V(service) is run.
    type: list
    elements: dict
    suboptions:
      type:
        description:
          - V(service) asks the init system for the service's status. On hosts where systemd runs
            as PID 1, C(systemctl show) of each of the service's units (active means healthy);
            elsewhere C(service NAME status).
          - V(process) looks for a process whose command line matches C(pattern). Processes
            stopped by a signal (C(SIGSTOP)) do not count as running when all of them are stopped.
          - V(port) checks that a TCP port is listening and, with C(process), who holds it.
          - V(http) requests C(url) and compares the status code.
          - V(command) runs C(argv) without a shell, compares the exit code with
            C(rc) and looks for C(indicator) in its output.
        type: str
        required: true
        choices: [command, http, port, process, service]
      pattern:
        description:
          - For V(process) checks, a Python regular expression searched for in each process's
            command line (arguments joined by spaces). Defaults to the service name.
          - The module's own process and its parents are not counted.
        type: str
      port:
        description:
          - For V(port) checks, the TCP port that must be in LISTEN state (IPv4 or IPv6).
          - Required when C(type=port).
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
          - Required when C(type=http).
        type: str
      status:
        description:
          - For V(http) checks, the expected HTTP status code.
        type: int
        default: 200
      argv:
        description:
          - For V(command) checks, the program and its arguments, run without a shell.
          - Required when C(type=command).
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
          - Seconds this check may take. Defaults to the module's O(timeout).
        type: int

  units:
    description:
      - The init system's unit names of the service. Defaults to V(<name>.service).
      - On systemd hosts the units' states, C(systemctl show) properties, journal and cgroups
        (which processes they hold) are evidence. On SysV hosts the init script is the name.
    type: list
    elements: str
  processes:
    description:
      - Process names of the service (C(comm), or the program's basename), for example
        V(nginx), V(redis-server), V(postgres).
      - When omitted, programs whose name starts with the service name (V(sshd) for V(ssh)).
    type: list
    elements: str
  user:
    description:
      - The account the service runs as (V(www-data), V(redis)). Evidence says what this
        account may do on each path (C(rwx)).
    type: str
  config_paths:
    description:
      - Its configuration files and directories (V(/etc/nginx)). Their state is evidence, and
        only lines of files under them are quoted when a configuration test names a line
        (when none is given, files under C(/etc)).
    type: list
    elements: path
    default: []
  data_paths:
    description:
      - Its data directories (V(/var/lib/redis)); their state is evidence.
    type: list
    elements: path
    default: []
  runtime_paths:
    description:
      - Its runtime directories and files (V(/run/redis), V(/run/nginx.pid)); their state is evidence.
    type: list
    elements: path
    default: []
  log_paths:
    description:
      - Its log directories; their state is evidence. Defaults to the directories of C(logs).
    type: list
    elements: path
  logs:
    description:
      - Log files or shell-style globs (V(/var/log/nginx/*.log)). Their last lines are evidence,
        at most ten files, newest first; compressed rotations are skipped.
    type: list
    elements: path
    default: []
  ports:
    description:
      - TCP ports the service listens on. The listeners on them and the processes holding
        them are evidence; a process holding one counts as one of the service's processes.
    type: list
    elements: int
    default: []
  config_test:
    description:
      - A command that tests the service's configuration, run without a shell, for example
        V([nginx, -t]). Its exit code and output are evidence, with the lines around any
        line of a configuration file that its output names.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Other paths whose state is evidence - whether each exists, type, owner, mode, and the
        disk and inode use of its filesystem.
    type: list
    elements: path
    default: []
  pid_files:
    description:
      - PID files of the service. For each, its content, whether that PID is alive and what it
        runs; a live PID named in one counts as one of the service's processes.
    type: list
    elements: path
    default: []
  depends_on:
    description:
      - Names of services it needs (an application needs V(postgresql)). Their init system
        state is evidence.
    type: list
    elements: str
    default: []
  stateful:
    description:
      - What a restart costs. V(true) for a service that holds state a restart loses or must
        recover (a database, a queue) - its connections and transactions in flight, minutes of
        crash recovery. The fallback restart never runs for it, and any plan that restarts,
        stops or signals it waits for a human's approval, whatever the policy's verdict.
    type: bool
    default: false
  confirm_attempts:
    description:
      - How many times a failing check is checked again before the failure counts and an
        incident opens; unset takes the run's O(sentinel.remediation.heal#module:confirm_attempts). V(0) acts on one failure.
    type: int
  confirm_interval:
    description:
      - Seconds between those re-checks; unset takes the run's O(sentinel.remediation.heal#module:confirm_interval).
    type: int
  on_timeout:
    description:
      - What a check that did not answer within its timeout, while the service's processes run,
        means. V(escalate) (the default) reports the service V(degraded) (slow, alive) and asks a
        human; V(remediate) treats it as down and heals it.
    type: str
    choices: [escalate, remediate]
    default: escalate
"""

    # A list of service definitions (service_health's one-round-trip form).
    # Rendered from DEFINITION by scripts/render_doc_fragments.py: do not edit the keys here.
    SERVICES = r"""
options:
  services:
    description:
      - The services to check in one call, each a service definition with its checks.
      - Mutually exclusive with O(service).
    type: list
    elements: dict
    suboptions:
      name:
        description:
          - Name of the service as the init system knows it (V(nginx), V(redis-server), V(ssh)).
        type: str
        required: true

      checks:
        description:
          - The service's health checks, run in order. All run, even after one fails.
          - When omitted, one check of type V(service) is run.
        type: list
        elements: dict
        suboptions:
          type:
            description:
              - V(service) asks the init system for the service's status. On hosts where systemd runs
                as PID 1, C(systemctl show) of each of the service's units (active means healthy);
                elsewhere C(service NAME status).
              - V(process) looks for a process whose command line matches C(pattern). Processes
                stopped by a signal (C(SIGSTOP)) do not count as running when all of them are stopped.
              - V(port) checks that a TCP port is listening and, with C(process), who holds it.
              - V(http) requests C(url) and compares the status code.
              - V(command) runs C(argv) without a shell, compares the exit code with
                C(rc) and looks for C(indicator) in its output.
            type: str
            required: true
            choices: [command, http, port, process, service]
          pattern:
            description:
              - For V(process) checks, a Python regular expression searched for in each process's
                command line (arguments joined by spaces). Defaults to the service name.
              - The module's own process and its parents are not counted.
            type: str
          port:
            description:
              - For V(port) checks, the TCP port that must be in LISTEN state (IPv4 or IPv6).
              - Required when C(type=port).
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
              - Required when C(type=http).
            type: str
          status:
            description:
              - For V(http) checks, the expected HTTP status code.
            type: int
            default: 200
          argv:
            description:
              - For V(command) checks, the program and its arguments, run without a shell.
              - Required when C(type=command).
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
              - Seconds this check may take. Defaults to the module's O(timeout).
            type: int

      units:
        description:
          - The init system's unit names of the service. Defaults to V(<name>.service).
          - On systemd hosts the units' states, C(systemctl show) properties, journal and cgroups
            (which processes they hold) are evidence. On SysV hosts the init script is the name.
        type: list
        elements: str
      processes:
        description:
          - Process names of the service (C(comm), or the program's basename), for example
            V(nginx), V(redis-server), V(postgres).
          - When omitted, programs whose name starts with the service name (V(sshd) for V(ssh)).
        type: list
        elements: str
      user:
        description:
          - The account the service runs as (V(www-data), V(redis)). Evidence says what this
            account may do on each path (C(rwx)).
        type: str
      config_paths:
        description:
          - Its configuration files and directories (V(/etc/nginx)). Their state is evidence, and
            only lines of files under them are quoted when a configuration test names a line
            (when none is given, files under C(/etc)).
        type: list
        elements: path
        default: []
      data_paths:
        description:
          - Its data directories (V(/var/lib/redis)); their state is evidence.
        type: list
        elements: path
        default: []
      runtime_paths:
        description:
          - Its runtime directories and files (V(/run/redis), V(/run/nginx.pid)); their state is evidence.
        type: list
        elements: path
        default: []
      log_paths:
        description:
          - Its log directories; their state is evidence. Defaults to the directories of C(logs).
        type: list
        elements: path
      logs:
        description:
          - Log files or shell-style globs (V(/var/log/nginx/*.log)). Their last lines are evidence,
            at most ten files, newest first; compressed rotations are skipped.
        type: list
        elements: path
        default: []
      ports:
        description:
          - TCP ports the service listens on. The listeners on them and the processes holding
            them are evidence; a process holding one counts as one of the service's processes.
        type: list
        elements: int
        default: []
      config_test:
        description:
          - A command that tests the service's configuration, run without a shell, for example
            V([nginx, -t]). Its exit code and output are evidence, with the lines around any
            line of a configuration file that its output names.
        type: list
        elements: str
        default: []
      paths:
        description:
          - Other paths whose state is evidence - whether each exists, type, owner, mode, and the
            disk and inode use of its filesystem.
        type: list
        elements: path
        default: []
      pid_files:
        description:
          - PID files of the service. For each, its content, whether that PID is alive and what it
            runs; a live PID named in one counts as one of the service's processes.
        type: list
        elements: path
        default: []
      depends_on:
        description:
          - Names of services it needs (an application needs V(postgresql)). Their init system
            state is evidence.
        type: list
        elements: str
        default: []
      stateful:
        description:
          - What a restart costs. V(true) for a service that holds state a restart loses or must
            recover (a database, a queue) - its connections and transactions in flight, minutes of
            crash recovery. The fallback restart never runs for it, and any plan that restarts,
            stops or signals it waits for a human's approval, whatever the policy's verdict.
        type: bool
        default: false
      confirm_attempts:
        description:
          - How many times a failing check is checked again before the failure counts and an
            incident opens; unset takes the run's O(sentinel.remediation.heal#module:confirm_attempts). V(0) acts on one failure.
        type: int
      confirm_interval:
        description:
          - Seconds between those re-checks; unset takes the run's O(sentinel.remediation.heal#module:confirm_interval).
        type: int
      on_timeout:
        description:
          - What a check that did not answer within its timeout, while the service's processes run,
            means. V(escalate) (the default) reports the service V(degraded) (slow, alive) and asks a
            human; V(remediate) treats it as down and heals it.
        type: str
        choices: [escalate, remediate]
        default: escalate
"""

    # The service a plan verifies (execute_plan).
    # Rendered from DEFINITION by scripts/render_doc_fragments.py: do not edit the keys here.
    VERIFY = r"""
options:
  verify:
    description:
      - The service to verify after the commands ran, a service definition with its checks as
        O(sentinel.remediation.service_health#module:services) items take it.
      - Its checks run until healthy or O(settle) seconds passed. Without it nothing is verified.
    type: dict
    suboptions:
      name:
        description:
          - Name of the service as the init system knows it (V(nginx), V(redis-server), V(ssh)).
        type: str
        required: true

      checks:
        description:
          - The service's health checks, run in order. All run, even after one fails.
          - When omitted, one check of type V(service) is run.
        type: list
        elements: dict
        suboptions:
          type:
            description:
              - V(service) asks the init system for the service's status. On hosts where systemd runs
                as PID 1, C(systemctl show) of each of the service's units (active means healthy);
                elsewhere C(service NAME status).
              - V(process) looks for a process whose command line matches C(pattern). Processes
                stopped by a signal (C(SIGSTOP)) do not count as running when all of them are stopped.
              - V(port) checks that a TCP port is listening and, with C(process), who holds it.
              - V(http) requests C(url) and compares the status code.
              - V(command) runs C(argv) without a shell, compares the exit code with
                C(rc) and looks for C(indicator) in its output.
            type: str
            required: true
            choices: [command, http, port, process, service]
          pattern:
            description:
              - For V(process) checks, a Python regular expression searched for in each process's
                command line (arguments joined by spaces). Defaults to the service name.
              - The module's own process and its parents are not counted.
            type: str
          port:
            description:
              - For V(port) checks, the TCP port that must be in LISTEN state (IPv4 or IPv6).
              - Required when C(type=port).
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
              - Required when C(type=http).
            type: str
          status:
            description:
              - For V(http) checks, the expected HTTP status code.
            type: int
            default: 200
          argv:
            description:
              - For V(command) checks, the program and its arguments, run without a shell.
              - Required when C(type=command).
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
              - Seconds this check may take. Defaults to the module's O(timeout).
            type: int

      units:
        description:
          - The init system's unit names of the service. Defaults to V(<name>.service).
          - On systemd hosts the units' states, C(systemctl show) properties, journal and cgroups
            (which processes they hold) are evidence. On SysV hosts the init script is the name.
        type: list
        elements: str
      processes:
        description:
          - Process names of the service (C(comm), or the program's basename), for example
            V(nginx), V(redis-server), V(postgres).
          - When omitted, programs whose name starts with the service name (V(sshd) for V(ssh)).
        type: list
        elements: str
      user:
        description:
          - The account the service runs as (V(www-data), V(redis)). Evidence says what this
            account may do on each path (C(rwx)).
        type: str
      config_paths:
        description:
          - Its configuration files and directories (V(/etc/nginx)). Their state is evidence, and
            only lines of files under them are quoted when a configuration test names a line
            (when none is given, files under C(/etc)).
        type: list
        elements: path
        default: []
      data_paths:
        description:
          - Its data directories (V(/var/lib/redis)); their state is evidence.
        type: list
        elements: path
        default: []
      runtime_paths:
        description:
          - Its runtime directories and files (V(/run/redis), V(/run/nginx.pid)); their state is evidence.
        type: list
        elements: path
        default: []
      log_paths:
        description:
          - Its log directories; their state is evidence. Defaults to the directories of C(logs).
        type: list
        elements: path
      logs:
        description:
          - Log files or shell-style globs (V(/var/log/nginx/*.log)). Their last lines are evidence,
            at most ten files, newest first; compressed rotations are skipped.
        type: list
        elements: path
        default: []
      ports:
        description:
          - TCP ports the service listens on. The listeners on them and the processes holding
            them are evidence; a process holding one counts as one of the service's processes.
        type: list
        elements: int
        default: []
      config_test:
        description:
          - A command that tests the service's configuration, run without a shell, for example
            V([nginx, -t]). Its exit code and output are evidence, with the lines around any
            line of a configuration file that its output names.
        type: list
        elements: str
        default: []
      paths:
        description:
          - Other paths whose state is evidence - whether each exists, type, owner, mode, and the
            disk and inode use of its filesystem.
        type: list
        elements: path
        default: []
      pid_files:
        description:
          - PID files of the service. For each, its content, whether that PID is alive and what it
            runs; a live PID named in one counts as one of the service's processes.
        type: list
        elements: path
        default: []
      depends_on:
        description:
          - Names of services it needs (an application needs V(postgresql)). Their init system
            state is evidence.
        type: list
        elements: str
        default: []
      stateful:
        description:
          - What a restart costs. V(true) for a service that holds state a restart loses or must
            recover (a database, a queue) - its connections and transactions in flight, minutes of
            crash recovery. The fallback restart never runs for it, and any plan that restarts,
            stops or signals it waits for a human's approval, whatever the policy's verdict.
        type: bool
        default: false
      confirm_attempts:
        description:
          - How many times a failing check is checked again before the failure counts and an
            incident opens; unset takes the run's O(sentinel.remediation.heal#module:confirm_attempts). V(0) acts on one failure.
        type: int
      confirm_interval:
        description:
          - Seconds between those re-checks; unset takes the run's O(sentinel.remediation.heal#module:confirm_interval).
        type: int
      on_timeout:
        description:
          - What a check that did not answer within its timeout, while the service's processes run,
            means. V(escalate) (the default) reports the service V(degraded) (slow, alive) and asks a
            human; V(remediate) treats it as down and heals it.
        type: str
        choices: [escalate, remediate]
        default: escalate
"""

    # The watched services a verified service depends on (execute_plan).
    # Rendered from DEFINITION by scripts/render_doc_fragments.py: do not edit the keys here.
    DEPENDS = r"""
options:
  depends:
    description:
      - The definitions (as O(verify) takes one) of the services that O(verify) depends on
        (its C(depends_on)) and that are themselves watched. When evidence is gathered, each is
        judged by its own health checks, so the evidence's C(dependencies) says whether the
        dependency works, not only what its init system says (a Debian C(postgresql) umbrella
        unit is active while the cluster is down).
      - A dependency given no definition here is reported by its init system's status.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description:
          - Name of the service as the init system knows it (V(nginx), V(redis-server), V(ssh)).
        type: str
        required: true

      checks:
        description:
          - The service's health checks, run in order. All run, even after one fails.
          - When omitted, one check of type V(service) is run.
        type: list
        elements: dict
        suboptions:
          type:
            description:
              - V(service) asks the init system for the service's status. On hosts where systemd runs
                as PID 1, C(systemctl show) of each of the service's units (active means healthy);
                elsewhere C(service NAME status).
              - V(process) looks for a process whose command line matches C(pattern). Processes
                stopped by a signal (C(SIGSTOP)) do not count as running when all of them are stopped.
              - V(port) checks that a TCP port is listening and, with C(process), who holds it.
              - V(http) requests C(url) and compares the status code.
              - V(command) runs C(argv) without a shell, compares the exit code with
                C(rc) and looks for C(indicator) in its output.
            type: str
            required: true
            choices: [command, http, port, process, service]
          pattern:
            description:
              - For V(process) checks, a Python regular expression searched for in each process's
                command line (arguments joined by spaces). Defaults to the service name.
              - The module's own process and its parents are not counted.
            type: str
          port:
            description:
              - For V(port) checks, the TCP port that must be in LISTEN state (IPv4 or IPv6).
              - Required when C(type=port).
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
              - Required when C(type=http).
            type: str
          status:
            description:
              - For V(http) checks, the expected HTTP status code.
            type: int
            default: 200
          argv:
            description:
              - For V(command) checks, the program and its arguments, run without a shell.
              - Required when C(type=command).
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
              - Seconds this check may take. Defaults to the module's O(timeout).
            type: int

      units:
        description:
          - The init system's unit names of the service. Defaults to V(<name>.service).
          - On systemd hosts the units' states, C(systemctl show) properties, journal and cgroups
            (which processes they hold) are evidence. On SysV hosts the init script is the name.
        type: list
        elements: str
      processes:
        description:
          - Process names of the service (C(comm), or the program's basename), for example
            V(nginx), V(redis-server), V(postgres).
          - When omitted, programs whose name starts with the service name (V(sshd) for V(ssh)).
        type: list
        elements: str
      user:
        description:
          - The account the service runs as (V(www-data), V(redis)). Evidence says what this
            account may do on each path (C(rwx)).
        type: str
      config_paths:
        description:
          - Its configuration files and directories (V(/etc/nginx)). Their state is evidence, and
            only lines of files under them are quoted when a configuration test names a line
            (when none is given, files under C(/etc)).
        type: list
        elements: path
        default: []
      data_paths:
        description:
          - Its data directories (V(/var/lib/redis)); their state is evidence.
        type: list
        elements: path
        default: []
      runtime_paths:
        description:
          - Its runtime directories and files (V(/run/redis), V(/run/nginx.pid)); their state is evidence.
        type: list
        elements: path
        default: []
      log_paths:
        description:
          - Its log directories; their state is evidence. Defaults to the directories of C(logs).
        type: list
        elements: path
      logs:
        description:
          - Log files or shell-style globs (V(/var/log/nginx/*.log)). Their last lines are evidence,
            at most ten files, newest first; compressed rotations are skipped.
        type: list
        elements: path
        default: []
      ports:
        description:
          - TCP ports the service listens on. The listeners on them and the processes holding
            them are evidence; a process holding one counts as one of the service's processes.
        type: list
        elements: int
        default: []
      config_test:
        description:
          - A command that tests the service's configuration, run without a shell, for example
            V([nginx, -t]). Its exit code and output are evidence, with the lines around any
            line of a configuration file that its output names.
        type: list
        elements: str
        default: []
      paths:
        description:
          - Other paths whose state is evidence - whether each exists, type, owner, mode, and the
            disk and inode use of its filesystem.
        type: list
        elements: path
        default: []
      pid_files:
        description:
          - PID files of the service. For each, its content, whether that PID is alive and what it
            runs; a live PID named in one counts as one of the service's processes.
        type: list
        elements: path
        default: []
      depends_on:
        description:
          - Names of services it needs (an application needs V(postgresql)). Their init system
            state is evidence.
        type: list
        elements: str
        default: []
      stateful:
        description:
          - What a restart costs. V(true) for a service that holds state a restart loses or must
            recover (a database, a queue) - its connections and transactions in flight, minutes of
            crash recovery. The fallback restart never runs for it, and any plan that restarts,
            stops or signals it waits for a human's approval, whatever the policy's verdict.
        type: bool
        default: false
      confirm_attempts:
        description:
          - How many times a failing check is checked again before the failure counts and an
            incident opens; unset takes the run's O(sentinel.remediation.heal#module:confirm_attempts). V(0) acts on one failure.
        type: int
      confirm_interval:
        description:
          - Seconds between those re-checks; unset takes the run's O(sentinel.remediation.heal#module:confirm_interval).
        type: int
      on_timeout:
        description:
          - What a check that did not answer within its timeout, while the service's processes run,
            means. V(escalate) (the default) reports the service V(degraded) (slow, alive) and asks a
            human; V(remediate) treats it as down and heals it.
        type: str
        choices: [escalate, remediate]
        default: escalate
"""
