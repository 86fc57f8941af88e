"""Placing a component in a thread or in its own process, behind one handle type.

Both placements run the same :class:`~mosaic.runtime.host.ActorHost` around the same component
class; a process placement only adds a fresh interpreter around it (``python -m
mosaic.runtime.process_main``, the equivalent of multiprocessing's ``spawn``: nothing is
inherited, nothing is pickled, the ZeroMQ context is created after the start).
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Literal

from mosaic.core.affinity import unpin_process
from mosaic.core.errors import ComponentDied, RequestTimeout
from mosaic.runtime import bootstrap, heartbeat
from mosaic.runtime.bootstrap import Bootstrap
from mosaic.runtime.component import Component, make_component
from mosaic.runtime.host import ActorHost, HostStatus

log = logging.getLogger(__name__)

PlacementKind = Literal["thread", "process"]
Check = Callable[[], None]

_WAIT_SLICE_S = 0.05
#: How long a stopping child that was already asked to shut down gets before SIGTERM.
STOP_GRACE_S = 0.2
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


def _wait_bound(status: HostStatus, what: str, timeout: float, check: Check | None,
                exited: Callable[[], str | None]) -> None:
    deadline = time.monotonic() + timeout
    while not status.bound.wait(_WAIT_SLICE_S):
        cause = exited()
        if cause is not None:
            raise ComponentDied(what, cause)
        if check is not None:
            check()
        if time.monotonic() >= deadline:
            raise RequestTimeout(f"{what} did not start within {timeout:g} s")
    if status.failure is not None:
        raise ComponentDied(what, status.failure)


class ThreadPlaced(Placed):
    """A component in a pykka actor thread of this process."""

    placement: PlacementKind = "thread"

    def __init__(self, component: Component, kind: str, endpoint: str, *, cpu: int | None = None,
                 timeout: float = 30.0, check: Check | None = None) -> None:
        self.uid = component.uid
        self.kind = kind
        self.status = HostStatus()
        self._ref = ActorHost.start(component, endpoint, self.status, cpu)
        _wait_bound(self.status, self.describe(), timeout, check, self.exit_cause)
        assert self.status.endpoint is not None  # set together with `bound` on success
        self.endpoint = self.status.endpoint

    def alive(self) -> bool:
        return not self.status.stopped.is_set()

    def exit_cause(self) -> str | None:
        if not self.status.stopped.is_set():
            return None
        return self.status.failure or "stopped"

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
        return self.wait(timeout)


class ProcessPlaced(Placed):
    """A component in its own interpreter, started with ``python -m mosaic.runtime.process_main``.

    Construction launches the child and returns at once; :meth:`wait_bound` waits until it has
    bound its endpoint, which it announces with ``READY <endpoint>`` on stdout. Its stderr is
    forwarded to this process's log, and its last lines are kept to explain a crash.
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
        self._heartbeat = heartbeat.HeartbeatMonitor(uid)
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        level = log_level if log_level is not None else logging.getLogger().getEffectiveLevel()
        command = [sys.executable, "-m", "mosaic.runtime.process_main", kind, uid, endpoint,
                   "--component", component, "--parent-pid", str(os.getpid()), "--log-level", logging.getLevelName(level)]
        self._pinned = cpu is not None
        if cpu is not None:
            command += ["--cpu", str(cpu)]
        trust_read, trust_write = os.pipe()
        command += ["--heartbeat-fd", str(self._heartbeat.child_fd),
                    "--bootstrap-fd", str(trust_read)]
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True,
                pass_fds=(self._heartbeat.child_fd, trust_read),
            )
        except BaseException:
            self._heartbeat.abandon()
            os.close(trust_write)
            raise
        finally:
            os.close(trust_read)
        self._heartbeat.started(self._process.pid)
        bootstrap.write(trust_write, trust)
        _live_processes.add(self)
        self._readers = [
            threading.Thread(target=self._read_stdout, name=f"{uid}-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"{uid}-stderr", daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.endpoint = endpoint

    def wait_bound(self, timeout: float = 30.0, check: Check | None = None) -> ProcessPlaced:
        """Block until the child has bound its endpoint; kill it if it cannot start.

        Launching and waiting are apart so that several processes can start at once.
        """
        try:
            _wait_bound(self.status, self.describe(), timeout, check, self.exit_cause)
        except BaseException:
            self.kill()
            raise
        assert self.status.endpoint is not None
        self.endpoint = self.status.endpoint
        return self

    @property
    def pid(self) -> int:
        return self._process.pid

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        child_log = logging.getLogger(f"mosaic.child.{self.uid}")
        for raw in self._process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if not self.status.bound.is_set() and line.startswith("READY "):
                self.status.endpoint = line[6:].strip()
                self.status.bound.set()
            elif not self.status.bound.is_set() and line.startswith("FAILED "):
                self.status.failure = line[7:].strip()
                self.status.bound.set()
            else:
                child_log.info("%s", line)

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        child_log = logging.getLogger(f"mosaic.child.{self.uid}")
        for raw in self._process.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._stderr_tail.append(line)
            level_name = line.split(" ", 1)[0]
            level = logging.getLevelName(level_name)
            child_log.log(level if isinstance(level, int) else logging.WARNING, "%s", line)

    def alive(self) -> bool:
        return self._process.poll() is None

    def exit_cause(self) -> str | None:
        code = self._process.poll()
        if code is None:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            cause = f"killed by {name}"
        else:
            cause = f"exit code {code}"
        tail = self.stderr_tail()
        if code != 0 and tail:
            cause += f"; last output: {tail}"
        return cause

    def ended_in_order(self) -> bool:
        # SIGTERM is how stop() asks a child to stop: its handler runs the orderly shutdown,
        # but a child already on its way out may have its default action back and die of it.
        return self._process.poll() in (0, -signal.SIGTERM)

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
            # A dead child's last lines may still be in the pipe: let the readers drain it.
            for reader in self._readers:
                reader.join(timeout=0.05)
        return " | ".join(list(self._stderr_tail)[-lines:])

    def wait(self, timeout: float) -> bool:
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self._reap_readers()
        return True

    def kill(self) -> None:
        if self._process.poll() is None:
            self._unpin()
            try:
                self._process.kill()
            except ProcessLookupError:
                pass
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            log.error("%s did not die after SIGKILL", self.describe())
        self._reap_readers()

    def stop(self, timeout: float) -> bool:
        """Ask the child to stop with SIGTERM (its orderly stop), then SIGKILL after ``timeout``.

        A child already on its way out (after its shutdown request) gets a moment's grace
        first. True if it ended without SIGKILL.
        """
        if self.wait(min(timeout, STOP_GRACE_S)):
            return True
        self._unpin()
        try:
            self._process.terminate()
        except ProcessLookupError:
            pass
        if self.wait(timeout):
            return True
        self.kill()
        return False

    def _unpin(self) -> None:
        # A pinned child on its way out must not queue for one busy CPU while another is free.
        if self._pinned:
            unpin_process(self.pid)

    def _reap_readers(self) -> None:
        for reader in self._readers:
            reader.join(timeout=1.0)
        self._heartbeat.close()
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()
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
    placement. Blocks until the component's endpoint is bound, at most ``timeout`` s; raises
    :class:`ComponentDied` if it fails to start (with the cause) and whatever ``check`` raises.
    """
    if placement == "thread":
        built = make_component(component, uid)
        built.credentials = trust.credentials
        built.allowed_imports = trust.allowed_imports
        return ThreadPlaced(built, kind, endpoint, cpu=cpu, timeout=timeout, check=check)
    if placement == "process":
        return ProcessPlaced(kind, uid, endpoint, component=component, cpu=cpu, heartbeat_timeout=heartbeat_timeout,
                             trust=trust).wait_bound(timeout, check)
    raise ValueError(f"unknown placement {placement!r}: expected 'thread' or 'process'")


def kill_all_processes() -> None:
    """SIGKILL every component process this process started and reap them (forced exit)."""
    for placed in list(_live_processes):
        placed.kill()
