"""How long one step of a run's shutdown may still take, hurried by a cancel or a failure."""

from __future__ import annotations

import time

from mosaic.conductors.run_context import HURRIED_SHUTDOWN_S, RunContext


class ShutdownClock:
    """The time left to a shutdown step (a component's shutdown request, a conductor's reap).

    It starts with the run's shutdown timeout, or :data:`HURRIED_SHUTDOWN_S` if the run is
    already cancelled or failed (see :meth:`RunContext.shutdown_timeout`). A cancel or failure
    that comes *during* the step cuts what is left to :data:`HURRIED_SHUTDOWN_S` from then on:
    a Ctrl-C while a brain saves a slow checkpoint must still mean seconds.
    """

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self.timeout = ctx.shutdown_timeout()
        self._deadline = time.monotonic() + self.timeout

    def _hurried(self) -> bool:
        return self._ctx.cancelled.is_set() or self._ctx.failed.is_set()

    def remaining(self) -> float:
        """Seconds left, never negative."""
        now = time.monotonic()
        if self._hurried():
            self._deadline = min(self._deadline, now + HURRIED_SHUTDOWN_S)
        return max(0.0, self._deadline - now)

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def deadline(self) -> str:
        """Which deadline this is, for a message that says it passed."""
        if self._hurried():
            return "the hurried deadline of a cancelled or failed run"
        return f"the shutdown timeout ({self.timeout:g} s)"
