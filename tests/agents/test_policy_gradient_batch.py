"""Policy gradient over copies: one forward pass acts for all copies, ended copies send the
episodes a muscle without copies sends, updates reach every copy, and 8 copies learn CartPole."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.learners import MLP, PolicyGradientBrain, PolicyGradientMuscle
from mosaic.agents.learners.mlp import masked_logits, sample_softmax
from mosaic.core.errors import MosaicError
from tests.agents.vector_loop import SLOT, Finished, VectorLoop, vector_env

# Learning is CPU-bound: on a loaded machine it takes several times as long.
pytestmark = pytest.mark.timeout(300)

COPIES = 8
SMALL: dict[str, Any] = {"hidden_sizes": [16, 16]}


def box_slots(n_inputs: int = 4, n_actions: int = 2) -> dict[str, Slot]:
    box = spaces.Box(-np.inf, np.inf, (n_inputs,), np.float64)
    return {SLOT: Slot(SLOT, box, spaces.Discrete(n_actions))}


def muscle_with(mode: Mode = "train", seed: int = 0, copies: int = COPIES, n_actions: int = 2,
                **params: Any) -> PolicyGradientMuscle:
    muscle = PolicyGradientMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", box_slots(n_actions=n_actions), seed, mode,
                               params, copies=copies))
    return muscle


def brain_with(n_actions: int = 2, **params: Any) -> PolicyGradientBrain:
    brain = PolicyGradientBrain()
    brain.setup(BrainContext("a", "a", box_slots(n_actions=n_actions), 0, "train", params))
    return brain


def batch_of(observations: np.ndarray, *, rewards: Any = 0.0, terminated: Any = False,
             truncated: Any = False, acted: Any = True, starts: Any = False,
             finals: dict[int, np.ndarray] | None = None, legal: Any = None) -> Batch:
    n = observations.shape[0]

    def column(value: Any, dtype: Any) -> np.ndarray:
        return np.broadcast_to(np.asarray(value, dtype=dtype), (n,)).copy()

    return Batch(observations, column(rewards, np.float64), column(terminated, bool),
                 column(truncated, bool), column(acted, bool), column(starts, bool),
                 finals or {}, legal)


def test_actions_are_one_int64_per_copy_in_the_batched_space() -> None:
    env = vector_env("CartPole-v1", COPIES)
    observations, _ = env.reset(seed=0)
    muscle = muscle_with()
    actions = muscle.act_batch(SLOT, batch_of(observations, acted=False, starts=True))
    assert actions.shape == (COPIES,) and actions.dtype == np.int64
    assert env.action_space.contains(actions)
    observations, *_ = env.step(actions)
    env.close()
    # The uniform policy of a fresh muscle: about half of each action over many draws.
    draws = np.concatenate([muscle.act_batch(SLOT, batch_of(observations)) for _ in range(250)])
    assert 0.45 < draws.mean() < 0.55


def test_one_copy_replays_the_single_step_muscle_exactly() -> None:
    """Same seed and observations: the same draws, actions, episodes and updates."""
    env = gymnasium.make("CartPole-v1")
    single, batched = muscle_with(seed=7, copies=1), muscle_with(seed=7, copies=1)
    brain = brain_with(batch_episodes=2, **SMALL)
    sent: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for episode in range(6):
        observation, _ = env.reset(seed=episode)
        single.reset()
        batch = batch_of(observation[None], acted=False, starts=True)
        while True:
            action = single.act(SLOT, observation)
            assert batched.act_batch(SLOT, batch).tolist() == [action]
            observation, reward, terminated, truncated, _ = env.step(action)
            one = single.feedback(SLOT, float(reward), terminated, truncated, observation)
            ended = terminated or truncated
            final = {0: observation} if ended else {}
            batch = batch_of(env.reset()[0][None] if ended else observation[None],
                             rewards=reward, terminated=terminated, truncated=truncated,
                             starts=ended, finals=final)
            many = batched.feedback_batch(SLOT, batch)
            if not ended:
                assert one is None and many == []
                continue
            assert one is not None and len(many) == 1
            sent.append((one, many[0]))
            update = brain.learn("m", one)
            if update is not None:
                single.apply_update(update)
                batched.apply_update(update)
            break
    env.close()
    assert brain.version == 3
    for one, other in sent:
        assert one.keys() == other.keys()
        for key, value in one.items():
            assert np.array_equal(value, other[key]) if value is not None else other[key] is None


def test_ended_copies_send_their_episodes_in_the_single_step_format() -> None:
    loop = VectorLoop(vector_env("CartPole-v1", COPIES), PolicyGradientMuscle(),
                      PolicyGradientBrain(), seed=3, params={**SMALL, "batch_episodes": 4})
    finished = loop.run(lambda done: len(done) >= 30, max_steps=10_000)
    loop.flush()
    loop.env.close()
    # One episode per finished episode, in the same order (steps, then copies).
    assert len(loop.experience) == len(finished) >= 30
    for episode, stats in zip(loop.experience, finished, strict=True):
        t = stats.steps
        assert episode["observations"].shape == (t, 4) and episode["observations"].dtype == float
        assert episode["actions"].shape == (t,) and episode["actions"].dtype == np.int64
        assert episode["rewards"].shape == (t,) and episode["rewards"].sum() == stats.total_reward
        assert episode["masks"] is None and episode["final_observation"].shape == (4,)
        assert episode["terminated"] == stats.terminated and not episode["truncated"]
        # CartPole ends when the pole falls or the cart leaves: the final observation shows it.
        x, _, angle, _ = episode["final_observation"]
        assert abs(x) > 2.4 or abs(angle) > 0.2095
        assert isinstance(episode["version"], int)
    assert isinstance(loop.brain, PolicyGradientBrain)
    assert loop.brain.version == len(finished) // 4
    # The weights came back: later episodes were collected with newer ones.
    assert loop.experience[-1]["version"] > loop.experience[0]["version"] == 0


def test_masks_are_honoured_per_copy_and_recorded_in_the_episodes() -> None:
    masks = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=np.int8)
    muscle = muscle_with(copies=4, n_actions=3)
    rng = np.random.default_rng(1)
    seen: list[set[int]] = [set() for _ in range(4)]
    batch = batch_of(rng.standard_normal((4, 4)), acted=False, starts=True, legal=masks)
    for step in range(50):
        for copy, action in enumerate(muscle.act_batch(SLOT, batch).tolist()):
            seen[copy].add(action)
        batch = batch_of(rng.standard_normal((4, 4)), rewards=1.0, truncated=step == 49,
                         legal=masks)
        episodes = muscle.feedback_batch(SLOT, batch)
    assert seen == [{0, 2}, {1}, {0, 1, 2}, {1, 2}]
    assert len(episodes) == 4
    for copy, episode in enumerate(episodes):
        assert np.array_equal(episode["masks"], np.repeat(masks[copy:copy + 1] == 1, 50, 0))
        assert set(episode["actions"].tolist()) == seen[copy]
    none_for_copy_1 = masks.copy()
    none_for_copy_1[1] = 0
    with pytest.raises(MosaicError, match="copy 1 allows no action"):
        muscle.act_batch(SLOT, batch_of(np.zeros((4, 4)), legal=none_for_copy_1))
    greedy = muscle_with("test", copies=4, n_actions=3)
    assert greedy.act_batch(SLOT, batch_of(np.zeros((4, 4)), legal=masks)).tolist() == [0, 1, 0, 1]


def test_an_update_changes_the_policy_of_every_copy_and_test_mode_takes_its_arg_max() -> None:
    # A policy whose preferred action is the sign of the first input.
    policy = MLP.from_layers([(np.array([[5.0, -5.0], [0, 0], [0, 0], [0, 0]]), np.zeros(2))])
    update = {**policy.to_arrays(), "version": np.array(4)}
    observations = np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]] * 4)
    greedy = muscle_with("test")
    assert greedy.act_batch(SLOT, batch_of(observations)).tolist() == [0] * COPIES
    greedy.apply_update(update)
    assert greedy.act_batch(SLOT, batch_of(observations)).tolist() == [0, 1] * 4
    assert greedy.feedback_batch(SLOT, batch_of(observations, terminated=True)) == []
    sampler = muscle_with()
    sampler.apply_update(update)
    actions = np.array([sampler.act_batch(SLOT, batch_of(observations)) for _ in range(200)])
    # softmax([5, -5]): the preferred action about 99.995% of the time, in every copy.
    assert (actions == np.array([0, 1] * 4)).mean() > 0.99
    assert sampler.version == 4
    episodes = sampler.feedback_batch(SLOT, batch_of(observations, truncated=True))
    assert [episode["version"] for episode in episodes] == [4] * COPIES


def test_sample_softmax_draws_by_inverse_cdf_and_never_picks_a_masked_action() -> None:
    logits = masked_logits(np.zeros((3, 4)), np.array([[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 0]]))
    assert sample_softmax(logits, np.array([0.0, 0.0, 0.0])).tolist() == [0, 1, 2]
    assert sample_softmax(logits, np.array([0.3, 0.6, 0.9])).tolist() == [1, 3, 2]
    # A uniform of 1 (only reachable by rounding) still gives the last legal action.
    assert sample_softmax(logits, np.ones(3)).tolist() == [3, 3, 2]


def cartpole(seed: int, target: float, max_steps: int) -> tuple[VectorLoop, list[Finished]]:
    loop = VectorLoop(vector_env("CartPole-v1", COPIES), PolicyGradientMuscle(),
                      PolicyGradientBrain(), seed=seed)

    def reached(done: list[Finished]) -> bool:
        return len(done) >= 20 and bool(np.mean([e.total_reward for e in done[-20:]]) >= target)

    finished = loop.run(reached, max_steps)
    loop.env.close()
    return loop, finished


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eight_copies_learn_cartpole(seed: int) -> None:
    # Over seeds 0..19, with default params, the mean of the last 20 returns first reached 195
    # after 16,000 to 22,000 env steps (2,000 to 2,700 steps of the 8 copies; about 1 s).
    _, finished = cartpole(seed, target=195.0, max_steps=5_000)
    assert len(finished) >= 20
    assert np.mean([e.total_reward for e in finished[-20:]]) >= 195.0
    assert np.mean([e.total_reward for e in finished[:20]]) < 40  # it started near random


def test_same_seed_gives_identical_actions_and_weights_and_another_seed_does_not() -> None:
    runs = [cartpole(seed, target=np.inf, max_steps=300)[0] for seed in (5, 5, 6)]
    first, second, other = (run.actions for run in runs)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    brains = [run.brain for run in runs]
    assert all(isinstance(brain, PolicyGradientBrain) for brain in brains)
    state_a, state_b = brains[0].state(), brains[1].state()
    assert all(np.array_equal(state_a[k], state_b[k]) for k in state_a)
    assert int(state_a["version"]) > 0
