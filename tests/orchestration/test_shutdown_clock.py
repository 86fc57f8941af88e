"""The shutdown clock: a step's time left, cut short by a cancel or a failure, and a message
that names the deadline that passed."""

from __future__ import annotations

import threading

import pytest

from mosaic.conductors.run_context import HURRIED_SHUTDOWN_S
from mosaic.conductors.shutdown_clock import ShutdownClock

pytestmark = pytest.mark.timeout(10)


class Run:
    """What the clock reads of a run: its cancel and failure flags and its shutdown timeout."""

    def __init__(self, timeout: float) -> None:
        self.cancelled, self.failed = threading.Event(), threading.Event()
        self.timeout = timeout

    def shutdown_timeout(self) -> float:
        return self.timeout


def test_a_clock_names_the_plain_timeout_until_the_run_is_cancelled_or_failed() -> None:
    run = Run(30.0)
    clock = ShutdownClock(run)  # type: ignore[arg-type]
    assert clock.remaining() > HURRIED_SHUTDOWN_S
    assert clock.deadline() == "the shutdown timeout (30 s)"
    run.cancelled.set()
    assert clock.remaining() <= HURRIED_SHUTDOWN_S
    assert clock.deadline() == "the hurried deadline of a cancelled or failed run"
