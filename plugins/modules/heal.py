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
version_added: 0.1.0
author: sentinel.remediation maintainers (@sentinel-remediation)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - sentinel.remediation.llm
description:
  - The attempt loop of the C(sentinel.remediation.remediate) role in one task per host. For each
    failing service (from the health and evidence of M(sentinel.remediation.service_health)) it opens
    an incident and runs attempts until the service is healed, waits for a human, or is escalated.
  - "An attempt: plan (memory, runbooks, the LLM, the fallback restart when O(fallback_restart) is on: see
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
requirements:
  - openai (Python package, on the controller) - only to ask an LLM
  - rank-bm25 (Python package, on the controller)
  - tree-sitter and tree-sitter-bash (Python packages, on the controller) - the safety policy's shell parser
  - redis (Python package, on the controller) - only with the Redis fact cache (community.general.redis), for leases and shared plans
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
      - When given, the failing services that O(fleet_stop) leaves to act on and that memory holds a fix
        for are checked once more, in one round trip that carries those remembered fixes (the host runs one
        only where it finds the very failure that fix healed); a service named in O(fleet_stop) is never in
        it. The other services are healed from O(health) as it is.
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
  fallback_restart:
    description:
      - When no remembered fix, runbook or LLM gives a plan, plan the service's restart as root
        (C(service <name> restart), C(systemctl restart <name>) where systemctl is present); the policy
        still judges it, and it never runs for a C(stateful) service without a human.
      - Off by default (the role's C(remediate_fallback_restart)); the incident is then escalated with a
        reason that names the sources tried and says the fallback restart was off.
    type: bool
    default: false
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
    description:
      - Controller directory of the run's state - pending plans (C(pending/ID.json)), the incident journal and the
        run's shared plans. It is created when missing and must be writable (checked before the host is touched).
      - Empty means C($SENTINEL_STATE_DIR/remediation), else C($XDG_STATE_HOME/sentinel-remediation/remediation),
        else C(~/.local/state/sentinel-remediation/remediation). A directory inside an installed collection is refused.
      - Refused too when another account owns it or a directory above it up to C(/), or may write to one of them
        (every user, or a group with another member); a sticky directory such as C(/tmp) is accepted above an entry
        of root's or this user's.
    type: path
    default: ""
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
  confinement:
    description:
      - How the kernel holds each command to its verdict (Landlock, applied by the host's plan runner
        just before exec; see M(sentinel.remediation.execute_plan) O(sentinel.remediation.execute_plan#module:confinement)).
      - V(preferred) confines every command where the host's kernel can, and runs a command that cannot be
        confined there only when a human approved it; V(required) refuses such a command; V(off) confines nothing.
    type: str
    choices: [required, preferred, "off"]
    default: preferred
  settle:
    description: Seconds the verification keeps re-checking a service that is starting.
    type: int
    default: 5
  undo_unhealed:
    description:
      - Before each command, the host keeps every path its verdict declares it changes (bytes, mode, owner,
        link target, or that it did not exist) in a root-only store; an attempt that did not heal is put
        back exactly before the next attempt (see M(sentinel.remediation.execute_plan) O(sentinel.remediation.execute_plan#module:snapshot)).
        A path that could not be put back escalates the incident.
      - V(false) leaves a failed attempt's changes in place (they are still kept for M(sentinel.remediation.undo)).
    type: bool
    default: true
  snapshot_dir:
    description: The store of kept paths on each host; empty for C(/var/lib/sentinel-remediation) (root).
    type: str
    default: ""
  known_good:
    description:
      - Keep a known-good baseline of each service's configuration on the host at every healthy check
        (M(sentinel.remediation.service_health) O(sentinel.remediation.service_health#module:known_good), in the
        store of O(snapshot_dir)). At an incident the evidence leads with the redacted diff from it, and the
        first attempt goes back to the last known-good state, ahead of memory and the model (the drifted files
        the failure names, else every drifted one; a file new since then is taken out, its bytes kept); the bad
        version is kept aside on the host and the diff is in the report, the journal and the task's warnings. A
        drift that holds the service (a condition, a refusal, a do-not-start marker) is left to its owner.
      - The baseline holds what the service runs as and runs too (its accounts' groups, the mode and owner of its
        unit's programs and its directories); a lost membership or a changed mode or owner the failure explains
        is put back the same way (C(gpasswd -a), C(chown), C(chmod) with the recorded values).
    type: bool
    default: true
  snapshot_max_bytes:
    description: Upper bound of the kept content on each host, in bytes; the least recently kept goes first.
    type: int
    default: 268435456
  snapshot_max_age:
    description: Seconds the kept states of an incident stay on its host (and it can be undone).
    type: int
    default: 1209600
  confirm_attempts:
    description:
      - Confirmed failures only - how many times a failing service is checked again, on the host
        and in the same round trip, before an incident opens (a service's own C(confirm_attempts)
        wins). A service that passes a re-check recovered by itself and nothing acts on it; V(0)
        acts on one failed check.
      - The default, 2 (a failure seen three times in a row), is Kubernetes' C(failureThreshold)
        and Nagios' C(max_check_attempts) default of 3.
    type: int
    default: 2
  confirm_interval:
    description:
      - Seconds between those re-checks (a service's own C(confirm_interval) wins). The default, 2,
        outlasts a restart in progress or a short stall and adds about 4 s to a host with a
        failing service; set it per service for longer stalls (a database checkpoint).
    type: int
    default: 2
  confirm_max_seconds:
    description: No re-check starts later than this many seconds after the host's first check (the round trip stays bounded).
    type: int
    default: 30
  action_budget:
    description:
      - At most this many attempts per host and service in O(action_budget_window) seconds (counted in
        the incident journal, across runs). Past it, the service is escalated once and left alone,
        pass after pass, until a human clears it (O(clear_holds)). V(0) sets no budget.
    type: int
    default: 6
  action_budget_window:
    description: Seconds of the O(action_budget) window.
    type: int
    default: 3600
  flap_count:
    description:
      - A service healed this many times in O(flap_window) seconds that fails again is flapping - it is
        escalated once and left alone until a human clears it. V(0) turns flap detection off.
    type: int
    default: 3
  flap_window:
    description: Seconds of the O(flap_count) window.
    type: int
    default: 3600
  canary_size:
    description:
      - Canary, then the fleet - the first this many hosts of a run that are about to run one shared plan (one
        failure signature) run it first and are verified; the other hosts with that plan wait for them (at most
        max_commands x command_timeout + settle + 60 s), run it when every canary healed, and run nothing
        and escalate with the canary's evidence when one did not (or none reported). V(0) runs every host at once.
      - A plan already proven on this fleet needs no canary - the fleet's memory shows it healed this failure
        signature on at least this many hosts, with the same commands and the verdicts the policy gives them now,
        and no host's latest run of it failed to heal. Only such a remembered fix goes with the health check.
    type: int
    default: 1
  canary_waves:
    description:
      - After the canary, the plan widens in waves of these many hosts, in order (arrival order of the hosts
        about to run it); each wave runs only once every host of the waves before it ran the plan and was
        verified healed. The hosts after the last wave form one more wave. A host of an earlier wave that
        did not heal stops the rollout - no later host runs the plan, each escalates with that evidence.
        V([]) (the default) is the canary, then every other host at once.
    type: list
    elements: int
    default: []
  phase:
    description:
      - V(full) checks and heals in one task. V(health) only checks (with the re-checks that confirm a
        failure, and evidence) and returns RV(health), sending no remembered fix ahead and running nothing,
        so that the play can count the fleet's failures (the fleet-wide stop) before any host acts; the heal
        then takes that result as O(health) (its remembered fixes go with its first round trip then).
    type: str
    choices: [full, health]
    default: full
  fleet_stop:
    description:
      - Services whose check failed on too much of the fleet at once (the C(stopped) of the
        C(sentinel.remediation.fleet_stop) filter, service to C(hosts), C(checked), C(reason)). Such a
        service is not planned for nor acted on; it escalates, with the list, and only the first host of the
        list notifies.
    type: dict
    default: {}
  notify_remind:
    description:
      - An escalation of a service that was notified before, with the same state, signature and reason, is not
        notified again for this many seconds (notify on change, remind on an interval; Alertmanager's
        C(repeat_interval) default). RV(notify) leaves it out and the outcome carries C(repeat_notice). V(0)
        notifies every escalation of every run.
    type: int
    default: 14400
  clear_holds:
    description:
      - Services (names, or V(all)) whose hold (budget spent, flapping) a human clears on this run - they
        are acted on again.
    type: list
    elements: str
    default: []
  approval_max_age:
    description:
      - Seconds after it was recorded that a waiting plan may still be approved; an older one is refused
        (nothing runs, the incident escalates, and the next run plans again from the host's state then).
        C(0) never expires.
      - A plan waits only while its incident lasts. A pass that finds the service healthy withdraws the
        plans still waiting for it, so an approval never reaches a later incident that fails the same way.
    type: int
    default: 86400
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
pending_dir:
  description:
    - The directory of this host's plans waiting for approval (C(<id>.json)), as resolved from
      O(artifacts_dir) or the state directory; the AWX plan node reads what it shows from there.
  returned: when the pass ran (not the health phase, not unreachable)
  type: str
  sample: /home/awx/.local/state/sentinel-remediation/remediation/pending
outcomes:
  description:
    - One outcome per watched service (docs/contracts.md) with C(state) in V(healthy), V(healed),
      V(waiting_approval), V(escalated), V(failed), V(dry_run), V(waiting) (a service whose failing
      dependencies, listed in C(waits_on), were not healed, so nothing ran for it); the commands that ran with their
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
