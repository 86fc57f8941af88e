"""SyncCopies steps its copies with less work than Gymnasium's SyncVectorEnv and answers what it
answers: both stepped side by side, with the same seeds and actions, agree to the bit."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Dict
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TransformObservation

from mosaic.environments.sync_copies import SyncCopies
from tests.fixtures.envs import TAXI

pytestmark = pytest.mark.timeout(60)

COPIES = 4

def _in_a_dict(env_id: str) -> gymnasium.Env[Any, Any]:
    """An environment whose observations are a Dict (which SyncVectorEnv concatenates per key)."""
    env = gymnasium.make(env_id)
    return TransformObservation(env, lambda observation: {"x": observation},
                                Dict({"x": env.observation_space}))


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, tuple):
        return (isinstance(right, tuple) and len(left) == len(right)
                and all(_equal(a, b) for a, b in zip(left, right, strict=True)))
    if isinstance(left, dict):
        return (isinstance(right, dict) and left.keys() == right.keys()
                and all(_equal(left[key], right[key]) for key in left))
    if isinstance(left, np.ndarray) and left.dtype == object:
        return (isinstance(right, np.ndarray) and left.shape == right.shape
                and all(_equal(a, b) for a, b in zip(left.ravel(), right.ravel(), strict=True)))
    if isinstance(left, np.ndarray):
        return (isinstance(right, np.ndarray) and left.dtype == right.dtype
                and np.array_equal(left, right))
    return type(left) is type(right) and bool(left == right)


def _side_by_side(make: Any, mode: AutoresetMode, steps: int = 300) -> int:
    """Step a SyncVectorEnv and SyncCopies alike; return how many copies' episodes ended."""
    plain = SyncVectorEnv([make] * COPIES, autoreset_mode=mode)
    lean = SyncCopies([make] * COPIES, autoreset_mode=mode)
    assert lean.lean  # this Gymnasium has what the lean step reads
    rng = np.random.default_rng(7)
    ended = 0
    try:
        seeds = list(range(COPIES))
        assert _equal(plain.reset(seed=seeds), lean.reset(seed=seeds))
        for _ in range(steps):
            actions = np.array([plain.single_action_space.sample() for _ in range(COPIES)])
            expected, got = plain.step(actions), lean.step(actions.copy())
            assert _equal(expected, got)
            observations = got[0]
            if isinstance(observations, np.ndarray):
                assert observations is not lean._observations  # a copy, as the base class's
            done = got[2] | got[3]
            ended += int(np.count_nonzero(done))
            if mode == AutoresetMode.DISABLED and done.any():
                seeds = [int(seed) for seed in rng.integers(0, 1000, COPIES)]
                # A dict each: the vector takes reset_mask out of the one it is given.
                assert _equal(plain.reset(seed=seeds, options={"reset_mask": done}),
                              lean.reset(seed=seeds, options={"reset_mask": done}))
    finally:
        plain.close()
        lean.close()
    return ended


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED,
                                  AutoresetMode.NEXT_STEP])
@pytest.mark.parametrize("make", [
    functools.partial(gymnasium.make, "CartPole-v1"),  # a Box, no info
    functools.partial(gymnasium.make, TAXI, max_episode_steps=20),  # Discrete, info every step
    functools.partial(_in_a_dict, "CartPole-v1"),  # a Dict: concatenated by Gymnasium
], ids=["cartpole", "taxi", "dict"])
def test_it_answers_as_sync_vector_env(make: Any, mode: AutoresetMode) -> None:
    assert _side_by_side(make, mode) > COPIES  # episodes ended, and the resets agreed too


def test_a_wrong_number_of_actions_is_refused() -> None:
    lean = SyncCopies([functools.partial(gymnasium.make, "CartPole-v1")] * 2,
                      autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        lean.reset(seed=0)
        with pytest.raises(ValueError):
            lean.step(np.zeros(3, dtype=np.int64))
    finally:
        lean.close()


def test_observations_that_do_not_stack_are_refused() -> None:
    """The lean stacking falls back to np.stack, which raises, for an observation of another
    shape than the space's."""
    def wrong_shape() -> gymnasium.Env[Any, Any]:
        env = gymnasium.make("CartPole-v1", disable_env_checker=True)
        return TransformObservation(env, lambda observation: observation[:2],
                                    env.observation_space)

    lean = SyncCopies([wrong_shape] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        with pytest.raises(ValueError):
            lean.reset(seed=0)  # the base class's reset stacks them first
        with pytest.raises(ValueError):
            lean.step(np.zeros(2, dtype=np.int64))
    finally:
        lean.close()
