# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# This file holds only the documentation of the action plugin plugins/action/heal.py;
# the action validates its arguments against the options below.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: heal
short_description: Heal a host's failing services, one incident at a time (plan, gate, run, verify, retry)
version_added: 0.2.0
author: sentinel.remediation maintainers (@sentinel-remediation)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
description:
  - The attempt loop of the C(sentinel.remediation.remediate) role in one task per host. For each
    failing service (from the health and evidence of M(sentinel.remediation.service_health)) it opens
    an incident and runs attempts until the service is healed, waits for a human, or is escalated.
  - "An attempt: plan (memory, runbooks, the LLM, the fallback restart: see
    M(sentinel.remediation.plan)), classify every command with the safety policy for this host and
    this incident's scope, gate (run / wait for approval / escalate), run the allowed commands and
    verify the service in one round trip with M(sentinel.remediation.execute_plan), remember the
    episode."
  - The decisions come from the attempt engine (C(plugins/plugin_utils/incident.py)). A plan whose
    commands ran without healing never runs again in the incident and its source is not asked
    again (the model is asked again, and sees each earlier attempt's commands, exit codes, output
    tails and the health error after them). A command that failed runs again only after another,
    new command of the plan.
  - Hosts with the same failure signature and the same incident history share one plan per run
    (the first plans, the others reuse it, each classifying it again for itself); hosts never wait
    for hosts with other failures.
  - In check mode nothing runs on the host and nothing is remembered; every failing service ends
    C(dry_run) with the plan and each command's verdict ("would run").
