"""The parent's side of a child process: start it, read it, tell how it ended, signal it, reap it.

Every child mosaic starts (component processes, operator workers) runs in a session of its own,
so that a Ctrl-C at the terminal reaches only mosaic, which then stops its children in order,
and so that a signal to the child's process group also reaches whatever the child started.
The ordered stop is in :mod:`mosaic.runtime.processes.stop`; the child's own side (it dies with
its parent) in :mod:`mosaic.runtime.processes.parent`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Protocol

from mosaic.core.affinity import unpin_process
from mosaic.runtime.processes.stderr import StderrReader

#: How long :meth:`ChildProcess.release` waits in all for the pipe readers to reach the end.
RELEASE_READERS_S = 1.0


class StartedProcess(Protocol):
    """What a :class:`ChildProcess` needs of a started process: a ``subprocess.Popen``, or an
    :class:`~mosaic.runtime.processes.adopted.AdoptedProcess` (a fork of a zygote)."""

    @property
    def pid(self) -> int: ...
    @property
    def stdin(self) -> IO[bytes] | None: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status; raises ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        ...

    def send_signal(self, sig: int) -> None: ...


def spawn(argv: Sequence[str], *, stdin: bool = False, env: Mapping[str, str] | None = None,
          cwd: str | None = None, pass_fds: Sequence[int] = ()) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, with pipes on its stdout and stderr.

    Its stdin is a pipe if ``stdin``, else ``/dev/null``. It inherits no descriptor but
    ``pass_fds``; ``env`` (default: this process's) and ``cwd`` as for ``subprocess.Popen``.
    Returns at once; raises ``OSError`` if the program cannot be started.
    """
    return subprocess.Popen(
        list(argv), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
        start_new_session=True, close_fds=True, pass_fds=tuple(pass_fds),
    )


def describe_exit(code: int | None) -> str:
    """How a process ended, from its exit status: ``exit code 3`` or ``killed by SIGKILL``.

    A signal without a name reads ``killed by signal N``; no status at all (``None``), ``exit
    status unknown``.
    """
    if code is None:
        return "exit status unknown"
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


class ChildProcess:
    """A started child: its output read, its end observed, its signals sent, its pipes reaped.

    ``process`` is started with pipes on stdout and stderr (see :func:`spawn` and
    :func:`~mosaic.runtime.processes.zygote_client.fork_process`); a missing pipe
    reads as empty. From construction on, daemon threads read both: ``read_stdout`` gets the
    stdout stream and reads it to its end (on ``<name>-stdout``), and a :class:`StderrReader`
    sends stderr to ``log`` (``default_level`` for lines without a level name) and keeps the
    last ``keep_lines`` lines. A ``pinned`` child (bound to one CPU) is unpinned before it is
    signalled: on its way out it must not queue for one busy CPU while another is free.
    Nothing here waits without a bound; every method is safe from any thread.
    """

    def __init__(self, process: StartedProcess, name: str, *,
                 read_stdout: Callable[[IO[bytes]], None], log: logging.Logger,
                 default_level: int, keep_lines: int, pinned: bool = False) -> None:
        self.process = process
        self.name = name
        self._pinned = pinned
        self._stdout_reader = threading.Thread(
            target=read_stdout, args=(process.stdout or io.BytesIO(),), name=f"{name}-stdout",
            daemon=True)
        self._stdout_reader.start()
        self._stderr = StderrReader(process.stderr or io.BytesIO(), name, log,
                                    default_level=default_level, keep=keep_lines)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exit_code(self) -> int | None:
        """The exit status (negative: killed by that signal), or None while it runs."""
        return self.process.poll()

    def alive(self) -> bool:
        """True until the child has exited."""
        return self.process.poll() is None

    def exit_cause(self) -> str | None:
        """:func:`describe_exit` of its exit status, or None while it runs."""
        code = self.process.poll()
        return None if code is None else describe_exit(code)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the child to exit, and reap it; True if it has."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's process group (to the child alone if it leads none).

        Nothing is sent to a child that has exited. Never raises.
        """
        if self.process.poll() is not None:
            return
        if self._pinned:
            unpin_process(self.pid)
        try:
            if os.getpgid(self.pid) == self.pid:  # its own session: reach what it started too
                os.killpg(self.pid, sig)
            else:
                self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass  # it exited meanwhile

    def kill(self, timeout: float) -> bool:
        """SIGKILL its process group, then wait up to ``timeout`` s for it; True if reaped."""
        self.signal(signal.SIGKILL)
        return self.wait(timeout)

    def stderr_lines(self) -> list[str]:
        """The last lines it wrote to stderr, oldest first."""
        return self._stderr.lines()

    def drain_stderr(self, timeout: float) -> None:
        """Give the stderr reader up to ``timeout`` s to read what a dead child left in the pipe."""
        self._stderr.join(timeout)

    def release(self) -> None:
        """After its end: close its stdin, wait up to :data:`RELEASE_READERS_S` s in all for
        the readers to reach the end of their pipes, and close each pipe whose reader ended.

        A pipe whose reader is still blocked (a grandchild holds it open) is left to it: closing
        it under the reader would wait for that read. Idempotent.
        """
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        deadline = time.monotonic() + RELEASE_READERS_S
        for reader, stream in ((self._stdout_reader, self.process.stdout),
                               (self._stderr.thread, self.process.stderr)):
            reader.join(max(0.0, deadline - time.monotonic()))
            if not reader.is_alive() and stream is not None:
                stream.close()
