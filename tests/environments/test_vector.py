"""The vector adapter: N copies in lockstep, each ended copy started again in a way the outcome
states the same for every autoreset mode, with mosaic's seeds where the vector takes them."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from mosaic.core.errors import MosaicError
from mosaic.environments.factory import make_any, make_vector_environment
from mosaic.environments.vector import VectorAdapter
from tests.fixtures.envs import TAXI

pytestmark = pytest.mark.timeout(60)


def _run_until_an_end(adapter: VectorAdapter, copies: int, seeds: np.ndarray):
    adapter.reset(np.arange(copies, dtype=np.uint64))
    for _ in range(600):
        outcome = adapter.step(np.ones(copies, dtype=np.int64), seeds)
        if outcome.starts.any():
            return outcome
    raise AssertionError("no copy ended")


def test_an_ended_copy_starts_again_in_the_same_step_with_its_seed():
    adapter = make_vector_environment("gymnasium:CartPole-v1", {}, 3)
    seeds = np.array([11, 12, 13], dtype=np.uint64)
    try:
        outcome = _run_until_an_end(adapter, 3, seeds)
        ended = outcome.starts.nonzero()[0]
        assert outcome.acted.all()
        assert (outcome.terminated | outcome.truncated)[ended].all()
        assert set(outcome.final_observations) == set(ended.tolist())
        for copy in ended:
            fresh = gymnasium.make("CartPole-v1")
            first, _ = fresh.reset(seed=int(seeds[copy]))
            np.testing.assert_array_equal(outcome.observations[copy], first)
            assert not np.array_equal(outcome.final_observations[copy], first)
        assert adapter.reseeds
    finally:
        adapter.close()


def test_copies_seeded_once_go_on_from_their_own_generators():
    """``seeding: once``: the seeds of later episodes are ignored, and each copy continues
    from the generator its first seed made, as a copy of Gymnasium's own vector does."""
    adapter = make_vector_environment("gymnasium:CartPole-v1", {}, 3, seeding="once")
    seeds = np.array([11, 12, 13], dtype=np.uint64)
    try:
        outcome = _run_until_an_end(adapter, 3, seeds)
        assert not adapter.reseeds
        for copy in outcome.starts.nonzero()[0]:
            fresh = gymnasium.make("CartPole-v1")
            fresh.reset(seed=int(copy))  # the first reset's seed (np.arange in _run_until_an_end)
            while True:
                _, _, terminated, truncated, _ = fresh.step(1)
                if terminated or truncated:
                    break
            second, _ = fresh.reset()
            np.testing.assert_array_equal(outcome.observations[copy], second)
            first_of_given, _ = fresh.reset(seed=int(seeds[copy]))
            assert not np.array_equal(outcome.observations[copy], first_of_given)
    finally:
        adapter.close()


def test_copies_seeded_once_reset_inside_the_step_and_give_the_episodes_of_a_masked_reset():
    """Without max_steps, copies seeded once reset inside the vector's step (SAME_STEP); with
    it, mosaic resets them after the step (DISABLED, a reset with a mask). Both give every copy
    the same episodes: observations, rewards, ends, starts and final observations."""
    inside = make_vector_environment("gymnasium:CartPole-v1", {}, 4, seeding="once")
    after = make_vector_environment("gymnasium:CartPole-v1", {}, 4, seeding="once",
                                    max_steps=10**9)
    actions = np.random.default_rng(5).integers(0, 2, size=(300, 4))
    try:
        assert inside.env.unwrapped.autoreset_mode == AutoresetMode.SAME_STEP
        assert after.env.unwrapped.autoreset_mode == AutoresetMode.DISABLED
        seeds = np.arange(4, dtype=np.uint64)
        np.testing.assert_array_equal(inside.reset(seeds).observations,
                                      after.reset(seeds).observations)
        ends = 0
        for step in actions:
            a, b = inside.step(step, None), after.step(step, None)
            for field in ("observations", "rewards", "terminated", "truncated", "starts"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            assert a.final_observations.keys() == b.final_observations.keys()
            for copy, final in a.final_observations.items():
                np.testing.assert_array_equal(final, b.final_observations[copy])
            ends += int(a.starts.sum())
        assert ends > 20
    finally:
        inside.close()
        after.close()


def test_an_unknown_seeding_is_refused():
    with pytest.raises(MosaicError, match="seeding must be one of episode, once"):
        make_vector_environment("gymnasium:CartPole-v1", {}, 2, seeding="never")


def test_max_steps_truncates_and_restarts_a_copy():
    adapter = make_vector_environment("gymnasium:CartPole-v1", {}, 2, max_steps=3)
    try:
        adapter.reset(np.arange(2, dtype=np.uint64))
        seeds = np.arange(2, dtype=np.uint64)
        for _ in range(2):
            assert not adapter.step(np.zeros(2, dtype=np.int64), seeds).starts.any()
        outcome = adapter.step(np.zeros(2, dtype=np.int64), seeds)
        assert outcome.truncated.all() and outcome.starts.all()
    finally:
        adapter.close()


def test_a_next_step_vector_says_which_copies_started_and_did_not_act():
    adapter = make_vector_environment("gymnasium:CartPole-v1", {}, 3, vector_mode="native")
    try:
        assert not adapter.reseeds
        ended = _first_end(adapter)
        outcome = adapter.step(np.ones(3, dtype=np.int64), None)
        assert (outcome.starts == ended).all()
        assert (outcome.acted == ~ended).all()
        assert (outcome.rewards[ended] == 0).all()
        assert not outcome.final_observations
    finally:
        adapter.close()


def _first_end(adapter: VectorAdapter) -> np.ndarray:
    adapter.reset(np.zeros(3, dtype=np.uint64))
    for _ in range(600):
        outcome = adapter.step(np.ones(3, dtype=np.int64), None)
        assert not outcome.starts.any()
        if (outcome.terminated | outcome.truncated).any():
            return outcome.terminated | outcome.truncated
    raise AssertionError("no copy ended")


def test_a_same_step_vector_gives_the_final_observations():
    env = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2,
                        autoreset_mode=AutoresetMode.SAME_STEP)
    adapter = VectorAdapter(env)
    try:
        outcome = _run_until_an_end(adapter, 2, np.zeros(2, dtype=np.uint64))
        assert set(outcome.final_observations) == set(outcome.starts.nonzero()[0].tolist())
        assert not adapter.reseeds
    finally:
        adapter.close()


