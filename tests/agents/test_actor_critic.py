"""TD3 and SAC: params and spaces are checked, actions are scaled to the bounds, transitions are
sent per step and per copy, the actor gradients match finite differences, the state round-trips
exactly, and a small continuous problem is learnt; SAC's gSDE exploration keeps its matrix for
an episode (or ``sde_sample_freq`` steps) per copy, and its density and gradients are right."""

from __future__ import annotations

import itertools
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
from mosaic.agents.learners.sac import MEAN_BOUND, SDE_EPS, squashed_gaussian, squashed_gsde
from mosaic.core.errors import MosaicError
from tests.agents.test_mlp import numeric_gradient, relative_error
from tests.agents.vector_loop import SLOT

pytestmark = pytest.mark.timeout(300)

LEARNERS = [(TD3Brain, TD3Muscle), (SACBrain, SACMuscle)]
GSDE: dict[str, Any] = {"exploration": "gsde", "log_std_init": -1.0}
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
    with pytest.raises(MosaicError, match="exploration"):
        brain_with(TD3Brain, exploration="gsde")


@pytest.mark.parametrize(("params", "message"), [
    ({"exploration": "pink"}, "params.exploration"),
    ({"sde_sample_freq": 0}, "expected -1 .a new exploration matrix each episode. or an integer"),
    ({"sde_sample_freq": -2}, "params.sde_sample_freq"),
])
def test_bad_gsde_params_are_refused_naming_the_key(params, message) -> None:
    for build in (lambda: muscle_with(SACMuscle, **params),
                  lambda: brain_with(SACBrain, **params)):
        with pytest.raises(MosaicError, match=message):
            build()


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


def test_squashed_gsde_log_prob_is_the_density_of_the_action_and_its_noise() -> None:
    rng = np.random.default_rng(5)
    h, d = 4, 2
    means = rng.standard_normal((3, d)) * 1.5
    features = np.tanh(rng.standard_normal((3, h)))
    log_std = rng.standard_normal((h, d)) * 0.3 - 1.0
    weights = np.exp(log_std) * rng.standard_normal((h, d))
    actions, log_prob = squashed_gsde(means, features, log_std, weights)
    variance = features**2 @ np.exp(2 * log_std) + SDE_EPS
    u = np.arctanh(actions)
    centre = np.clip(means, -MEAN_BOUND, MEAN_BOUND)
    assert np.allclose(u - centre, features @ weights)
    gaussian = np.exp(-0.5 * (u - centre) ** 2 / variance) / np.sqrt(2 * np.pi * variance)
    density = np.prod(gaussian / (1 - actions**2), axis=1)
    assert np.allclose(np.exp(log_prob), density, rtol=1e-4)
    # That variance is the noise's, over the exploration matrices the muscle would draw.
    draws = np.exp(log_std) * rng.standard_normal((20_000, h, d))
    noise = np.einsum("h,khd->kd", features[0], draws)
    assert np.allclose(noise.var(axis=0), variance[0], rtol=0.05)


def test_gsde_actor_gradient_matches_finite_differences() -> None:
    """With respect to the means (one beyond MEAN_BOUND, where the clip stops it), to log_std
    and to the features, through the exploration matrix and the variance."""
    brain = brain_with(SACBrain, **GSDE)
    rng = np.random.default_rng(4)
    for critic in brain.critics:
        for _, b in critic.layers:
            b[...] = rng.standard_normal(b.shape)
    brain.log_std[...] = rng.standard_normal(brain.log_std.shape) * 0.3 - 1.0
    x = rng.standard_normal((6, 3))
    means = rng.standard_normal((6, 2)) * 0.5
    means[0, 0] = 2.5
    features = np.tanh(rng.standard_normal((6, 16)))
    draws = rng.standard_normal((16, 2))

    def loss() -> float:
        return brain._gsde_actor_gradient(x, means, features, draws, 0.3)[0]

    _, grad_means, grad_log_std, grad_features = brain._gsde_actor_gradient(
        x, means, features, draws, 0.3)
    assert grad_means[0, 0] == 0.0 and np.abs(grad_log_std).min() > 0
    assert relative_error(grad_means, numeric_gradient(loss, means)) < 1e-6
    assert relative_error(grad_log_std, numeric_gradient(loss, brain.log_std)) < 1e-6
    assert relative_error(grad_features, numeric_gradient(loss, features)) < 1e-6


@pytest.mark.parametrize("learn_features", [True, False])
def test_gsde_actor_update_follows_the_whole_gradient_through_the_network(
        learn_features: bool) -> None:
    """What the actor's Adam step is given: the gradient of the loss with respect to every
    weight (through the means, and with sde_learn_features through the features too)."""
    brain = brain_with(SACBrain, **GSDE, hidden_sizes=[5, 4], sde_learn_features=learn_features)
    rng = np.random.default_rng(6)
    for network in (brain.actor, *brain.critics):
        for _, b in network.layers:
            b[...] = rng.standard_normal(b.shape)
    x = rng.standard_normal((6, 3))
    draws = rng.standard_normal(brain.log_std.shape)
    outputs, cache = brain.actor.forward_cached(x)
    features = cache[-1].copy()

    def loss() -> float:
        means, layers = brain.actor.forward_cached(x)
        used = layers[-1] if learn_features else features
        return brain._gsde_actor_gradient(x, means, used, draws, 0.3)[0]

    _, grad_means, _, grad_features = brain._gsde_actor_gradient(x, outputs, features, draws,
                                                                 0.3)
    grads = brain.actor.backward(cache, grad_means, grad_features if learn_features else None)
    for param, grad in zip(brain.actor.parameters(), grads, strict=True):
        assert relative_error(grad, numeric_gradient(loss, param)) < 1e-6


