"""SIGINT and SIGTERM at each stage of a run: an orderly shutdown within 2 s, nothing left.

A signal mid-step is tested in test_experiment_start.py
(test_a_signal_mid_run_shuts_down_in_order); here it arrives while a component sets up, and
while a run that took all its steps shuts down. A run whose shutdown a signal cut short is
recorded as cancelled, not finished: its components were given half a second instead of their
shutdown timeout, so what they save on the way out (a brain's checkpoint, say) may be missing;
its steps are all stored.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.cli import (
    SIGNAL_EXIT_S,
    assert_store_consistent,
    finish,
    query,
    run_mosaic,
    signal_and_time,
    staged_experiment,
    start_mosaic,
    wait_for_file,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

RecordProperty = Callable[[str, object], None]

SIGNALS = pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                                  ids=["SIGINT", "SIGTERM"])
EPISODES = 3


def start_stalled(tmp_path: Path, kind: str, stage: str,
                  episodes: int) -> tuple[subprocess.Popen[str], Path]:
    """Start a run whose ``kind`` holds at ``stage``; return it, with its store, once there."""
    marker = tmp_path / "stage.marker"
    path = write_experiment(tmp_path, staged_experiment(episodes=episodes,
                                                        stall=(kind, stage, marker)))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_file(marker, proc)
    except BaseException:
        finish(proc)
        raise
    return proc, store


def states(store: Path) -> list[str]:
    """The states the run went through, in order (there is one run)."""
    return [s for (s,) in query(store, "SELECT to_state FROM transitions ORDER BY seq")]


@SIGNALS
@pytest.mark.parametrize(("kind", "stage"), [("environment", "start"), ("muscle", "setup"),
                                             ("brain", "setup")])
def test_a_signal_during_setup_cancels_the_run(tmp_path: Path, process_tag: str,
                                               record_property: RecordProperty, sig: int,
                                               code: int, kind: str, stage: str) -> None:
    """While a component sets up: exit 130/143 within 2 s, the run cancelled, no step taken."""
    proc, store = start_stalled(tmp_path, kind, stage, episodes=100_000)
    try:
        elapsed = signal_and_time(proc, sig)
    finally:
        stderr = finish(proc)
    record_property("seconds_to_exit", round(elapsed, 2))
    assert proc.returncode == code, stderr
    assert elapsed < SIGNAL_EXIT_S, f"exit took {elapsed:.2f} s"
    assert "Traceback" not in stderr, stderr
    assert "cancelled" in stderr
    [(status, error, steps)] = query(store, "SELECT status, error, steps FROM runs")
    assert (status, error, steps) == ("cancelled", None, 0)
    assert states(store) == ["setting_up", "stopping", "cancelled"]
    assert_store_consistent(store)


@SIGNALS
@pytest.mark.parametrize(("kind", "stage"), [("environment", "close"), ("muscle", "teardown"),
                                             ("brain", "save")])
def test_a_signal_during_shutdown_cancels_the_run_and_keeps_its_steps(
        tmp_path: Path, process_tag: str, record_property: RecordProperty, sig: int, code: int,
        kind: str, stage: str) -> None:
    """While a run that took all its steps shuts down: exit within 2 s, every step stored, the
    run cancelled (its shutdown was cut short)."""
    proc, store = start_stalled(tmp_path, kind, stage, episodes=EPISODES)
    try:
        elapsed = signal_and_time(proc, sig)
    finally:
        stderr = finish(proc)
    record_property("seconds_to_exit", round(elapsed, 2))
    assert proc.returncode == code, stderr
    assert elapsed < SIGNAL_EXIT_S, f"exit took {elapsed:.2f} s"
    assert "Traceback" not in stderr, stderr
    [(status, error, episodes, steps)] = query(
        store, "SELECT status, error, episodes, steps FROM runs")
    assert (status, error, episodes) == ("cancelled", None, EPISODES)
    assert steps > 0
    assert states(store) == ["setting_up", "running", "stopping", "cancelled"]
    assert_store_consistent(store)


def test_a_second_sigint_during_setup_exits_at_once(tmp_path: Path, process_tag: str,
                                                    record_property: RecordProperty) -> None:
    """A second SIGINT while the first one's orderly shutdown is under way (a component holds
    in its set-up, and takes about a second to end): exit 130 at once, every component process
    gone; the run, never closed, reads as interrupted, not cancelled.

    The two are sent apart: signals sent back to back reach Python's handler as one.
    """
    proc, store = start_stalled(tmp_path, "environment", "start", episodes=100_000)
    try:
        elapsed = signal_and_time(proc, signal.SIGINT, signal.SIGINT, gap=0.2)
    finally:
        stderr = finish(proc)
    record_property("seconds_to_exit", round(elapsed, 2))
    assert proc.returncode == 130, stderr
    assert elapsed < 0.2 + 0.5, f"exit took {elapsed - 0.2:.2f} s after the second SIGINT"
    assert "Traceback" not in stderr, stderr
    [(uid,)] = query(store, "SELECT uid FROM runs")
    shown = run_mosaic("runs", "show", uid, "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "interrupted" in shown.stdout
    # process_tag: no component process outlived the command.
