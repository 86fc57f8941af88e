"""Reading a child's stderr: every line to the log, the last ones kept to explain a crash."""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import IO

#: A longer line reaches the log in pieces of this many bytes: a child cannot make its parent
#: hold an endless line in memory.
MAX_LINE_BYTES = 8192
#: The level names a child's log lines start with (``%(levelname)s ...``).
_LEVELS = {name: getattr(logging, name) for name in ("DEBUG", "INFO", "WARNING", "ERROR",
                                                     "CRITICAL")}


class StderrReader:
    """Reads ``stream`` to its end on a daemon thread named ``<name>-stderr``, started at once.

    Each line goes to ``log`` at the level its first word names (mosaic's children start their
    log lines with the level name), without that word, since the parent's own log format shows
    the level again; else as it is at ``default_level``. The last ``keep`` lines stay for
    :meth:`lines`. A pipe that breaks or is closed under the reader ends it quietly.
    """

    def __init__(self, stream: IO[bytes], name: str, log: logging.Logger, *,
                 default_level: int, keep: int) -> None:
        self._stream = stream
        self._log = log
        self._default_level = default_level
        self._tail: deque[str] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, name=f"{name}-stderr", daemon=True)
        self.thread.start()

    def lines(self) -> list[str]:
        """The last lines read (at most ``keep``), oldest first."""
        with self._lock:
            return list(self._tail)

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the reader to reach the end; True if it has."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def _read(self) -> None:
        try:
            for raw in iter(lambda: self._stream.readline(MAX_LINE_BYTES), b""):
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._lock:
                    self._tail.append(text)
                first, _, rest = text.partition(" ")
                level = _LEVELS.get(first)
                if level is None or not rest:
                    self._log.log(self._default_level, "%s", text)
                else:
                    self._log.log(level, "%s", rest)
        except (OSError, ValueError):  # the pipe broke, or was closed during the reap
            pass
