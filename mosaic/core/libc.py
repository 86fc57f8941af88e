"""This process's C library through ctypes, for the few calls Python's ``os`` lacks or makes
while holding the GIL (``prctl``, ``sched_setaffinity``)."""

from __future__ import annotations

import ctypes
import functools
import sys


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library (Linux only; None elsewhere, or where it cannot be loaded).

    It is this process's own symbols: ``ctypes.util.find_library`` would start ``ldconfig -p``
    in a subprocess, a fork and an exec in every child's start-up. ``sched_setaffinity`` has its
    argument types declared.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        loaded = ctypes.CDLL(None, use_errno=True)
        loaded.sched_setaffinity.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return loaded
