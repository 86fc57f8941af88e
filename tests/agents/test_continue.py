"""Each built-in learner, saved between episodes and resumed from the file in a fresh instance,
goes on exactly as the uninterrupted one: the same episodes, the same brain and muscle states,
the same generators."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from mosaic.agents import Brain, Muscle
from mosaic.agents.learners import (
    DQNBrain,
    DQNMuscle,
    Harness,
    PolicyGradientBrain,
    PolicyGradientMuscle,
    PPOBrain,
    PPOMuscle,
    SACBrain,
    SACMuscle,
    TabularQBrain,
    TabularQMuscle,
    TD3Brain,
    TD3Muscle,
)
from mosaic.agents.policies import load_policy
from mosaic.core.checkpoints import read_checkpoint

pytestmark = pytest.mark.timeout(120)

Learner = tuple[str, Callable[[], Muscle], Callable[[], Brain], dict[str, Any], int, int]

# (env, muscle, brain, params, episodes before the save, episodes after). The splits fall
# inside what each learner holds between updates: a policy-gradient batch of 4 episodes half
# collected, a PPO rollout of 300 steps part collected, a DQN buffer filling while it trains.
LEARNERS: dict[str, Learner] = {
    "tabular_q": ("FrozenLake-v1", TabularQMuscle, TabularQBrain,
                  {"epsilon_decay_episodes": 30, "update_every": 3}, 13, 20),
    "policy_gradient": ("CartPole-v1", PolicyGradientMuscle, PolicyGradientBrain,
                        {"batch_episodes": 4, "hidden_sizes": [16]}, 6, 7),
    "dqn": ("CartPole-v1", DQNMuscle, DQNBrain,
            {"learning_starts": 50, "batch_size": 16, "hidden_sizes": [16], "sync_every": 5,
             "epsilon_decay_steps": 400, "buffer_size": 300}, 8, 6),
    "ppo": ("CartPole-v1", PPOMuscle, PPOBrain,
            {"rollout_steps": 300, "minibatch_size": 64, "epochs": 2, "hidden_sizes": [16]},
            7, 8),
    # Updates before and after the split, on a learning rate and clip range still falling.
    "ppo_annealed": ("CartPole-v1", PPOMuscle, PPOBrain,
                     {"rollout_steps": 64, "minibatch_size": 32, "epochs": 2,
                      "hidden_sizes": [16], "anneal_steps": 600}, 7, 8),
}
#: Learners without a greedy policy checkpoint (Box actions); the split falls between the
#: random steps and training, with the replay buffer already wrapping around.
CONTINUOUS: dict[str, Learner] = {
    name: ("Pendulum-v1", muscle, brain,
           {"learning_starts": 150, "random_steps": 250, "batch_size": 16,
            "hidden_sizes": [16], "sync_every": 5, "buffer_size": 500}, 2, 2)
    for name, muscle, brain in (("td3", TD3Muscle, TD3Brain), ("sac", SACMuscle, SACBrain))
}
#: SAC with gSDE: the brain's log_std and the muscle's exploration matrices (drawn at each
#: episode's start and every 70 steps) go on as they were.
CONTINUOUS["sac_gsde"] = ("Pendulum-v1", SACMuscle, SACBrain,
                          {**CONTINUOUS["sac"][3], "exploration": "gsde", "sde_sample_freq": 70},
                          2, 2)


def state_of(harness: Harness) -> dict[str, Any]:
    """Everything the learner's future depends on, for comparison."""
    return {"brain": harness.brain.state(), "muscle": harness.muscle.state(),
            "rngs": (harness.brain.context.rng.bit_generator.state,
                     harness.muscle.context.rng.bit_generator.state)}


def assert_same(left: Any, right: Any) -> None:
    if isinstance(left, dict):
        assert sorted(left) == sorted(right)
        for key in left:
            assert_same(left[key], right[key])
    elif isinstance(left, tuple):
        assert len(left) == len(right)
        for a, b in zip(left, right, strict=True):
            assert_same(a, b)
    else:
        np.testing.assert_array_equal(left, right)


def outcomes(harness: Harness, episodes: int) -> list[tuple[int, int, float]]:
    return [(s.episode, s.steps, s.total_reward) for s in harness.run(episodes)]


@pytest.mark.parametrize("name", sorted({**LEARNERS, **CONTINUOUS}))
def test_a_resumed_learner_goes_on_as_the_uninterrupted_one(name: str, tmp_path: Path) -> None:
    env_id, muscle, brain, params, before, after = {**LEARNERS, **CONTINUOUS}[name]
    env = gymnasium.make(env_id)
    try:
        with Harness(env, muscle(), brain(), seed=5, params=params) as whole:
            outcomes(whole, before)
            expected = outcomes(whole, after)
            final = state_of(whole)
        path = str(tmp_path / "agent.npz")
        with Harness(env, muscle(), brain(), seed=5, params=params) as first:
            outcomes(first, before)
            first.save(path)
        # A fresh pair, seeded alike, whose set-up draws differ from where the first stopped.
        with Harness(env, muscle(), brain(), seed=5, params=params) as resumed:
            resumed.resume(path)
            assert outcomes(resumed, after) == expected
            assert_same(state_of(resumed), final)
    finally:
        env.close()


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_the_checkpoint_is_a_policy_checkpoint_too(name: str, tmp_path: Path) -> None:
    env_id, muscle, brain, params, before, _ = LEARNERS[name]
    env = gymnasium.make(env_id)
    try:
        with Harness(env, muscle(), brain(), seed=1, params=params) as harness:
            outcomes(harness, before)
            path = tmp_path / "agent.npz"
            harness.save(str(path))
            greedy = harness.brain.greedy_policy()
        policy = load_policy(path)
        saved = read_checkpoint(path)
        assert saved.positions == {"env": (before, 0, 0)}
        assert set(saved.muscles) == {"agent@env"} and "rng" in saved.brain
        # What a learner's load_checkpoint reads is the brain's greedy policy.
        arrays = {"q": policy.q} if policy.kind == "q_table" else {
            f"{kind}{i}": layer[j] for i, layer in enumerate(policy.layers)  # type: ignore[union-attr]
            for j, kind in enumerate("Wb")}
        assert_same(arrays, {k: v for k, v in greedy.items() if k not in ("format", "version")})
    finally:
        env.close()


def test_tabular_q_goes_on_with_the_epsilon_it_stopped_at(tmp_path: Path) -> None:
    env = gymnasium.make("FrozenLake-v1")
    params = {"epsilon_decay_episodes": 10}
    try:
        with Harness(env, TabularQMuscle(), TabularQBrain(), seed=2, params=params) as first:
            first.run(6)
            first.save(str(tmp_path / "q.npz"))
        with Harness(env, TabularQMuscle(), TabularQBrain(), seed=2, params=params) as resumed:
            resumed.resume(str(tmp_path / "q.npz"))
            resumed.run(1)
            # The seventh episode's epsilon: 1 - 6/10 * 0.95, not a fresh start's 1.0.
            assert resumed.muscle.epsilon == pytest.approx(1.0 - 0.6 * 0.95)  # type: ignore[attr-defined]
    finally:
        env.close()
