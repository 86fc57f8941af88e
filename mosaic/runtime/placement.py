"""Placing a component in a thread or in its own process, behind one handle type.

Both placements run the same :class:`~mosaic.runtime.host.ActorHost` around the same component
class; a process placement only adds an interpreter of its own around it (``python -m
mosaic.runtime.process_main``, the equivalent of multiprocessing's ``spawn``: nothing is
inherited, nothing is pickled, the ZeroMQ context is created after the start). Where the
command has opened a zygote, that interpreter is a fork of it, which has done the imports
already, with no thread and no ZeroMQ context to copy
(:mod:`~mosaic.runtime.processes.zygote_client`); else a fresh one.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import weakref
from collections.abc import Callable
from typing import IO, Literal

from mosaic.core.errors import ComponentDied, RequestTimeout
from mosaic.runtime import bootstrap, heartbeat
from mosaic.runtime.bootstrap import Bootstrap
from mosaic.runtime.component import Component, make_component
from mosaic.runtime.host import ActorHost, HostStatus
from mosaic.runtime.processes.child import ChildProcess, StartedProcess, spawn
from mosaic.runtime.processes.stop import (
    STOPPED,
    TERMINATED,
    UNREAPED,
    StopSchedule,
    stop_in_order,
)
from mosaic.runtime.processes.zygote_client import fork_process
from mosaic.runtime.setup_wait import SetupWait

log = logging.getLogger(__name__)

#: "ray" is placed by mosaic.runtime.ray_placement, which is an extra's.
PlacementKind = Literal["thread", "process", "ray"]
Check = Callable[[], None]

_WAIT_SLICE_S = 0.05
#: How long a stopping child that was already asked to shut down gets before SIGTERM.
STOP_GRACE_S = 0.2
#: How long a child gets to die after SIGKILL before it is reported and left.
KILL_WAIT_S = 5.0
#: Lines of a child's stderr kept for its crash report, and how long a dead child's are drained.
STDERR_KEPT_LINES = 20
DRAIN_DEAD_S = 0.05
_live_processes: weakref.WeakSet[ProcessPlaced] = weakref.WeakSet()


class Placed:
    """A running component: where to reach it, whether it lives, and how to end it."""

    uid: str
    kind: str
    placement: PlacementKind
    endpoint: str

    def alive(self) -> bool:
        """True while the component's thread or process runs."""
        raise NotImplementedError

    def exit_cause(self) -> str | None:
        """How it ended (exit code, signal, error), or ``None`` while alive."""
        raise NotImplementedError

    def failure(self) -> str | None:
        """Why it no longer serves (it ended, or it stopped answering), or ``None`` if it does."""
        return self.exit_cause()

    def ended_in_order(self) -> bool:
        """True if it has ended by its own orderly stop (not by an error, a crash or a kill)."""
        raise NotImplementedError

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for it to end by itself; True if it has ended."""
        raise NotImplementedError

    def kill(self) -> None:
        """End it now, without its shutdown sequence."""
        raise NotImplementedError

    def stop(self, timeout: float) -> bool:
        """Ask it to stop, give it ``timeout`` s, then kill it. True if it ended without a kill."""
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.kind} {self.uid!r} ({self.placement})"

    def scheduling(self) -> heartbeat.Scheduling | None:
        """How the kernel schedules the threads doing this component's work, or None where it
        cannot say. Set-up waits read it to tell a slow set-up from a hung one (see
        :mod:`mosaic.runtime.setup_wait`)."""
        return None

    def setup_wait(self, timeout: float, check: Check | None = None, *,
                   subject: str | None = None, doing: str = "answer") -> SetupWait:
        """A wait of ``timeout`` s on this component's set-up, longer while it makes progress;
        ``subject`` names it in the timeout's message (default: :meth:`describe`)."""
        return SetupWait(subject or self.describe(), timeout, self.scheduling, check,
                         doing=doing)