def gsde_muscle(copies: int = 1, **params: Any) -> ActorCriticMuscle:
    """A gSDE muscle acting with a brain's first weights (and ``log_std``)."""
    muscle = muscle_with(SACMuscle, copies=copies, **{**SMALL, **GSDE, **params})
    muscle.apply_update(brain_with(SACBrain, **GSDE, **params).weights())
    return muscle


def test_gsde_keeps_its_exploration_matrix_for_an_episode_and_draws_only_new_ones() -> None:
    muscle = gsde_muscle()
    start = muscle.rng.bit_generator.state
    observation = np.array([0.3, -0.2, 0.5])
    first = [muscle.act(SLOT, observation) for _ in range(5)]
    # The noise is a function of the state for the whole episode: the same state, the same
    # action, and one matrix (16 features x 2 action values) drawn for it.
    assert all(np.array_equal(first[0], action) for action in first)
    fresh = np.random.default_rng()
    fresh.bit_generator.state = start
    fresh.standard_normal((1, 16, 2))
    assert muscle.rng.bit_generator.state == fresh.bit_generator.state
    # Another state, other noise; a new episode, a new matrix.
    assert not np.array_equal(muscle.act(SLOT, -observation), first[0])
    muscle.reset()
    assert not np.array_equal(muscle.act(SLOT, observation), first[0])
    greedy = muscle_with(SACMuscle, mode="test", **SMALL, **GSDE)
    greedy.apply_update(brain_with(SACBrain, **GSDE).weights())
    assert np.array_equal(greedy.act(SLOT, observation), greedy.act(SLOT, observation))
    assert not np.array_equal(greedy.act(SLOT, observation), first[0])


def test_gsde_with_sde_sample_freq_draws_a_new_matrix_every_that_many_steps() -> None:
    muscle = gsde_muscle(sde_sample_freq=3)
    observation = np.array([0.3, -0.2, 0.5])
    actions = [muscle.act(SLOT, observation) for _ in range(7)]
    changes = [not np.array_equal(a, b) for a, b in itertools.pairwise(actions)]
    assert changes == [False, False, True, False, False, True]


def test_gsde_copies_each_keep_their_own_matrix_and_a_copy_that_begins_draws_anew() -> None:
    muscle = gsde_muscle(copies=3)
    observations = np.tile([0.3, -0.2, 0.5], (3, 1))
    none, every = np.zeros(3, bool), np.ones(3, bool)

    def act(starts: np.ndarray) -> np.ndarray:
        return muscle.act_batch(SLOT, Batch(observations, np.zeros(3), none, none, every,
                                            starts, {}))

    first = act(every)
    assert len({tuple(row) for row in first}) == 3  # one matrix per copy
    assert np.array_equal(act(none), first)
    again = act(np.array([False, True, False]))
    assert np.array_equal(again[[0, 2]], first[[0, 2]]) and not np.array_equal(again[1], first[1])


def test_gsde_muscle_state_round_trips_and_a_mismatched_update_is_refused() -> None:
    muscle = gsde_muscle(sde_sample_freq=4)
    observation = np.array([0.3, -0.2, 0.5])
    for _ in range(2):
        muscle.act(SLOT, observation)
    copy = gsde_muscle(sde_sample_freq=4)
    copy.load_state(muscle.state())
    copy.rng.bit_generator.state = muscle.rng.bit_generator.state
    for _ in range(6):  # across a new draw after 4 steps
        assert np.array_equal(copy.act(SLOT, observation), muscle.act(SLOT, observation))
    with pytest.raises(MosaicError, match="sde_weights"):
        copy.load_state({**muscle.state(), "sde_weights": np.zeros((1, 1, 16, 3))})
    with pytest.raises(MosaicError, match=re.escape("needs the update's log_std of shape (16, 2)")):
        copy.apply_update({k: v for k, v in brain_with(SACBrain, **GSDE).weights().items()
                           if k != "log_std"})


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


@pytest.mark.parametrize(("brain_cls", "params"), [(TD3Brain, {}), (SACBrain, {}),
                                                   (SACBrain, GSDE)], ids=["td3", "sac", "gsde"])
def test_state_round_trips_and_the_copy_learns_as_the_original(brain_cls, params) -> None:
    brain = brain_with(brain_cls, **params)
    for i in range(5):
        brain.learn("m", rows(4, seed=i))
    assert brain.updates > 0 and brain.version > 0
    if params:  # log_std learns, and muscles get it as of the version
        assert not np.allclose(brain.log_std, -1.0)
        assert np.array_equal(brain.weights()["log_std"], brain.state()["published.log_std"])
    copy = brain_with(brain_cls, seed=99, **params)
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


@pytest.mark.parametrize(("brain_cls", "muscle_cls", "exploration"),
                         [(TD3Brain, TD3Muscle, {}), (SACBrain, SACMuscle, {}),
                          (SACBrain, SACMuscle, {"exploration": "gsde"})],
                         ids=["td3", "sac", "gsde"])
def test_a_small_continuous_problem_is_learnt(brain_cls, muscle_cls, exploration) -> None:
    env = TargetEnv()
    params: dict[str, Any] = {"hidden_sizes": [32], "learning_starts": 100,
                              "random_steps": 100, "batch_size": 64, **exploration}
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
