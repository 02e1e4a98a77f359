"""The monitor loop: a pass every interval until SIGINT/SIGTERM.

The first signal asks for a clean stop: the pass under way finishes (its report is
stored), then the loop ends. A second signal cancels the pass under way through
ansible-runner's ``cancel_callback``. Passes never overlap, within this process (one at a
time) or across processes (the per-host locks of every pass).
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from . import report as reporting
from .locking import LockTimeout
from .errors import DriverError
from .exit_codes import EXIT_FAILED, EXIT_OK


class StopSignal:
    """SIGINT/SIGTERM handling: first signal = stop after this pass, second = cancel it."""

    def __init__(self, out: TextIO | None = sys.stderr, first_cancels: bool = False) -> None:
        # first_cancels: a single pass (`run`, `approvals approve`) has nothing to finish
        # "after", so the first signal cancels it and ansible-runner stops ansible-playbook
        # (it runs in its own session and would otherwise outlive the driver).
        self.first_cancels = first_cancels
        self.stop = threading.Event()
        self.cancel = threading.Event()
        self.out = out
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if self.stop.is_set() or self.first_cancels:
            self.stop.set()
            self.cancel.set()
            self._say(f"{name}: cancelling the pass under way")
        else:
            self.stop.set()
            self._say(f"{name}: stopping after the pass under way (send it again to cancel the pass)")

    def _say(self, text: str) -> None:
        if self.out is not None:
            print(f"watch: {text}", file=self.out, flush=True)

    def install(self) -> StopSignal:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def cancelled(self) -> bool:
        return self.cancel.is_set()


def watch(
    run_one: Callable[[Callable[[], bool]], dict],
    interval: float,
    max_passes: int | None = None,
    out: TextIO | None = sys.stderr,
    stopper: StopSignal | None = None,
) -> int:
    """Run passes every ``interval`` seconds; returns the exit code of the last pass."""
    stopper = stopper or StopSignal(out)
    stopper.install()
    code = EXIT_OK
    passes = 0
    try:
        while not stopper.stop.is_set():
            started = time.monotonic()
            passes += 1
            try:
                result = run_one(stopper.cancelled)
                code = reporting.exit_code(result)
                totals = ", ".join(f"{k}={v}" for k, v in result.get("totals", {}).items() if v) or "no outcome"
                stopper._say(f"pass {passes} ({result.get('run', {}).get('ident')}) done: {totals}; exit code {code}")
            except LockTimeout as exc:
                stopper._say(f"pass {passes} not run: {exc}")
            except DriverError as exc:
                # The loop outlives a bad pass (inventory down, a host list error...): say it, go on.
                code = EXIT_FAILED
                stopper._say(f"pass {passes} failed: {exc}")
            if max_passes and passes >= max_passes:
                break
            remaining = interval - (time.monotonic() - started)
            if remaining > 0:
                stopper.stop.wait(remaining)
    finally:
        stopper.restore()
    stopper._say(f"stopped after {passes} pass(es)")
    return code
