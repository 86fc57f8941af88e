"""TD3 and SAC: params and spaces are checked, actions are scaled to the bounds, transitions are
sent per step and per copy, the actor gradients match finite differences, the state round-trips
exactly, and a small continuous problem is learnt."""

from __future__ import annotations

import re
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.learners import Harness, SACBrain, SACMuscle, TD3Brain, TD3Muscle
from mosaic.agents.learners.actor_critic import ActorCriticMuscle
from mosaic.agents.learners.actor_critic_brain import ActorCriticBrain
from mosaic.agents.learners.sac import squashed_gaussian
from mosaic.core.errors import MosaicError
from tests.agents.test_mlp import numeric_gradient, relative_error
from tests.agents.vector_loop import SLOT

pytestmark = pytest.mark.timeout(300)

LEARNERS = [(TD3Brain, TD3Muscle), (SACBrain, SACMuscle)]
SMALL: dict[str, Any] = {"hidden_sizes": [16], "learning_starts": 4, "batch_size": 8,
                         "random_steps": 0, "sync_every": 2}
BOX = spaces.Box(np.array([-2.0, 0.0]), np.array([2.0, 1.0]), dtype=np.float32)


def slots(action_space: Any = BOX) -> dict[str, Slot]:
    box = spaces.Box(-np.inf, np.inf, (3,), np.float64)
    return {SLOT: Slot(SLOT, box, action_space)}


def muscle_with(cls: type[ActorCriticMuscle], mode: Mode = "train", copies: int = 1,
                action_space: Any = BOX, **params: Any) -> ActorCriticMuscle:
    muscle = cls()
    muscle.setup(MuscleContext("a", "a@env", "env", slots(action_space), 0, mode, params,
                               copies=copies))
    return muscle


def brain_with(cls: type[ActorCriticBrain], seed: int = 0, **params: Any) -> ActorCriticBrain:
    brain = cls()
    brain.setup(BrainContext("a", "a", slots(), seed, "train", {**SMALL, **params}))
    return brain


