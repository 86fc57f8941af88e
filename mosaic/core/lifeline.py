"""What the operating system says of a child's lifeline: the parent-death signal, the adoption of
orphans, and whether a process exists. How a child uses them is
:mod:`mosaic.runtime.processes.parent`'s business."""

from __future__ import annotations

import os
import signal

from mosaic.core.libc import libc as load_libc

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    libc = load_libc()
    if libc is None:
        return False
    try:
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except AttributeError:
        return False


def arm_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent ends (Linux only).

    Returns whether it was armed. Linux sends the signal when the parent *thread* that started
    this process ends, so start children from threads that outlive them.
    """
    return _prctl(_PR_SET_PDEATHSIG, int(sig))


def adopt_orphans(adopt: bool = True) -> bool:
    """Make this process the parent of its descendants whose own parent ends (Linux only);
    with ``adopt=False``, no longer.

    An orphan is then re-parented to this process, not to init: it can be waited for with
    ``os.waitpid`` like a child started here, and its parent-death signal fires with this
    process. Orphans nobody waits for stay zombies until this process exits. Returns whether
    the kernel agreed.
    """
    return _prctl(_PR_SET_CHILD_SUBREAPER, int(adopt))


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
