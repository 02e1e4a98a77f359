# -*- coding: utf-8 -*-
# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# This file holds only the documentation of the action plugin plugins/action/plan.py;
# the action validates its arguments against the options below.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: plan
short_description: Plan a small, policy-checked fix for a failed service (LLM, runbooks or memory)
version_added: 0.1.0
author: sentinel.remediation maintainers (@sentinel-remediation)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - sentinel.remediation.llm
description:
  - Runs on the controller and B(plans only); it never runs a command on any host.
  - "Sources, in order: a remembered successful fix for the same failure signature, the best
    matching runbook (C(runbooks/*.yml)), an OpenAI-compatible LLM when one is configured,
    the fallback restart C(service <name> restart) as root when O(fallback_restart) is on
    and the policy allows it, else nothing with a reason (which says when the fallback
    restart was off). With O(backend=llm) the LLM is asked before the runbooks; with
    O(backend=runbook) it is never asked."
  - The LLM is asked for diagnosis and commands in one completion with structured outputs
    (C(response_format) json_schema), falling back to C(json_object) and then to tolerant
    parsing of plain text for servers that lack them.
  - Every command goes through the policy engine (the same one as the
    P(sentinel.remediation.policy_check#filter) filter). Commands it rejects, and commands
    that repeat a failed one, are sent back to the LLM with the reasons (at most
    O(max_attempts) completions) and otherwise dropped with their reasons.
  - Error text and evidence are redacted of secrets before anything leaves the controller
    and the evidence is bounded and fenced as untrusted data in the prompt.
  - Failures of the LLM (connection refused, timeout, 429, 5xx, empty, truncated or
    invalid answers, refusals) are outcomes, reported in RV(llm.error) and RV(msg), never
    task failures; the task fails only on bad arguments, a bad policy or bad runbooks.
  - "LLM settings come from, first found wins: O(llm), the environment (E(OPENAI_BASE_URL),
    E(OPENAI_API_KEY), E(OPENAI_MODEL)), the C([sentinel_remediation]) section of the active
    ansible.cfg (C(llm_base_url), C(llm_model), C(llm_api_key_env) naming an environment
    variable that holds the key, C(llm_temperature), C(llm_timeout), C(llm_max_retries),
    C(llm_retry_after_max), C(llm_max_tokens), C(llm_response_format)), then the defaults."
  - "A runbook is chosen by the specific evidence of its fault: typed facts read from the
    evidence (a port held by another process, a stale PID file, a config test naming a
    file, a missing path, a masked unit...) and regexes over the failure's text. A runbook
    must explain every cause the evidence shows, so a plain start is chosen only when the
    evidence shows nothing but a stopped service. See docs/planner.md."
  - "Runbook steps may hold placeholders filled only from the evidence and validated:
    C({port_owner_pid:PORT}) (digits, greater than 1, not the service's own process),
    C({port_owner_name:PORT}), C({config_error_file:PREFIX}) (the file a config test names,
    under PREFIX), C({largest_file:DIR}) (the largest file listed in DIR, never a redis
    data file), C({stale_pid_file:PREFIX}), C({missing_dir:PREFIX}), C({unit}), C({service})
    and C({user}). A placeholder that cannot be filled makes the runbook unusable for this
    failure. A step with C(approval: true) always waits for a human's approval."
requirements:
  - openai (Python package, on the controller) - only to ask an LLM
  - rank-bm25 (Python package, on the controller)
  - tree-sitter and tree-sitter-bash (Python packages, on the controller) - the safety policy's shell parser
options:
  service:
    description: The failed service, as the init system names it (C(nginx), C(redis-server), C(ssh)...).
    type: str
    required: true
  error:
    description: The health check's short error text.
    type: str
    default: ""
  evidence:
    description:
      - Evidence from the host, usually the C(evidence) key of M(sentinel.remediation.evidence),
        or plain text. Redacted again and bounded here.
    type: raw
  failed_commands:
    description: Commands that already failed for this failure; never proposed again.
    type: list
    elements: str
    default: []
  successful_fixes:
    description:
      - Remembered fixes for the same signature, newest first, as the memory lookup returns them
        (C(successes)); each a command string, or a dict with C(commands) (strings or dicts with
        C(command)), optional C(diagnosis) and optional C(signature) (a different signature is ignored).
    type: list
    elements: raw
    default: []
  host_tools:
    description:
      - The tools the host has and lacks, as M(sentinel.remediation.evidence) returns them in C(tools).
      - C(absent) tools are added to the policy's C(absent_tools) and named to the LLM as missing.
    type: dict
    default: {}
    suboptions:
      present:
        description: Tools found on the host.
        type: list
        elements: str
        default: []
      absent:
        description: Tools the host lacks.
        type: list
        elements: str
        default: []
  policy:
    description: Policy overrides (the role's C(remediation_policy)), deep-merged with the defaults.
    type: dict
    default: {}
  max_commands:
    description: At most this many commands in the plan.
    type: int
    default: 3
  max_attempts:
    description: At most this many planning completions (the first ask plus re-asks with the reasons).
    type: int
    default: 3
  passages:
    description: How many knowledge passages (runbook parts and sections of the operator's documents) are quoted to the LLM.
    type: int
    default: 3
  runbook_dirs:
    description:
      - The operator's runbook directories (C(*.yml), C(*.yaml); the collection's format, see docs/planner.md).
        Their runbooks are added to the collection's C(runbooks/); one with the id of a bundled runbook
        replaces it, and a later directory overrides an earlier one.
      - A bad runbook fails the task with a message naming the file and the key.
    type: list
    elements: path
    default: []
  docs_dirs:
    description:
      - The operator's document directories, read recursively. Markdown (C(.md)), reStructuredText (C(.rst))
        and text (C(.txt)) files are split into sections at their headings and indexed (BM25) next to the
        runbooks; the best sections are quoted to the LLM with their file and heading.
      - A document is about the services its front matter declares (C(services) list) or that its file path
        or headings name; sections about other services are quoted only when nothing closer exists, and
        are then marked as such.
      - The index is built once per content (paths, sizes, modification times) and cached in
        E(SENTINEL_KNOWLEDGE_CACHE) (default C(~/.cache/sentinel-remediation/knowledge); V(off) for none).
    type: list
    elements: path
    default: []
  backend:
    description:
      - C(auto) uses the LLM only when one is configured (a base URL or an API key is known).
      - C(llm) asks the LLM before the runbooks. C(runbook) never asks an LLM.
    type: str
    choices: [auto, llm, runbook]
    default: auto
  fallback_restart:
    description:
      - When no remembered fix, runbook or LLM gives a plan, plan the service's restart as root
        (C(service <name> restart), C(systemctl restart <name>) where systemctl is present).
      - Off by default, a service nothing knows is left to a human; the result's C(msg) then says the
        fallback restart was off.
    type: bool
    default: false
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: The planner never changes anything; check mode returns the same plan.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: all
notes:
  - The LLM sees only redacted text; RV(llm) and RV(msg) never hold the API key.
  - Token counts come from the server's C(usage); when a server sends none they are estimated
    (about four characters a token) and RV(llm.tokens_estimated) is true.
seealso:
  - plugin: sentinel.remediation.runbook
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Plan a fix for nginx from the collected evidence
  sentinel.remediation.plan:
    service: nginx
    error: "{{ health.error }}"
    evidence: "{{ collected.evidence }}"
    host_tools: "{{ collected.tools }}"
    failed_commands: "{{ remembered.failed_commands }}"
    successful_fixes: "{{ remembered.successes }}"
    max_commands: 3
  register: plan

- name: Plan with a local vLLM server
  sentinel.remediation.plan:
    service: redis-server
    error: "redis-cli ping: Connection refused"
    evidence: "{{ collected.evidence }}"
    backend: llm
    llm:
      base_url: http://vllm.internal:8000/v1
      model: Qwen/Qwen2.5-7B-Instruct
      api_key: "{{ vault_vllm_key }}"
      timeout: 20

- name: Runbooks and memory only
  sentinel.remediation.plan:
    service: cron
    error: cron is not running
    backend: runbook
"""

RETURN = r"""
diagnosis:
  description: What is wrong, from the plan's source.
  type: str
  returned: always
  sample: Another process holds nginx's port 80.
commands:
  description:
    - The plan, in order. Each item is exactly a policy verdict (as P(sentinel.remediation.policy_check#filter)
      returns it) plus C(source). Never a command the policy rejected.
  type: list
  elements: dict
  returned: always
  contains:
    command:
      description: The command text.
      type: str
    verdict:
      description: V(allow) or V(approval).
      type: str
    reasons:
      description: Why the policy decided so.
      type: list
      elements: str
    argv:
      description: The argv to execute (with a leading V(sudo) when the tool needs root).
      type: list
      elements: str
    display:
      description: The command as shown to people.
      type: str
    source:
      description: V(memory), V(runbook), V(llm) or V(fallback).
      type: str
  sample:
    - command: kill 4242
      verdict: approval
      reasons: [kill needs approval]
      argv: [sudo, kill, "4242"]
      display: sudo kill 4242
      source: runbook
dropped:
  description: Commands refused (policy reject, repeats of a failed command), each a verdict dict plus C(source).
  type: list
  elements: dict
  returned: always
source:
  description: Where the plan came from, V(memory), V(runbook), V(llm), V(fallback), or V(none).
  type: str
  returned: always
backend_used:
  description: The same as RV(source) (the name docs/contracts.md uses).
  type: str
  returned: always
escalate:
  description: True when a runbook or the LLM says a human is needed; RV(commands) is then empty.
  type: bool
  returned: always
signature:
  description: The failure signature, C(<service>:<16 hex>), free of timestamps, PIDs and host names.
  type: str
  returned: always
  sample: nginx:3f2a9c01d4e5b6a7
signature_basis:
  description: What the signature was made of (service, normalised error, key facts).
  type: dict
  returned: always
runbook:
  description: The best matching runbook (C(id), C(title), C(escalate), C(matched)), or null.
  type: dict
  returned: always
passages:
  description:
    - The knowledge passages quoted to the LLM, best first. Each has C(source) (C(runbook) or C(doc)),
      C(runbook) (its id, or null for a document), C(kind) (C(summary), C(steps), C(notes) or C(section)),
      C(file) and C(heading) (where it came from), C(score) (BM25) and C(other_service) (true when no
      passage was about this service and these are about others).
  type: list
  elements: dict
  returned: always
llm:
  description: What the LLM was asked and what it cost.
  type: dict
  returned: always
  contains:
    configured:
      description: Whether an endpoint was configured.
      type: bool
    used:
      description: Whether it was asked.
      type: bool
    calls:
      description: Completions asked for (format fallbacks included).
      type: int
    requests:
      description: HTTP requests, retries included.
      type: int
    prompt_tokens:
      description: Prompt tokens over all calls.
      type: int
    completion_tokens:
      description: Completion tokens over all calls.
      type: int
    seconds:
      description: Wall time spent waiting for the LLM.
      type: float
    tokens_estimated:
      description: True when the server sent no usage and tokens were estimated.
      type: bool
    attempts:
      description: Planning attempts (first ask and re-asks).
      type: int
    error:
      description:
        - Null, or what went wrong; V(not_configured), V(connection), V(timeout), V(rate_limited),
          V(server_error), V(bad_response), V(auth), V(not_found), V(bad_request), V(no_model), V(client_error),
          V(empty), V(truncated), V(oversize), V(invalid), V(refusal), V(no_commands), V(all_refused), V(deadline),
          V(no_usable_plan).
      type: str
    error_message:
      description: The error in words.
      type: str
    model:
      description: The model used.
      type: str
    response_format:
      description: The response format that worked last (V(json_schema), V(json_object), V(none)).
      type: str
msg:
  description: One paragraph saying which source planned, what was refused and what went wrong.
  type: str
  returned: always
"""