def rows(k: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {"observations": rng.standard_normal((k, 3)),
            "actions": rng.uniform(-1, 1, (k, 2)), "rewards": rng.standard_normal(k),
            "next_observations": rng.standard_normal((k, 3)),
            "terminated": rng.random(k) < 0.2, "truncated": np.zeros(k, bool)}


@pytest.mark.parametrize(("brain_cls", "muscle_cls"), LEARNERS)
@pytest.mark.parametrize(("params", "message"), [
    ({"learning_rate": 0}, "params.learning_rate"), ({"tau": 0}, "params.tau"),
    ({"hidden_sizes": [0]}, "params.hidden_sizes"),
    ({"hiden_sizes": [8]}, "did you mean 'hidden_sizes'"),
])
def test_bad_params_are_refused_naming_the_key(brain_cls, muscle_cls, params, message) -> None:
    for build in (lambda: muscle_with(muscle_cls, **params),
                  lambda: brain_with(brain_cls, **params)):
        with pytest.raises(MosaicError, match=message):
            build()


def test_each_learner_refuses_the_other_learners_params() -> None:
    with pytest.raises(MosaicError, match="policy_delay"):
        brain_with(SACBrain, policy_delay=2)
    with pytest.raises(MosaicError, match="initial_alpha"):
        brain_with(TD3Brain, initial_alpha=0.5)


@pytest.mark.parametrize(("brain_cls", "muscle_cls"), LEARNERS)
@pytest.mark.parametrize(("space", "reason"), [
    (spaces.Discrete(3), "needs a Box .continuous. action space.*use DQNBrain or PPOBrain"),
    (spaces.Box(-np.inf, np.inf, (1,)), "bounds, so they must be finite"),
])
def test_unsupported_action_spaces_are_refused_with_the_reason(brain_cls, muscle_cls, space,
                                                              reason) -> None:
    with pytest.raises(MosaicError, match=reason):
        muscle_with(muscle_cls, action_space=space)
    brain = brain_cls()
    with pytest.raises(MosaicError, match=reason):
        brain.setup(BrainContext("a", "a", slots(space), 0, "train", {}))
    # What experiment-check asks of the classes, before anything is set up.
    observation = slots()[SLOT].observation_space
    for cls in (brain_cls, muscle_cls):
        found = cls.space_problem("env agent 'x'", observation, space)
        assert found is not None and found.startswith(f"{cls.__name__} ")
        assert re.search(reason, found) and "env agent 'x' has " in found, found
        assert cls.space_problem("env agent 'x'", observation, BOX) is None


@pytest.mark.parametrize("muscle_cls", [TD3Muscle, SACMuscle])
def test_actions_are_scaled_to_the_bounds_in_the_space_dtype(muscle_cls) -> None:
    muscle = muscle_with(muscle_cls, random_steps=5)
    actions = np.array([muscle.act(SLOT, np.zeros(3)) for _ in range(200)])
    assert actions.dtype == np.float32 and actions.shape == (200, 2)
    assert all(BOX.contains(a) for a in actions)
    # Random steps and exploration both reach far apart values of each dimension.
    assert (actions.max(axis=0) - actions.min(axis=0) > [2.0, 0.5]).all()
    greedy = muscle_with(muscle_cls, mode="test")
    assert np.array_equal(greedy.act(SLOT, np.ones(3)), greedy.act(SLOT, np.ones(3)))
    assert np.allclose(greedy.act(SLOT, np.ones(3)), [0.0, 0.5])  # no actor yet: the middle


@pytest.mark.parametrize("muscle_cls", [TD3Muscle, SACMuscle])
def test_feedback_sends_the_action_in_actor_units_and_sums_rewards(muscle_cls) -> None:
    muscle = muscle_with(muscle_cls)
    sent = muscle.act(SLOT, np.zeros(3))
    assert muscle.feedback(SLOT, 1.0, False, False, None) is None
    item = muscle.feedback(SLOT, 2.0, True, False, np.ones(3))
    assert item is not None
    assert np.allclose(BOX.low + (item["actions"][0] + 1) * 0.5 * (BOX.high - BOX.low), sent,
                       atol=1e-6)
    assert item["rewards"].tolist() == [3.0] and item["terminated"].tolist() == [True]
    assert np.array_equal(item["next_observations"], np.ones((1, 3)))
    test = muscle_with(muscle_cls, mode="test")
    test.act(SLOT, np.zeros(3))
    assert test.feedback(SLOT, 1.0, True, False, np.ones(3)) is None


@pytest.mark.parametrize("muscle_cls", [TD3Muscle, SACMuscle])
def test_feedback_batch_sends_one_row_per_copy_with_its_final_observation(muscle_cls) -> None:
    muscle = muscle_with(muscle_cls, copies=3)
    none, every = np.zeros(3, bool), np.ones(3, bool)
    first = Batch(np.zeros((3, 3)), np.zeros(3), none, none, none, every, {})
    actions = muscle.act_batch(SLOT, first)
    assert actions.shape == (3, 2) and actions.dtype == np.float32
    outcome = Batch(np.full((3, 3), 5.0), np.array([1.0, 2.0, 3.0]),
                    np.array([False, True, False]), none, every, np.array([False, True, False]),
                    {1: np.full(3, 7.0)})
    [item] = muscle.feedback_batch(SLOT, outcome)
    assert item["rewards"].tolist() == [1.0, 2.0, 3.0]
    assert item["terminated"].tolist() == [False, True, False]
    assert item["next_observations"][:, 0].tolist() == [5.0, 7.0, 5.0]
    assert item["actions"].shape == (3, 2) and np.abs(item["actions"]).max() <= 1.0
    assert muscle.feedback_batch(SLOT, outcome) == []  # each action's outcome is sent once


def test_squashed_gaussian_log_prob_is_the_density_of_the_action() -> None:
    rng = np.random.default_rng(3)
    outputs = rng.standard_normal((4, 2)) * 0.5
    noise = rng.standard_normal((4, 1))
    actions, log_prob = squashed_gaussian(outputs, noise)
    mean, std = outputs[:, :1], np.exp(outputs[:, 1:])
    u = np.arctanh(actions)
    gaussian = np.exp(-0.5 * ((u - mean) / std) ** 2) / (std * np.sqrt(2 * np.pi))
    density = gaussian[:, 0] / (1 - actions[:, 0] ** 2)  # change of variables through tanh
    assert np.allclose(np.exp(log_prob), density, rtol=1e-4)


@pytest.mark.parametrize("brain_cls", [TD3Brain, SACBrain])
def test_actor_gradient_matches_finite_differences(brain_cls) -> None:
    brain = brain_with(brain_cls)
    rng = np.random.default_rng(4)
    for critic in brain.critics:  # distinct critics, so that min(Q1, Q2) picks either
        for _, b in critic.layers:
            b[...] = rng.standard_normal(b.shape)
    x = rng.standard_normal((6, 3))
    outputs = rng.standard_normal((6, brain.actor.n_outputs)) * 0.5
    noise = rng.standard_normal((6, 2))

    def gradient() -> tuple[float, np.ndarray]:
        if brain_cls is SACBrain:
            return brain._actor_gradient(x, outputs, noise, 0.3)
        return brain._actor_gradient(x, outputs)

    _, grad = gradient()
    assert relative_error(grad, numeric_gradient(lambda: gradient()[0], outputs)) < 1e-6


@pytest.mark.parametrize("brain_cls", [TD3Brain, SACBrain])
def test_state_round_trips_and_the_copy_learns_as_the_original(brain_cls) -> None:
    brain = brain_with(brain_cls)
    for i in range(5):
        brain.learn("m", rows(4, seed=i))
    assert brain.updates > 0 and brain.version > 0
    copy = brain_with(brain_cls, seed=99)
    copy.load_state(brain.state())
    copy.rng.bit_generator.state = brain.rng.bit_generator.state
    for i in range(5, 9):
        answers = [b.learn("m", rows(3, seed=i)) for b in (brain, copy)]
        assert (answers[0] is None) == (answers[1] is None)
    for name, value in brain.state().items():
        assert np.array_equal(value, copy.state()[name]), name
    with pytest.raises(MosaicError, match="cannot load"):
        copy.load_state({k: v for k, v in brain.state().items() if k != "critic2.W0"})
    assert np.array_equal(copy.state()["critic2.W0"], brain.state()["critic2.W0"])


@pytest.mark.parametrize("brain_cls", [TD3Brain, SACBrain])
def test_metrics_are_reported_every_sync_every_updates(brain_cls) -> None:
    brain = brain_with(brain_cls)
    for i in range(6):
        brain.learn("m", rows(4, seed=i))
    logged = [name for name, _, _ in brain.context.metrics.take()]
    assert brain.updates == 21 and brain.version == 10
    expected = set(brain_cls.metric_names)
    assert set(logged) == expected and len(logged) == 10 * len(expected)


class TargetEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """One step: the reward is minus the squared distance of the action from the observation."""

    observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.target = self.np_random.uniform(-1.0, 1.0, (1,)).astype(np.float32)
        return self.target, {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self.target, -float((action[0] - self.target[0]) ** 2), True, False, {}


@pytest.mark.parametrize(("brain_cls", "muscle_cls"), LEARNERS)
def test_a_small_continuous_problem_is_learnt(brain_cls, muscle_cls) -> None:
    env = TargetEnv()
    params: dict[str, Any] = {"hidden_sizes": [32], "learning_starts": 100,
                              "random_steps": 100, "batch_size": 64}
    if brain_cls is SACBrain:
        params["initial_alpha"] = 0.05  # the rewards are small: less entropy to start with
    brain = brain_cls()
    with Harness(env, muscle_cls(), brain, seed=0, params=params) as harness:
        early = np.mean([s.total_reward for s in harness.run(100)])
        harness.run(2900)
    greedy = Harness(env, muscle_cls(), seed=1, mode="test", params=params)
    greedy.muscle.apply_update(brain.weights())
    late = np.mean([s.total_reward for s in greedy.run(200)])
    # Uniform actions score -2/3 on average.
    assert early < -0.4 and late > -0.03, (early, late)


@pytest.mark.parametrize("brain_cls", [TD3Brain, SACBrain])
def test_malformed_transitions_are_refused_naming_what_does_not_fit(brain_cls) -> None:
    brain = brain_with(brain_cls)
    with pytest.raises(MosaicError, match="expected transition columns"):
        brain.learn("m", {k: v for k, v in rows(2).items() if k != "actions"})
    with pytest.raises(MosaicError, match="2 action values"):
        brain.learn("m", {**rows(2), "actions": np.zeros((2, 3))})
    with pytest.raises(MosaicError, match="rewards that are not finite"):
        brain.learn("m", {**rows(2), "rewards": np.array([0.0, np.nan])})
    assert len(brain.buffer) == 0 and brain.transitions == 0
