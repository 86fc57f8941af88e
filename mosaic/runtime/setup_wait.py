"""Set-up waits: how a run tells a component that sets up slowly from one that hangs in set-up.

A component's set-up (its process starting, a brain importing torch, an environment building
its world) is given ``timeouts.setup``. On a busy machine a healthy set-up can take several
times that, so a set-up wait does not give up at the timeout on a component that is making
progress: it asks the kernel how the component's threads spent the last timeout window
(:func:`mosaic.runtime.heartbeat.scheduling`, the same reading heartbeats use to tell starved
from hung) and gives it another window if they ran, or waited for a CPU, for a fair share of
it, or are runnable now. Up to :data:`CEILING` times the timeout in all; then it fails anyway.

A component that used (almost) no CPU through a window and is not runnable (sleeping forever
in its set-up, blocked on a lock, stopped) fails at the end of that window, so a component
hung from the start fails at ``timeouts.setup`` as it always did, with the same message. A
component the kernel cannot be asked about (no ``/proc``, a Ray actor on another node) gets
``timeouts.setup`` and no more.

What a component's threads are: all of a component process's, and only the actor thread of a
component placed in a thread of the run's process (the rest of that process is busy with
other things). See :meth:`mosaic.runtime.placement.Placed.scheduling`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mosaic.core.errors import RequestTimeout
from mosaic.runtime.heartbeat import Scheduling

__all__ = ["BUSY_SHARE", "CEILING", "SetupWait", "making_progress"]

#: The most a set-up wait gives a component that keeps making progress, in set-up timeouts.
CEILING = 10
#: A component made progress through a window if its threads were on a CPU or waiting for one
#: for at least this share of it. A sleeping process wakes for its heartbeat only (well under
#: 1%); a busy one runs or queues for nearly all of it, however loaded the machine.
BUSY_SHARE = 0.25

Probe = Callable[[], Scheduling | None]
Check = Callable[[], None]


def making_progress(before: Scheduling, after: Scheduling, span: float) -> bool:
    """Did a component whose threads read ``before``, then ``span`` s later ``after``, work?

    Working: not stopped, and either runnable now (a thread that waited for a CPU all along
    has no wait booked yet: the kernel books it once the thread runs) or on a CPU or in a run
    queue for at least :data:`BUSY_SHARE` of the span.
    """
    if after.stopped:
        return False
    busy = (after.ran_s - before.ran_s) + (after.waited_s - before.waited_s)
    return after.runnable or busy >= BUSY_SHARE * span


class SetupWait:
    """One wait on the set-up of ``subject`` (``"brain 'learner'"``): pass :attr:`budget` and
    :meth:`check` to the wait itself (``client.request(..., wait.budget, wait.check)``).

    The wait is given ``timeout`` s, one more ``timeout`` each time the component is found
    :func:`making_progress` by ``probe`` over the window just ended, and at most
    :data:`CEILING` ``* timeout``. :meth:`check` runs ``check`` (the run's own: a cancel, a
    dead part), then raises :class:`RequestTimeout` once the time given is up: ``"<subject>
    did not <doing> within <timeout> s"`` for a component hung from the start, as any timed-out
    request says. Without a ``probe`` the budget is ``timeout`` and the check only ``check``.
    Build it just before the wait: the first window starts then.
    """

    def __init__(self, subject: str, timeout: float, probe: Probe | None,
                 check: Check | None = None, *, doing: str = "answer") -> None:
        self.subject, self.timeout, self.doing = subject, timeout, doing
        self._probe, self._check = probe, check
        self.started = self._window = time.monotonic()
        self._before = probe() if probe is not None else None
        self.extended = 0
        #: What to give the wait: the ceiling, which :meth:`check` enforces with its message.
        self.budget = timeout * CEILING if probe is not None else timeout

    def check(self) -> None:
        """Raise what ``check`` raises, or :class:`RequestTimeout` once the time given is up."""
        if self._check is not None:
            self._check()
        if self._probe is None:
            return
        now = time.monotonic()
        if self._before is None and not self.extended:
            # Not yet readable when the wait began (a thread that has not started yet): the
            # first window starts with the first reading.
            self._before = self._probe()
            if self._before is not None:
                self._window = now
        if now - self._window < self.timeout:
            return
        elapsed = now - self.started
        if elapsed >= self.budget:
            raise RequestTimeout(
                f"{self.subject} did not {self.doing} within {self.budget:g} s, the most set-up "
                f"may take ({CEILING} x timeouts.setup), though it was still working")
        after = self._probe()
        before, self._before = self._before, after
        if before is not None and after is not None and making_progress(
                before, after, now - self._window):
            self._window = now
            self.extended += 1
            return
        if not self.extended:
            raise RequestTimeout(f"{self.subject} did not {self.doing} within {self.timeout:g} s")
        raise RequestTimeout(
            f"{self.subject} did not {self.doing} within {elapsed:.0f} s: it worked for "
            f"{self.extended * self.timeout:g} s, then did nothing for {self.timeout:g} s "
            "(timeouts.setup)")