def _wait_bound(placed: Placed, status: HostStatus, timeout: float, check: Check | None) -> None:
    wait = placed.setup_wait(timeout, check, doing="start")
    deadline = time.monotonic() + wait.budget
    while not status.bound.wait(_WAIT_SLICE_S):
        cause = placed.exit_cause()
        if cause is not None:
            raise ComponentDied(placed.describe(), cause)
        wait.check()
        if time.monotonic() >= deadline:
            raise RequestTimeout(f"{placed.describe()} did not start within {wait.budget:g} s")
    if status.failure is not None:
        raise ComponentDied(placed.describe(), status.failure)


class ThreadPlaced(Placed):
    """A component in a pykka actor thread of this process.

    Its thread no longer serves once it has ended, or once it is stuck in a direct call that
    its watchdog gave up on (see :mod:`mosaic.runtime.watchdog`): then :meth:`failure` says so
    and :meth:`stop` does not wait for it.
    """

    placement: PlacementKind = "thread"

    def __init__(self, component: Component, kind: str, endpoint: str, *, cpu: int | None = None,
                 timeout: float = 30.0, check: Check | None = None) -> None:
        self.uid = component.uid
        self.kind = kind
        self.component = component
        self.status = HostStatus()
        self._ref = ActorHost.start(component, endpoint, self.status, cpu)
        _wait_bound(self, self.status, timeout, check)
        assert self.status.endpoint is not None  # set together with `bound` on success
        self.endpoint = self.status.endpoint

    def scheduling(self) -> heartbeat.Scheduling | None:
        # Its actor thread only: the rest of the run's process is busy with other parts.
        tid = self.status.thread_id
        return None if tid is None else heartbeat.scheduling(os.getpid(), tid)

    def alive(self) -> bool:
        return not self.status.stopped.is_set()

    def exit_cause(self) -> str | None:
        if not self.status.stopped.is_set():
            return None
        return self.status.failure or "stopped"

    def failure(self) -> str | None:
        return self.exit_cause() or self.component.stuck

    def ended_in_order(self) -> bool:
        return self.status.stopped.is_set() and self.status.failure is None

    def wait(self, timeout: float) -> bool:
        return self.status.stopped.wait(timeout)

    def kill(self) -> None:
        # A thread cannot be killed; ask pykka to stop it and let it go (it is a daemon).
        self._ref.stop(block=False)

    def stop(self, timeout: float) -> bool:
        if self.wait(0):
            return True
        self._ref.stop(block=False)
        if self.component.stuck is not None:
            return False  # its thread is held in a call given up on: it cannot stop now
        return self.wait(timeout)


