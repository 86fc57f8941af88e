"""A forked process's command line: what ``ps`` and ``/proc/PID/cmdline`` show of it.

A process forked from a zygote (:mod:`mosaic.runtime.processes.zygote`) inherits the zygote's
command line. So that ``ps`` (and whoever looks for a component by its command line) sees what
the process is, the same command line as a spawned one's, the fork writes that command line over
the memory the kernel reads it from: the original ``argv`` strings, one after the other. That
room is fixed at the start of the zygote, which asks for enough of it (:data:`ROOM_BYTES`).

Why not the ``setproctitle`` package: it sets a *title*, one string, which ``/proc/PID/cmdline``
then holds as a single argument followed by NULs, and it refuses a NUL inside the string. ``ps``
would show the same text, but whoever reads the command line as arguments, split on NULs (the
tests that find a component by its ``mosaic.runtime.process_main KIND UID`` arguments, or any
tool that reads it as argv) would get one argument. A fork here shows its arguments one string
each, as a spawned process does.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

#: The room a zygote's command line reserves for the command lines of its forks.
ROOM_BYTES = 2048
#: Fields 48 and 49 of /proc/PID/stat: where the argv strings start and end (Linux 3.5+),
#: counted after the command name's closing parenthesis, which ends field 2.
_ARG_START_FIELD = 48 - 3
_ARG_END_FIELD = 49 - 3


def argv_room() -> tuple[int, int] | None:
    """Where this process's argv strings lie in its memory (start, end), or None if unknown."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        start, end = int(fields[_ARG_START_FIELD]), int(fields[_ARG_END_FIELD])
    except (OSError, ValueError, IndexError):
        return None
    return (start, end) if 0 < start < end else None


def set_command_line(argv: Sequence[str]) -> bool:
    """Show ``argv`` as this process's command line; True if it fit whole.

    The strings are written NUL-separated over the original ones, and the rest of that room is
    cleared (``ps`` shows trailing blanks); what does not fit is cut. The last byte stays NUL,
    so the kernel reads the room as argv strings, not as a single title. Call only where nothing
    uses the original argv strings any more (Python keeps copies): in a fork.
    """
    room = argv_room()
    if room is None:
        return False
    start, end = room
    size = end - start
    wanted = b"".join(arg.encode() + b"\0" for arg in argv)
    fits = len(wanted) <= size
    text = wanted[:size - 1].ljust(size, b"\0")
    ctypes.memmove(start, text, size)
    return fits
