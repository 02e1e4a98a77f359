# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run of the remediation service without Docker: a fake host port that answers as the
host modules do (service_health, execute_plan) from a script, and records what it was asked."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.sentinel.remediation.plugins.modules.heal import DOCUMENTATION
from ansible_collections.sentinel.remediation.plugins.plugin_utils import approval
from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import from_documentation
from ansible_collections.sentinel.remediation.plugins.plugin_utils.remediation.service import (
    CacheSettings,
    Remediation,
    open_run,
)

NGINX = {"name": "nginx", "units": ["nginx"], "processes": ["nginx"], "ports": [80],
         "checks": [{"type": "service"}]}
# What the host's evidence says of a stopped nginx (no process left: a start costs nothing).
STOPPED = {"init": "systemd", "unit": {"ActiveState": "inactive", "Result": "success"}, "processes": []}


class FakeHost:
    """The host as the service's port sees it. ``health``: what each service_health call
    answers (the last repeats); ``verify``: whether each execute_plan healed (the last repeats)."""

    def __init__(self, *, healthy=False, error="nginx is not running", verify=(True,), unreachable=False,
                 remembered_ran=None):
        self.calls: list[tuple[str, dict]] = []
        self.healthy = healthy
        self.error = error
        self.verify = list(verify)
        self.unreachable = unreachable
        self.remembered_ran = remembered_ran  # answer for fixes sent ahead: healed or not (None: not run)

    def run_module(self, name, args):
        self.calls.append((name, copy.deepcopy(dict(args))))
        if self.unreachable:
            return {"unreachable": True, "msg": "Failed to connect to the host via ssh"}
        if name == "sentinel.remediation.service_health":
            return self._health(args)
        if name == "sentinel.remediation.execute_plan":
            healed = self.verify.pop(0) if len(self.verify) > 1 else self.verify[0]
            return {"changed": True, "results": [{"rc": 0, "stdout": "", "stderr": "", "label": command["label"]} for command in args["commands"]],
                    "verify": {"healthy": healed, "error": "" if healed else self.error},
                    "evidence": STOPPED}
        raise AssertionError(f"unexpected module {name}")

    def _health(self, args):
        rows = []
        for definition in args["services"]:
            row = {"name": definition["name"], "healthy": self.healthy,
                   "error": "" if self.healthy else self.error, "checks": []}
            if not self.healthy and definition["name"] in (args.get("defer_evidence") or ()):
                row["evidence_deferred"] = "evidence deferred"
            elif not self.healthy:
                row["evidence"] = STOPPED
            for fix in args.get("remembered") or []:
                if fix["service"] == definition["name"] and self.remembered_ran is not None:
                    row["remembered"] = {"ran": True, "signature": fix["signature"],
                                         "results": [{"rc": 0, "label": command["label"]} for command in fix["commands"]],
                                         "verify": {"healthy": self.remembered_ran,
                                                    "error": "" if self.remembered_ran else self.error}}
                    # as service_health: the row stays the failure the host found, the fix's record beside it
            rows.append(row)
        return {"services": rows, "healthy": all(r["healthy"] for r in rows), "tools": {"present": ["systemctl"]}}

    def ran(self) -> list[str]:
        """Every command the host was asked to run through execute_plan (as the policy judged it)."""
        return [c["label"] for name, args in self.calls if name == "sentinel.remediation.execute_plan"
                for c in args["commands"]]


def defaults() -> dict:
    spec = from_documentation(DOCUMENTATION)
    return {name: option.get("default") for name, option in spec.items()}


@pytest.fixture
def make_run(tmp_path, monkeypatch):
    """``make_run(host, **args)``: a Remediation over ``host`` (a FakeHost), its state in tmp_path."""
    monkeypatch.setenv(approval.DIR_ENV, str(tmp_path / "approval"))
    monkeypatch.setenv(approval.KEY_ENV, "ab" * 32)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def make(host, *, facts=None, check_mode=False, cache=CacheSettings(), loop=None, name="web1", clock=None,
             **overrides):
        args = defaults()
        args.update(services=[NGINX], artifacts_dir=str(tmp_path / "state"), backend="runbook", settle=0,
                    lease_dir=str(tmp_path / "leases"))
        args.update(overrides)
        (tmp_path / "state").mkdir(exist_ok=True)
        task_vars = {"inventory_hostname": name, "ansible_facts": dict(facts or {})}
        ctx = open_run(args, host=name, hostnames=[name], target=f"{name}:22", check_mode=check_mode,
                       definitions={d["name"]: dict(d) for d in args["services"]}, task_vars=task_vars,
                       cache=cache, log=lambda message: None, clock=clock)
        return Remediation(ctx, host, **({"loop": loop} if loop else {}))
    return make
