"""The Harness keeps a run's seeds: given a run's seed (not the file's), it replays the run's
first agent in its first environment, episode by episode."""

from __future__ import annotations

import gymnasium
import pytest

import mosaic
from mosaic.agents import RandomMuscle
from mosaic.agents.learners import Harness, PolicyGradientBrain, PolicyGradientMuscle
from tests.e2e.cli import cartpole, write_experiment

pytestmark = pytest.mark.timeout(120)

PARAMS = {"hidden_sizes": [16], "learning_rate": 0.01, "batch_episodes": 2}


def _replay(seed: int, episodes: int, muscle, brain=None, params=None) -> list[tuple[int, float]]:
    env = gymnasium.make("CartPole-v1")
    try:
        with Harness(env, muscle, brain, seed=seed, params=params) as harness:
            return [(s.steps, s.total_reward) for s in harness.run(episodes)]
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
    assert _replay(run.seed, 6, RandomMuscle()) == _episodes(results)
    assert _replay(11, 6, RandomMuscle()) != _episodes(results)


def test_a_run_seed_replays_a_learner(tmp_path):
    params = "params: {hidden_sizes: [16], learning_rate: 0.01, batch_episodes: 2}"
    muscle = f"{{class: mosaic.agents.learners:PolicyGradientMuscle, {params}}}"
    brain = f"{{class: mosaic.agents.learners:PolicyGradientBrain, {params}}}"
    text = cartpole(episodes=8, seed=5, muscle=muscle).replace(
        "muscle:", f"brain: {brain}\n        muscle:", 1)
    (run,) = results = mosaic.run(write_experiment(tmp_path, text), progress=False)
    replayed = _replay(run.seed, 8, PolicyGradientMuscle(), PolicyGradientBrain(), PARAMS)
    assert replayed == _episodes(results)
