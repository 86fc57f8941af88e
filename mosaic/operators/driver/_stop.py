"""Stopping a worker process in escalating steps, each bounded by a share of one time budget."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable

from mosaic.core.errors import WorkerError


def escalate_stop(
    process: subprocess.Popen[bytes],
    budget: float,
    *,
    send_stop: Callable[[float], None] | None,
    close_stdin: Callable[[], None],
) -> str:
    """Stop ``process``; returns the step that ended it, or ``unreaped``.

    Steps, each bounded by a share of ``budget`` seconds: ``send_stop(timeout)`` sends the
    ``stop`` command unless it is None (40 %; a WorkerError from it is ignored), ``stopped``;
    ``close_stdin()`` so that the worker sees EOF (15 %), ``eof``; SIGTERM to its process group
    (30 %), ``sigterm``; SIGKILL (the rest, at least 0.2 s), ``sigkill``.
    """
    if send_stop is not None:
        try:
            send_stop(min(0.2, budget * 0.4))
        except WorkerError:
            pass
        if _wait(process, budget * 0.4):
            return "stopped"
    close_stdin()
    if _wait(process, budget * 0.15):
        return "eof"
    _signal(process, signal.SIGTERM)
    if _wait(process, budget * 0.3):
        return "sigterm"
    _signal(process, signal.SIGKILL)
    if _wait(process, max(budget * 0.15, 0.2)):
        return "sigkill"
    return "unreaped"


def _wait(process: subprocess.Popen[bytes], timeout: float) -> bool:
    try:
        process.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def _signal(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is not None:
        return
    try:
        if os.getpgid(process.pid) == process.pid:  # own session: the signal reaches its children
            os.killpg(process.pid, sig)
        else:
            process.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass
