"""PPO on the NumPy MLP: its params are checked, its advantages are GAE's, it honours masks and
Box bounds, it is reproducible, round-trips its state, and it learns CartPole on copies."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import Batch, BrainContext, MuscleContext, Slot
from mosaic.agents.learners import Harness, PPOBrain, PPOMuscle
from mosaic.agents.learners.ppo_policy import gae
from mosaic.core.errors import MosaicError
from mosaic.experiment.schema import AgentConfig
from tests.agents.vector_loop import VectorLoop, vector_env

# Learning is CPU-bound: on a loaded machine it takes several times as long.
pytestmark = pytest.mark.timeout(300)

BOX = spaces.Box(-np.inf, np.inf, (4,), np.float64)
# Learns CartPole in a few thousand steps (measured: 1.5-2 s per seed on a quiet machine).
FAST = {"rollout_steps": 256, "minibatch_size": 64, "epochs": 10, "learning_rate": 0.001,
        "discount": 0.98, "gae_lambda": 0.8}


def slots(action_space: gymnasium.Space[Any]) -> dict[str, Slot]:
    return {"agent_0": Slot("agent_0", BOX, action_space)}


def muscle_with(action_space: gymnasium.Space[Any], mode: str = "train", copies: int = 1,
                **params: Any) -> PPOMuscle:
    muscle = PPOMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", slots(action_space), 0, mode, params,
                               copies=copies))
    return muscle


def brain_with(action_space: gymnasium.Space[Any], seed: int = 0, **params: Any) -> PPOBrain:
    brain = PPOBrain()
    brain.setup(BrainContext("a", "a", slots(action_space), seed, "train", params))
    return brain


def batch(observations: np.ndarray, legal_actions: np.ndarray | None = None) -> Batch:
    n = observations.shape[0]
    return Batch(observations, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool),
                 np.zeros(n, bool), np.ones(n, bool), {}, legal_actions)


def test_defaults_and_bad_params_are_reported_by_name() -> None:
    brain = brain_with(spaces.Discrete(2))
    p = brain.params
    assert (p.rollout_steps, p.epochs, p.minibatch_size, p.clip_range, p.discount,
            p.gae_lambda, p.learning_rate, p.hidden_sizes) == (2048, 10, 64, 0.2, 0.99, 0.95,
                                                               3e-4, [64, 64])
    for bad, key in (({"clip_range": 0}, "clip_range"), ({"gae_lambda": 1.5}, "gae_lambda"),
                     ({"hidden_sizes": [0]}, "hidden_sizes"), ({"epochs": "3"}, "epochs"),
                     ({"clip": 0.1}, "clip"), ({"anneal_steps": -1}, "anneal_steps")):
        with pytest.raises(MosaicError, match=f"params.{key}"):
            brain_with(spaces.Discrete(2), **bad)
        with pytest.raises(MosaicError, match=f"params.{key}"):
            muscle_with(spaces.Discrete(2), **bad)


def test_an_experiment_file_with_a_bad_param_fails_at_load() -> None:
    agent = {"uid": "a", "brain": "mosaic.agents.learners:PPOBrain",
             "muscle": "mosaic.agents.learners:PPOMuscle", "params": {"epochs": 0}}
    with pytest.raises(Exception, match="epochs"):
        AgentConfig.model_validate(agent)
    assert AgentConfig.model_validate({**agent, "params": {"epochs": 3}})


def test_gae_matches_a_hand_computed_example() -> None:
    rewards = np.array([1.0, 0.0, 2.0])
    values = np.array([0.5, 1.0, 1.5])
    gamma, lam, last = 0.9, 0.8, 2.0
    # deltas: 1 + .9*1 - .5 = 1.4;  0 + .9*1.5 - 1 = .35;  2 + .9*2 - 1.5 = 2.3
    a2 = 2.3
    a1 = 0.35 + 0.72 * a2
    a0 = 1.4 + 0.72 * a1
    advantages, returns = gae(rewards, values, last, gamma, lam)
    np.testing.assert_allclose(advantages, [a0, a1, a2])
    np.testing.assert_allclose(returns, np.array([a0, a1, a2]) + values)
    # A terminated segment bootstraps from 0; lambda 1 gives the discounted return - value.
    advantages, _ = gae(rewards, values, 0.0, 1.0, 1.0)
    np.testing.assert_allclose(advantages, [3.0 - 0.5, 2.0 - 1.0, 2.0 - 1.5])


def test_masks_are_honoured_in_sampling_log_probs_and_test_mode() -> None:
    brain = brain_with(spaces.Discrete(4), hidden_sizes=[8])
    rng = np.random.default_rng(1)
    for layer in brain.policy.layers:  # a policy that prefers the masked actions
        layer[0][...] = rng.standard_normal(layer[0].shape)
    brain.policy.layers[-1][1][...] = [5.0, 0.0, 5.0, 0.0]
    mask = np.array([False, True, False, True])
    train = muscle_with(spaces.Discrete(4), copies=16, rollout_steps=10_000)
    train.apply_update(brain.weights())
    obs = rng.standard_normal((16, 4))
    masks = np.tile(mask, (16, 1))
    seen = {int(a) for _ in range(20) for a in train.act_batch("agent_0", batch(obs, masks))}
    assert seen == {1, 3}
    single = {train.act("agent_0", obs[0], mask) for _ in range(50)}
    assert single == {1, 3}
    # The recorded log-probabilities are those of the masked softmax: two legal actions.
    segment = train._open[("agent_0", 0)]
    assert all(np.exp(lp) > 0.0 for lp in segment.log_probs)
    probs = np.exp(segment.log_probs)
    assert np.all(probs < 1.0)
    test = muscle_with(spaces.Discrete(4), mode="test", copies=16)
    test.apply_update(brain.weights())
    assert set(test.act_batch("agent_0", batch(obs, masks)).tolist()) <= {1, 3}
    assert test.act("agent_0", {"observation": obs[0], "action_mask": mask}) in {1, 3}


def test_box_actions_are_clipped_to_the_bounds_and_the_rollout_keeps_the_sample() -> None:
    box = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 0.5], np.float32))
    muscle = muscle_with(box, copies=64, initial_log_std=1.5, rollout_steps=64)
    actions = muscle.act_batch("agent_0", batch(np.zeros((64, 4))))
    assert actions.shape == (64, 2) and actions.dtype == np.float32
    assert all(box.contains(a) for a in actions)
    step = Batch(np.zeros((64, 4)), np.ones(64), np.zeros(64, bool), np.zeros(64, bool),
                 np.ones(64, bool), np.zeros(64, bool), {})
    [rollout] = muscle.feedback_batch("agent_0", step)
    sampled = np.concatenate([s["actions"] for s in rollout["segments"]])
    assert (np.abs(sampled) > 2.0).any()  # std e^1.5: some samples fall outside
    single = muscle_with(box, mode="test")
    assert box.contains(single.act("agent_0", np.zeros(4)))
    # The brain learns from it and answers with a policy and its log std.
    brain = brain_with(box, hidden_sizes=[8], initial_log_std=1.5)
    update = brain.learn("a@env", rollout)
    assert update["log_std"].shape == (2,) and brain.version == 1
    assert set(brain.last_stats) == {"policy_loss", "value_loss", "entropy", "approx_kl",
                                     "clip_fraction", "grad_norm"}


def test_truncated_and_cut_segments_bootstrap_and_terminated_ones_do_not() -> None:
    muscle = muscle_with(spaces.Discrete(2), copies=2, rollout_steps=6)
    obs = np.arange(8.0).reshape(2, 4)
    muscle.act_batch("agent_0", batch(obs))
    final = np.full(4, 9.0)
    ended = Batch(obs + 1, np.ones(2), np.array([True, False]), np.array([False, True]),
                  np.ones(2, bool), np.ones(2, bool), {0: final, 1: final + 1})
    assert muscle.feedback_batch("agent_0", ended) == []
    muscle.act_batch("agent_0", ended)
    going = Batch(obs + 2, np.ones(2), np.zeros(2, bool), np.zeros(2, bool), np.ones(2, bool),
                  np.zeros(2, bool), {})
    assert muscle.feedback_batch("agent_0", going) == []
    muscle.act_batch("agent_0", going)
    [rollout] = muscle.feedback_batch("agent_0", going)
    terminated, truncated, *cut = rollout["segments"]
    assert terminated["terminated"] and terminated["last_observation"] is None
    assert not truncated["terminated"]
    np.testing.assert_array_equal(truncated["last_observation"], final + 1)
    assert [len(s["actions"]) for s in cut] == [2, 2]
    np.testing.assert_array_equal(cut[0]["last_observation"], obs[0] + 2)
    assert sum(len(s["actions"]) for s in rollout["segments"]) == 6


def test_same_seed_gives_the_same_run_and_state_round_trips() -> None:
    def run(seed: int) -> tuple[list[np.ndarray], PPOBrain]:
        env = vector_env("CartPole-v1", 4)
        loop = VectorLoop(env, PPOMuscle(), PPOBrain(), seed=seed,
                          params={**FAST, "hidden_sizes": [16]})
        loop.run(lambda _: False, 300)
        env.close()
        assert isinstance(loop.brain, PPOBrain)
        return loop.actions, loop.brain

    first, brain = run(3)
    again, brain_again = run(3)
    other, _ = run(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    state = brain.state()
    assert brain.version == 4  # 300 steps of 4 copies, 256 per rollout
    for name, array in brain_again.state().items():
        np.testing.assert_array_equal(state[name], array)
    fresh = brain_with(spaces.Discrete(2), **FAST, hidden_sizes=[16])
    fresh.load_state(state)
    for name, array in state.items():
        np.testing.assert_array_equal(fresh.state()[name], array)
    with pytest.raises(MosaicError):
        fresh.load_state({k: v for k, v in state.items() if k != "value.W0"})


def rollout_of_64_steps(muscle: PPOMuscle | None = None) -> Any:
    """64 steps of a fresh ``muscle`` (set up with ``rollout_steps: 64``; by default one of
    Discrete(2)) on random observations and rewards, episodes of 20 steps: its experience."""
    if muscle is None:
        muscle = muscle_with(spaces.Discrete(2), rollout_steps=64)
    rng = np.random.default_rng(1)
    experience = None
    for t in range(64):
        muscle.act("agent_0", rng.standard_normal(4))
        experience = muscle.feedback("agent_0", float(rng.standard_normal()), t % 20 == 19,
                                     False, rng.standard_normal(4))
    assert experience is not None
    return experience


def test_anneal_steps_take_the_learning_rate_and_clip_range_linearly_to_zero() -> None:
    experience = rollout_of_64_steps()
    small: dict[str, Any] = {"rollout_steps": 64, "minibatch_size": 16, "epochs": 2,
                             "hidden_sizes": [16], "learning_rate": 0.001, "clip_range": 0.2}
    annealed = brain_with(spaces.Discrete(2), **small, anneal_steps=192)
    constant = brain_with(spaces.Discrete(2), **small)
    start = annealed.weights()
    first = annealed.learn("a@env", experience)
    # After 64 of 192 steps two thirds are left, as Stable-Baselines3's lin_ schedules.
    assert annealed.optimizer.learning_rate == pytest.approx(0.001 * 2 / 3)
    assert annealed.clip_range == pytest.approx(0.2 * 2 / 3)
    unannealed = constant.learn("a@env", experience)
    assert constant.optimizer.learning_rate == 0.001 and constant.clip_range == 0.2
    assert not np.array_equal(first["W0"], start["W0"])
    assert not np.allclose(first["W0"], unannealed["W0"], rtol=0, atol=1e-7)
    second = annealed.learn("a@env", experience)
    third = annealed.learn("a@env", experience)  # 192 steps: nothing left to learn with
    assert annealed.optimizer.learning_rate == 0.0 and annealed.clip_range == 0.0
    assert not np.array_equal(second["W0"], first["W0"])
    assert third.keys() == second.keys()
    for name, array in second.items():
        if name != "version":
            np.testing.assert_array_equal(third[name], array, err_msg=name)
    # The steps learnt from are part of the state, so a continued run anneals on.
    state = annealed.state()
    assert int(state["steps"]) == 192
    fresh = brain_with(spaces.Discrete(2), **small, anneal_steps=384)
    fresh.load_state(state)
    fresh.learn("a@env", experience)
    assert fresh.steps == 256 and fresh.optimizer.learning_rate == pytest.approx(0.001 / 3)
    old = {name: array for name, array in state.items() if name != "steps"}
    with pytest.raises(MosaicError, match="steps"):
        fresh.load_state(old)
    assert fresh.steps == 256  # refused: nothing changed
    constant.load_state(old)  # without annealing, a state saved before steps were kept loads
    assert constant.steps == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_eight_copies_learn_cartpole(seed: int) -> None:
    env = vector_env("CartPole-v1", 8)
    loop = VectorLoop(env, PPOMuscle(), PPOBrain(), seed=seed, params=FAST)

    def solved(episodes: list[Any]) -> bool:
        return len(episodes) >= 20 and np.mean([e.total_reward for e in episodes[-20:]]) >= 195

    episodes = loop.run(solved, 30_000)
    env.close()
    # Measured: seed 0 after about 6,100 steps of all copies, seed 1 after about 7,000.
    assert solved(episodes), np.mean([e.total_reward for e in episodes[-20:]])


def test_the_harness_drives_the_single_step_methods_and_test_mode_sends_nothing() -> None:
    env = gymnasium.make("CartPole-v1")
    brain = PPOBrain()
    with Harness(env, PPOMuscle(), brain, seed=0, params={**FAST, "rollout_steps": 64}) as h:
        stats = h.run(20)
    steps = sum(s.steps for s in stats)
    assert brain.version == steps // 64
    test = muscle_with(spaces.Discrete(2), mode="test")
    test.apply_update(brain.weights())
    assert test.act("agent_0", np.zeros(4)) in (0, 1)
    assert test.feedback("agent_0", 1.0, True, False, np.zeros(4)) is None
    env.close()
