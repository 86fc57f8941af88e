"""The exit codes every ``mosaic`` command shares (see the README's table)."""

from __future__ import annotations

import signal

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "EXIT_SIGNAL"]

#: ``0``: everything finished; ``1``: a run (or an operator) failed; ``2``: the input (a file, a
#: store path, an option) is invalid and nothing was started.
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
#: A run cancelled by a signal exits as shells report a process killed by it: 128 + the signal.
#: These are the signals that stop a command in order: Ctrl-C, ``kill``, and SIGHUP, which a
#: closed terminal (or a lost SSH session) sends.
EXIT_SIGNAL: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
