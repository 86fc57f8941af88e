"""Whether a run the store marks ``running`` is still alive, or ``interrupted``.

A run of this host is judged by its process (alive, not a zombie, and not a recycled pid); a run
of another host by the age of its heartbeat. The verdict is computed when reading, never stored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mosaic.core.lifeline import process_exists
from mosaic.core.run_states import RunStatus

# A running run on another host whose heartbeat is older than this (seconds) is interrupted.
STALE_AFTER = 300.0
# Slack when comparing a process's start time with its run's start (clock and /proc rounding).
_START_SLACK = 10.0


def run_status(row: Any, now: float, hostname: str, stale_after: float) -> str:
    """The status to report for the run ``row`` at time ``now``.

    That is its stored status, except that a ``running`` run whose process is gone is
    ``interrupted``: on ``hostname`` (this host) when its pid is dead or belongs to a later
    process, elsewhere when its last heartbeat is older than ``stale_after`` seconds.

    Plain text, not a :class:`~mosaic.core.run_states.RunStatus`: ``interrupted`` is none, and a
    store written by a later mosaic may hold a status this one does not know.
    """
    running = RunStatus.RUNNING.value
    if row.status != running:
        return str(row.status)
    if row.pid is not None and row.hostname == hostname:
        return running if _pid_alive(row.pid, row.started_at) else "interrupted"
    last = row.heartbeat_at if row.heartbeat_at is not None else row.started_at
    if last is None or now - last > stale_after:
        return "interrupted"
    return running


def _pid_alive(pid: int, started_at: float | None) -> bool:
    """Whether ``pid`` on this host is still the process that started a run at ``started_at``."""
    if not process_exists(pid):
        return False
    # On Linux, tell a zombie or a recycled pid from the run's own process.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            return False
        if started_at is None:
            return True
        boot = _boot_time()
        if boot is None:
            return True
        began = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return True
    return began <= started_at + _START_SLACK


def _boot_time() -> float | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None
