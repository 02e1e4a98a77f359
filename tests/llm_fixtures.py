# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the planner's tests: the test LLM server and a runner for the action."""
from __future__ import annotations

import importlib
import shlex
import sys
import types
from unittest.mock import MagicMock

import pytest

from llm_server import LLMServer

POLICY_MODULE = "ansible_collections.sentinel.remediation.plugins.plugin_utils.policy"


def _standin_policy() -> types.ModuleType:
    """A tiny stand-in with the contract's API, used only while the real engine is absent."""
    module = types.ModuleType(POLICY_MODULE)

    class PolicyError(ValueError):
        pass

    root_tools = {"service", "kill", "rm", "mv", "mkdir", "chown", "chmod", "redis-cli"}

    def load_policy(overrides=None):
        policy = {"absent_tools": [], "deny": ["reboot", "shutdown", "dd", "mkfs"]}
        for key, value in (overrides or {}).items():
            if key not in ("absent_tools", "deny"):
                raise PolicyError(f"unknown policy key {key!r}")
            policy[key] = list(value)
        return policy

    def classify(command, policy=None):
        policy = policy or load_policy()
        reasons, argv = [], None
        if any(token in command for token in (";", "&&", "||", "|", "`", "$(", ">", "<")):
            reasons.append("chaining or redirection needs a shell")
        else:
            try:
                argv = shlex.split(command)
            except ValueError:
                reasons.append("unbalanced quotes")
        if argv:
            tool = argv[0]
            if tool in policy["absent_tools"]:
                reasons.append(f"{tool} is not installed on this host; use service / ss instead")
            if tool in policy["deny"] or argv[:2] == ["rm", "-rf"] and "/" in argv:
                reasons.append(f"{tool} is forbidden")
        if reasons:
            return {"command": command, "verdict": "reject", "reasons": reasons, "argv": None, "display": command}
        verdict = "approval" if argv[0] in ("kill", "rm") else "allow"
        if verdict == "approval":
            reasons.append(f"{argv[0]} needs approval")
        else:
            reasons.append("allowed")
        if argv[0] in root_tools:
            argv = ["sudo"] + argv
        return {"command": command, "verdict": verdict, "reasons": reasons, "argv": argv,
                "display": " ".join(argv)}

    def classify_many(commands, policy=None):
        return [classify(c, policy) for c in commands]

    module.PolicyError = PolicyError
    module.load_policy = load_policy
    module.classify = classify
    module.classify_many = classify_many
    module.ensure_sudo = lambda command, policy=None: command
    module.STANDIN = True
    return module


def real_policy_available() -> bool:
    try:
        module = importlib.import_module(POLICY_MODULE)
    except ImportError:
        return False
    return all(hasattr(module, name) for name in ("load_policy", "classify_many"))


@pytest.fixture(autouse=True)
def policy_engine(monkeypatch):
    """The real policy engine when it exists, else the stand-in above."""
    if real_policy_available():
        module = importlib.import_module(POLICY_MODULE)
    else:
        module = _standin_policy()
        monkeypatch.setitem(sys.modules, POLICY_MODULE, module)
        package = importlib.import_module(POLICY_MODULE.rsplit(".", 1)[0])
        monkeypatch.setattr(package, "policy", module, raising=False)
    return module


@pytest.fixture(autouse=True)
def no_llm_environment(monkeypatch, tmp_path):
    """No test sees a developer's OPENAI_* / AZURE_OPENAI_* variables or their ansible.cfg section."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_API_VERSION", "OPENAI_CUSTOM_HEADERS",
                 "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_DEPLOYMENT"):
        monkeypatch.delenv(name, raising=False)
    from ansible_collections.sentinel.remediation.plugins.plugin_utils import llm_client

    monkeypatch.setattr(llm_client, "active_ansible_cfg", lambda: None)


@pytest.fixture
def llm_server():
    """A running test LLM server; script it with ``llm_server.queue(...)``."""
    server = LLMServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def run_plan():
    """Build the action plugin directly and call ``run()``: ``run_plan(args, task_vars=None, check_mode=False)``."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.play_context import PlayContext
    from ansible.playbook.task import Task
    from ansible.template import Templar

    from ansible_collections.sentinel.remediation.plugins.action.plan import ActionModule

    def run(args, task_vars=None, check_mode=False):
        task = MagicMock(Task)
        task.args = dict(args)
        task.action = "sentinel.remediation.plan"
        task.async_val = 0
        task.check_mode = check_mode
        task.diff = False
        loader = DataLoader()
        action = ActionModule(task=task, connection=MagicMock(), play_context=PlayContext(), loader=loader,
                              templar=Templar(loader=loader), shared_loader_obj=None)
        return action.run(task_vars=task_vars or {"inventory_hostname": "web-01"})

    return run
