"""A component that dies fails its run, names itself and its exit cause, and leaves nothing.

Each kind of component process (environment, muscle, brain) is killed with SIGKILL while it
sets up, while the run steps, and while it shuts down, through the real ``mosaic`` command.
A run whose component dies during shutdown fails too: shutdown is where environments close and
brains save their checkpoints, so a run that lost that part did not finish.

The simulation controller and the conductors are threads of the ``mosaic`` process. The only
code of the user's that runs in one of them is a termination condition, in the controller's
thread: its failures are tested here. The conductors run no user code: nothing real can make
them fail.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.cli import (
    UIDS,
    assert_store_consistent,
    cartpole,
    finish,
    query,
    run_mosaic,
    signal_and_time,
    staged_experiment,
    start_mosaic,
    wait_for_file,
    wait_for_steps,
    write_experiment,
)
from tests.processes import component_pid, component_pids

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

RecordProperty = Callable[[str, object], None]

#: Where each kind of component holds, per stage, in tests.fixtures.stages.
STALLS = {
    ("environment", "setup"): "start",
    ("environment", "shutdown"): "close",
    ("muscle", "setup"): "setup",
    ("muscle", "shutdown"): "teardown",
    ("brain", "setup"): "setup",
    ("brain", "shutdown"): "save",
}
#: Seconds from the kill to the command's exit (and to the failed run's end).
DETECTION_LIMIT_S = 5.0


@pytest.mark.parametrize("stage", ["setup", "mid-run", "shutdown"])
@pytest.mark.parametrize("kind", ["environment", "muscle", "brain"])
def test_a_killed_component_fails_the_run_naming_it(tmp_path: Path, process_tag: str,
                                                    record_property: RecordProperty, kind: str,
                                                    stage: str) -> None:
    """SIGKILL of one component process at one stage: the run fails within 5 s, naming it."""
    uid = UIDS[kind]
    marker = tmp_path / "stage.marker"
    episodes = 3 if stage == "shutdown" else 100_000
    stall = None if stage == "mid-run" else (kind, STALLS[kind, stage], marker)
    path = write_experiment(tmp_path, staged_experiment(episodes=episodes, stall=stall))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    seen = 0
    try:
        if stall is None:
            seen = wait_for_steps(store, proc, minimum=100)
        else:
            wait_for_file(marker, proc)
        pid = component_pid(proc.pid, kind, uid)
        assert pid is not None, f"no process for {kind} {uid!r}"
        if stall is not None:
            assert int(marker.read_text()) == pid  # the marker is that component's
        elapsed = signal_and_time(proc, signal.SIGKILL, pid=pid)
    finally:
        stderr = finish(proc)
    record_property("seconds_to_exit", round(elapsed, 2))
    assert proc.returncode == 1, stderr
    assert elapsed < DETECTION_LIMIT_S, f"the kill took {elapsed:.2f} s to end the command"
    assert "Traceback" not in stderr, stderr
    [(status, error, episodes_done, steps)] = query(
        store, "SELECT status, error, episodes, steps FROM runs")
    assert status == "failed"
    assert f"{kind} {uid!r}" in error and "killed by SIGKILL" in error, error
    assert f"{kind} {uid!r}" in stderr and "killed by SIGKILL" in stderr, stderr
    assert_store_consistent(store)
    assert steps >= seen
    states = [s for (s,) in query(store, "SELECT to_state FROM transitions ORDER BY seq")]
    if stage == "setup":
        assert steps == 0
        assert states == ["setting_up", "stopping", "failed"]
    else:
        assert states == ["setting_up", "running", "stopping", "failed"]
    if stage == "shutdown":
        assert episodes_done == episodes  # every step was taken and recorded before the kill
    # process_tag: no component process outlived the command.


def test_a_killed_component_fails_its_own_run_and_the_others_go_on(
        tmp_path: Path, process_tag: str, record_property: RecordProperty) -> None:
    """With two runs at once, killing one run's environment fails that run alone."""
    path = write_experiment(tmp_path, staged_experiment(runs=2, episodes=150))
    store = tmp_path / "results.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store), "--jobs", "2")
    try:
        wait_for_steps(store, proc, minimum=100)
        deadline = time.monotonic() + 10
        while len(pids := component_pids(proc.pid, "environment", "cartpole")) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "two runs did not start"
            time.sleep(0.02)
        assert [s for (s,) in query(store, "SELECT status FROM runs")] == ["running"] * 2
        os.kill(pids[0], signal.SIGKILL)
        killed_at = time.time()
        proc.wait(timeout=40)
    finally:
        stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr, stderr
    runs = query(store, "SELECT status, error, episodes, ended_at FROM runs ORDER BY run_index")
    [failed] = [run for run in runs if run[0] == "failed"]
    [finished] = [run for run in runs if run[0] == "finished"]
    assert "environment 'cartpole'" in failed[1] and "killed by SIGKILL" in failed[1]
    record_property("seconds_to_failed_run_end", round(failed[3] - killed_at, 2))
    assert failed[3] - killed_at < DETECTION_LIMIT_S
    assert finished[1] is None and finished[2] == 150
    assert finished[3] > failed[3]  # it went on after the other run had failed
    assert_store_consistent(store)


def test_a_finished_run_with_stalling_fixtures_unused_finishes(tmp_path: Path,
                                                               process_tag: str) -> None:
    """The fixtures of these tests, holding nowhere, make an ordinary run that finishes."""
    path = write_experiment(tmp_path, staged_experiment(episodes=3))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=30)
    assert result.returncode == 0, result.stderr
    [(status, episodes)] = query(store, "SELECT status, episodes FROM runs")
    assert (status, episodes) == ("finished", 3)
    assert_store_consistent(store)


@pytest.mark.parametrize(("condition", "cause"), [
    ("condition_that_raises", "RuntimeError: the condition broke"),
    ("condition_that_exits", "SystemExit: 5"),
])
def test_a_failure_in_the_simulation_controller_fails_the_run_naming_it(
        tmp_path: Path, process_tag: str, condition: str, cause: str) -> None:
    """A termination condition that raises (even SystemExit) in the controller's thread."""
    termination = f"    termination: {{condition: 'tests.fixtures.stages:{condition}'}}\n"
    path = write_experiment(tmp_path, cartpole(episodes=50, placement="process") + termination)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), timeout=30)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    [(status, error, episodes)] = query(store, "SELECT status, error, episodes FROM runs")
    assert (status, episodes) == ("failed", 2)
    assert error == f"termination condition tests.fixtures.stages:{condition} failed: {cause}"
    assert_store_consistent(store)


def test_a_thread_component_that_exits_fails_its_own_run_only(tmp_path: Path,
                                                              process_tag: str) -> None:
    """sys.exit() in a thread-placed environment of one run fails that run, naming it and the
    exit; the other run, in the same process, finishes."""
    path = write_experiment(tmp_path, cartpole(runs=2, episodes=3,
                                               env="tests.fixtures.envs:ExitingForOneSeed"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "--jobs", "2",
                        timeout=30)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    runs = query(store, "SELECT run_index, status, error, episodes FROM runs ORDER BY run_index")
    assert runs[0][1:] == ("finished", None, 3)
    assert runs[1][1] == "failed"
    assert runs[1][2] == "environment 'cartpole' (thread) died: SystemExit: 6"
    assert_store_consistent(store)