class ProcessPlaced(Placed):
    """A component in its own interpreter, started with ``python -m mosaic.runtime.process_main``.

    Construction launches the child and returns at once; :meth:`wait_bound` waits until it has
    bound its endpoint, which it announces with ``READY <endpoint>`` on stdout. Its stderr is
    forwarded to this process's log, and its last lines are kept to explain a crash (see
    :class:`~mosaic.runtime.processes.child.ChildProcess`).
    The child dies with this process (``PR_SET_PDEATHSIG`` plus a parent check), and beats on
    a pipe of its own (:mod:`mosaic.runtime.heartbeat`): after ``heartbeat_timeout`` s of
    silence that it did not spend waiting for a CPU, it counts as hung. What it is trusted with
    (the run's credentials, what it may import) reaches it through another pipe
    (:mod:`mosaic.runtime.bootstrap`).
    """

    placement: PlacementKind = "process"

    def __init__(self, kind: str, uid: str, endpoint: str, *, component: str,
                 cpu: int | None = None,
                 log_level: int | None = None,
                 heartbeat_timeout: float = heartbeat.DEFAULT_TIMEOUT_S,
                 trust: Bootstrap = bootstrap.NO_TRUST) -> None:
        self.uid = uid
        self.kind = kind
        self.status = HostStatus()
        self.heartbeat_timeout = heartbeat_timeout
        level = log_level if log_level is not None else logging.getLogger().getEffectiveLevel()
        command = [sys.executable, "-m", "mosaic.runtime.process_main", kind, uid, endpoint,
                   "--component", component, "--parent-pid", str(os.getpid()),
                   "--log-level", logging.getLevelName(level)]
        if cpu is not None:
            command += ["--cpu", str(cpu)]
        process, trust_write = self._start(command)
        self._heartbeat.started(process.pid)
        self._child = ChildProcess(
            process, uid, read_stdout=self._read_stdout,
            log=logging.getLogger(f"mosaic.child.{uid}"), default_level=logging.WARNING,
            keep_lines=STDERR_KEPT_LINES, pinned=cpu is not None)
        bootstrap.write(trust_write, trust)
        _live_processes.add(self)
        self.endpoint = endpoint

    def _start(self, command: list[str]) -> tuple[StartedProcess, int]:
        """Start ``command`` as a fork of the zygote, else as a fresh interpreter; return the
        process and the write end of its trust pipe.

        Each attempt has a heartbeat pipe and a trust pipe of its own. A zygote that failed to
        answer may still fork the command later: such a late fork then holds the first
        attempt's pipes, whose trust end is closed, so it neither takes the trust meant for the
        spawn nor beats in its place; it reads the end of its trust pipe and exits.
        """
        process, trust_write = self._attempt(command, fork_process)
        if process is None:
            process, trust_write = self._attempt(command, spawn)
        assert process is not None  # spawn raises instead
        return process, trust_write

    def _attempt(self, command: list[str],
                 start: Callable[..., StartedProcess | None]) -> tuple[StartedProcess | None, int]:
        """``start(argv, pass_fds=...)`` with new heartbeat and trust pipes; the process (None:
        not started, and its pipes closed) and the write end of its trust pipe."""
        self._heartbeat = heartbeat.HeartbeatMonitor(self.uid)
        trust_read, trust_write = os.pipe()
        fds = (self._heartbeat.child_fd, trust_read)
        argv = [*command, "--heartbeat-fd", str(fds[0]), "--bootstrap-fd", str(trust_read)]
        process: StartedProcess | None = None
        try:
            process = start(argv, pass_fds=fds)
        finally:
            os.close(trust_read)
            if process is None:  # not started, or start raised
                self._heartbeat.abandon()
                os.close(trust_write)
        return process, trust_write

    def wait_bound(self, timeout: float = 30.0, check: Check | None = None) -> ProcessPlaced:
        """Block until the child has bound its endpoint; kill it if it cannot start.

        It is given ``timeout`` s, and more while it is still working, up to
        :data:`~mosaic.runtime.setup_wait.CEILING` times that (see
        :mod:`mosaic.runtime.setup_wait`). Launching and waiting are apart so that several
        processes can start at once.
        """
        try:
            _wait_bound(self, self.status, timeout, check)
        except BaseException:
            self.kill()
            raise
        assert self.status.endpoint is not None
        self.endpoint = self.status.endpoint
        return self

    @property
    def pid(self) -> int:
        return self._child.pid

    def scheduling(self) -> heartbeat.Scheduling | None:
        return heartbeat.scheduling(self.pid) if self.alive() else None

    def _read_stdout(self, stdout: IO[bytes]) -> None:
        child_log = logging.getLogger(f"mosaic.child.{self.uid}")
        for raw in stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if not self.status.bound.is_set() and line.startswith("READY "):
                self.status.endpoint = line[6:].strip()
                self.status.bound.set()
            elif not self.status.bound.is_set() and line.startswith("FAILED "):
                self.status.failure = line[7:].strip()
                self.status.bound.set()
            else:
                child_log.info("%s", line)

    def alive(self) -> bool:
        return self._child.alive()

    def exit_cause(self) -> str | None:
        cause = self._child.exit_cause()
        if cause is None:
            return None
        tail = self.stderr_tail()
        if self._child.exit_code != 0 and tail:
            cause += f"; last output: {tail}"
        return cause

    def ended_in_order(self) -> bool:
        # SIGTERM is how stop() asks a child to stop: its handler runs the orderly shutdown,
        # but a child already on its way out may have its default action back and die of it.
        return self._child.exit_code in (0, -signal.SIGTERM)

    def failure(self) -> str | None:
        cause = self.exit_cause()
        if cause is not None:
            return cause
        silence = self._heartbeat.hung_for(self.heartbeat_timeout)
        if silence is not None:
            return f"stopped answering: no heartbeat for {silence:.1f} s"
        return None

    def stderr_tail(self, lines: int = 5) -> str:
        """The last ``lines`` lines the child wrote to stderr, joined with `` | ``."""
        if not self.alive():
            # A dead child's last lines may still be in the pipe: let the reader drain it.
            self._child.drain_stderr(DRAIN_DEAD_S)
        return " | ".join(self._child.stderr_lines()[-lines:])

    def wait(self, timeout: float) -> bool:
        if not self._child.wait(timeout):
            return False
        self._release()
        return True

    def kill(self) -> None:
        if not self._child.kill(KILL_WAIT_S):  # pragma: no cover - SIGKILL cannot be ignored
            log.error("%s did not die after SIGKILL", self.describe())
        self._release()

    def stop(self, timeout: float) -> bool:
        """Ask the child to stop with SIGTERM (its orderly stop), then SIGKILL after ``timeout``.

        A child already on its way out (after its shutdown request) gets a moment's grace
        first, :data:`STOP_GRACE_S` at most. True if it ended without SIGKILL; after SIGKILL it
        is given :data:`KILL_WAIT_S`.
        """
        schedule = StopSchedule(ask_s=min(timeout, STOP_GRACE_S), sigterm_s=timeout,
                                sigkill_s=KILL_WAIT_S)
        outcome = stop_in_order(self._child, schedule)
        if outcome == UNREAPED:  # pragma: no cover - SIGKILL cannot be ignored
            log.error("%s did not die after SIGKILL", self.describe())
        self._release()
        return outcome in (STOPPED, TERMINATED)

    def _release(self) -> None:
        self._child.release()
        self._heartbeat.close()
        _live_processes.discard(self)


