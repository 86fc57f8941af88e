"""What the operating system says of a child's lifeline: the parent-death signal, and whether a
process exists. How a child uses them is :mod:`mosaic.runtime.processes.parent`'s business."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def arm_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent ends (Linux only).

    Returns whether it was armed. Linux sends the signal when the parent *thread* that started
    this process ends, so start children from threads that outlive them.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def process_exists(pid: int) -> bool:
    """True if a process ``pid`` exists, whoever owns it (a zombie counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    except OSError:
        return False
    return True

