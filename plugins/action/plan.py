# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin sentinel.remediation.plan: thin edge around plugin_utils.planner."""
from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sentinel.remediation.plugins.modules.plan import DOCUMENTATION
from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import from_documentation, llm_option_spec
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import LLMError, resolve_settings
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import Planner, PlannerError
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import hostnames_of

display = Display()
_NAME = "sentinel.remediation.plan"
_announced_no_llm = False


def argument_spec() -> dict:
    spec = from_documentation(DOCUMENTATION)
    spec["llm"] = llm_option_spec()
    return spec


class ActionModule(ActionBase):
    """Plan on the controller; nothing is sent to or run on the host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        global _announced_no_llm
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _spec, args = self.validate_argument_spec(argument_spec=argument_spec())
        try:
            settings = resolve_settings(args["llm"])
        except LLMError as exc:
            raise AnsibleActionFail(f"{_NAME}: {exc}") from exc
        hostnames = hostnames_of(task_vars)
        try:
            planner = Planner(
                service=args["service"], error=args["error"], evidence=args["evidence"],
                failed_commands=args["failed_commands"], successful_fixes=args["successful_fixes"],
                host_tools=args["host_tools"], policy=args["policy"], max_commands=args["max_commands"],
                backend=args["backend"], max_attempts=args["max_attempts"], passages=args["passages"],
                runbook_dirs=args["runbook_dirs"], docs_dirs=args["docs_dirs"], hostnames=hostnames,
                llm_settings=settings, fallback_restart=args["fallback_restart"])
            outcome = planner.run()
        except PlannerError as exc:
            raise AnsibleActionFail(f"{_NAME}: {exc}") from exc
        except Exception as exc:  # an internal error is an outcome with a message, not a trace
            raise AnsibleActionFail(f"{_NAME}: internal error {type(exc).__name__}: {exc}") from exc
        if not settings.configured and args["backend"] != "runbook" and not _announced_no_llm:
            _announced_no_llm = True
            display.warning(f"{_NAME}: no LLM configured (llm.base_url / OPENAI_BASE_URL, llm.api_key / "
                            "OPENAI_API_KEY); planning from runbooks and memory")
        result.update(outcome)
        return result
