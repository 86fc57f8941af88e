"""End to end: ``rollouts: M`` steps an environment's copies in M rollout workers, through the
real ``mosaic`` command. One worker gives the per-step loop's trajectories; a learner's brain
learns from several workers in rounds, so threads and processes give one digest; a killed
worker fails the run naming it; Ctrl-C ends the command within its promise; a termination
condition stops the workers; a run killed with its command resumes to the same digest."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import (
    REPO,
    SIGNAL_EXIT_S,
    assert_store_consistent,
    finish,
    mosaic_command,
    query,
    run_mosaic,
    signal_and_time,
    start_mosaic,
    wait_for_steps,
    write_experiment,
)
from tests.processes import component_pid

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ROLLOUTS = """\
    uid: rollouts
    seed: 3
    episodes: {episodes}
    placement: {placement}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
        copies: 4
        {rollouts}
        record_steps: all
    agents:
      - uid: player
        {agent}
"""
RANDOM = "muscle: mosaic.agents:RandomMuscle"
PPO = """brain: mosaic.agents.learners:PPOBrain
        muscle: mosaic.agents.learners:PPOMuscle
        params: {rollout_steps: 64, epochs: 2, minibatch_size: 32}"""


def experiment(tmp_path: Path, name: str, *, rollouts: int | None = 2, placement: str = "thread",
               episodes: int = 40, agent: str = RANDOM, extra: str = "") -> Path:
    text = ROLLOUTS.format(episodes=episodes, placement=placement, agent=agent,
                           rollouts=f"rollouts: {rollouts}" if rollouts else "") + extra
    return write_experiment(tmp_path, text, f"{name}.yml")


def run(tmp_path: Path, name: str, **settings: object) -> tuple[Path, tuple[object, ...]]:
    """Run the experiment to its end; return the store and the run's status, episodes, steps
    and digest."""
    path = experiment(tmp_path, name, **settings)  # type: ignore[arg-type]
    store = tmp_path / f"{name}.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store), "-q", timeout=150)
    assert result.returncode == 0, result.stderr
    [row] = query(store, "SELECT status, episodes, steps, digest FROM runs")
    assert_store_consistent(store)
    return store, row


def stored(store: Path) -> list[tuple[object, ...]]:
    return query(store, "SELECT episode, step, copy, reward, terminated, truncated FROM steps "
                        "ORDER BY copy, episode, step")


def test_one_rollout_worker_takes_the_per_step_loops_trajectories(tmp_path: Path) -> None:
    worker_store, in_worker = run(tmp_path, "worker", rollouts=1)
    loop_store, in_loop = run(tmp_path, "loop", rollouts=None)
    assert in_worker == in_loop
    assert in_worker[:2] == ("finished", 40)
    assert stored(worker_store) == stored(loop_store)
    assert (query(worker_store, "SELECT copy, episode, seed, steps FROM episodes ORDER BY 1, 2")
            == query(loop_store, "SELECT copy, episode, seed, steps FROM episodes ORDER BY 1, 2"))


def test_a_learner_with_two_workers_has_one_digest_in_threads_and_processes(
        tmp_path: Path, process_tag: str) -> None:
    seen = {}
    for placement in ("thread", "process", "thread"):
        store, row = run(tmp_path, f"ppo-{placement}-{len(seen)}", placement=placement,
                         agent=PPO, episodes=60)
        seen[len(seen)] = row
        # Each worker numbers its copies after the one before: eight copies in all.
        assert query(store, "SELECT DISTINCT copy FROM episodes ORDER BY copy") == [
            (copy,) for copy in range(8)]
        # The brain learned: its metrics reached the store.
        assert query(store, "SELECT count(*) FROM metrics")[0][0] > 0
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][:2] == ("finished", 60)


def test_a_killed_rollout_worker_fails_the_run_naming_it(tmp_path: Path,
                                                         process_tag: str) -> None:
    path = experiment(tmp_path, "killed", placement="process", episodes=1_000_000)
    store = tmp_path / "killed.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=200)
        pid = component_pid(proc.pid, "rollout", "cartpole/rollout-1")
        assert pid is not None, "no process for rollout worker 1"
        elapsed = signal_and_time(proc, signal.SIGKILL, pid=pid)
    finally:
        stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert elapsed < 5.0, f"the kill took {elapsed:.2f} s to end the command"
    assert "Traceback" not in stderr, stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed"
    assert "rollout 'cartpole/rollout-1'" in error and "killed by SIGKILL" in error, error
    assert_store_consistent(store)


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_ctrl_c_stops_the_workers_in_order(tmp_path: Path, process_tag: str,
                                           placement: str) -> None:
    path = experiment(tmp_path, "cancelled", placement=placement, agent=PPO,
                      episodes=1_000_000)
    store = tmp_path / "cancelled.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store))
    try:
        wait_for_steps(store, proc, minimum=500)
        elapsed = signal_and_time(proc, signal.SIGINT)
    finally:
        stderr = finish(proc)
    assert proc.returncode == 130, stderr
    assert elapsed < SIGNAL_EXIT_S, f"Ctrl-C took {elapsed:.2f} s to end the command"
    assert "Traceback" not in stderr, stderr
    [(status, steps)] = query(store, "SELECT status, steps FROM runs")
    assert status == "cancelled" and steps >= 500
    assert_store_consistent(store)


def test_a_termination_condition_stops_the_workers(tmp_path: Path) -> None:
    threshold = "    termination: {reward_threshold: 1, window: 3}\n"
    _, (status, episodes, _, _) = run(tmp_path, "terminated", episodes=100_000,
                                      extra=threshold)
    assert status == "finished"
    assert 3 <= episodes < 1000


def test_a_rollout_run_killed_with_its_command_resumes_to_the_same_digest(
        tmp_path: Path, process_tag: str) -> None:
    _, expected = run(tmp_path, "whole", agent=PPO, placement="process", episodes=400)
    path = experiment(tmp_path, "resumed", agent=PPO, placement="process", episodes=400)
    store = tmp_path / "resumed.sqlite"
    proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(path), "--store",
                             str(store), "-q"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_for_steps(store, proc, minimum=300, timeout=60)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.communicate()
    time.sleep(0.2)
    resumed = run_mosaic("experiment-start", str(path), "--store", str(store), "--resume",
                         timeout=150)
    assert resumed.returncode == 0, resumed.stderr
    [row] = query(store, "SELECT status, episodes, steps, digest FROM runs")
    assert row == expected
    assert_store_consistent(store)


def test_a_killed_worker_is_run_again_under_max_failures(tmp_path: Path,
                                                         process_tag: str) -> None:
    path = experiment(tmp_path, "retried", placement="process", episodes=4000,
                      extra="    executor: {max_failures: 1}\n")
    store = tmp_path / "retried.sqlite"
    proc = start_mosaic("experiment-start", str(path), "--store", str(store), "-q")
    try:
        wait_for_steps(store, proc, minimum=200)
        pid = component_pid(proc.pid, "rollout", "cartpole/rollout-1")
        assert pid is not None, "no process for rollout worker 1"
        os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        stderr = finish(proc)
    assert proc.returncode == 0, stderr
    [(status, episodes)] = query(store, "SELECT status, episodes FROM runs")
    assert (status, episodes) == ("finished", 4000)
    [(reason,)] = query(store, "SELECT reason FROM transitions WHERE to_state = 'resumed'")
    assert "rollout 'cartpole/rollout-1'" in reason and "killed by SIGKILL" in reason, reason
    assert_store_consistent(store)


def test_an_environment_that_raises_in_a_worker_fails_the_run_naming_both(
        tmp_path: Path) -> None:
    path = write_experiment(tmp_path, """\
        uid: raising
        episodes: 1000
        environments:
          - uid: cartpole
            env: tests.fixtures.envs:RaisingCartPole
            params: {fail_at: 40}
            rollouts: 2
        agents:
          - uid: random
            muscle: mosaic.agents:RandomMuscle
        """)
    store = tmp_path / "raising.sqlite"
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "-q", timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    [(status, error)] = query(store, "SELECT status, error FROM runs")
    assert status == "failed"
    assert "rollout 'cartpole/rollout-" in error and "broken at step 40" in error, error