options:
  services:
    description:
      - The watched services' definitions (the role's C(remediate_services)), each with C(name);
        the whole definition is used for the incident scope and passed to the host modules.
    type: list
    elements: dict
    required: true
  health:
    description:
      - The monitor's result, as M(sentinel.remediation.service_health) returns it with O(services)
        (C(services) list with C(name), C(healthy), C(error), C(evidence)) and C(tools).
      - "When left out, the action checks the services itself with M(sentinel.remediation.service_health)
        (evidence for the failing ones, in the same round trip), after every input is checked: one
        task per host for the whole pass. The result is returned as RV(health)."
    type: dict
  notify_routes:
    description:
      - The role's C(remediate_notify_routes), checked with O(notify_configured) before any host is
        touched (an unknown reason or channel, or a channel that is not set up, fails the task).
      - RV(notify) then says whether this host has something to send.
    type: dict
  notify_configured:
    description:
      - Which channels are set up, V(webhook), V(slack), V(pagerduty), V(mail); a true value (the
        webhook's value may be its URL, which must then be http(s)).
    type: dict
    default: {}
  role_entry_point:
    description:
      - The entry point of the C(sentinel.remediation.remediate) role (V(main)) whose argument spec the
        role's variables are checked against first, in this task (the role's own validation task is
        then not needed, and C(playbooks/remediate.yml) saves that task per host).
    type: str
  backend:
    description: Plan sources; C(auto) (memory, runbooks, the LLM when configured, fallback), C(llm), C(runbook), C(memory).
    type: str
    choices: [auto, llm, runbook, memory]
    default: auto
  llm:
    description: The OpenAI-compatible endpoint, exactly as the C(llm) option of M(sentinel.remediation.plan).
    type: dict
    default: {}
  policy:
    description: Policy overrides (the role's C(remediation_policy)).
    type: dict
    default: {}
  max_attempts:
    description: Attempts per incident before it is escalated.
    type: int
    default: 3
  max_commands:
    description: Most commands in one plan.
    type: int
    default: 3
  auto_approve:
    description: Run commands the policy gates behind a human without asking (labs and tests only).
    type: bool
    default: false
  require_approval:
    description: Every plan waits for a human, whatever the policy says (the AWX plan node).
    type: bool
    default: false
  monitor_only:
    description: Report failing services as C(failed) and change nothing.
    type: bool
    default: false
  memory_max:
    description: Episodes kept in this host's C(sentinel_memory).
    type: int
    default: 50
  artifacts_dir:
    description: Controller directory for pending plans (C(pending/ID.json)) and the run's shared plans.
    type: path
    required: true
  lease_dir:
    description:
      - Controller directory of the host leases (one remediation at a time per real target, whatever its
        inventory name). Every run on the controller must use the same one, whatever its O(artifacts_dir)
        (a playbook run and a driver run keep different artifacts).
      - Empty means C($XDG_CACHE_HOME/sentinel-remediation/leases), else C(~/.cache/sentinel-remediation/leases).
    type: path
    default: ""
  output_max:
    description: Characters of each command's stdout and stderr kept in the incident and memory.
    type: int
    default: 2000
  evidence_log_lines:
    description: Log lines the evidence keeps per log.
    type: int
    default: 50
  evidence_max_bytes:
    description: Bytes of evidence text per item.
    type: int
    default: 4000
  command_timeout:
    description: Seconds one command may run on the host.
    type: int
    default: 60
  settle:
    description: Seconds the verification keeps re-checking a service that is starting.
    type: int
    default: 5
  plan_wait:
    description:
      - Seconds a host waits for another host planning the same failure before planning alone.
      - With the C(community.general.redis) fact cache, the wait also covers hosts of other runs and
        controllers on the same Redis (AWX job slicing, several controllers); see docs/operate.md.
    type: int
    default: 300
  plan_share_ttl:
    description:
      - With the C(community.general.redis) fact cache, seconds a plan stays in Redis for other runs and
        controllers to reuse for the same failure signature, incident history and memory. At least 1.
      - Ignored with any other fact cache (plans are then shared by the hosts of one run only).
    type: int
    default: 900
  runbook_dirs:
    description:
      - The operator's runbook directories, added to the bundled runbooks; a runbook with the id of a
        bundled one replaces it. A bad runbook fails the task, naming the file and the key.
    type: list
    elements: path
    default: []
  docs_dirs:
    description:
      - The operator's document directories (Markdown, reStructuredText, text), split into sections at their
        headings and indexed next to the runbooks; the best sections reach the LLM with file and heading.
        See M(sentinel.remediation.plan) and docs/planner.md.
    type: list
    elements: path
    default: []
  resume:
    description:
      - Resume one pending plan instead of monitoring (C(playbooks/resume.yml)). C(id) names it,
        C(decision) is V(approve) or V(reject). The plan is read from its authenticated pending file
        (never from the fact cache), must be for this host, and is used at most once. An approved plan
        runs only if the service still fails with the same failure signature and today's policy, in the
        scope of the host's current evidence, judges its argv as approved; after it, the incident goes on
        like any other.
    type: dict
    suboptions:
      id:
        description: The pending plan's id.
        type: str
        required: true
      decision:
        description: What the operator decided.
        type: str
        choices: [approve, reject]
        required: true
      by:
        description:
          - Who approved or rejected, recorded in the journal, the report and the notification.
            Empty names the controller's user.
        type: str
        default: ""
      digest:
        description:
          - SHA-256 of the pending file's bytes as the approver was shown them
            (C(sentinel-remediate approvals show)); when given, a file that changed since is refused.
        type: str
        default: ""
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Plans and classifies; runs nothing, writes no memory and no pending plan.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
notes:
  - The pending plans and the run's shared plans are written on the controller, mode 0600.
seealso:
  - module: sentinel.remediation.plan
  - module: sentinel.remediation.execute_plan
  - module: sentinel.remediation.service_health
"""

EXAMPLES = r"""
- name: Check every watched service and heal what is failing, in one task per host
  sentinel.remediation.heal:
    services: "{{ remediate_services }}"
    artifacts_dir: /var/lib/sentinel
    max_attempts: 3
  become: true
  register: healed

- name: Or heal from a health result of your own
  sentinel.remediation.heal:
    services: "{{ remediate_services }}"
    health: "{{ health }}"
    artifacts_dir: /var/lib/sentinel
  become: true
"""

RETURN = r"""
outcomes:
  description:
    - One outcome per watched service (docs/contracts.md) with C(state) in V(healthy), V(healed),
      V(waiting_approval), V(escalated), V(failed), V(dry_run); the commands that ran with their
      verdict and rc, the refused ones with the reasons, the LLM usage and errors, and a timeline
      of the attempts.
    - C(recall) says how memory served the plan, V(exact) (a remembered fix of this very failure),
      V(offered) (the model was shown similar incidents' fixes) or V(hint) (similar incidents were
      shown to people only, nothing of them ran); C(recalled) lists those similar incidents, each
      C(signature), C(host), C(similarity) and C(commands) (adapted to this host where the values
      map one to one, with the C(original) text and a C(note) otherwise).
  type: list
  elements: dict
  returned: always
incidents:
  description: The full incident state of each remediated service (attempts, commands, outputs).
  type: list
  elements: dict
  returned: always
ansible_facts:
  description: C(sentinel_memory) and C(sentinel_pending) when they changed (kept in the fact cache).
  type: dict
  returned: when changed
health:
  description: The health result the action gathered itself (O(health) left out), as M(sentinel.remediation.service_health) returns it.
  type: dict
  returned: when O(health) is left out
notify:
  description:
    - Whether this host has something to notify (an escalation, or a plan waiting for approval
      when O(notify_routes) routes V(waiting_approval) somewhere).
  type: bool
  returned: always
ansible_stats:
  description: The outcomes as the custom stat C(sentinel_remediation) (per host, aggregated), read by the report callback.
  type: dict
  returned: always
msg:
  description: One line per remediated service.
  type: str
  returned: always
"""
