"""The Harness drives a run's step core: given a run's seed (not the file's), it replays the
run's first agent in its first environment, episode by episode, to the run's digest."""

from __future__ import annotations

import gymnasium
import pytest

import mosaic
from mosaic.agents import RandomMuscle
from mosaic.agents.learners import (
    Harness,
    PolicyGradientBrain,
    PolicyGradientMuscle,
    SACBrain,
    SACMuscle,
)
from tests.e2e.cli import cartpole, write_experiment

pytestmark = pytest.mark.timeout(120)

PARAMS = {"hidden_sizes": [16], "learning_rate": 0.01, "batch_episodes": 2}


def _replay(seed: int, episodes: int, muscle, brain=None, params=None, env="CartPole-v1"
            ) -> tuple[list[tuple[int, float]], str]:
    """The (steps, return) of each episode the harness plays on ``env``, and its digest."""
    env = gymnasium.make(env)
    try:
        with Harness(env, muscle, brain, seed=seed, params=params, agent="random",
                     environment="cartpole") as harness:
            played = [(s.steps, s.total_reward) for s in harness.run(episodes)]
            return played, harness.digest
    finally:
        env.close()


def _episodes(results) -> list[tuple[int, float]]:
    frame = results.episodes().sort_values("episode")
    return list(zip(frame["steps"].astype(int), frame["total_return"].astype(float),
                    strict=True))


def test_a_run_seed_replays_a_random_agent(tmp_path):
    path = write_experiment(tmp_path, cartpole(episodes=6, seed=11))
    (run,) = results = mosaic.run(path, progress=False)
    assert run.seed != 11  # a run's seed is derived from the file's
    assert _replay(run.seed, 6, RandomMuscle()) == (_episodes(results), run.digest)
    assert _replay(11, 6, RandomMuscle())[0] != _episodes(results)


def test_a_run_seed_replays_a_learner(tmp_path):
    params = "params: {hidden_sizes: [16], learning_rate: 0.01, batch_episodes: 2}"
    muscle = f"{{class: mosaic.agents.learners:PolicyGradientMuscle, {params}}}"
    brain = f"{{class: mosaic.agents.learners:PolicyGradientBrain, {params}}}"
    text = cartpole(episodes=8, seed=5, muscle=muscle).replace(
        "muscle:", f"brain: {brain}\n        muscle:", 1)
    (run,) = results = mosaic.run(write_experiment(tmp_path, text), progress=False)
    replayed = _replay(run.seed, 8, PolicyGradientMuscle(), PolicyGradientBrain(), PARAMS)
    assert replayed == (_episodes(results), run.digest)


def test_a_run_seed_replays_a_learner_whose_muscle_starts_with_the_brains_weights(tmp_path):
    """SAC's muscle acts on the brain's actor from its sync answer on, as in a run (before any
    weights it would sample tanh(N(0, 1))): the harness's first steps are the run's."""
    ac = {"hidden_sizes": [16], "batch_size": 32, "learning_starts": 100, "random_steps": 0}
    params = "params: {hidden_sizes: [16], batch_size: 32, learning_starts: 100, random_steps: 0}"
    muscle = f"{{class: mosaic.agents.learners:SACMuscle, {params}}}"
    brain = f"{{class: mosaic.agents.learners:SACBrain, {params}}}"
    text = cartpole(episodes=2, seed=3, muscle=muscle, env="gymnasium:Pendulum-v1").replace(
        "muscle:", f"brain: {brain}\n        muscle:", 1)
    (run,) = results = mosaic.run(write_experiment(tmp_path, text), progress=False)
    replayed = _replay(run.seed, 2, SACMuscle(), SACBrain(), ac, env="Pendulum-v1")
    assert replayed == (_episodes(results), run.digest)
