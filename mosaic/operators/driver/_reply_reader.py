"""A worker's stdout, read into a bounded queue of reply lines.

A line over the protocol's limit arrives as :data:`OVERSIZE`, and :data:`EOF` comes last. The
worker's stderr is read by :class:`~mosaic.runtime.processes.child.ChildProcess`, like every
child's.
"""

from __future__ import annotations

import queue
import threading
from typing import IO, Any

from mosaic.operators import protocol as p
from mosaic.runtime.processes.lines import bounded_lines

EOF = object()
OVERSIZE = object()
#: How often a reader held up by a full queue looks whether it should give up.
_PUT_SLICE_S = 0.1


class ReplyReader:
    """Reads a worker's stdout (:meth:`read`, on the child's stdout thread) into :attr:`replies`.

    ``replies`` holds at most ``max_queued_lines`` items; the reader then waits (back-pressure
    on a chatty worker) until they are taken or :meth:`close` is called. Nothing here waits
    without a bound.
    """

    def __init__(self, max_queued_lines: int) -> None:
        #: stdout lines (bytes) or :data:`OVERSIZE`, then :data:`EOF`.
        self.replies: queue.Queue[Any] = queue.Queue(max_queued_lines)
        self._closing = threading.Event()

    def close(self) -> None:
        """Let a reader held up by a full queue end (nothing more is queued)."""
        self._closing.set()

    def read(self, stream: IO[bytes]) -> None:
        """Queue every line of ``stream`` until its end, then :data:`EOF`."""
        try:
            for line in bounded_lines(stream, p.MAX_LINE_BYTES):
                self._put(OVERSIZE if line is None else line)
        except (OSError, ValueError):  # the pipe was closed under us during stop()
            pass
        finally:
            self._put(EOF)

    def _put(self, item: Any) -> None:
        while not self._closing.is_set():
            try:
                self.replies.put(item, timeout=_PUT_SLICE_S)
                return
            except queue.Full:
                continue
