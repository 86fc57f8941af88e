"""The parent's side of a zygote: start it, have it fork component processes, end it.

Starting a component process as a fresh interpreter costs it its imports (NumPy, Gymnasium,
mosaic's actors and transport: about 0.3 s of CPU each), and many of them on a few cores start
slowly. A :class:`Zygote` pays those imports once, in a process of its own started like every
other child (spawned: nothing is inherited), and forks each component process from there
(:mod:`mosaic.runtime.processes.zygote`). Forks are re-parented to this process, which adopts
orphans for that (:func:`~mosaic.core.lifeline.adopt_orphans`), so each is supervised as a
spawned child would be (:class:`~mosaic.runtime.processes.adopted.AdoptedProcess`).

:func:`fork_process` is what placements call: a fork of this process's zygote for a command
it can run, else None, and they spawn. A zygote that fails once (it died, did not answer within
:data:`FORK_REPLY_S`, or could not fork) is given up: that start and every later one spawn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import IO

from mosaic.core.lifeline import adopt_orphans
from mosaic.runtime.processes.adopted import AdoptedProcess
from mosaic.runtime.processes.child import ChildProcess, StartedProcess, spawn
from mosaic.runtime.processes.title import ROOM_BYTES
from mosaic.runtime.processes.zygote_wire import ForkRequest, WireError, decode_reply

log = logging.getLogger(__name__)

#: How long a fork request waits for its reply, the zygote's imports included on a busy machine.
FORK_REPLY_S = 20.0
#: How long a failed zygote's last words (its stderr) are waited for, to say why it failed.
GIVE_UP_DRAIN_S = 0.5
#: How long a killed zygote is waited for.
CLOSE_WAIT_S = 1.0

_current: Zygote | None = None
_current_lock = threading.Lock()


class ZygoteUnavailable(Exception):
    """The zygote cannot fork this command (see the message); spawn it instead."""


class Zygote:
    """A zygote process that has imported ``preload``, and forks ``python -m`` commands of
    those modules for this process.

    Construction starts it and returns at once: it imports meanwhile, and the first
    :meth:`fork` waits for that. Raises :class:`ZygoteUnavailable` where this system cannot
    re-parent its forks here (not Linux). Start it from a thread that outlives it (the
    parent-death signal, see :mod:`mosaic.core.lifeline`); it ends with :meth:`close`, or when
    this process ends.
    """

    def __init__(self, preload: Iterable[str]) -> None:
        self.preload = frozenset(preload)
        if not adopt_orphans():
            raise ZygoteUnavailable("this system cannot re-parent a zygote's forks")
        self._socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, "-m", "mosaic.runtime.processes.zygote",
                   "--socket-fd", str(theirs.fileno()), "--parent-pid", str(os.getpid()),
                   "--preload", ",".join(sorted(self.preload)),
                   "--room", " " * ROOM_BYTES]  # its forks' command lines go there
        try:
            process = spawn(command, pass_fds=(theirs.fileno(),))
        except BaseException:
            self._socket.close()
            raise
        finally:
            theirs.close()
        self._child = ChildProcess(process, "zygote", read_stdout=_discard,
                                   log=logging.getLogger("mosaic.zygote"),
                                   default_level=logging.WARNING, keep_lines=10)
        self._lock = threading.Lock()
        self._broken: str | None = None

    @property
    def pid(self) -> int:
        return self._child.pid

    def can_run(self, argv: Sequence[str]) -> bool:
        """True if ``argv`` is ``[this python, "-m", a preloaded module, ...]`` and the zygote
        has not been given up."""
        return (self._broken is None and len(argv) >= 3 and argv[0] == sys.executable
                and argv[1] == "-m" and argv[2] in self.preload)

    def fork(self, argv: Sequence[str], *, pass_fds: Sequence[int] = ()) -> AdoptedProcess:
        """Run ``argv`` in a fork, as :func:`~mosaic.runtime.processes.child.spawn` would.

        The fork has a session of its own, pipes on stdout and stderr, ``/dev/null`` on stdin,
        and no descriptor but ``pass_fds`` (at the same numbers); it inherits the zygote's
        environment and working directory (this process's when the zygote started). Blocks
        until the zygote answers, at most :data:`FORK_REPLY_S`; raises
        :class:`ZygoteUnavailable` (and gives the zygote up) if it cannot fork.
        """
        stdout_read, stdout_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        request = ForkRequest(tuple(argv), (1, 2, *pass_fds))
        try:
            with self._lock:
                pid = self._ask(request, [stdout_write, stderr_write, *pass_fds])
        except BaseException:
            os.close(stdout_read)
            os.close(stderr_read)
            raise
        finally:
            os.close(stdout_write)
            os.close(stderr_write)
        stdout: IO[bytes] = open(stdout_read, "rb")  # noqa: SIM115 (the child's to close)
        stderr: IO[bytes] = open(stderr_read, "rb")  # noqa: SIM115
        return AdoptedProcess(pid, argv, stdout, stderr)

    def _ask(self, request: ForkRequest, fds: list[int]) -> int:
        if self._broken is not None:
            raise ZygoteUnavailable(self._broken)
        try:
            self._socket.settimeout(FORK_REPLY_S)
            socket.send_fds(self._socket, [request.encode()], fds)
            reply = self._socket.recv(4096)
            if reply:
                return decode_reply(reply)
            reason = "it ended"
        except (OSError, WireError) as error:  # a timeout is an OSError too
            reason = f"{type(error).__name__}: {error}"
        raise ZygoteUnavailable(self._give_up(reason))

    def _give_up(self, reason: str) -> str:
        """Kill the zygote for ``reason``, say so in the log, and return what was said."""
        self._child.drain_stderr(GIVE_UP_DRAIN_S)
        tail = " | ".join(self._child.stderr_lines()[-3:])
        cause = self._child.exit_cause()
        self._broken = (f"zygote {self.pid}: {reason}" + (f" ({cause})" if cause else "")
                        + (f"; last output: {tail}" if tail else ""))
        log.warning("%s; component processes start as fresh interpreters", self._broken)
        self._socket.close()
        self._child.kill(CLOSE_WAIT_S)
        self._child.release()
        return self._broken

    def close(self) -> None:
        """End the zygote now (it holds nothing to save: SIGKILL), and reap it; orphans are
        no longer adopted here.

        Its forks are not its children: they live on with this process. Idempotent.
        """
        with self._lock:
            if self._broken is None:
                self._broken = "closed"
                self._socket.close()
                self._child.kill(CLOSE_WAIT_S)
                self._child.release()
                adopt_orphans(False)


def _discard(stdout: IO[bytes]) -> None:
    for _ in stdout:  # the zygote writes nothing there; read to the end all the same
        pass


def start_zygote(preload: Iterable[str]) -> Zygote | None:
    """Start this process's zygote, which :func:`fork_process` then forks from; return it, or
    None where it cannot start (said in the debug log). With one already open, return that.

    Call from a thread that outlives the zygote (the main thread), and :func:`close_zygote`
    when done.
    """
    global _current
    with _current_lock:
        if _current is None:
            try:
                _current = Zygote(preload)
            except (ZygoteUnavailable, OSError) as error:
                log.debug("no zygote: %s", error)
        return _current


def current_zygote() -> Zygote | None:
    """This process's zygote, if one is open."""
    return _current


def close_zygote() -> None:
    """End this process's zygote, if it has one (see :meth:`Zygote.close`)."""
    global _current
    with _current_lock:
        zygote, _current = _current, None
    if zygote is not None:
        zygote.close()


def fork_process(argv: Sequence[str], *, pass_fds: Sequence[int] = ()) -> StartedProcess | None:
    """A fork of this process's zygote running ``argv`` (see :meth:`Zygote.fork`), or None if
    there is no zygote that can run it (:meth:`Zygote.can_run`) or it failed now.

    A zygote that failed to answer in time may still fork ``argv`` later, with ``pass_fds``:
    whoever starts ``argv`` another way must give it descriptors of its own (new pipes), so
    that such a late fork shares nothing with it. Blocks while the zygote answers (at most
    :data:`FORK_REPLY_S`).
    """
    zygote = _current
    if zygote is not None and zygote.can_run(argv):
        with contextlib.suppress(ZygoteUnavailable):  # said in the log, once
            return zygote.fork(argv, pass_fds=pass_fds)
    return None

