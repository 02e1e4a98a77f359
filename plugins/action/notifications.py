# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin sentinel.remediation.notifications: route escalations, report the sends.

Thin: the routing, the wording and the reading of send results are in
``plugin_utils/notifications.py``; the role sends with the community collections.
"""
from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.sentinel.remediation.plugins.modules.notifications import DOCUMENTATION
from ansible_collections.sentinel.remediation.plugins.plugin_utils import notifications as routing
from ansible_collections.sentinel.remediation.plugins.plugin_utils._argspec import from_documentation

_NAME = "sentinel.remediation.notifications"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _spec, args = self.validate_argument_spec(argument_spec=from_documentation(DOCUMENTATION))
        result["changed"] = False
        if args["results"] is not None:
            records, warnings = routing.summarise(args["notices"], args["results"])
            result["notifications"] = records
            result["failed_notices"] = [r for r in records if r["status"] == "failed"]
            if warnings:
                result["warnings"] = warnings
            return result
        try:
            routes = routing.check_routes(args["routes"], args["configured"])
        except routing.NotificationError as exc:
            raise AnsibleActionFail(f"{_NAME}: {exc}") from None
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        result.update(routing.notices(args["host"], args["outcomes"], routes, now=now, receiver=args["receiver"]))
        result["routes"] = routes
        return result
