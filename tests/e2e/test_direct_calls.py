"""Parts in a thread of the run's process, called directly on the step loop (mosaic.runtime.direct):
what they are handed is their own, and one that hangs still fails the run, or lets Ctrl-C end it,
in seconds, though the call into it cannot be interrupted."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.cli import (
    SIGNAL_EXIT_S,
    assert_store_consistent,
    cartpole,
    finish,
    query,
    run_mosaic,
    signal_and_time,
    start_mosaic,
    wait_for_file,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

RecordProperty = Callable[[str, object], None]

HANG_AT = 30


def hanging(tmp_path: Path, marker: Path, step_timeout: float = 60.0) -> Path:
    """Every part in a thread; the environment's step HANG_AT holds 30 s. The agent learns:
    its brain counts the experiences it got, and saves the count in its checkpoint."""
    params = f"{{hang_at: {HANG_AT}, hold: 30, marker: '{marker}'}}"
    text = cartpole(episodes=100_000, placement="thread", env="tests.fixtures.envs:HangingCartPole",
                    params=params, timeouts=f"{{step: {step_timeout:g}}}",
                    muscle="tests.fixtures.agents:ExperienceMuscle")
    return write_experiment(tmp_path, text.replace(
        "muscle:", "brain: tests.fixtures.agents:CountingBrain\n        muscle:", 1))


def assert_checkpoint_saved(store: Path) -> None:
    """The brain saved its checkpoint, with the experiences of the steps taken: the held
    environment did not cost the rest of the run its orderly shutdown."""
    [saved] = Path(f"{store.with_suffix('')}-checkpoints").glob("**/random.npz")
    with np.load(saved, allow_pickle=False) as data:
        count = int(data["brain/state/count"][0])
    assert 0 < count <= HANG_AT - 1


def states(store: Path) -> list[str]:
    return [s for (s,) in query(store, "SELECT to_state FROM transitions ORDER BY seq")]


def test_a_muscle_that_writes_into_its_observations_changes_no_trajectory(
        tmp_path: Path, process_tag: str) -> None:
    """A muscle zeroes every observation it is handed, in place: the run's digest is the one of
    the same muscle in a process, and of one that leaves its observations alone."""
    digests = {}
    for name, placement, muscle in (("thread", "thread", "tests.fixtures.agents:ScribblingMuscle"),
                                    ("process", "process",
                                     "tests.fixtures.agents:ScribblingMuscle"),
                                    ("random", "thread", "mosaic.agents:RandomMuscle")):
        path = write_experiment(tmp_path, cartpole(episodes=5, placement=placement,
                                                   muscle=muscle), f"{name}.yml")
        store = tmp_path / f"{name}.sqlite"
        result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=60)
        assert result.returncode == 0, result.stderr
        [(digest,)] = query(store, "SELECT digest FROM runs")
        digests[name] = digest
        observed = query(store, "SELECT COUNT(*) FROM steps WHERE observation IS NOT NULL")
        assert observed[0][0] > 0
    assert digests["thread"] == digests["process"] == digests["random"]


def test_a_thread_environment_that_hangs_fails_the_run_naming_it(
        tmp_path: Path, process_tag: str, record_property: RecordProperty) -> None:
    """Past the step timeout (1 s here) the run fails, naming the environment, and the command
    exits within seconds, though the environment's call still holds its thread."""
    marker = tmp_path / "hang.marker"
    path = hanging(tmp_path, marker, step_timeout=1)
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_file(marker, proc)
        elapsed = signal_and_time(proc)  # no signal: the time until it exits by itself
    finally:
        stderr = finish(proc)
    record_property("seconds_to_exit", round(elapsed, 2))
    assert proc.returncode == 1, stderr
    assert elapsed < 1 + 5.0, f"the hang took {elapsed:.2f} s to end the run"
    assert "Traceback" not in stderr, stderr
    [(status, error, steps)] = query(store, "SELECT status, error, steps FROM runs")
    assert (status, error) == ("failed", "environment 'cartpole' did not answer within 1 s")
    assert steps == HANG_AT - 1
    assert states(store) == ["setting_up", "running", "stopping", "failed"]
    assert_store_consistent(store)
    assert_checkpoint_saved(store)


def test_a_thread_muscle_that_hangs_fails_the_run_naming_it(tmp_path: Path,
                                                            process_tag: str) -> None:
    """The muscle's act holds: the run fails naming it, within seconds of the step timeout.
    Its shutdown is not waited for: the call it is held in keeps its lock."""
    marker = tmp_path / "hang.marker"
    muscle = (f"{{class: tests.fixtures.agents:HangingMuscle, params: {{hang_at: {HANG_AT}, "
              f"marker: '{marker}'}}}}")
    path = write_experiment(tmp_path, cartpole(episodes=100_000, placement="thread",
                                               muscle=muscle, timeouts="{step: 1}"))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_file(marker, proc)
        elapsed = signal_and_time(proc)
    finally:
        stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert elapsed < 1 + 5.0, f"the hang took {elapsed:.2f} s to end the run"
    assert "Traceback" not in stderr, stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert (status, error) == ("failed", "muscle 'random@cartpole' did not answer within 1 s")
    assert states(store) == ["setting_up", "running", "stopping", "failed"]
    assert_store_consistent(store)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_thread_environment_hangs_ends_the_run_within_2_s(
        tmp_path: Path, process_tag: str, record_property: RecordProperty, sig: int,
        code: int) -> None:
    """Ctrl-C while the environment's step holds the controller's thread: exit within 2 s, the
    run cancelled, every step taken stored."""
    marker = tmp_path / "hang.marker"
    path = hanging(tmp_path, marker)
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_file(marker, proc)
        elapsed = signal_and_time(proc, sig)
    finally:
        stderr = finish(proc)
    record_property("seconds_to_exit", round(elapsed, 2))
    assert proc.returncode == code, stderr
    assert elapsed < SIGNAL_EXIT_S, f"exit took {elapsed:.2f} s"
    assert "Traceback" not in stderr, stderr
    [(status, error, steps)] = query(store, "SELECT status, error, steps FROM runs")
    assert (status, error, steps) == ("cancelled", None, HANG_AT - 1)
    assert states(store) == ["setting_up", "running", "stopping", "cancelled"]
    assert_store_consistent(store)
    assert_checkpoint_saved(store)
