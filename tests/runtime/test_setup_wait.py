"""A set-up wait gives a component that is working more time, and one that hangs none.

Real processes and threads, read through /proc: a busy child or thread outlasts several
set-up timeouts, a sleeping or stopped one fails at the first, naming it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pykka
import pytest

from mosaic.core.errors import RequestTimeout
from mosaic.runtime import heartbeat
from mosaic.runtime.component import Component
from mosaic.runtime.host import ActorHost
from mosaic.runtime.placement import ThreadPlaced
from mosaic.runtime.setup_wait import CEILING, SetupWait
from tests.runtime.conftest import StartChild

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")]

BUSY = """
import sys, time
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    sum(range(1000))
print("done", flush=True)
time.sleep(60)
"""
SLEEPING = """
import time
print("ready", flush=True)
time.sleep(60)
"""
#: Slack for a verdict that comes late on a loaded machine (the test's own thread starved).
LATE_S = 3.0


def wait_for(wait: SetupWait, done: threading.Event | None = None, limit: float = 30.0) -> float:
    """Run ``wait.check`` as a socket's wait does until ``done`` is set; the seconds taken."""
    began = time.monotonic()
    while done is None or not done.is_set():
        wait.check()
        assert time.monotonic() - began < limit, "the wait never ended"
        time.sleep(0.05)
    return time.monotonic() - began


def done_when(lines, text: str) -> threading.Event:
    done = threading.Event()

    def watch() -> None:
        while lines.next(timeout=60) != text:
            pass
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    return done


def test_a_process_busy_for_several_timeouts_is_given_the_time(start_child: StartChild):
    child, lines = start_child(BUSY, "2.5")
    assert lines.next() == "ready"
    wait = SetupWait("brain 'learner'", 0.5, lambda: heartbeat.scheduling(child.pid))
    wait_for(wait, done_when(lines, "done"))
    assert wait.extended >= 2


def test_a_sleeping_process_fails_at_the_timeout_naming_it(start_child: StartChild):
    child, lines = start_child(SLEEPING)
    assert lines.next() == "ready"
    wait = SetupWait("brain 'learner'", 1.0, lambda: heartbeat.scheduling(child.pid))
    began = time.monotonic()
    with pytest.raises(RequestTimeout, match=r"^brain 'learner' did not answer within 1 s$"):
        wait_for(wait)
    assert 1.0 <= time.monotonic() - began < 1.0 + LATE_S


def test_a_stopped_process_fails_at_the_timeout_though_it_was_busy(start_child: StartChild):
    child, lines = start_child(BUSY, "60")
    assert lines.next() == "ready"
    os.kill(child.pid, signal.SIGSTOP)
    try:
        wait = SetupWait("environment 'e'", 0.5, lambda: heartbeat.scheduling(child.pid),
                         doing="start")
        with pytest.raises(RequestTimeout, match=r"environment 'e' did not start within 0\.5 s"):
            wait_for(wait)
    finally:
        os.kill(child.pid, signal.SIGCONT)


def test_a_process_that_works_then_sleeps_fails_one_timeout_after(start_child: StartChild):
    child, lines = start_child(BUSY, "1.5")
    assert lines.next() == "ready"
    wait = SetupWait("muscle 'm'", 0.5, lambda: heartbeat.scheduling(child.pid))
    done = done_when(lines, "done")
    with pytest.raises(RequestTimeout, match=r"muscle 'm' did not answer within \d+ s: it worked"):
        wait_for(wait)
    assert done.is_set()


def test_a_process_busy_for_ever_fails_at_the_ceiling(start_child: StartChild):
    child, lines = start_child(BUSY, "60")
    assert lines.next() == "ready"
    wait = SetupWait("brain 'b'", 0.2, lambda: heartbeat.scheduling(child.pid))
    began = time.monotonic()
    with pytest.raises(RequestTimeout, match=f"within {0.2 * CEILING:g} s, the most set-up"):
        wait_for(wait)
    assert time.monotonic() - began < 0.2 * CEILING + LATE_S


def test_without_a_reading_the_wait_is_the_timeout() -> None:
    wait = SetupWait("brain 'b'", 0.3, lambda: None)
    began = time.monotonic()
    with pytest.raises(RequestTimeout, match=r"did not answer within 0\.3 s"):
        wait_for(wait)
    assert time.monotonic() - began < 0.3 + LATE_S
    assert SetupWait("brain 'b'", 0.3, None).budget == 0.3


class _SlowToStart(Component):
    """Busy for ``busy`` s in its set-up, or asleep until ``release`` is set."""

    def __init__(self, uid: str, busy: float, release: threading.Event) -> None:
        super().__init__(uid)
        self.busy, self.release = busy, release

    def on_setup(self) -> None:
        if self.busy:
            end = time.monotonic() + self.busy
            while time.monotonic() < end:
                sum(range(1000))
        else:
            self.release.wait(60)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # a thread asleep in its set-up ends, and its actor with it


def test_a_thread_busy_in_its_setup_starts_past_the_timeout(release: threading.Event) -> None:
    placed = ThreadPlaced(_SlowToStart("busy", 2.0, release), "environment",
                          "inproc://setup-wait-busy", timeout=0.5)
    try:
        assert placed.alive() and placed.endpoint
    finally:
        assert placed.stop(5.0)


def test_a_thread_asleep_in_its_setup_fails_at_the_timeout(release: threading.Event) -> None:
    began = time.monotonic()
    with pytest.raises(RequestTimeout,
                       match=r"environment 'asleep' \(thread\) did not start within 0.5 s"):
        ThreadPlaced(_SlowToStart("asleep", 0, release), "environment",
                     "inproc://setup-wait-asleep", timeout=0.5)
    assert time.monotonic() - began < 0.5 + LATE_S
    release.set()  # a thread cannot be killed: wake it, then stop its actor
    for ref in pykka.ActorRegistry.get_by_class(ActorHost):
        ref.stop(timeout=5)
