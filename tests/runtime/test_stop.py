"""The ordered stop: each kind of child ends at the step it heeds, within the schedule."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from mosaic.runtime.processes.child import ChildProcess
from mosaic.runtime.processes.stop import (
    ASK_DELIVERY_S,
    EOF,
    KILLED,
    STOPPED,
    TERMINATED,
    StopSchedule,
    stop_in_order,
)

from .conftest import StartChild

pytestmark = pytest.mark.timeout(60)

#: Reads stdin: exits 0 on a ``stop`` line, or at its end.
HEEDS_STOP_AND_EOF = """
    import sys
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            sys.exit(0)
"""
#: Reads nothing; SIGTERM's default action ends it.
HEEDS_SIGTERM = "import time\nprint('ready', flush=True)\ntime.sleep(60)"
#: Ignores SIGTERM, and stdin: only SIGKILL ends it.
HEEDS_NOTHING = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
"""
BUDGET_S = 2.0


def _ask(child: ChildProcess) -> Callable[[float], None]:
    def ask(timeout: float) -> None:
        assert 0 < timeout <= ASK_DELIVERY_S
        assert child.process.stdin is not None
        child.process.stdin.write(b"stop\n")
        child.process.stdin.flush()
    return ask


def _close_stdin(child: ChildProcess) -> Callable[[], None]:
    def close() -> None:
        assert child.process.stdin is not None
        child.process.stdin.close()
    return close


@pytest.mark.parametrize(("code", "can_ask", "outcome", "exit_code"), [
    (HEEDS_STOP_AND_EOF, True, STOPPED, 0),
    (HEEDS_STOP_AND_EOF, False, EOF, 0),
    (HEEDS_SIGTERM, True, TERMINATED, -signal.SIGTERM),
    (HEEDS_NOTHING, True, KILLED, -signal.SIGKILL),
])
def test_each_child_ends_at_the_step_it_heeds_within_the_budget(
        start_child: StartChild, code: str, can_ask: bool, outcome: str, exit_code: int) -> None:
    child, lines = start_child(code, stdin=True)
    assert lines.next() == "ready"
    schedule = StopSchedule.sharing(BUDGET_S, ask=can_ask)
    began = time.monotonic()
    ended = stop_in_order(child, schedule, ask=_ask(child) if can_ask else None,
                          close_stdin=_close_stdin(child))
    took = time.monotonic() - began
    assert (ended, child.exit_code) == (outcome, exit_code)
    assert took < BUDGET_S + ASK_DELIVERY_S + 2.0
    child.release()


def test_a_child_asked_by_other_means_gets_its_grace_then_sigterm(
        start_child: StartChild) -> None:
    # How a component process is stopped: it had its shutdown request already, so the first
    # step only waits; it ends by itself within the grace, or SIGTERM asks it.
    leaving, lines = start_child("import time\nprint('ready', flush=True)\ntime.sleep(0.3)")
    assert lines.next() == "ready"
    grace = StopSchedule(ask_s=3.0, sigterm_s=1.0, sigkill_s=1.0)
    assert stop_in_order(leaving, grace) == STOPPED and leaving.exit_code == 0
    staying, lines = start_child(HEEDS_SIGTERM)
    assert lines.next() == "ready"
    began = time.monotonic()
    assert stop_in_order(staying, StopSchedule(ask_s=0.2, sigterm_s=3.0, sigkill_s=1.0)) \
        == TERMINATED
    assert time.monotonic() - began < 2.5  # less than the ask's grace and SIGTERM's share


def test_the_budget_is_shared_in_the_documented_proportions() -> None:
    schedule = StopSchedule.sharing(10.0)
    assert (schedule.ask_s, schedule.eof_s, schedule.sigterm_s, schedule.sigkill_s) == \
        pytest.approx((4.0, 1.5, 3.0, 1.5))
    assert StopSchedule.sharing(0.4, ask=False).ask_s == 0.0
    assert StopSchedule.sharing(0.4).sigkill_s == 0.2  # never less than a moment for SIGKILL
