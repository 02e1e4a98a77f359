# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin sentinel.remediation.heal: the front door of the remediation service.

It checks the arguments (the role's variables first), builds the run's context and the port
through which the service runs modules on the host, calls the service
(``plugin_utils/remediation``) and shapes its result as the task's. Every decision of the
attempt loop lives in the service; this file decides nothing about a plan.
"""
from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Mapping

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sentinel.remediation.plugins.modules.heal import DOCUMENTATION
from ansible_collections.sentinel.remediation.plugins.module_utils.option_bounds import MINIMUMS, ROLE_VARIABLES
from ansible_collections.sentinel.remediation.plugins.module_utils.signature import hostnames_of
from ansible_collections.sentinel.remediation.plugins.plugin_utils import notifications as routing
from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as policy_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import state_dir
from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import from_documentation, llm_option_spec
from ansible_collections.sentinel.remediation.plugins.plugin_utils.knowledge import load_knowledge
from ansible_collections.sentinel.remediation.plugins.plugin_utils.lease import target_key
from ansible_collections.sentinel.remediation.plugins.plugin_utils.llm_client import LLMError, resolve_settings
from ansible_collections.sentinel.remediation.plugins.plugin_utils.plain_data import plain
from ansible_collections.sentinel.remediation.plugins.plugin_utils.planner import PlannerError
from ansible_collections.sentinel.remediation.plugins.plugin_utils.role_inputs import check_role_inputs
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation import vocabulary as words
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation.service import (
    CacheSettings,
    Remediation,
    RemediationError,
    open_run,
)

display = Display()
_NAME = "sentinel.remediation.heal"
_announced_no_llm = False
_announced_volatile = False


def argument_spec() -> dict:
    spec = from_documentation(DOCUMENTATION)
    spec["llm"] = llm_option_spec()
    return spec


def _controller_user() -> str:
    """Who runs this controller, the approver when none is named (remediate_approved_by)."""
    try:
        return f"{getpass.getuser()} on {socket.gethostname()}"
    except (KeyError, OSError):
        return f"uid {os.getuid()} on {socket.gethostname()}"


# Options of this action that the role fills from its variables: bad input names both.
_ROLE_VARS = ROLE_VARIABLES


def _role_var(option: str, value) -> str:
    return f" ({_ROLE_VARS[option]}={value})" if option in _ROLE_VARS else ""


def _definitions(services) -> dict[str, dict]:
    """The watched service definitions by name: names present and unique."""
    if not services:
        # A play that watches nothing is a configuration error, not a healthy host: said at once.
        raise AnsibleActionFail(f"{_NAME}: bad input: remediate_services is empty: this host watches no service. "
                                "Name the services to watch in the inventory (remediate_services in its group_vars "
                                "or host_vars, one definition per service), or leave the host out of the play")
    out = {}
    for item in services:
        if not isinstance(item, Mapping) or not item.get("name"):
            raise AnsibleActionFail(f"{_NAME}: bad input: every item of services needs a name, got {item!r}")
        if str(item["name"]) in out:
            raise AnsibleActionFail(f"{_NAME}: bad input: services names {item['name']!r} twice "
                                    "(remediate_services: one definition per service)")
        out[str(item["name"])] = dict(item)
    return out


class _ModulePort:
    """The service's host port over this action's ``_execute_module``."""

    def __init__(self, action: ActionBase, task_vars: Mapping):
        self.action = action
        self.task_vars = task_vars

    def run_module(self, name: str, args: Mapping) -> Mapping:
        return self.action._execute_module(module_name=name, module_args=dict(args), task_vars=self.task_vars)


class ActionModule(ActionBase):
    """Heal this host's failing services; the host is reached through the service's modules only."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        entry_point = self._task.args.get("role_entry_point")
        if entry_point:
            # The role's variables first: a bad one is named as the operator wrote it.
            check_role_inputs(self, str(entry_point), task_vars)
        # The arguments as plain data: the validation deep-copies them, and tagged values cost
        # that copy most of this action's controller CPU (plain_data.py); nothing here reads a tag.
        self._task.args = plain(self._task.args)
        _spec, args = self.validate_argument_spec(argument_spec=argument_spec())
        args["artifacts_dir"] = _state_dir(args["artifacts_dir"])
        # Every input is checked before the host is touched (the health check included).
        for name, low in MINIMUMS.items():
            if name in args and args[name] < low:
                raise AnsibleActionFail(f"{_NAME}: bad input: {name} must be at least {low}, got {args[name]}"
                                        f"{_role_var(name, args[name])}")
        if any(w < 1 for w in args["canary_waves"]):
            raise AnsibleActionFail(f"{_NAME}: bad input: every wave of canary_waves is at least 1 host, got "
                                    f"{args['canary_waves']} (remediate_canary_waves)")
        settings = _llm_settings(args)
        definitions = _definitions(args["services"])
        routes = _routes(args)
        _announce_no_llm(settings, args)
        try:
            # The operator's runbooks are checked before any host is touched; the index over
            # them and the documents is built once per content and cached (knowledge.py).
            knowledge = load_knowledge(args["runbook_dirs"], args["docs_dirs"])
        except ValueError as exc:  # RunbookError, KnowledgeError: they name the file and the key
            raise AnsibleActionFail(f"{_NAME}: {exc}") from exc
        ctx = open_run(args, host=str(task_vars.get("inventory_hostname") or "host"), hostnames=hostnames_of(task_vars),
                       target=target_key(task_vars), check_mode=bool(self._task.check_mode), definitions=definitions,
                       task_vars=task_vars, settings=settings, knowledge=knowledge, log=display.warning,
                       cache=CacheSettings(str(getattr(C, "CACHE_PLUGIN", "") or ""),
                                           str(getattr(C, "CACHE_PLUGIN_CONNECTION", "") or ""),
                                           str(getattr(C, "CACHE_PLUGIN_PREFIX", "") or "")))
        resume = args["resume"]
        try:
            done = Remediation(ctx, _ModulePort(self, task_vars)).run(
                resume, approver=(str(resume.get("by") or "") or _controller_user()) if resume else "")
        except (PlannerError, policy_mod.PolicyError, RemediationError) as exc:
            raise AnsibleActionFail(f"{_NAME}: {exc}") from None
        if args["phase"] == "health" and done.unreachable is None:
            # The play counts the fleet's failures before any host heals (fleet_stop.py).
            return dict(result, health=done.health, changed=False, msg=f"{_NAME}: health checked",
                        **({"warnings": done.warnings} if done.warnings else {}))
        # Where this host's waiting plans are, as resolved here (remediate_artifacts_dir, else the
        # state directory): what awx_plan.yml shows the approver is read from there, never guessed.
        result["pending_dir"] = os.path.join(args["artifacts_dir"], "pending")
        return _shaped(result, done, routes, ctx.check_mode)


def _shaped(result: dict, done, routes, check_mode: bool) -> dict:
    """The service's result as the task's: outcomes, incidents, the report's custom stat,
    whether to notify, the facts to keep, the warnings."""
    if done.warnings:
        result.setdefault("warnings", []).extend(done.warnings)
    if done.unreachable is not None:
        return dict(result, **done.unreachable)
    if done.health is not None:
        result["health"] = done.health
    outcomes = done.outcomes
    result["outcomes"] = outcomes
    result["incidents"] = [i.to_dict() for i in done.incidents]
    result["changed"] = any(c.ran for i in done.incidents for a in i.attempts for c in a.commands)
    result["msg"] = "; ".join(f"{o['service']}: {o['state']}" for o in outcomes) or "no watched service"
    # The report callback reads the outcomes as a custom stat (what set_stats would record).
    result["ansible_stats"] = {"data": {"sentinel_remediation": outcomes}, "per_host": True, "aggregate": True}
    waiting = routes.get("waiting_approval") if routes else None
    result["notify"] = any((o["state"] in words.NOTIFIED_STATES and not o.get("repeat_notice"))
                           or (o["state"] == "waiting_approval" and bool(waiting)) for o in outcomes)
    if done.facts and not check_mode:
        result["ansible_facts"] = done.facts
    return result


def _state_dir(configured) -> str:
    """The state directory resolved and proven writable before any host is touched; a warning
    (once per run) when the fact cache cannot keep memory and pending plans."""
    global _announced_volatile
    try:
        path = state_dir.ensure_writable(state_dir.artifacts_dir(configured),
                                         collection=state_dir.installed_collection_root())
    except state_dir.StateDirError as exc:
        raise AnsibleActionFail(f"{_NAME}: {exc}") from None
    warning = state_dir.volatile_cache_warning(C.CACHE_PLUGIN)
    if warning and not _announced_volatile:
        _announced_volatile = True
        display.warning(f"{_NAME}: {warning}")
    return path


def _llm_settings(args: Mapping):
    try:
        settings = resolve_settings(args["llm"])
    except LLMError as exc:
        given = args["llm"].get("base_url") if isinstance(args["llm"], Mapping) else None
        raise AnsibleActionFail(f"{_NAME}: bad input: {exc}"
                                + (f" (remediate_llm.base_url={given})" if given else "")) from None
    if settings.base_url and not re.match(r"^https?://[^\s/]+", settings.base_url):
        raise AnsibleActionFail(f"{_NAME}: bad input: the LLM base URL is not an http(s) URL: "
                                f"remediate_llm.base_url={settings.base_url} "
                                f"(from {settings.origin.get('base_url', 'the settings')})")
    return settings


def _routes(args: Mapping):
    if args["notify_routes"] is None:
        return None
    try:
        return routing.check_routes(args["notify_routes"], args["notify_configured"])
    except routing.NotificationError as exc:
        raise AnsibleActionFail(f"{_NAME}: bad input: {exc}") from None


def _announce_no_llm(settings, args: Mapping) -> None:
    global _announced_no_llm
    if not settings.configured and args["backend"] not in ("runbook", "memory") \
            and not _announced_no_llm and not args["monitor_only"]:
        _announced_no_llm = True
        display.warning(f"{_NAME}: no LLM configured (llm.base_url / OPENAI_BASE_URL, llm.api_key / "
                        "OPENAI_API_KEY); planning from runbooks and memory")
