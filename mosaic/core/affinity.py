"""Keeping a run's step loop on one CPU.

The step loop is a strict ping-pong: the simulation controller asks an environment, waits, asks
a muscle, waits. Only one of them works at any moment, so spreading them over CPUs buys nothing,
while every hand-over to a thread sleeping on another CPU costs a cross-CPU wake-up. On the
virtual machines mosaic was measured on, that wake-up cost about 100 µs, several times the rest
of a round trip: pinning the controller, environment and muscle threads to one CPU tripled
steps/s (see ``benchmarks/throughput.py``).

Only those threads are pinned. Brains (which may train on many cores), the store writer and the
idle orchestration threads stay free. ``cpu_affinity: auto`` in the experiment file turns this
on; a CPU number chooses the CPU.

It is off by default: it does not survive sharing. Beside other busy processes (three mosaic
commands on 2 vCPUs were enough), the kernel can take many seconds to move a thread to its CPU,
and a pinned process then starts, stops or even dies of SIGKILL that much later.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from mosaic.core.libc import libc
from mosaic.core.lifeline import process_exists

log = logging.getLogger(__name__)

#: How long to watch the CPUs before choosing the idlest one.
SAMPLE_S = 0.02

_WORD_BITS = ctypes.sizeof(ctypes.c_ulong) * 8


def available_cpus() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _busy_ticks() -> dict[int, tuple[int, int]]:
    """cpu -> (busy ticks, total ticks) from /proc/stat."""
    ticks = {}
    with open("/proc/stat") as stat:
        for line in stat:
            name, *values = line.split()
            if name.startswith("cpu") and name != "cpu":
                numbers = [int(v) for v in values]
                idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)
                ticks[int(name[3:])] = (sum(numbers) - idle, sum(numbers))
    return ticks


def choose_cpu(setting: str | int) -> int | None:
    """The CPU for a run's step loop, or ``None`` to leave scheduling to the OS.

    ``"auto"`` picks, of the available CPUs, the one with the fewest step loops of other mosaic
    processes on it, and of those the least busy over a short sample; it then claims that CPU
    until this process exits, so that commands started side by side spread over the CPUs
    instead of piling onto the one that looked idle to each. A number is used as given if
    available.
    """
    if setting == "none" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = available_cpus()
    if isinstance(setting, int):
        if setting not in cpus:
            log.warning("cpu_affinity %d is not available (have %s); not pinning", setting, cpus)
            return None
        return setting
    if len(cpus) == 1:
        return cpus[0]
    claims = _claims()
    try:
        before = _busy_ticks()
        time.sleep(SAMPLE_S)
        after = _busy_ticks()
    except (OSError, ValueError, IndexError):
        before = after = {}

    def busy(cpu: int) -> float:
        b0, t0 = before.get(cpu, (0, 0))
        b1, t1 = after.get(cpu, (0, 0))
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0

    chosen = min(cpus, key=lambda cpu: (claims[cpu], busy(cpu)))
    _claim(chosen)
    return chosen


def _set_affinity(tid: int, cpus: set[int]) -> None:
    """``sched_setaffinity(tid, cpus)`` with the GIL released.

    ``os.sched_setaffinity`` keeps the GIL through the system call, and on a busy machine the
    kernel can take seconds to move a thread to its new CPU: every other thread of the process
    (its heartbeat, its supervisors) would stand still meanwhile. A call through ctypes releases
    the GIL, so only the thread that moves waits.
    """
    c_library = libc()
    if c_library is None:
        os.sched_setaffinity(tid, cpus)
        return
    mask = (ctypes.c_ulong * (max(cpus) // _WORD_BITS + 1))()
    for cpu in cpus:
        mask[cpu // _WORD_BITS] |= 1 << (cpu % _WORD_BITS)
    if c_library.sched_setaffinity(tid, ctypes.sizeof(mask), ctypes.byref(mask)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def pin_thread(native_id: int, cpu: int | None) -> None:
    """Run the thread with ``native_id`` (``threading.Thread.native_id``) on ``cpu`` only."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    try:
        _set_affinity(native_id, {cpu})
    except OSError as error:
        log.warning("could not pin thread %d to CPU %d: %s", native_id, cpu, error)


def pin_current_thread(cpu: int | None) -> None:
    """Run the calling thread (and threads it starts later) on ``cpu`` only; no-op for ``None``."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    try:
        _set_affinity(0, {cpu})  # 0: the calling thread on Linux
    except OSError as error:
        log.warning("could not pin the step loop to CPU %d: %s", cpu, error)


def unpin_process(pid: int) -> None:
    """Let every thread of process ``pid`` run on any CPU again. Best effort, never raises.

    A process that is to end must not wait for its turn on one busy CPU: its exit (or its
    orderly stop) then takes seconds on a loaded machine, although another CPU is free.
    """
    if not hasattr(os, "sched_setaffinity"):
        return
    cpus = set(available_cpus())
    try:
        tasks = [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return
    for tid in tasks:
        with contextlib.suppress(OSError):  # the thread has ended, or is not ours to move
            _set_affinity(tid, cpus)


def _claims_folder() -> Path:
    # Not named like a run's ipc folder (mosaic-PID-...): it outlives every run.
    return Path(tempfile.gettempdir()) / f".mosaic-cpus-{os.getuid()}"


def _claims() -> Counter[int]:
    """How many live mosaic processes of this user run a step loop on each CPU."""
    counts: Counter[int] = Counter()
    try:
        entries = list(_claims_folder().iterdir())
    except OSError:
        return counts
    for entry in entries:
        cpu, _, pid = entry.name.partition("-")
        if not (cpu.isdigit() and pid.isdigit()):
            continue
        if not process_exists(int(pid)):
            entry.unlink(missing_ok=True)  # its process is gone
            continue
        counts[int(cpu)] += 1
    return counts


def _claim(cpu: int) -> None:
    """Tell other mosaic processes that this one runs a step loop on ``cpu``, until it exits."""
    folder = _claims_folder()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        claim = folder / f"{cpu}-{os.getpid()}"
        claim.touch()
    except OSError:
        return
    atexit.register(claim.unlink, missing_ok=True)
