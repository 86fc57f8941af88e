"""TD3's Ornstein-Uhlenbeck exploration noise: the process reverts to 0 at its rate and settles
at its standard deviation, one seed gives one sequence, and it restarts and reloads where told;
the muscle keeps one process per slot and copy, restarts it with each episode, saves it in its
state (a muscle that loads it acts on as the saved one would have), and refuses bad params
naming the key. Gaussian noise, the default, is drawn as before and adds nothing to the state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.learners import TD3Brain, TD3Muscle
from mosaic.agents.learners.exploration_noise import OrnsteinUhlenbeck
from mosaic.core.errors import MosaicError

pytestmark = pytest.mark.timeout(60)

OU: dict[str, Any] = {"noise": "ornstein-uhlenbeck", "exploration_noise": 0.5, "random_steps": 0}
OBSERVATION = spaces.Box(-np.inf, np.inf, (2,), np.float64)
ACTION = spaces.Box(-1.0, 1.0, (1,), np.float32)


def muscle_with(copies: int = 1, slots: tuple[str, ...] = ("agent_0",), seed: int = 0,
                **params: Any) -> TD3Muscle:
    muscle = TD3Muscle()
    muscle.setup(MuscleContext("a", "a@env", "env",
                               {slot: Slot(slot, OBSERVATION, ACTION) for slot in slots}, seed,
                               "train", {**OU, **params}, copies=copies))
    return muscle


def batch(copies: int, starts: list[bool]) -> Batch:
    none = np.zeros(copies, bool)
    return Batch(np.zeros((copies, 2)), np.zeros(copies), none, none, ~np.array(starts),
                 np.array(starts), {})


def test_the_process_reverts_to_zero_at_its_rate_and_settles_at_its_deviation() -> None:
    sigma, theta, dt = 0.5, 1.0, 0.1
    process = OrnsteinUhlenbeck((20_000,), sigma, theta, dt)
    process.load(np.full(20_000, 3.0), "start")
    rng = np.random.default_rng(0)
    for _ in range(5):
        values = process.step(rng)
    # The mean decays as (1 - theta * dt) ** steps; the noise averages out over 20k processes.
    assert abs(values.mean() - 3.0 * 0.9**5) < 0.02
    for _ in range(200):  # 20 times the process's memory of 1 / (theta * dt) steps
        values = process.step(rng)
    # The stationary deviation of the discrete process: sigma^2 dt / (1 - (1 - theta dt)^2).
    assert abs(values.mean()) < 0.02
    assert values.std() == pytest.approx(sigma * np.sqrt(dt / (1 - 0.9**2)), rel=0.03)
    # Without sigma nothing is drawn into it: a pure decay.
    quiet = OrnsteinUhlenbeck((1,), 0.0, theta, dt)
    quiet.load(np.ones(1), "start")
    assert quiet.step(rng)[0] == pytest.approx(0.9)


def test_one_seed_gives_one_sequence_and_each_step_carries_the_last() -> None:
    def sequence(seed: int) -> np.ndarray:
        process, rng = OrnsteinUhlenbeck((3, 2), 0.5, 0.15, 0.01), np.random.default_rng(seed)
        return np.array([process.step(rng) for _ in range(50)])

    first = sequence(7)
    assert np.array_equal(first, sequence(7))
    assert not np.array_equal(first, sequence(8))
    # Correlated in time: a step moves a value far less than the values spread.
    assert np.abs(np.diff(first, axis=0)).mean() < 0.2 * np.abs(first[-1]).mean()


def test_restart_and_load_touch_only_what_they_are_given() -> None:
    process, rng = OrnsteinUhlenbeck((2, 3, 1), 0.5, 0.15, 0.01), np.random.default_rng(1)
    for _ in range(10):
        process.step(rng)
    before = process.values.copy()
    process.restart((1, np.array([False, True, False])))
    assert process.values[1, 1, 0] == 0.0
    mask = np.ones_like(before, bool)
    mask[1, 1, 0] = False
    assert np.array_equal(process.values[mask], before[mask])
    process.step(rng, (0, slice(0, 1)))  # one slot's first copy only
    assert np.array_equal(process.values[0, 1:], before[0, 1:])
    with pytest.raises(MosaicError, match=r"saved noise of shape \(3,\); expected \(2, 3, 1\)"):
        process.load(np.zeros(3), "saved noise")
    with pytest.raises(MosaicError, match="theta \\* dt <= 1"):
        OrnsteinUhlenbeck((1,), 0.5, 50.0, 0.1)


@pytest.mark.parametrize(("params", "message"), [
    ({"noise": "pink"}, "params.noise: expected 'gaussian' or 'ornstein-uhlenbeck', got the "
                        "text 'pink'"),
    ({"noise_theta": 0}, "params.noise_theta: expected a number > 0"),
    ({"noise_dt": -0.1}, "params.noise_dt: expected a number > 0"),
    ({"noise_theta": 50, "noise_dt": 0.1}, "params.noise_dt: expected noise_theta \\* "
                                           "noise_dt <= 1"),
    ({"exploration_noise": -1}, "params.exploration_noise"),
    ({"noise_sigma": 0.5}, "unknown key 'noise_sigma'"),
])
def test_bad_noise_params_are_refused_by_the_muscle_and_the_brain_naming_the_key(
        params: dict[str, Any], message: str) -> None:
    with pytest.raises(MosaicError, match=message):
        muscle_with(**params)
    brain = TD3Brain()
    with pytest.raises(MosaicError, match=message):
        brain.setup(BrainContext("a", "a", {"agent_0": Slot("agent_0", OBSERVATION, ACTION)}, 0,
                                 "train", {**OU, **params}))


def test_the_muscle_drifts_with_the_noise_and_starts_each_episode_at_zero() -> None:
    def deltas(muscle: TD3Muscle) -> float:
        actions = np.array([muscle.act("agent_0", np.zeros(2))[0] for _ in range(200)])
        return float(np.abs(np.diff(actions)).mean())

    # No actor yet (outputs 0): the action is the clipped noise.
    drifting, fresh = muscle_with(), muscle_with(noise="gaussian")
    assert deltas(drifting) < 0.1 < deltas(fresh)
    assert np.abs(drifting.state()["noise"]).max() > 0
    drifting.reset()
    assert not drifting.state()["noise"].any()
    assert set(fresh.state()) == {"steps"}  # the default's state is as it was


def test_each_slot_and_copy_has_its_process_and_a_copy_that_starts_restarts_its_own() -> None:
    muscle = muscle_with(copies=3, slots=("b", "a"))
    muscle.act_batch("a", batch(3, [True, True, True]))
    muscle.act_batch("b", batch(3, [True, True, True]))
    for _ in range(20):
        muscle.act_batch("a", batch(3, [False, False, False]))
    noise = muscle.state()["noise"]
    assert noise.shape == (2, 3, 1)  # slots in sorted order, copies, action values
    assert (noise[0] != 0).all() and (noise[1] != 0).all()
    assert len(np.unique(noise[0])) == 3  # each copy draws its own
    draws = np.random.default_rng()
    draws.bit_generator.state = muscle.context.rng.bit_generator.state
    muscle.act_batch("a", batch(3, [False, True, False]))
    stepped = muscle.state()["noise"]
    # Copy 1 of slot 'a' restarted at 0 before its step; slot 'b' did not act.
    started = noise[0] * np.array([[1.0], [0.0], [1.0]])
    expected = started * (1 - 0.15 * 0.01) + 0.5 * np.sqrt(0.01) * draws.standard_normal((3, 1))
    assert np.allclose(stepped[0], expected, rtol=0, atol=1e-15)
    assert np.array_equal(stepped[1], noise[1])


def test_a_muscle_that_loads_the_state_acts_on_as_the_saved_one() -> None:
    saved = muscle_with(copies=2)
    saved.act_batch("agent_0", batch(2, [True, True]))
    for _ in range(30):
        saved.act_batch("agent_0", batch(2, [False, False]))
    state = saved.state()
    rng_state = saved.context.rng.bit_generator.state
    loaded = muscle_with(copies=2, seed=99)
    loaded.load_state(state)
    loaded.context.rng.bit_generator.state = rng_state  # as a checkpoint restores it
    for _ in range(10):
        assert np.array_equal(saved.act_batch("agent_0", batch(2, [False, False])),
                              loaded.act_batch("agent_0", batch(2, [False, False])))
    with pytest.raises(MosaicError, match="state 'noise' of shape"):
        muscle_with().load_state({**state})
    # A state saved with Gaussian noise: the process starts at 0.
    plain = muscle_with(copies=2)
    plain.load_state({"steps": np.array(5)})
    assert not plain.state()["noise"].any() and plain.steps == 5
