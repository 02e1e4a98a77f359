# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every run of the heal action parses (its argument spec, the role's, the bundled runbooks
and their index, the default policy), parsed once in the calling process.

The report callback calls ``warm()`` in the controller's main process, before Ansible forks a
worker per host: each worker then starts with them in memory instead of parsing them again.
Only a speed-up: nothing depends on it."""
from __future__ import annotations

from ansible_collections.sentinel.remediation.plugins.modules.heal import DOCUMENTATION as HEAL_DOCUMENTATION
from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy
from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import from_documentation, llm_option_spec
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import load_knowledge
from ansible_collections.sentinel.remediation.plugins.plugin_utils.role_inputs import role_validator


def warm() -> None:
    """Parse the heal action's inputs, the bundled knowledge and the default policy now."""
    from_documentation(HEAL_DOCUMENTATION)
    llm_option_spec()
    role_validator("main")
    load_knowledge([], [])
    policy.load_policy()
