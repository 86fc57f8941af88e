"""Ending a child process in order, each step bounded in time: ask, EOF, SIGTERM, SIGKILL.

The gentlest step comes first: a child asked to stop saves what it must and exits by itself.
Each later step is harsher and comes only when the one before has had its time. The step that
ended the child names the outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from signal import SIGKILL, SIGTERM

from mosaic.runtime.processes.child import ChildProcess

#: The outcomes of :func:`stop_in_order`: the step during which the child ended, or none did.
STOPPED = "stopped"
EOF = "eof"
TERMINATED = "sigterm"
KILLED = "sigkill"
UNREAPED = "unreaped"
#: The most the ask may take to deliver, out of the ask's share.
ASK_DELIVERY_S = 0.2
#: The least SIGKILL gets, whatever the budget: the kernel needs a moment to end the child.
SIGKILL_MIN_S = 0.2


@dataclass(frozen=True)
class StopSchedule:
    """How long each step of :func:`stop_in_order` waits for the child to end, in seconds.

    ``ask_s`` follows the ask (or, without one, gives a child already asked by other means a
    grace); 0 skips that wait. ``eof_s`` follows the close of its stdin, ``sigterm_s`` SIGTERM,
    ``sigkill_s`` SIGKILL.
    """

    ask_s: float
    sigterm_s: float
    sigkill_s: float
    eof_s: float = 0.0

    @classmethod
    def sharing(cls, budget: float, *, ask: bool = True) -> StopSchedule:
        """Shares of ``budget``: the ask 40 % (none if not ``ask``), EOF 15 %, SIGTERM 30 %,
        SIGKILL the rest, at least :data:`SIGKILL_MIN_S`."""
        return cls(ask_s=budget * 0.4 if ask else 0.0, eof_s=budget * 0.15,
                   sigterm_s=budget * 0.3, sigkill_s=max(budget * 0.15, SIGKILL_MIN_S))


def stop_in_order(child: ChildProcess, schedule: StopSchedule, *,
                  ask: Callable[[float], None] | None = None,
                  close_stdin: Callable[[], None] | None = None) -> str:
    """Stop ``child``, and reap it; returns the outcome: the step that ended it, or ``unreaped``.

    1. ``ask(timeout)`` asks it to stop, taking at most ``timeout`` s (the lesser of
       :data:`ASK_DELIVERY_S` and ``ask_s``); ``ask`` must not raise. Then ``ask_s``:
       :data:`STOPPED`.
    2. ``close_stdin()``, so that it reads EOF (skipped without it); then ``eof_s``: :data:`EOF`.
    3. SIGTERM to its process group; then ``sigterm_s``: :data:`TERMINATED` (``sigterm``).
    4. SIGKILL to its process group; then ``sigkill_s``: :data:`KILLED` (``sigkill``).

    A child that is still there after all of them is :data:`UNREAPED`. At most the sum of the
    schedule and the ask's delivery; the pipes are left to :meth:`ChildProcess.release`.
    """
    if ask is not None:
        ask(min(ASK_DELIVERY_S, schedule.ask_s))
    if schedule.ask_s > 0 and child.wait(schedule.ask_s):
        return STOPPED
    if close_stdin is not None:
        close_stdin()
        if child.wait(schedule.eof_s):
            return EOF
    child.signal(SIGTERM)
    if child.wait(schedule.sigterm_s):
        return TERMINATED
    child.signal(SIGKILL)
    if child.wait(schedule.sigkill_s):
        return KILLED
    return UNREAPED
