"""The two daemon threads that read a worker's stdout and stderr pipes.

stdout lines go to a bounded queue, from which the handle takes its replies: a line over the
protocol's limit arrives as :data:`OVERSIZE`, and :data:`EOF` comes last. stderr lines go to a
bounded tail, kept for crash reports, and to ``logging`` (logger
``mosaic.operators.worker.<operator_id>``, at the level the line starts with, else INFO).
"""

from __future__ import annotations

import logging
import queue
import subprocess
import threading
from collections import deque
from typing import Any

from mosaic.operators import protocol as p

EOF = object()
OVERSIZE = object()
_LEVELS = {name: getattr(logging, name) for name in ("DEBUG", "INFO", "WARNING", "ERROR",
                                                     "CRITICAL")}


class PipeReaders:
    """Reads ``process``'s stdout and stderr on two daemon threads, started at once.

    ``replies`` holds at most ``max_queued_lines`` stdout items (the stdout reader then waits:
    back-pressure on a chatty worker), ``stderr_tail`` the last ``tail_lines`` stderr lines.
    Nothing here waits without a bound.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        operator_id: str,
        *,
        max_queued_lines: int,
        tail_lines: int,
    ) -> None:
        self.process = process
        #: stdout lines (bytes) or :data:`OVERSIZE`, then :data:`EOF`.
        self.replies: queue.Queue[Any] = queue.Queue(max_queued_lines)
        self._stderr: deque[str] = deque(maxlen=tail_lines)
        self._stderr_lock = threading.Lock()
        self._closing = threading.Event()
        self._worker_log = logging.getLogger(f"mosaic.operators.worker.{operator_id}")
        self.stdout_thread = threading.Thread(
            target=self._read_stdout, name=f"{operator_id}-stdout", daemon=True)
        self.stderr_thread = threading.Thread(
            target=self._read_stderr, name=f"{operator_id}-stderr", daemon=True)
        self.stdout_thread.start()
        self.stderr_thread.start()

    def stderr_tail(self, max_chars: int) -> str:
        """The last lines the worker wrote to stderr (at most ``max_chars`` characters)."""
        with self._stderr_lock:
            text = "\n".join(self._stderr)
        return text[-max_chars:]

    def close(self) -> None:
        """Stop the readers and close each pipe whose reader has ended (0.5 s per thread)."""
        self._closing.set()
        for thread, stream in ((self.stdout_thread, self.process.stdout),
                               (self.stderr_thread, self.process.stderr)):
            thread.join(timeout=0.5)
            if not thread.is_alive() and stream is not None:
                stream.close()

    def _put(self, item: Any) -> None:
        while not self._closing.is_set():
            try:
                self.replies.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _read_stdout(self) -> None:
        stream = self.process.stdout
        if stream is None:
            self._put(EOF)
            return
        try:
            while True:
                line = stream.readline(p.MAX_LINE_BYTES + 1)
                if not line:
                    break
                if len(line) > p.MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):
                        line = stream.readline(p.MAX_LINE_BYTES)
                    self._put(OVERSIZE)
                    continue
                if line.strip():
                    self._put(line)
        except (OSError, ValueError):  # the pipe was closed under us during stop()
            pass
        finally:
            self._put(EOF)

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        if stream is None:
            return
        try:
            for raw in iter(lambda: stream.readline(8192), b""):
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._stderr_lock:
                    self._stderr.append(text)
                level = _LEVELS.get(text.split(" ", 1)[0], logging.INFO)
                self._worker_log.log(level, "%s", text)
        except (OSError, ValueError):
            pass
