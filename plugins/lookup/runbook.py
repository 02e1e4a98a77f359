# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup plugin sentinel.remediation.runbook: the best runbook passages for a failure."""
from __future__ import annotations

DOCUMENTATION = r"""
name: runbook
author: sentinel.remediation maintainers (@sentinel-remediation)
version_added: 0.1.0
short_description: Retrieve the knowledge passages (runbooks, operator documents) that best fit a service failure
description:
  - Ranks passages of the runbooks (the collection's C(runbooks/) plus O(runbook_dirs)) and of the sections of
    the operator's documents (O(docs_dirs)) for a failure with BM25 (the C(rank-bm25) library) and returns the
    best ones. A runbook passage is a runbook's summary, its steps, or its notes; a document passage is one
    section under a heading.
  - Each term is a free-text query (for example the health check's error). With O(service),
    O(error) and O(evidence) the query is built from the failure as the planner builds it,
    including the key facts behind the failure signature.
  - With O(service), passages about other services are left out unless nothing else scores; they are then
    returned with C(other_service=true).
  - With O(match=true) it returns instead the runbooks whose evidence matchers fit the failure,
    best first, with their steps and the facts they matched; placeholders in steps are left as they are.
requirements:
  - rank-bm25 (Python package, on the controller)
options:
  _terms:
    description: Free-text queries; joined with the failure's own text when O(service) is set.
    type: list
    elements: str
    default: []
  service:
    description: The failed service; passages about other services are left out.
    type: str
  error:
    description: The health check's error text.
    type: str
    default: ""
  evidence:
    description: Evidence from M(sentinel.remediation.evidence) (its C(evidence) key) or text.
    type: raw
  top:
    description: How many passages to return.
    type: int
    default: 3
  match:
    description: Return matching runbooks (with C(score), C(matched) and C(facts)) instead of passages.
    type: bool
    default: false
  runbook_dirs:
    description:
      - The operator's runbook directories, added to the collection's C(runbooks/); a runbook with the id
        of a bundled one replaces it.
    type: list
    elements: path
    default: []
  docs_dirs:
    description: The operator's document directories (Markdown, reStructuredText, text), split into sections.
    type: list
    elements: path
    default: []
notes:
  - Secrets in O(error) and O(evidence) are redacted before they are used.
  - Passages scoring zero are never returned, so the list may be shorter than O(top).
seealso:
  - module: sentinel.remediation.plan
"""

EXAMPLES = r"""
- name: The three best passages for a failing nginx
  ansible.builtin.debug:
    msg: "{{ lookup('sentinel.remediation.runbook', service='nginx', error=health.error,
             evidence=collected.evidence, wantlist=True) }}"

- name: Free-text search
  ansible.builtin.debug:
    msg: "{{ query('sentinel.remediation.runbook', 'redis No space left on device', top=1) }}"

- name: Which runbook fits, with its steps
  ansible.builtin.set_fact:
    _runbooks: "{{ query('sentinel.remediation.runbook', service='redis-server',
                         error=\"Can't chdir to '/var/lib/redis': Permission denied\", match=true) }}"

- name: Search the team's own runbooks and wiki export too
  ansible.builtin.debug:
    msg: "{{ query('sentinel.remediation.runbook', service='billing-api', error=health.error,
                   runbook_dirs=['/srv/ops/runbooks'], docs_dirs=['/srv/ops/wiki']) }}"
"""

RETURN = r"""
_raw:
  description:
    - Passages, best first, each C(source) (C(runbook) or C(doc)), C(runbook) (id, null for a document),
      C(kind) (C(summary), C(steps), C(notes) or C(section)), C(file), C(heading), C(text), C(score) and
      C(other_service).
    - With O(match=true), runbooks, each C(runbook) (its id, title, services, steps, notes,
      escalate...), C(score), C(matched) and C(facts).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sentinel.remediation.plugins.module_utils.redact import redact_text, redact_value
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import KnowledgeError, load_knowledge
from ansible_collections.sentinel.remediation.plugins.plugin_utils.runbooks import RunbookError, match_runbooks
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import key_facts


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        service = self.get_option("service") or ""
        error = redact_text(self.get_option("error") or "")
        evidence = self.get_option("evidence")
        evidence = redact_value(evidence) if evidence is not None else None
        top = self.get_option("top")
        try:
            knowledge = load_knowledge(self.get_option("runbook_dirs"), self.get_option("docs_dirs"))
        except (RunbookError, KnowledgeError) as exc:
            raise AnsibleLookupError(f"sentinel.remediation.runbook: {exc}") from exc
        if self.get_option("match"):
            if not service:
                raise AnsibleLookupError("sentinel.remediation.runbook: match=true needs service")
            return match_runbooks(knowledge.runbooks, service, error, evidence)[:top]
        parts = [redact_text(str(term)) for term in terms or []]
        if service:
            parts += [service, error] + key_facts(service, error, evidence)
        query = " ".join(p for p in parts if p)
        if not query.strip():
            raise AnsibleLookupError("sentinel.remediation.runbook: give a query term or service/error")
        return knowledge.query(query, service or None, top)
