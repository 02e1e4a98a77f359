"""The error the driver reports as one line with exit code 2."""
from __future__ import annotations


class DriverError(Exception):
    """A problem the user can act on (bad path, unknown id...): one line, exit code 2."""
