"""A child this process did not fork itself, but waits for as its parent: a fork of its zygote,
re-parented here (see :mod:`mosaic.runtime.processes.zygote`).

:class:`AdoptedProcess` answers what :class:`subprocess.Popen` answers
(:class:`~mosaic.runtime.processes.child.StartedProcess`), so a
:class:`~mosaic.runtime.processes.child.ChildProcess` supervises either the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO

log = logging.getLogger(__name__)

#: The longest sleep between two looks while waiting for the child to exit.
_MAX_POLL_S = 0.05


class AdoptedProcess:
    """Process ``pid``, a child of this process, with ``stdout`` and ``stderr`` pipes from it
    and ``/dev/null`` on its stdin (``stdin`` is None).

    As with ``Popen``: :meth:`poll` and :meth:`wait` reap it and set :attr:`returncode`
    (negative: killed by that signal); :meth:`send_signal` sends nothing once it is reaped, so
    a signal never reaches another process that took its pid. Safe from any thread.
    """

    stdin: IO[bytes] | None = None

    def __init__(self, pid: int, args: Sequence[str], stdout: IO[bytes],
                 stderr: IO[bytes]) -> None:
        self.pid = pid
        self.args = list(args)
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        """Its exit status if it has exited (and is now reaped), else None. Never blocks."""
        if self.returncode is not None or not self._lock.acquire(blocking=False):
            return self.returncode
        try:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    # Not (or no longer) this process's to wait for: its status is lost.
                    # Popen reads that as 0; say so in the log, since nothing else will.
                    log.warning("process %d ended without an exit status for mosaic", self.pid)
                    self.returncode = 0
                else:
                    if pid == self.pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
        finally:
            self._lock.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` s (None: for ever) for it to exit, and reap it; its exit
        status. Raises :class:`subprocess.TimeoutExpired` after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:
            remaining = _MAX_POLL_S if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(min(delay, remaining, _MAX_POLL_S))
            delay *= 2
        return code

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to it, unless it has exited."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
