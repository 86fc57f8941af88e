"""The zygote: one interpreter that has imported what component processes import, and forks
them on request, so that each does not spend a fresh interpreter's imports again.

``python -m mosaic.runtime.processes.zygote --socket-fd N --parent-pid P --preload m1,m2``

It imports the ``--preload`` modules, checks that it is still the only thread of its process
(no thread, no ZeroMQ context: what a fork copies must not be half-held by a thread that the
fork lacks), then serves fork requests on the socket ``N``
(:mod:`~mosaic.runtime.processes.zygote_wire`) until its parent closes the socket, or dies.

Each request is ``python -m MODULE ARGS`` with descriptors. The zygote forks twice: the first
fork forks the process that runs the command and exits at once, so that this process is
re-parented to the zygote's own parent (which adopts orphans:
:func:`~mosaic.core.lifeline.adopt_orphans`). For that parent it is then a child like a spawned
one: it waits for it, signals it and sees its exit status, and the process dies with it through
its own parent-death signal. The process then takes a session of its own, the passed
descriptors at the numbers the request names (``/dev/null`` on stdin, every other descriptor
closed), the command line of the command (:mod:`~mosaic.runtime.processes.title`), fresh random
seeds, and runs ``MODULE`` as ``__main__``, as ``python -m`` would; it exits as that does.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import os
import runpy
import socket
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from mosaic.core.imports import user_folder_last
from mosaic.core.process_exit import exit_process, exit_status
from mosaic.runtime.processes.parent import die_with_parent
from mosaic.runtime.processes.title import set_command_line
from mosaic.runtime.processes.zygote_wire import (
    MAX_FDS,
    MAX_REQUEST_BYTES,
    ForkRequest,
    WireError,
    encode_reply,
)

#: How long a fork waits to be re-parented after its first parent's exit (it is at once).
ADOPTION_WAIT_S = 5.0


@dataclass(frozen=True)
class Fork:
    """In a forked process: the request it runs, and the descriptors passed with it."""

    request: ForkRequest
    passed: tuple[int, ...]
    first_parent: int

    def run(self) -> NoReturn:
        """Become the requested command, run it, and exit as it does, without the teardown
        (see :func:`~mosaic.core.process_exit.exit_process`)."""
        os.setsid()
        deadline = time.monotonic() + ADOPTION_WAIT_S
        while os.getppid() == self.first_parent and time.monotonic() < deadline:
            time.sleep(0.0005)
        self._take_descriptors()
        argv = self.request.argv
        set_command_line(argv)
        _reseed()
        sys.argv = [argv[0], *argv[3:]]
        gc.enable()  # what the zygote imported is frozen: collections here leave it be
        # Run afresh as __main__ (what it imports stays imported), as ``python -m`` would.
        sys.modules.pop(argv[2], None)
        try:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as stop:
            status = exit_status(stop)
        except BaseException:
            sys.excepthook(*sys.exc_info())
            status = 1
        # Without the teardown: freeing the zygote's objects would write to every page the
        # fork shares with it (copy-on-write), a few tenths of a second of CPU for nothing.
        exit_process(status)

    def _take_descriptors(self) -> None:
        targets = self.request.fds
        # Out of the way of every target first, so that no dup2 overwrites a descriptor still
        # to be placed.
        base = max((2, *targets, *self.passed)) + 1
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base) for fd in self.passed]
        for fd in self.passed:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(null, 0)
        for fd, target in zip(moved, targets, strict=True):
            os.dup2(fd, target)  # inheritable, as pass_fds leaves them
        keep = {0, 1, 2, *targets}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                with contextlib.suppress(OSError):
                    os.close(int(name))


def _reseed() -> None:
    # Python's random reseeds itself in a fork (os.register_at_fork); NumPy's global
    # generator does not, and sibling forks would draw the same numbers from it.
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _threads() -> list[str]:
    """The names of this process's threads (just this one where /proc does not say)."""
    names = []
    try:
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read().strip())
    except OSError:
        return ["main"]
    return names


def fork_twice(request: ForkRequest, passed: Sequence[int]) -> Fork | int:
    """Fork the process that runs ``request``, through a first fork that exits at once.

    In the zygote, returns the pid of the second fork; in that fork, the :class:`Fork` to run.
    Raises ``OSError`` if a fork fails.
    """
    read_end, write_end = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # nothing buffered here may be written again by a fork
    try:
        first = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        raise
    if first == 0:
        os.close(read_end)
        first_pid = os.getpid()
        try:
            second = os.fork()
        except OSError:
            os._exit(1)
        if second == 0:
            os.close(write_end)
            return Fork(request, tuple(passed), first_pid)
        os.write(write_end, str(second).encode())
        os._exit(0)
    os.close(write_end)
    try:
        answer = os.read(read_end, 32)
    finally:
        os.close(read_end)
        os.waitpid(first, 0)
    if not answer:
        raise OSError("the first fork could not fork")
    return int(answer)


def serve(control: socket.socket) -> Fork | None:
    """Serve fork requests on ``control`` until its other end closes (returns None); in a fork,
    returns the :class:`Fork` to run."""
    while True:
        try:
            data, passed, flags, _ = socket.recv_fds(control, MAX_REQUEST_BYTES, MAX_FDS)
        except ConnectionError:
            return None
        if not data:
            for fd in passed:
                os.close(fd)
            return None
        forked: Fork | int | None = None
        problem = ""
        try:
            if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
                raise WireError("fork request truncated")
            request = ForkRequest.decode(data)
            if len(passed) != len(request.fds):
                raise WireError(f"{len(passed)} descriptors passed for {len(request.fds)}")
            forked = fork_twice(request, passed)
        except (WireError, OSError) as error:
            problem = f"{type(error).__name__}: {error}"
        if isinstance(forked, Fork):
            control.close()
            return forked
        for fd in passed:  # the fork has its own copies
            os.close(fd)
        try:
            control.send(encode_reply(forked, problem or None))
        except OSError:  # the parent is gone
            return None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    options = dict(zip(args[0::2], args[1::2], strict=False))
    try:
        control = socket.socket(fileno=int(options["--socket-fd"]))
        parent_pid = int(options["--parent-pid"])
    except (KeyError, ValueError, OSError) as error:
        print(f"ERROR zygote: bad arguments {args[:6]!r}: {error}", file=sys.stderr, flush=True)
        return 2
    die_with_parent(parent_pid, check_every=None)  # and the socket's end tells it too
    user_folder_last()  # before the preloads; the forks inherit it (as process_main's own)
    gc.disable()  # no collection leaves holes in the pages the forks are to share
    for module in filter(None, options.get("--preload", "").split(",")):
        try:
            importlib.import_module(module)
        except Exception:  # the fork imports it again, and reports what fails
            print(f"WARNING zygote: cannot preload {module}: "
                  f"{traceback.format_exc(limit=1).strip()}", file=sys.stderr, flush=True)
    threads = _threads()
    if len(threads) > 1:  # a BLAS thread pool (OPENBLAS_NUM_THREADS > 1), or a module's thread
        print(f"WARNING zygote: {len(threads)} threads after its imports ({', '.join(threads)});"
              " it does not fork", file=sys.stderr, flush=True)
        return 1
    gc.freeze()  # the forks' collections leave these objects (and their pages) alone
    forked = serve(control)
    if forked is None:
        os._exit(0)  # nothing to save, and a teardown is only a delay
    forked.run()


if __name__ == "__main__":
    sys.exit(main())
