"""Bounding how much a flood of one event writes to the log.

A server logs every message it rejects, and anyone who can reach a process-placed component's
endpoint can send it garbage as fast as the loopback carries it. Logged one line each, 10,000
garbage frames would be 10,000 lines, written by the component, piped to the run's process and
written again: the log would grow with the attack, and the run would spend its time logging.
A :class:`LogLimiter` logs the first few of each kind of event per time window in full and counts
the rest; one summary line per window says how many were held back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Records of one kind logged in full per window.
DEFAULT_BURST = 5
#: Seconds of one window.
DEFAULT_WINDOW_S = 60.0
#: Kinds tracked per window; more are counted together under :data:`OTHER` (the set of kinds
#: is small by design, this only bounds memory whatever the callers pass).
MAX_KINDS = 32
OTHER = "other"


class LogLimiter:
    """Lets the first ``burst`` events of each kind through per ``window`` seconds.

    :meth:`allow` answers whether one event of ``kind`` may be logged in full; the caller logs
    it if so. Events held back are counted by kind, and logged as one summary line at
    ``level`` on ``logger`` when the window is over: at the next event, at the next
    :meth:`flush` (call it when idle), or at the latest by ``flush(force=True)`` (call it when
    closing). Not thread-safe: one limiter belongs to one thread, as a server does.
    """

    def __init__(self, logger: logging.Logger, name: str, what: str, *,
                 level: int = logging.ERROR, burst: int = DEFAULT_BURST,
                 window: float = DEFAULT_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.name = name
        self.what = what
        self.level = level
        self.burst = burst
        self.window = window
        self._clock = clock
        self._started = clock()
        self._logged: dict[str, int] = {}
        self._held: dict[str, int] = {}

    @property
    def held(self) -> int:
        """Events held back in the current window and not yet summarised."""
        return sum(self._held.values())

    def allow(self, kind: str) -> bool:
        """Count one event of ``kind``; True if it is to be logged in full."""
        now = self._clock()
        if now - self._started >= self.window:
            self._roll(now)
        logged = self._logged
        if kind not in logged and len(logged) >= MAX_KINDS:
            kind = OTHER
        count = logged.get(kind, 0)
        if count < self.burst:
            logged[kind] = count + 1
            return True
        self._held[kind] = self._held.get(kind, 0) + 1
        return False

    def flush(self, force: bool = False) -> None:
        """Summarise held-back events if the window is over (or at once if ``force``)."""
        if not self._held:
            return
        now = self._clock()
        if force or now - self._started >= self.window:
            self._roll(now)

    def _roll(self, now: float) -> None:
        if self._held:
            kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(self._held.items()))
            self.logger.log(self.level, "%s: %d more %s in the last %.0f s, not logged one by one "
                            "(%s)", self.name, sum(self._held.values()), self.what,
                            now - self._started, kinds)
        self._started = now
        self._logged = {}
        self._held = {}
