# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# This file holds only the documentation of the action plugin plugins/action/notifications.py;
# the action validates its arguments against the options below.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: notifications
short_description: Route a host's escalations to notification channels, and report what was sent
version_added: 0.1.0
author: sentinel.remediation maintainers (@sentinel-remediation)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
description:
  - Controller-side. Without O(results) it decides, for each outcome of the host that needs a human
    (escalated, or waiting for approval), which channels hear of it (webhook, slack, pagerduty,
    mail) from O(routes), and words the notices; the C(sentinel.remediation.remediate) role then
    sends them with M(community.general.slack), M(community.general.mail) and M(ansible.builtin.uri).
  - With O(results) (the registered results of those tasks) it returns one record per notice,
    V(sent), V(failed) or V(skipped), and a warning for each failed one. A failed notification
    never fails the task.
  - An escalation's reason is one of V(refused) (the policy refused every command), V(needs_human)
    (no plan, or the planner asked for a human), V(llm_error) (the model failed and nothing else
    planned), V(exhausted) (plans ran and the service still fails), V(rejected) (an operator
    rejected the plan).
options:
  host:
    description: The host the outcomes belong to.
    type: str
    required: true
  outcomes:
    description: The host's outcomes (the C(outcomes) of M(sentinel.remediation.heal)).
    type: list
    elements: dict
    default: []
  routes:
    description:
      - Reason (V(refused), V(needs_human), V(llm_error), V(exhausted), V(rejected),
        V(waiting_approval), or V(default) for the reasons not named) to a list of channels
        (V(webhook), V(slack), V(pagerduty), V(mail), or V(all) for every configured one).
      - A reason left out goes to V(default) when given, else to every configured channel
        (escalations) or nowhere (V(waiting_approval)).
      - A channel named but not configured, or an unknown reason or channel, is an error.
    type: dict
    default: {}
  configured:
    description: Which channels are configured (channel name to true/false).
    type: dict
    default: {}
  receiver:
    description: The C(receiver) field of the webhook's Alertmanager-style body.
    type: str
    default: sentinel
  notices:
    description: The notices the first call returned (with O(results)).
    type: list
    elements: dict
    default: []
  results:
    description:
      - The registered result of each channel's task (channel name to the result; a loop's result
        with C(results), each carrying its notice as C(item)). Given, the action reports instead
        of routing.
    type: dict
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Routing and reporting only; it sends nothing in any mode.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
seealso:
  - module: sentinel.remediation.heal
  - module: community.general.slack
  - module: community.general.mail
"""

EXAMPLES = r"""
- name: Work out who hears of what
  sentinel.remediation.notifications:
    host: "{{ inventory_hostname }}"
    outcomes: "{{ healed.outcomes }}"
    routes:
      refused: [pagerduty, slack]
      llm_error: [slack]
      default: [mail]
    configured: {slack: true, pagerduty: true, mail: true}
  register: routed

- name: Post to Slack
  community.general.slack:
    token: "{{ slack_token }}"
    msg: "{{ item.text }}"
  loop: "{{ routed.notices | selectattr('channel', '==', 'slack') }}"
  register: slack_sent
  failed_when: false

- name: Say what was sent
  sentinel.remediation.notifications:
    host: "{{ inventory_hostname }}"
    notices: "{{ routed.notices }}"
    results:
      slack: "{{ slack_sent }}"
  register: notified
"""

RETURN = r"""
notices:
  description:
    - One per outcome and channel, C(channel), C(host), C(service), C(kind) (the reason), C(state),
      C(severity) (V(critical), or V(warning) for a wait for approval), C(title), C(text),
      C(dedup_key) and C(details).
  type: list
  elements: dict
  returned: without O(results)
webhook:
  description: The Alertmanager-style JSON body for the webhook (one per host), or null.
  type: dict
  returned: without O(results)
routes:
  description: Each reason with the channels it goes to (V(all) expanded).
  type: dict
  returned: without O(results)
notifications:
  description: One record per notice, C(host), C(service), C(kind), C(channel), C(status) (V(sent), V(failed), V(skipped)) and C(error).
  type: list
  elements: dict
  returned: with O(results)
failed_notices:
  description: The notices whose send failed (C(notifications) with C(status=failed)); the task itself never fails for them.
  type: list
  elements: dict
  returned: with O(results)
"""
