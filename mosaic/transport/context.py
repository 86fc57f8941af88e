"""The one ZeroMQ context of this process."""

from __future__ import annotations

import os
import threading

import zmq

_lock = threading.Lock()
_context: zmq.Context[zmq.Socket[bytes]] | None = None
_owner_pid: int | None = None
_io_cpu: int | None = None


def pin_io_threads(cpu: int | None) -> None:
    """Run this process's ZeroMQ I/O threads on ``cpu``; takes effect if no socket exists yet.

    ipc and tcp messages pass through the I/O threads, so they belong with the step loop's
    threads (see :mod:`mosaic.core.affinity`).
    """
    global _io_cpu
    _io_cpu = cpu


def context() -> zmq.Context[zmq.Socket[bytes]]:
    """Return this process's ZeroMQ context, creating it on first use.

    ``linger`` is set to 0 before any socket exists, so closing a socket never waits for
    undelivered messages and interpreter exit cannot hang on them. A child process gets its own
    context (the check on the pid guards against a context inherited through ``fork``).
    """
    global _context, _owner_pid
    pid = os.getpid()
    if _context is not None and _owner_pid == pid:
        return _context
    with _lock:
        if _context is None or _owner_pid != pid:
            ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
            ctx.linger = 0
            if _io_cpu is not None:
                ctx.set(zmq.THREAD_AFFINITY_CPU_ADD, _io_cpu)
            _context = ctx
            _owner_pid = pid
        return _context


#: How long a closing server keeps its unsent replies (ms): a component's last reply is the
#: answer to its shutdown, sent just before its process ends.
REPLY_LINGER_MS = 1000


def deliver_pending(timeout: float) -> bool:
    """Wait up to ``timeout`` s for the messages this process's closed sockets still hold (a
    server's last replies, kept :data:`REPLY_LINGER_MS`) to be handed to the operating system;
    True if that finished. Closes every socket still open, dropping what they hold, and ends
    the context. For a process whose components have stopped and that is about to end without
    the interpreter's teardown (:func:`mosaic.core.process_exit.exit_process`): its ZeroMQ I/O
    thread would otherwise die with the answer to the run's last request, its shutdown. No
    other thread may use a socket any more (stop the gatekeeper first)."""
    ctx = _context
    if ctx is None or _owner_pid != os.getpid():
        return True
    ending = threading.Thread(target=ctx.destroy, kwargs={"linger": 0}, name="zmq-end",
                              daemon=True)
    ending.start()
    ending.join(timeout)
    return not ending.is_alive()