def place(component: str, kind: str, uid: str,
          placement: PlacementKind, endpoint: str, *, cpu: int | None = None,
          timeout: float = 30.0, check: Check | None = None,
          heartbeat_timeout: float = heartbeat.DEFAULT_TIMEOUT_S,
          trust: Bootstrap = bootstrap.NO_TRUST) -> Placed:
    """Start ``kind`` named ``uid`` in a thread or a process, bound to ``endpoint``.

    ``component`` is the class path of the component (see
    :func:`~mosaic.runtime.component.make_component`), built here or in the child process.
    The component is given ``trust`` (the run's credentials, what it may import) in either
    placement. Blocks until the component's endpoint is bound, ``timeout`` s or, while it is
    still working, longer (see :mod:`mosaic.runtime.setup_wait`); raises
    :class:`ComponentDied` if it fails to start (with the cause) and whatever ``check`` raises.
    """
    if placement == "thread":
        built = make_component(component, uid)
        built.credentials = trust.credentials
        built.allowed_imports = trust.allowed_imports
        return ThreadPlaced(built, kind, endpoint, cpu=cpu, timeout=timeout, check=check)
    if placement == "process":
        return ProcessPlaced(kind, uid, endpoint, component=component, cpu=cpu,
                             heartbeat_timeout=heartbeat_timeout,
                             trust=trust).wait_bound(timeout, check)
    raise ValueError(f"unknown placement {placement!r}: expected 'thread' or 'process'")


def kill_all_processes() -> None:
    """SIGKILL every component process this process started and reap them (forced exit)."""
    for placed in list(_live_processes):
        placed.kill()
