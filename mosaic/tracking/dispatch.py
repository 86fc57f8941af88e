"""The tracking thread: the sinks' work, off the runs' threads, behind a bounded queue.

The tee puts what the sinks are to log (a run's start and end, its scalars) on a queue and
returns at once; one daemon thread takes everything queued off every :data:`DRAIN_S` seconds (a
run's step loop never wakes it) and calls each sink (:mod:`mosaic.tracking.sink`) in order.
Nothing here blocks a caller or raises to one:

* the queue holds at most :data:`QUEUE_POINTS` scalars; past that, new scalars are dropped, with
  one warning (a run's start and end always get in: the sinks close their runs);
* a sink that raises is turned off, with one warning, and the others go on;
* :meth:`Dispatcher.close` gives the sinks what was queued before it, lets them close (TensorBoard's
  files flushed, MLflow's runs ended) and waits for that a bounded time.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from mosaic.tracking.sink import Point, RunEnd, RunStart, Sink

__all__ = ["DRAIN_S", "QUEUE_POINTS", "TICK_S", "Dispatcher"]

log = logging.getLogger("mosaic.tracking")

#: The most scalars that wait for the sinks; past it, new ones are dropped.
QUEUE_POINTS = 200_000
#: How often the thread takes what is queued, in seconds.
DRAIN_S = 0.25
#: How often the sinks get a tick (to write what is due), in seconds.
TICK_S = 1.0

_START, _SCALARS, _FINISH = "start", "scalars", "finish"
_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@/\s]*@")


def describe(error: BaseException) -> str:
    """``error`` on one line, at most 300 characters, with a URL's password as ``***``."""
    text = " ".join(str(error).split()) or "(no message)"
    text = _PASSWORD.sub(r"\1***@", f"{type(error).__name__}: {text}")
    return text if len(text) <= 300 else f"{text[:297]}..."


class Dispatcher:
    """Calls ``sinks`` from a thread of its own with what :meth:`start`, :meth:`scalars` and
    :meth:`finish` queue (from any thread; they never block), until :meth:`close`."""

    def __init__(self, sinks: Sequence[Sink], *, limit: int = QUEUE_POINTS,
                 tick_s: float = TICK_S) -> None:
        self._live = list(sinks)
        self._limit = limit
        self._tick_s = tick_s
        self._items: deque[tuple[str, Any, int]] = deque()
        self._pending = 0
        self._dropped = 0
        self._stopping = False
        self._ready = threading.Condition(threading.Lock())
        self._thread = threading.Thread(target=self._main, name="mosaic-tracking", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """How many scalars were dropped because the queue was full."""
        return self._dropped

    @property
    def sinks(self) -> list[Sink]:
        """The sinks still on (a copy)."""
        return list(self._live)

    def start(self, run: RunStart) -> None:
        self._put(_START, run, 0)

    def scalars(self, run: str, points: list[Point]) -> None:
        if points:
            self._put(_SCALARS, (run, points), len(points))

    def finish(self, run: RunEnd) -> None:
        self._put(_FINISH, run, 0)

    def close(self, timeout: float) -> None:
        """Give the sinks everything queued so far, close them, and wait up to ``timeout``
        seconds for that (then say what may be lost, and go on). Idempotent."""
        with self._ready:
            self._stopping = True
            self._ready.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("%s did not finish within %g s; what was not logged by then "
                        "is lost", " and ".join(sink.name for sink in self.sinks) or "a sink",
                        timeout)

    # -- the caller's side ----------------------------------------------------------------
    def _put(self, kind: str, payload: Any, points: int) -> None:
        with self._ready:
            if self._stopping or not self._live:
                return
            # A run's start and end always get in, whatever waits: they are few.
            if points and self._pending + points > self._limit:
                self._dropped += points
                first = self._dropped == points
            else:
                self._items.append((kind, payload, points))
                self._pending += points
                return
        if first:
            log.warning("more than %d scalars wait for %s; newer ones are dropped "
                        "until it catches up (the store records everything)", self._limit,
                        " and ".join(sink.name for sink in self.sinks))

    # -- the thread -----------------------------------------------------------------------
    def _main(self) -> None:
        next_tick = time.monotonic() + self._tick_s
        while True:
            with self._ready:
                if not self._stopping:
                    self._ready.wait(DRAIN_S)  # only close() wakes it sooner
                items = list(self._items)
                self._items.clear()
                self._pending = 0
                stopping = self._stopping
            for kind, payload, _ in items:
                self._deliver(kind, payload)
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + self._tick_s
                for sink in list(self._live):
                    self._call(sink, sink.tick, now)
            if stopping:
                for sink in list(self._live):
                    self._call(sink, sink.close)
                return

    def _deliver(self, kind: str, payload: Any) -> None:
        for sink in list(self._live):
            if kind == _SCALARS:
                self._call(sink, sink.scalars, *payload)
            elif kind == _START:
                self._call(sink, sink.start, payload)
            else:
                self._call(sink, sink.finish, payload)

    def _call(self, sink: Sink, method: Any, *args: Any) -> None:
        try:
            method(*args)
        except Exception as error:
            with self._ready:
                self._live.remove(sink)
            log.warning("%s failed and is off from now on (the runs go on): %s",
                        sink.name, describe(error))
            try:
                if method != sink.close:
                    sink.close()
            except Exception as closing:
                log.debug("%s did not close: %s", sink.name, describe(closing))