def test_a_vectors_own_autoreset_mode_counts_over_its_metadata():
    """Gymnasium 1.2's vectors write their mode into the copies' class-level metadata, so a
    vector made later overwrites it for all; the adapter goes by the vector's own mode."""
    env = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2,
                        autoreset_mode=AutoresetMode.SAME_STEP)
    env.metadata["autoreset_mode"] = AutoresetMode.DISABLED  # as another vector would leave it
    adapter = VectorAdapter(env)
    try:
        outcome = _run_until_an_end(adapter, 2, np.zeros(2, dtype=np.uint64))
        # Reset inside the step, so none reset again by the adapter: the final observations
        # are the vector's, and the copies that started are those that ended.
        ended = (outcome.terminated | outcome.truncated).nonzero()[0].tolist()
        assert set(outcome.final_observations) == set(ended) == set(
            outcome.starts.nonzero()[0].tolist())
        assert not adapter.reseeds
    finally:
        adapter.close()


def test_a_vector_with_an_unknown_autoreset_mode_is_refused_naming_it():
    env = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point")
    try:
        env.metadata = {**env.metadata, "autoreset_mode": "sometimes"}
        with pytest.raises(MosaicError, match="autoreset_mode is 'sometimes', not one of "
                                              "Gymnasium's NextStep, SameStep, Disabled"):
            VectorAdapter(env)
    finally:
        env.close()


def test_a_step_limit_needs_a_vector_that_mosaic_resets():
    with pytest.raises(MosaicError, match="max_steps needs a vector environment"):
        make_vector_environment("gymnasium:CartPole-v1", {}, 2, vector_mode="native",
                                max_steps=10)



def test_action_masks_follow_the_copies_through_a_reset():
    adapter = make_vector_environment(f"gymnasium:{TAXI}", {}, 2, max_steps=2)
    try:
        start = adapter.reset(np.arange(2, dtype=np.uint64))
        assert start.legal_actions.shape == (2, 6)
        adapter.step(np.zeros(2, dtype=np.int64), np.arange(2, dtype=np.uint64))
        outcome = adapter.step(np.zeros(2, dtype=np.int64), np.array([5, 6], dtype=np.uint64))
        assert outcome.starts.all()
        for copy, seed in enumerate((5, 6)):
            _, info = gymnasium.make(TAXI).reset(seed=seed)
            np.testing.assert_array_equal(outcome.legal_actions[copy], info["action_mask"])
    finally:
        adapter.close()


def test_copies_of_a_pettingzoo_environment_are_refused():
    with pytest.raises(MosaicError, match="copies: takes Gymnasium environments"):
        make_vector_environment("pettingzoo:classic.tictactoe_v3", {}, 2)


def test_a_factory_vector_of_another_size_is_refused():
    with pytest.raises(MosaicError, match="vector of 3 copies, but the file asks for copies: 2"):
        make_vector_environment("tests.fixtures.vector_envs:cartpole_vector", {}, 2)


def test_a_factory_vector_without_copies_is_held_as_it_is():
    adapter = make_any("tests.fixtures.vector_envs:cartpole_vector", {"num_envs": 2})
    try:
        assert isinstance(adapter, VectorAdapter) and adapter.copies == 2
    finally:
        adapter.close()


def test_a_factory_of_single_environments_is_copied():
    adapter = make_vector_environment("tests.fixtures.vector_envs:cartpole", {}, 2)
    try:
        assert adapter.copies == 2 and adapter.reseeds
    finally:
        adapter.close()
