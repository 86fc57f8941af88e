"""DQN: params are checked, Box actions are refused, masks are honoured when acting and in the
target's max, the replay buffer keeps the newest transitions, and CartPole is learnt."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.learners import DQNBrain, DQNMuscle, Harness, ReplayBuffer
from mosaic.agents.learners.replay import Transitions
from mosaic.core.errors import MosaicError
from tests.agents.vector_loop import SLOT, VectorLoop, vector_env

# Learning is CPU-bound: on a loaded machine it takes several times as long.
pytestmark = pytest.mark.timeout(300)

SMALL: dict[str, Any] = {"hidden_sizes": [16], "learning_starts": 4, "batch_size": 8}
CARTPOLE: dict[str, Any] = {"hidden_sizes": [64, 64], "learning_rate": 0.001,
                            "learning_starts": 500, "epsilon_decay_steps": 5000,
                            "target_update_every": 200, "buffer_size": 20000}


def slots(n_actions: int = 3, action_space: Any = None) -> dict[str, Slot]:
    box = spaces.Box(-np.inf, np.inf, (2,), np.float64)
    return {SLOT: Slot(SLOT, box, action_space or spaces.Discrete(n_actions))}


def muscle_with(mode: Mode = "train", copies: int = 1, **params: Any) -> DQNMuscle:
    muscle = DQNMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", slots(), 0, mode, params, copies=copies))
    return muscle


def brain_with(**params: Any) -> DQNBrain:
    brain = DQNBrain()
    brain.setup(BrainContext("a", "a", slots(), 0, "train", {**SMALL, **params}))
    return brain


def rows(k: int, *, next_masks: Any = None, terminated: bool = False) -> dict[str, Any]:
    return {"observations": np.arange(2 * k, dtype=float).reshape(k, 2),
            "actions": np.zeros(k, np.int64), "rewards": np.ones(k),
            "next_observations": np.ones((k, 2)), "terminated": np.full(k, terminated),
            "truncated": np.zeros(k, bool), "next_masks": next_masks}


@pytest.mark.parametrize(("params", "key"), [
    ({"learning_rate": 0}, "learning_rate"), ({"discount": 1.5}, "discount"),
    ({"buffer_size": 0}, "buffer_size"), ({"hidden_sizes": [0]}, "hidden_sizes"),
    ({"epsilon_end": -0.1}, "epsilon_end"), ({"tau": 2}, "tau"), ({"batch": 3}, "batch"),
])
def test_bad_params_are_refused_naming_the_key(params: dict[str, Any], key: str) -> None:
    for build in (lambda: muscle_with(**params), lambda: brain_with(**params)):
        with pytest.raises(MosaicError, match=f"params.{key}"):
            build()


def test_defaults_are_sensible_and_the_model_is_the_muscles() -> None:
    model = DQNMuscle.params_model()
    defaults = model.model_validate({})
    assert defaults.double_dqn and defaults.buffer_size >= defaults.batch_size
    assert 0 < defaults.epsilon_end < defaults.epsilon_start <= 1


def test_a_box_action_space_is_refused_naming_ppo() -> None:
    box = spaces.Box(-1.0, 1.0, (1,), np.float32)
    for learner, context in ((DQNBrain(), BrainContext("a", "a", slots(action_space=box), 0)),
                             (DQNMuscle(), MuscleContext("a", "m", "e", slots(action_space=box),
                                                         0))):
        with pytest.raises(MosaicError, match="PPO"):
            learner.setup(context)  # type: ignore[arg-type]


def test_exploration_and_greedy_actions_stay_within_the_mask() -> None:
    muscle = muscle_with(epsilon_start=1.0, epsilon_decay_steps=0, epsilon_end=1.0)
    mask = np.array([0, 1, 0], dtype=np.int8)
    assert {muscle.act(SLOT, np.zeros(2), mask) for _ in range(50)} == {1}
    observation = {"observation": np.zeros(2), "action_mask": np.array([0, 0, 1], np.int8)}
    assert {muscle.act(SLOT, observation) for _ in range(50)} == {2}
    greedy = muscle_with(mode="test")
    brain = brain_with()
    brain.online.layers[-1][1][:] = [5.0, 0.0, -5.0]  # action 0 is best unless masked
    greedy.apply_update(brain.weights())
    assert greedy.act(SLOT, np.zeros(2)) == 0
    assert greedy.act(SLOT, np.zeros(2), np.array([0, 1, 1])) == 1
    copies = muscle_with(mode="test", copies=2)
    copies.apply_update(brain.weights())
    batch = Batch(np.zeros((2, 2)), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool),
                  np.zeros(2, bool), np.ones(2, bool), {}, np.array([[1, 1, 1], [0, 0, 1]]))
    assert copies.act_batch(SLOT, batch).tolist() == [0, 2]


@pytest.mark.parametrize("double_dqn", [False, True])
def test_the_target_max_skips_illegal_actions(double_dqn: bool) -> None:
    brain = brain_with(double_dqn=double_dqn, learning_rate=1e-9, discount=1.0,
                       learning_starts=1, batch_size=1, huber_delta=100.0)
    for net in (brain.online, brain.target):
        for w, b in net.layers:
            w[...] = 0.0
            b[...] = 0.0
        net.layers[-1][1][:] = [1.0, 10.0, 3.0]  # Q = these values everywhere
    brain.learn("a@env", rows(1, next_masks=np.array([[True, False, True]])))
    # loss = 0.5 * (Q(s, 0) - (r + max over legal Q(s'))) ** 2 = 0.5 * (1 - (1 + 3)) ** 2
    assert brain._stats[0] == pytest.approx(4.5)


def test_the_muscle_sends_the_next_mask_and_the_target_ignores_terminal_values() -> None:
    muscle = muscle_with()
    muscle.act(SLOT, np.zeros(2))
    item = muscle.feedback(SLOT, 1.0, False, False,
                           {"observation": np.ones(2), "action_mask": np.array([1, 0, 1])})
    assert item is not None and item["next_masks"].tolist() == [[True, False, True]]
    brain = brain_with(learning_starts=1, batch_size=1, learning_rate=1e-9)
    brain.online.layers[-1][1][:] += 100.0
    brain.target.layers[-1][1][:] += 100.0
    brain.learn("a@env", rows(1, terminated=True))
    q = brain.online.forward(np.array([0.0, 1.0]))[0]  # before the update: lr 1e-9
    assert brain._stats[1] == pytest.approx(q, abs=1e-6)  # q_mean: Q(s, 0) of the sample
    assert brain._stats[0] == pytest.approx(1.0 * (abs(q - 1.0) - 0.5))  # Huber, no bootstrap


def test_the_replay_buffer_keeps_the_newest_and_samples_uniformly() -> None:
    buffer = ReplayBuffer(5, 2, 3)
    for start in range(0, 12, 3):
        k = np.arange(start, start + 3)
        buffer.add(Transitions(np.c_[k, k].astype(float), k, k.astype(float),
                               np.zeros((3, 2)), np.zeros(3, bool), np.ones((3, 3), bool)))
    assert len(buffer) == 5
    assert buffer.contents().actions.tolist() == [7, 8, 9, 10, 11]
    samples = buffer.sample(np.random.default_rng(0), 5000).actions
    assert set(samples.tolist()) == {7, 8, 9, 10, 11}
    assert np.bincount(samples)[7:].min() > 900
    again = buffer.sample(np.random.default_rng(0), 5000).actions
    assert np.array_equal(samples, again)
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(2, 2, 3).sample(np.random.default_rng(0), 1)


def test_state_round_trips_and_the_same_seed_gives_the_same_learning() -> None:
    first, second = brain_with(), brain_with()
    for brain in (first, second):
        for _ in range(10):
            brain.learn("a@env", rows(3))
    state = first.state()
    assert all(np.array_equal(state[k], second.state()[k]) for k in state)
    fresh = brain_with()
    fresh.load_state(state)
    assert fresh.updates == first.updates > 0
    assert np.array_equal(fresh.online.forward(np.ones(2)), first.online.forward(np.ones(2)))


def _cartpole_harness(seed: int) -> float:
    """Mean greedy return over 10 episodes once training's last 10 average 150."""
    env = gymnasium.make("CartPole-v1")
    brain = DQNBrain()
    with Harness(env, DQNMuscle(), brain, seed=seed, params=CARTPOLE) as harness:
        returns: list[float] = []
        while len(returns) < 300 and (len(returns) < 10 or np.mean(returns[-10:]) < 150):
            returns.extend(stats.total_reward for stats in harness.run(1))
    assert np.mean(returns[-10:]) >= 150, f"seed {seed}: {len(returns)} episodes"
    greedy = Harness(env, DQNMuscle(), seed=seed, mode="test")
    greedy.muscle.apply_update(brain.weights())
    return float(np.mean([stats.total_reward for stats in greedy.run(10)]))


@pytest.mark.parametrize("seed", [0, 1])
def test_dqn_learns_cartpole(seed: int) -> None:
    assert _cartpole_harness(seed) >= 150


def test_dqn_learns_cartpole_with_copies() -> None:
    env = vector_env("CartPole-v1", 4)
    loop = VectorLoop(env, DQNMuscle(), DQNBrain(), seed=0, params=CARTPOLE)
    episodes = loop.run(lambda done: len(done) >= 10 and
                        np.mean([e.total_reward for e in done[-10:]]) >= 150, 40_000)
    env.close()
    assert np.mean([e.total_reward for e in episodes[-10:]]) >= 150
