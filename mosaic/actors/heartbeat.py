"""Heartbeats: how a run tells a component process that hangs from one that is merely busy.

A process that exits is seen at once (its exit code). A process that stops answering without
exiting (stopped by SIGSTOP, swapped out, frozen in a native call that holds the GIL, deadlocked
in its interpreter) is not. So every component process beats: a daemon thread writes one byte
to a pipe of its own every :data:`INTERVAL_S` seconds, and the parent reads the pipe in a thread
of its own and keeps the time of the last beat. A process whose last beat is older than the
run's ``timeouts.heartbeat`` has stopped answering, and the run fails naming it.

The beat comes from a thread beside the component's actor, so a component that is busy for a
long time in Python code (a slow LLM call, a long episode reset) keeps beating: that is the
business of ``timeouts.step``, not of liveness. The pipe is not the component's ZeroMQ socket, so
nothing a peer sends there can delay or fake a beat, and a child's own stdout stays its own.
"""

from __future__ import annotations

import os
import threading
import time

#: Seconds between two beats of a component process.
INTERVAL_S = 0.5
#: Default seconds without a beat after which a component process counts as hung.
DEFAULT_TIMEOUT_S = 2.5


def start_beating(fd: int, interval: float = INTERVAL_S) -> threading.Thread:
    """In a component process: beat on ``fd`` from a daemon thread until the reader is gone."""

    def beat() -> None:
        try:
            while True:
                os.write(fd, b".")
                time.sleep(interval)
        except OSError:  # the parent closed its end or ended: nobody listens any more
            pass
        finally:
            os.close(fd)

    thread = threading.Thread(target=beat, name="mosaic-heartbeat", daemon=True)
    thread.start()
    return thread


class HeartbeatMonitor:
    """In the parent: the read end of one child's heartbeat pipe and the time of its last beat.

    Create it before starting the child, pass :attr:`child_fd` to the child (``pass_fds``),
    then call :meth:`started` once the child runs, which closes the parent's copy of the write
    end and starts reading. Silence is only counted from the first beat on: a child still
    starting is the business of the start-up timeout.
    """

    def __init__(self, name: str) -> None:
        self._read_fd, self.child_fd = os.pipe()
        self._name = name
        self._last_beat: float | None = None
        self._reader: threading.Thread | None = None

    def started(self) -> None:
        os.close(self.child_fd)
        self._reader = threading.Thread(target=self._read, name=f"{self._name}-heartbeat",
                                        daemon=True)
        self._reader.start()

    def abandon(self) -> None:
        """The child could not be started: close both ends."""
        for fd in (self.child_fd, self._read_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read(self) -> None:
        try:
            while os.read(self._read_fd, 64):
                self._last_beat = time.monotonic()
        except OSError:
            pass
        finally:
            os.close(self._read_fd)

    def silence(self) -> float | None:
        """Seconds since the last beat, or None before the first one."""
        last = self._last_beat
        return None if last is None else time.monotonic() - last

    def join(self, timeout: float) -> None:
        """Wait for the reader to see the pipe close (the child has ended)."""
        if self._reader is not None:
            self._reader.join(timeout)
