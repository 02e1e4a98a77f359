# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The words of remediation, defined once: ``incident.py``, ``report.py`` and the loop import them."""
from __future__ import annotations

# The state of a service after a pass (an incident's final state, or a service's outcome).
STATES = ("healthy", "healed", "waiting_approval", "dry_run", "busy", "escalated", "degraded", "held", "failed",
          "unreachable", "waiting")
# The states a human is told about (the report is not ok with any of them).
FAILING_STATES = ("escalated", "degraded", "held", "failed", "unreachable")
# What a notification is sent for (a repeat of the same within notify_remind is not).
NOTIFIED_STATES = ("escalated", "degraded")
# An incident's state while its attempts go on.
OPEN = "open"
# The states in which a service counts as working (a dependant may be looked at again).
WORKING_STATES = ("healed", "healthy")
# What the policy says of one command (C2 ``verdict``).
VERDICTS = ("allow", "approval", "reject")
# What an attempt does with its checked plan (incident.gate, confinement.gate).
GATES = ("execute", "approval", "escalate", "dry_run")
# What stopped the loop from acting, or made it wait (safeguards.GUARDS).
SAFEGUARDS = ("recovered", "confirmed", "degraded", "restart_cost", "held", "canary", "rollout_stopped", "after_canary",
              "fleet_stop", "proven_plan")
# Why an escalated outcome needs a human (incident.escalation_kind); notifications route by it.
ESCALATION_KINDS = ("refused", "needs_human", "llm_error", "exhausted", "rejected")
