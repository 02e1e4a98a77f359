# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation service: what the ``sentinel.remediation.heal`` action runs for one host.

``service.Remediation(context, host).run()`` is the whole of it: the action checks its
arguments, builds one frozen ``context.RunContext`` and one ``context.HostPort`` (how a module
runs on the host) and shapes what ``run`` returns. Inside, one class per concern:

- ``service``: the pass over the watched services (health, dependencies, holds, outcomes);
- ``_attempts``: the attempt loop of one incident (plan, check, gate, execute, verify);
- ``_checking``: the one path that checks a plan for this host and incident;
- ``_ahead``: the remembered fixes sent with the health check;
- ``_approvals``: a plan that waits for a human, and its approval or rejection;
- ``_stores``: memory, journal, lease and plan share behind small facades;
- ``vocabulary``: the words of states, gates, verdicts and escalations (shared with
  ``incident.py`` and ``report.py``); ``contracts``: the data shapes as types.

This file imports nothing on purpose: ``incident.py`` imports ``vocabulary`` from here.
"""
