"""Phases and checkpoints through the real CLI."""

from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.cli import query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PHASED = """\
    uid: phased
    seed: 3
    episodes: 3
    placement: {placement}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: learner
        brain: tests.fixtures.agents:CountingBrain
        muscle: tests.fixtures.agents:ExperienceMuscle
        {load}
    phases:
      - name: train
      - name: test
        mode: test
        episodes: 2
"""


def checkpoint_count(path):
    with np.load(path, allow_pickle=False) as data:
        return int(data["brain/state/count"][0])


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_train_then_test_saves_and_loads_the_brain(tmp_path, process_tag, placement):
    path = write_experiment(tmp_path, PHASED.format(placement=placement, load=""))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 0, result.stderr
    runs = query(store, "SELECT uid, status, episodes, steps, seed FROM runs ORDER BY id")
    assert [(u.rsplit("-", 1)[1], s, e) for u, s, e, _, _ in runs] == [
        ("train", "finished", 3), ("test", "finished", 2)]
    assert runs[0][4] != runs[1][4]  # the test phase does not replay the training seeds
    train_steps = runs[0][3]
    [train] = (tmp_path / "results-checkpoints" / "phased").glob("*/train/learner.npz")
    # One experience per step after the first of each episode: steps - episodes... at least.
    assert 0 < checkpoint_count(train) <= train_steps
    # A test phase learns nothing, so it saves nothing.
    assert not list((tmp_path / "results-checkpoints" / "phased").glob("*/test/*"))


def test_training_continues_across_invocations(tmp_path, process_tag):
    store = tmp_path / "results.sqlite"
    first = write_experiment(tmp_path, PHASED.format(placement="thread", load=""), "first.yml")
    assert run_mosaic("experiment-start", str(first), "--store", str(store)).returncode == 0
    [saved] = (tmp_path / "results-checkpoints" / "phased").glob("*/train/learner.npz")
    before = checkpoint_count(saved)
    again = write_experiment(tmp_path, PHASED.format(placement="thread",
                                                     load="load: {phase: train}"), "again.yml")
    result = run_mosaic("experiment-start", str(again), "--store", str(store))
    assert result.returncode == 0, result.stderr
    trained = sorted((tmp_path / "results-checkpoints" / "phased").glob("*/train/learner.npz"),
                     key=lambda p: p.stat().st_mtime)
    assert len(trained) == 2
    assert checkpoint_count(trained[-1]) > before


def test_a_missing_checkpoint_fails_the_run_before_anything_starts(tmp_path, process_tag):
    path = write_experiment(tmp_path, PHASED.format(
        placement="thread", load="load: {phase: train, experiment: never-ran}"))
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 1
    [(status, error, steps)] = query(store, "SELECT status, error, steps FROM runs")
    assert status == "failed" and "never-ran" in error and steps == 0
    assert "Traceback" not in result.stderr


TERMINATING = """\
    uid: terminating
    seed: 3
    episodes: 1000
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: random
        muscle: mosaic.agents:RandomMuscle
    termination:
      {termination}
"""


@pytest.mark.parametrize(("termination", "episodes", "why"), [
    ("condition: tests.fixtures.agents:stop_after_four", 4, "condition stop_after_four met"),
    # Every CartPole episode returns more than 1.
    ("{reward_threshold: 1.0, window: 3}", 3, "over the last 3 episodes reached 1"),
])
def test_termination_conditions_end_the_phase_early_and_say_so(tmp_path, process_tag,
                                                               termination, episodes, why):
    text = TERMINATING.format(termination=termination)
    if termination.startswith("{"):
        text = text.replace("termination:\n      " + termination, "termination: " + termination)
    path = write_experiment(tmp_path, text)
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", str(path), "--store", str(store))
    assert result.returncode == 0, result.stderr
    assert query(store, "SELECT status, episodes FROM runs") == [("finished", episodes)]
    # The transition, the run's line and the summary say why it stopped before 1000 episodes.
    [(reason,)] = query(store, "SELECT reason FROM transitions WHERE to_state = 'stopping'")
    assert reason.startswith("simulation finished, ended early: ") and why in reason, reason
    assert reason.endswith(f"after {episodes} episodes")
    assert f"ended early by its termination condition: {reason.split(': ', 1)[1]}" in \
        result.stderr, result.stderr
    assert "Ended early: " in result.stdout and why in result.stdout


def test_frozenlake_q_learning_example_passes_its_test_phase(tmp_path, process_tag):
    store = tmp_path / "results.sqlite"
    result = run_mosaic("experiment-start", "examples/frozenlake_q.yml", "--store", str(store))
    assert result.returncode == 0, result.stderr
    runs = query(store, "SELECT uid, status, episodes FROM runs ORDER BY id")
    assert [(u.rsplit("-", 1)[1], s, e) for u, s, e in runs] == [
        ("train", "finished", 500), ("test", "finished", 100)]
    [(success,)] = query(store, "SELECT AVG(total_return) FROM episodes WHERE run_id = "
                                "(SELECT id FROM runs WHERE uid LIKE '%-test')")
    assert success >= 0.9


def test_checkpoint_every_n_episodes_saves_during_the_phase(tmp_path, process_tag):
    text = PHASED.format(placement="thread", load="checkpoint_every: 1").replace(
        "brain: tests.fixtures.agents:CountingBrain",
        "brain: tests.fixtures.agents:SaveCountingBrain")
    path = write_experiment(tmp_path, text)
    result = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "r.sqlite"))
    assert result.returncode == 0, result.stderr
    [train] = (tmp_path / "r-checkpoints" / "phased").glob("*/train/learner.npz")
    with np.load(train, allow_pickle=False) as data:
        # Saved before episodes 2 and 3 (every episode), then at the end of the phase.
        assert int(data["brain/state/saves"][0]) == 3
