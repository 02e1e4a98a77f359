# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one path that checks a plan for this host and incident: the policy is the last word.

Used for the planner's plan (shared plans included), the remembered fixes sent ahead, and an
approved plan at the moment it is used. The planner asks the policy through this class too
(``verdicts`` is its classifier, to choose among plan sources), and a verdict is kept for the
run by command, scope and host tools, so a command is classified once. The ``systemctl
reset-failed`` the engine adds before a start is the only command classified after the others
(verdicts are per command: the rest stand). A plan another host made is classified here in this
host's scope: its verdicts travel with it but never count.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence

from ansible_collections.sentinel.remediation.plugins.plugin_utils import autonomy as autonomy_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import do_no_harm
from ansible_collections.sentinel.remediation.plugins.plugin_utils import incident as engine
from ansible_collections.sentinel.remediation.plugins.plugin_utils import policy as policy_mod
from ansible_collections.sentinel.remediation.plugins.plugin_utils import read_pids
from ansible_collections.sentinel.remediation.plugins.plugin_utils import safeguards

from .contracts import Definition, Evidence, Verdict


class PlanCheck:
    """Policy, scope and the engine's additions for one run's host."""

    def __init__(self, policy_overrides: Mapping | None, definitions: Mapping[str, Mapping], undoable: bool = True):
        self.overrides = dict(policy_overrides or {})
        self.definitions = definitions
        self._known: dict[tuple[str, str, str], Verdict] = {}
        # Whether the host keeps what an attempt changes and puts back one that did not heal
        # (``undo_unhealed``): the autonomy table lets only what can be undone run alone.
        self.undoable = undoable

    def host_policy(self, tools: Mapping) -> dict:
        """The operator's policy plus the tools this host lacks."""
        policy = dict(self.overrides)
        absent = list(policy.get("absent_tools") or []) + list((tools or {}).get("absent") or [])
        policy["absent_tools"] = sorted(set(absent))
        return policy

    def privileged_groups(self, tools: Mapping) -> list[str]:
        """The groups no command may give a service account (the policy's ``privileged_groups``)."""
        return [str(g) for g in policy_mod.load_policy(self.host_policy(tools)).get("privileged_groups") or []]

    def scope(self, definition: Definition, evidence: Evidence, incident=None) -> dict:
        """The incident's scope for the policy: the service definition and the PIDs the
        evidence ties to it (and, given the incident, the PIDs its own reads showed:
        ``read_pids``). A dependency that is itself a watched service stands for its
        units (the Debian ``postgresql`` umbrella stands for ``postgresql@15-main``)."""
        pids = evidence.get("service_pids") if isinstance(evidence, Mapping) else None
        depends = []
        for name in definition.get("depends_on") or []:
            other = self.definitions.get(name)
            for unit in [name] + list((other or {}).get("units") or []):
                if unit not in depends:
                    depends.append(unit)
        if depends != list(definition.get("depends_on") or []):
            definition = dict(definition, depends_on=depends)
        scope = read_pids.with_seen(policy_mod.scope_from_service(definition, pids or (), evidence), incident)
        # A degraded incident planned for its dependency's cause: what it may not end (do_no_harm).
        rule = do_no_harm.constraint(definition, self.definitions, evidence)
        return dict(scope, do_no_harm=rule) if rule else scope

    def verdicts(self, commands: Sequence[Mapping], tools: Mapping, scope: Mapping) -> list[Verdict]:
        """The policy's verdict (C2) on each command's text in ``scope``, with this host's tools."""
        if not commands:
            return []
        policy = self.host_policy(tools)
        where = (json.dumps(policy, sort_keys=True, default=str), json.dumps(scope, sort_keys=True, default=str))
        texts = [str(c.get("command")) for c in commands]
        missing = [t for t in dict.fromkeys(texts) if (t,) + where not in self._known]
        if missing:
            judged = policy_mod.classify_many(missing, policy_mod.load_policy(policy), scope=scope)
            for text, verdict in zip(missing, judged):
                self._known[(text,) + where] = verdict
        return do_no_harm.refuse([copy.deepcopy(self._known[(t,) + where]) for t in texts],
                                 scope.get("do_no_harm") if isinstance(scope, Mapping) else None)

    def classifier(self, tools: Mapping, scope: Mapping) -> Callable[[Sequence[str]], list[Verdict]]:
        """The planner's way to ask the policy: this class's verdicts for command texts."""
        return lambda texts: self.verdicts([{"command": t} for t in texts], tools, scope)

    def classify(self, commands: Sequence[Mapping], tools: Mapping, scope: Mapping, source: str = "unknown") -> list[Verdict]:
        """Each command's verdict (C2 plus ``source``); a command already rejected upstream (a
        value that could not be localized) keeps its verdict."""
        if not commands:
            return []
        out = []
        for item, verdict in zip(commands, self.verdicts(commands, tools, scope)):
            if item.get("verdict") == "reject":
                out.append(dict(item))
                continue
            out.append(dict(verdict, source=item.get("source") or source))
        return out

    def check(self, commands: Sequence[Mapping], *, tools: Mapping, scope: Mapping, definition: Definition,
              evidence: Evidence, source: str = "unknown", autonomy: bool = False) -> list[Verdict]:
        """The plan as it would run here: classified, with the engine's ``reset-failed`` before
        a start systemd refuses (its start limit was hit), restarts weighed by their cost.
        ``autonomy``: the plan runs as an attempt (snapshots kept, undone if it does not heal),
        so the operator's autonomy table may let gated effects run alone (``autonomy.py``)."""
        checked = self.classify(commands, tools, scope, source)
        table = {}
        if autonomy:
            policy = policy_mod.load_policy(self.host_policy(tools))
            table = policy.get("autonomy") or {}
            checked = autonomy_mod.apply(checked, table, evidence=evidence, definition=definition,
                                         undoable=self.undoable, idle_seconds=policy.get("idle_transaction_seconds"))
        limited = engine.start_limited_unit(evidence)
        where = engine.reset_before_start(checked, limited)
        if where is not None:
            added = self.classify([{"command": f"systemctl reset-failed {limited}", "source": "engine"}], tools, scope)
            checked = checked[:where] + added + checked[where:]
        checked = safeguards.weigh_restart_cost(checked, definition, evidence,
                                                idle_restart=table.get("restart_without_clients") == "auto")
        return safeguards.weigh_owner_note(checked, definition, evidence)
