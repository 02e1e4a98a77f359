"""The driver's exit codes, one table for every command (``run``, ``watch``'s last pass,
``approvals approve|reject``, ``report``, ``runbooks check``)."""
from __future__ import annotations

EXIT_OK = 0            # every service healthy or healed; runbooks check: no errors
EXIT_FAILED = 1        # something escalated, failed or was unreachable, or the run itself failed; runbook errors
EXIT_USAGE = 2         # bad command line, unknown run or approval id, missing files
EXIT_WAITING = 3       # nothing failed, but at least one plan waits for approval
EXIT_BUSY = 4          # nothing ran: every host was locked by another pass (without --wait)
