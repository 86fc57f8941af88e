"""Heartbeats tell a component process that hangs from one that runs, before it exits."""

from __future__ import annotations

import os
import signal
import time

import pytest

from mosaic.actors.heartbeat import INTERVAL_S, HeartbeatMonitor, start_beating
from mosaic.actors.placement import ProcessPlaced


def wait_for(predicate, timeout: float) -> float:
    """Seconds until ``predicate()`` held; fails the test after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_monitor_counts_silence_from_the_first_beat_and_ends_with_the_pipe():
    monitor = HeartbeatMonitor("probe")
    write_fd = os.dup(monitor.child_fd)  # the child's copy, as pass_fds would hand it over
    monitor.started()
    assert monitor.silence() is None  # nothing beat yet: still starting, not silent
    os.write(write_fd, b".")
    wait_for(lambda: monitor.silence() is not None, 2.0)
    time.sleep(0.2)
    assert 0.2 <= monitor.silence() < 2.0
    os.close(write_fd)  # the child ended
    monitor.join(2.0)
    assert not monitor._reader.is_alive()


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
    placed = ProcessPlaced("environment", "env", f"ipc://{tmp_path}/env",
                           heartbeat_timeout=1.0).wait_bound(30)
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
