"""Heartbeats: how a run tells a component process that hangs from one that is merely busy.

A process that exits is seen at once (its exit code). A process that stops answering without
exiting (stopped by SIGSTOP, frozen in a native call that holds the GIL, deadlocked in its
interpreter) is not. So every component process beats: a daemon thread writes one byte to a
pipe of its own every :data:`INTERVAL_S` seconds, and the parent reads the pipe whenever it asks
about the child. A process whose last beat is older than the run's ``timeouts.heartbeat`` has
stopped answering, and the run fails naming it.

The beat comes from a thread beside the component's actor, so a component that is busy for a
long time in Python code (a slow LLM call, a long episode reset) keeps beating: that is the
business of ``timeouts.step``, not of liveness. The pipe is not the component's ZeroMQ socket, so
nothing a peer sends there can delay or fake a beat, and a child's own stdout stays its own.

**Starved is not hung.** On a shared machine (several runs, a CPU hog beside them) a healthy
process can go seconds without a beat, and so can the parent that listens. Two rules keep that
from failing a run:

* the parent drains the pipe when it asks, not from a thread of its own: if the parent was the
  one that did not get a CPU, the beats are waiting in the pipe and count;
* for a child silent past the timeout, the kernel is asked how it spent the silence
  (``/proc/PID/task/*``: thread states, time on a CPU and time waiting for one). A process
  whose threads were runnable but got little CPU, or waited for one a fair share of the time,
  is starved and gets more time; one that waited for nothing (stopped, deadlocked, blocked) or
  ran flat out without beating (a native call that holds the GIL) is hung.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: Seconds between two beats of a component process.
INTERVAL_S = 0.5
#: Default seconds without a beat after which a component process counts as hung.
DEFAULT_TIMEOUT_S = 2.5
#: A silent process counts as starved, not hung, while its threads spend at least this share of
#: the wall time waiting on a run queue. A stopped or deadlocked process waits for none; one held
#: up behind busy CPUs waits for much of it (its GIL holder queues, the others sleep on the GIL).
STARVED_SHARE = 0.2
#: A silent, runnable process that ran for more than this share of the wall time is spinning.
SPINNING_SHARE = 0.5


def start_beating(fd: int, interval: float = INTERVAL_S) -> threading.Thread:
    """In a component process: beat on ``fd`` from a daemon thread until the reader is gone.

    A full pipe (a parent that has not asked for a long time) skips beats instead of blocking.
    """
    os.set_blocking(fd, False)

    def beat() -> None:
        try:
            while True:
                with contextlib.suppress(BlockingIOError):  # unread beats already say we are alive
                    os.write(fd, b".")
                time.sleep(interval)
        except OSError:  # the parent closed its end or ended: nobody listens any more
            pass
        finally:
            os.close(fd)

    thread = threading.Thread(target=beat, name="mosaic-heartbeat", daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True)
class Scheduling:
    """What the kernel says of a process's threads at one moment."""

    #: Seconds they have run on a CPU, and waited for one (``/proc/PID/task/*/schedstat``).
    ran_s: float
    waited_s: float
    #: Some thread is runnable: on a CPU or in a run queue, waiting for one.
    runnable: bool
    #: The process is stopped (SIGSTOP, a debugger): it cannot beat, whatever the load.
    stopped: bool


def scheduling(pid: int, tid: int | None = None) -> Scheduling | None:
    """How the threads of ``pid`` are scheduled (only thread ``tid`` of it, if given), or None
    where the kernel does not say (no ``/proc``, or the process or thread is gone)."""
    ran = waited = 0
    runnable = stopped = False
    try:
        tasks = Path(f"/proc/{pid}/task")
        for task in tasks.iterdir() if tid is None else (tasks / str(tid),):
            try:
                run_ns, wait_ns = (task / "schedstat").read_text().split()[:2]
                state = (task / "stat").read_text().rpartition(")")[2].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                if tid is not None:
                    return None
                continue  # the thread ended meanwhile
            ran += int(run_ns)
            waited += int(wait_ns)
            runnable = runnable or state == "R"
            stopped = stopped or state in ("T", "t")
    except (OSError, ValueError, IndexError):
        return None
    return Scheduling(ran / 1e9, waited / 1e9, runnable, stopped)


@dataclass
class _Watch:
    """A long silence under watch: where it began, and whether the child looked starved."""

    since: float
    first: Scheduling
    runnable_seen: bool


class HeartbeatMonitor:
    """In the parent: the read end of one child's heartbeat pipe and the time of its last beat.

    Create it before starting the child, pass :attr:`child_fd` to the child (``pass_fds``),
    then call :meth:`started` with the child's pid once it runs, which closes the parent's copy
    of the write end. Silence is only counted from the first beat on: a child still starting is
    the business of the start-up timeout. Safe to ask from any thread.
    """

    def __init__(self, name: str) -> None:
        self._read_fd, self.child_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._name = name
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._last_beat: float | None = None
        self._watch: _Watch | None = None

    def started(self, pid: int | None = None) -> None:
        os.close(self.child_fd)
        self._pid = pid

    def abandon(self) -> None:
        """The child could not be started: close both ends."""
        for fd in (self.child_fd, self._read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """The child has ended: close the read end. Idempotent."""
        with self._lock:
            if self._read_fd >= 0:
                os.close(self._read_fd)
                self._read_fd = -1

    def _drain(self) -> None:
        if self._read_fd < 0:
            return
        try:
            while os.read(self._read_fd, 4096):
                self._last_beat = time.monotonic()
        except BlockingIOError:
            pass  # drained
        except OSError:
            pass

    def silence(self) -> float | None:
        """Seconds since the last beat, or None before the first one."""
        with self._lock:
            self._drain()
            last = self._last_beat
        return None if last is None else time.monotonic() - last

    def hung_for(self, timeout: float) -> float | None:
        """The silence in seconds if the child counts as hung after ``timeout`` s, else None.

        Silence past the timeout is a hang unless the child was starved meanwhile (see the
        module's notes); a starved child is judged again over the next half timeout.
        """
        with self._lock:
            self._drain()
            last = self._last_beat
            if last is None:
                return None
            now = time.monotonic()
            silence = now - last
            if silence <= timeout / 2:
                self._watch = None
                return None
            state = scheduling(self._pid) if self._pid is not None else None
            if state is None or state.stopped:  # nothing to weigh: silence alone decides
                return silence if silence > timeout else None
            watch = self._watch
            if watch is None:
                self._watch = _Watch(now, state, state.runnable)
                return None
            watch.runnable_seen = watch.runnable_seen or state.runnable
            span = now - watch.since
            if silence <= timeout or span < timeout / 2:
                return None
            if _starved(watch, state, span):
                self._watch = _Watch(now, state, state.runnable)  # look again later
                return None
            return silence


def _starved(watch: _Watch, now: Scheduling, span: float) -> bool:
    """Did a silent process spend ``span`` seconds waiting for a CPU rather than hanging?

    The kernel books run-queue waits only once a thread gets its CPU, so a thread still
    waiting shows as runnable, not yet as waited time; both count. A runnable process that ran
    for most of the span is spinning without beating (a native call holding the GIL): hung.
    """
    waited = now.waited_s - watch.first.waited_s
    ran = now.ran_s - watch.first.ran_s
    if waited >= STARVED_SHARE * span:
        return True
    return watch.runnable_seen and ran < SPINNING_SHARE * span
