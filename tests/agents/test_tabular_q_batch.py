"""Tabular Q-learning over copies: batched actions are legal and reproducible, ended copies send
the transitions the brain learns as single ones, and 8 copies learn FrozenLake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from mosaic.agents import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.learners import Harness, TabularQBrain, TabularQMuscle
from mosaic.core.errors import MosaicError
from mosaic.messages.codec import pack, unpack
from tests.agents.vector_loop import SLOT, VectorLoop, vector_env

pytestmark = pytest.mark.timeout(60)

COPIES = 8


def slots(n_states: int = 16, n_actions: int = 4) -> dict[str, Slot]:
    return {SLOT: Slot(SLOT, spaces.Discrete(n_states), spaces.Discrete(n_actions))}


def muscle_with(mode: Mode = "train", seed: int = 0, copies: int = COPIES,
                **params: Any) -> TabularQMuscle:
    muscle = TabularQMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", slots(), seed, mode, params, copies=copies))
    return muscle


def brain_with(**params: Any) -> TabularQBrain:
    brain = TabularQBrain()
    brain.setup(BrainContext("a", "a", slots(), 0, "train", params))
    return brain


def first_batch(states: Any, legal: Any = None) -> Batch:
    n = len(states)
    return Batch(np.asarray(states, dtype=np.int64), np.zeros(n), np.zeros(n, bool),
                 np.zeros(n, bool), np.zeros(n, bool), np.ones(n, bool), {}, legal)


def next_batch(states: Any, rewards: Any, terminated: Any, finals: dict[int, int]) -> Batch:
    n = len(states)
    ended = np.asarray(terminated, dtype=bool)
    return Batch(np.asarray(states, dtype=np.int64), np.asarray(rewards, dtype=np.float64),
                 ended, np.zeros(n, bool), np.ones(n, bool), ended,
                 {copy: np.int64(state) for copy, state in finals.items()})


def test_actions_are_one_int64_per_copy_in_the_batched_space() -> None:
    env = vector_env("FrozenLake-v1", COPIES, is_slippery=False)
    observations, _ = env.reset(seed=0)
    muscle = muscle_with()
    actions = muscle.act_batch(SLOT, first_batch(observations))
    env.close()
    assert actions.shape == (COPIES,) and actions.dtype == np.int64
    assert batch_space(spaces.Discrete(4), COPIES).contains(actions)
    assert env.action_space.contains(actions)
    # Epsilon starts at 1: the copies explore, and they do not all draw the same action.
    assert len(set(actions.tolist())) > 1


def test_masks_are_honoured_per_copy_when_exploring_and_when_greedy() -> None:
    masks = np.array([[0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]], dtype=np.int8)
    cases: list[tuple[Mode, float]] = [("train", 1.0), ("train", 0.0), ("test", 0.0)]
    for mode, epsilon in cases:
        muscle = muscle_with(mode, copies=4, epsilon=epsilon)
        muscle.q[0] = [9.0, 0.0, 5.0, 0.0]  # copy 0's best action is illegal for it
        seen: list[set[int]] = [set() for _ in range(4)]
        for _ in range(200):
            actions = muscle.act_batch(SLOT, first_batch([0, 0, 0, 0], masks))
            for copy, action in enumerate(actions.tolist()):
                seen[copy].add(action)
        for copy in range(4):
            assert seen[copy] <= set(np.flatnonzero(masks[copy]).tolist())
        if epsilon == 0.0:
            assert seen == [{2}, {0}, {2}, {0}]
        else:
            assert seen == [{1, 2}, {0}, {2, 3}, {0, 1, 2, 3}]
    muscle = muscle_with(copies=4, epsilon=1.0)
    with pytest.raises(MosaicError, match="copy 2 allows no action"):
        muscle.act_batch(SLOT, first_batch([0] * 4, np.array([[1, 0, 0, 0]] * 2 + [[0] * 4] * 2)))
    # PettingZoo's observation dict carries the masks with it, batched.
    batch = first_batch([0, 0], None)
    batched = {"observation": batch.observations, "action_mask": np.eye(4)[[3, 1]]}
    pz = Batch(batched, batch.rewards, batch.terminated, batch.truncated, batch.acted,
               batch.starts, {})
    assert muscle_with(copies=2).act_batch(SLOT, pz).tolist() == [3, 1]


def test_test_mode_is_greedy_with_ties_to_the_lowest_and_sends_nothing() -> None:
    muscle = muscle_with("test", copies=3)
    muscle.q[3] = [0.0, 2.0, 2.0, 1.0]
    muscle.q[5] = [1.0, 0.0, 0.0, 1.0]
    for _ in range(20):
        assert muscle.act_batch(SLOT, first_batch([3, 5, 0])).tolist() == [1, 0, 0]
    assert muscle.feedback_batch(SLOT, next_batch([4, 4, 4], [1, 1, 1], [1, 0, 0], {0: 4})) == []


def test_ended_copies_send_the_final_state_and_the_brain_learns_rows_as_transitions() -> None:
    muscle = muscle_with(copies=3, epsilon=1.0)
    actions = muscle.act_batch(SLOT, first_batch([0, 1, 2])).tolist()
    # Copy 1 ended in state 7 and restarts at 0; copies 0 and 2 go on.
    items = muscle.feedback_batch(SLOT, next_batch([4, 0, 6], [0.0, 1.0, 0.5], [0, 1, 0], {1: 7}))
    assert len(items) == 1
    rows = unpack(pack(items[0]))
    assert rows["states"].tolist() == [0, 1, 2] and rows["actions"].tolist() == actions
    assert rows["next_states"].tolist() == [4, 7, 6]  # the final state, not the restart
    assert rows["rewards"].tolist() == [0.0, 1.0, 0.5]
    assert rows["terminated"].tolist() == [False, True, False]
    assert rows["truncated"].tolist() == [False, False, False]
    assert rows["states"].dtype == np.int64 and rows["terminated"].dtype == bool
    # Nothing is pending until the copies act again.
    assert muscle.feedback_batch(SLOT, next_batch([4, 0, 6], [1, 1, 1], [0, 0, 0], {})) == []

    batched, single = brain_with(update_every=4), brain_with(update_every=4)
    for brain in (batched, single):
        brain.q[4] = [0.0, 3.0, 0.0, 0.0]
        brain.q[7] = [5.0, 0.0, 0.0, 0.0]  # terminal: copy 1 must not bootstrap from it
    assert batched.learn("m", rows) is None  # 3 transitions of 4
    answers = [single.learn("m", transition) for transition in zip(
        *(rows[name].tolist() for name in ("states", "actions", "rewards", "next_states",
                                           "terminated", "truncated")), strict=True)]
    assert answers == [None, None, None]
    assert np.array_equal(batched.q, single.q)
    assert batched.q[1, actions[1]] == pytest.approx(0.1)
    update = batched.learn("m", rows)  # 6 of 4: due
    assert update is not None and np.array_equal(update["q"], batched.q)
    at_end = brain_with()
    assert at_end.learn("m", {**rows, "terminated": np.zeros(3, bool)}) is None
    assert at_end.learn("m", rows) is not None  # a row ended an episode


def test_each_copy_explores_with_the_epsilon_of_its_own_episode() -> None:
    muscle = muscle_with(copies=2, epsilon_start=1.0, epsilon_end=0.0, epsilon_decay_episodes=4)
    muscle.act_batch(SLOT, first_batch([0, 0]))  # episodes 0 and 1 start
    assert muscle._copy_epsilons.tolist() == [1.0, 0.75] and muscle.episodes == 2
    muscle.feedback_batch(SLOT, next_batch([0, 0], [0, 0], [0, 1], {1: 5}))
    muscle.act_batch(SLOT, next_batch([0, 0], [0, 0], [0, 1], {1: 5}))  # copy 1: episode 2
    assert muscle._copy_epsilons.tolist() == [1.0, 0.5] and muscle.episodes == 3


def test_the_brain_refuses_a_malformed_transition_batch() -> None:
    brain = brain_with()
    good = {"states": np.array([0]), "actions": np.array([1]), "rewards": np.array([0.0]),
            "next_states": np.array([2]), "terminated": np.array([False]),
            "truncated": np.array([False])}
    with pytest.raises(MosaicError, match="transition batch with"):
        brain.learn("m", {k: v for k, v in good.items() if k != "rewards"})
    with pytest.raises(MosaicError, match="one length"):
        brain.learn("m", {**good, "actions": np.array([1, 2])})
    with pytest.raises(MosaicError, match="outside the table"):
        brain.learn("m", {**good, "next_states": np.array([16])})
    assert np.all(brain.q == 0.0)
    with pytest.raises(MosaicError, match="a batch of 3 copies"):
        muscle_with(copies=2).act_batch(SLOT, first_batch([0, 0, 0]))


def train(seed: int, episodes: int) -> tuple[VectorLoop, list[Any]]:
    env = vector_env("FrozenLake-v1", COPIES, is_slippery=False)
    loop = VectorLoop(env, TabularQMuscle(), TabularQBrain(), seed=seed)
    finished = loop.run(lambda done: len(done) >= episodes, max_steps=100_000)
    env.close()
    return loop, finished


def test_the_experience_of_ended_copies_matches_their_episodes() -> None:
    loop, finished = train(seed=1, episodes=40)
    loop.flush()
    rows = {name: np.concatenate([item[name] for item in loop.experience])
            for name in ("states", "next_states", "rewards", "terminated", "truncated")}
    ended = rows["terminated"] | rows["truncated"]
    # One ending transition per finished episode, in the same order (steps, then copies). Its
    # next state is the episode's last: the goal (15) when it paid 1, else a hole.
    assert int(ended.sum()) == len(finished) >= 40
    assert rows["rewards"][ended].tolist() == [e.total_reward for e in finished]
    assert rows["terminated"][ended].tolist() == [e.terminated for e in finished]
    holes = {5, 7, 11, 12}
    for next_state, reward in zip(rows["next_states"][ended], rows["rewards"][ended],
                                  strict=True):
        assert (next_state == 15) if reward == 1.0 else (next_state in holes)
    # One transition per step of every copy: finished steps and those of unfinished episodes.
    assert rows["states"].shape[0] == len(loop.actions) * COPIES


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frozen_lake_is_learnt_with_copies_and_the_greedy_test_phase_succeeds(
        tmp_path: Path, seed: int) -> None:
    loop, finished = train(seed=seed, episodes=500)
    assert isinstance(loop.brain, TabularQBrain)
    checkpoint = loop.brain.greedy_checkpoint(tmp_path / "q")
    env = gymnasium.make("FrozenLake-v1", is_slippery=False)
    with Harness(env, TabularQMuscle(), None, seed=seed + 100, mode="test",
                 params={"load_checkpoint": str(checkpoint)}) as harness:
        test = harness.run(100)
    env.close()
    assert np.mean([s.total_reward for s in test]) >= 0.9
    assert np.mean([e.total_reward for e in finished[-50:]]) > 0.5


def test_same_seed_gives_identical_actions_and_tables_and_another_seed_does_not() -> None:
    first, _ = train(seed=3, episodes=60)
    second, _ = train(seed=3, episodes=60)
    other, _ = train(seed=4, episodes=60)
    assert len(first.actions) == len(second.actions)
    assert all(np.array_equal(a, b) for a, b in zip(first.actions, second.actions, strict=True))
    assert isinstance(first.brain, TabularQBrain) and isinstance(second.brain, TabularQBrain)
    assert np.array_equal(first.brain.q, second.brain.q)
    assert not all(np.array_equal(a, b) for a, b in zip(first.actions, other.actions,
                                                        strict=False))
