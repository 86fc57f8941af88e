"""Ending a mosaic process promptly once its work is done.

At a normal exit, Python frees every object of every loaded module. With NumPy, Gymnasium,
SQLAlchemy, pydantic and ZeroMQ loaded, that is a few hundred milliseconds of CPU: on a busy
machine (4 CPU-bound processes beside a run on 2 cores) it was 2.5-3 s of the time from Ctrl-C
to the end of the ``mosaic`` command, long after the runs were cancelled, the store closed and
the component processes gone. :func:`exit_process` ends the process without that teardown, after
everything a normal exit does that anyone can see: waiting for the threads that are not daemons,
the ``atexit`` handlers (which include logging's flush), and the flush of stdout and stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

__all__ = ["exit_process", "exit_status"]


def exit_status(stop: SystemExit) -> int:
    """The status a normal exit would give for ``stop``: ``sys.exit(None)`` is 0, an int is
    itself, and anything else is printed on stderr and gives 1, as the interpreter does."""
    code = stop.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def exit_process(status: int) -> NoReturn:
    """End this process with ``status`` as a normal exit would, minus the interpreter's teardown.

    Threads that are not daemons are joined first, then the ``atexit`` handlers run, then stdout
    and stderr are flushed (a closed or broken stream is let be). Only for the main thread of a
    program's entry point: nothing after the call runs, not even ``finally`` clauses of callers.
    """
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)
