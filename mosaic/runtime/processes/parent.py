"""A child process's side of its supervision: it dies with its parent, and acts once on SIGTERM.

Every process mosaic starts (a component process, an operator worker) is asked to stop the same
way: SIGTERM. Whoever notices that its parent has gone asks it the same way too: the kernel
(``PR_SET_PDEATHSIG``), a check at start, or a check every few tenths of a second. So a child
has one way to stop, installed with :func:`on_first_sigterm`, and no orphan outlives a killed
run.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from mosaic.core.lifeline import arm_parent_death_signal, process_exists

log = logging.getLogger(__name__)

#: How often a child looks for its parent by default, where the kernel cannot tell it.
PARENT_CHECK_S = 0.5


class Lifeline:
    """This process's tie to its parent (see :func:`die_with_parent`)."""

    def __init__(self, parent_pid: int) -> None:
        self.parent_pid = parent_pid

    def check(self) -> bool:
        """True if the parent has gone; each call that finds it gone sends this process SIGTERM."""
        if os.getppid() == self.parent_pid:
            return False
        _sigterm_self()
        return True

    def _watch(self, every: float) -> None:
        while True:
            time.sleep(every)
            if self.check():
                return


def _sigterm_self() -> None:
    # The one way this process is ever asked to stop, whoever asks.
    os.kill(os.getpid(), signal.SIGTERM)


def die_with_parent(parent_pid: int | None = None, *, launcher_pid: int | None = None,
                    check_every: float | None = PARENT_CHECK_S) -> Lifeline:
    """Make this process get SIGTERM when its parent ends, however that is noticed.

    * the kernel sends it when the parent ends (Linux ``PR_SET_PDEATHSIG``; it fires when the
      parent *thread* that started this process ends, so parents start children from threads
      that outlive them);
    * at once, if the parent ended before the kernel was asked: ``parent_pid`` (default: the
      current parent) is no longer this process's parent, or ``launcher_pid`` names no process;
    * a daemon thread looks every ``check_every`` s whether the parent changed, for platforms
      without the kernel's signal; with ``None``, no thread: the caller's own loop calls
      :meth:`Lifeline.check` (a process that starts no thread before it pins itself to a CPU).

    What SIGTERM then does is :func:`on_first_sigterm`'s (the default action ends the process at
    once). Returns the :class:`Lifeline`.
    """
    if not arm_parent_death_signal(signal.SIGTERM):
        log.debug("prctl(PR_SET_PDEATHSIG) unavailable; relying on the parent check")
    lifeline = Lifeline(os.getppid() if parent_pid is None else parent_pid)
    if lifeline.check():
        return lifeline
    if launcher_pid is not None and not process_exists(launcher_pid):
        _sigterm_self()
        return lifeline
    if check_every is not None:
        threading.Thread(target=lifeline._watch, args=(check_every,), name="parent-check",
                         daemon=True).start()
    return lifeline


def on_first_sigterm(action: Callable[[], object]) -> None:
    """On the first SIGTERM, run ``action`` in the main thread; ignore every later one.

    Several often come within microseconds: a killed parent sends one per thread of its that
    ends (the kernel hands the child on from thread to thread), and a parent check adds one.
    A second run of ``action`` could interrupt the first where it holds a lock (pykka's stop
    takes its inbox's) and wait for it forever, or cut a cleanup short. ``action`` may raise to
    unwind the main thread. Call from the main thread.
    """
    fired = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        action()

    signal.signal(signal.SIGTERM, on_term)
