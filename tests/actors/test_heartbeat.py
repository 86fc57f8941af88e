"""Heartbeats tell a component process that hangs from one that runs, before it exits."""

from __future__ import annotations

import os
import signal
import time

import pytest

from mosaic.actors.kinds import component_path
from mosaic.runtime import heartbeat
from mosaic.runtime.bootstrap import Bootstrap
from mosaic.runtime.heartbeat import INTERVAL_S, HeartbeatMonitor, start_beating
from mosaic.runtime.placement import ProcessPlaced
from mosaic.transport import Credentials

ENVIRONMENT = component_path("environment")


def wait_for(predicate, timeout: float) -> float:
    """Seconds until ``predicate()`` held; fails the test after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_monitor_counts_silence_from_the_first_beat():
    monitor = HeartbeatMonitor("probe")
    write_fd = os.dup(monitor.child_fd)  # the child's copy, as pass_fds would hand it over
    monitor.started()
    try:
        assert monitor.silence() is None  # nothing beat yet: still starting, not silent
        os.write(write_fd, b".")
        wait_for(lambda: monitor.silence() is not None, 2.0)
        time.sleep(0.2)
        assert 0.2 <= monitor.silence() < 2.0
    finally:
        os.close(write_fd)
        monitor.close()
    monitor.close()  # idempotent


def test_beats_that_wait_in_the_pipe_count_when_the_parent_was_the_one_starved():
    # The parent asks late (it did not get a CPU); the child beat meanwhile: no silence.
    monitor = HeartbeatMonitor("probe")
    write_fd = os.dup(monitor.child_fd)
    monitor.started()
    try:
        os.write(write_fd, b".")
        assert monitor.silence() is not None
        time.sleep(0.6)
        os.write(write_fd, b".")  # a beat the parent has not read yet
        assert monitor.hung_for(0.5) is None
        assert monitor.silence() < 0.5  # from the late read, not from the first beat
    finally:
        os.close(write_fd)
        monitor.close()


def test_a_beating_thread_beats_until_nobody_reads():
    read_fd, write_fd = os.pipe()
    beater = start_beating(write_fd, interval=0.01)
    beats = b""
    while len(beats) < 3:
        beats += os.read(read_fd, 64)
    assert set(beats) == {ord(".")}
    os.close(read_fd)
    beater.join(2.0)
    assert not beater.is_alive()


@pytest.fixture
def environment_process(tmp_path, process_tag):
    placed = ProcessPlaced("environment", "env", f"ipc://{tmp_path}/env", component=ENVIRONMENT,
                           heartbeat_timeout=1.0,
                           trust=Bootstrap(Credentials.fresh(), None)).wait_bound(30)
    yield placed
    if placed.alive():
        os.kill(placed.pid, signal.SIGCONT)  # a stopped process cannot run its SIGTERM handler
    placed.stop(2.0)


def test_a_stopped_process_is_reported_hung_and_a_resumed_one_serves_again(environment_process):
    placed = environment_process
    wait_for(lambda: placed._heartbeat.silence() is not None, 5.0)
    assert placed.failure() is None
    os.kill(placed.pid, signal.SIGSTOP)
    took = wait_for(lambda: placed.failure() is not None, 5.0)
    assert 1.0 - INTERVAL_S <= took <= 3.0
    assert placed.alive()
    assert placed.failure().startswith("stopped answering: no heartbeat for ")
    os.kill(placed.pid, signal.SIGCONT)
    wait_for(lambda: placed.failure() is None, 3.0)


def test_an_exited_process_reports_its_exit_not_its_silence(environment_process):
    placed = environment_process
    wait_for(lambda: placed._heartbeat.silence() is not None, 5.0)
    os.kill(placed.pid, signal.SIGKILL)
    placed.wait(5.0)
    assert placed.failure() == "killed by SIGKILL"


class _Kernel:
    """Stands in for /proc: the scheduling figures a test wants the child to show."""

    def __init__(self) -> None:
        self.ran = self.waited = 0.0
        self.runnable = self.stopped = False
        self.started = time.monotonic()

    def elapsed(self) -> float:
        """Wall seconds since the child fell silent: the test's own ticks may come late."""
        return time.monotonic() - self.started

    def __call__(self, pid: int) -> heartbeat.Scheduling:
        return heartbeat.Scheduling(self.ran, self.waited, self.runnable, self.stopped)


@pytest.fixture
def silent_child(monkeypatch):
    """A monitor whose child beat once and then fell silent, and the kernel it asks."""
    kernel = _Kernel()
    monkeypatch.setattr(heartbeat, "scheduling", kernel)
    monitor = HeartbeatMonitor("probe")
    write_fd = os.dup(monitor.child_fd)
    monitor.started(pid=os.getpid())
    os.write(write_fd, b".")
    assert monitor.silence() is not None
    yield monitor, kernel
    os.close(write_fd)
    monitor.close()


def watch(monitor: HeartbeatMonitor, kernel: _Kernel, seconds: float, timeout: float = 0.4,
          on_tick=None) -> float | None:
    """Ask the monitor every 20 ms for ``seconds``; the first hang verdict, or None."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if on_tick is not None:
            on_tick(kernel)
        verdict = monitor.hung_for(timeout)
        if verdict is not None:
            return verdict
        time.sleep(0.02)
    return None


def test_a_silent_child_that_waits_for_nothing_is_hung(silent_child):
    monitor, kernel = silent_child  # sleeping, no run-queue wait: deadlocked or blocked
    verdict = watch(monitor, kernel, 2.0)
    assert verdict is not None and 0.4 < verdict < 1.5


def test_a_stopped_child_is_hung_at_the_timeout(silent_child):
    monitor, kernel = silent_child
    kernel.stopped = True
    verdict = watch(monitor, kernel, 2.0)
    assert verdict is not None and 0.4 < verdict < 1.0


def test_a_runnable_child_that_gets_no_cpu_is_starved_not_hung(silent_child):
    monitor, kernel = silent_child
    kernel.runnable = True  # in a run queue behind busy CPUs, barely running
    assert watch(monitor, kernel, 1.5) is None


def test_a_child_that_waited_for_a_cpu_is_starved_not_hung(silent_child):
    monitor, kernel = silent_child

    def queue(k: _Kernel) -> None:
        k.waited = 0.5 * k.elapsed()  # half of the time in a run queue

    assert watch(monitor, kernel, 1.5, on_tick=queue) is None


def test_a_runnable_child_that_runs_flat_out_without_beating_is_hung(silent_child):
    monitor, kernel = silent_child
    kernel.runnable = True

    def spin(k: _Kernel) -> None:
        k.ran = k.elapsed()  # on a CPU all the time, yet no beat: a native call holding the GIL

    verdict = watch(monitor, kernel, 2.0, on_tick=spin)
    assert verdict is not None


def test_the_kernel_reports_this_process_as_running():
    state = heartbeat.scheduling(os.getpid())
    assert state is not None and state.runnable and not state.stopped and state.ran_s > 0
