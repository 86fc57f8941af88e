"""PPO on PyTorch: TorchPPOBrain updates as the NumPy PPOBrain does, shares its state format,
and learns CartPole with the NumPy muscle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, MuscleContext, Slot
from mosaic.agents.learners import PPOBrain, PPOMuscle
from mosaic.core.errors import MosaicError
from tests.agents.test_ppo import rollout_of_64_steps
from tests.agents.vector_loop import VectorLoop, vector_env

pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")

from mosaic.agents.learners.torch_ppo import TorchPPOBrain

pytestmark = pytest.mark.timeout(300)

BOX = spaces.Box(-np.inf, np.inf, (4,), np.float64)
SMALL = {"rollout_steps": 64, "minibatch_size": 16, "epochs": 3, "hidden_sizes": [16, 16]}
FAST = {"rollout_steps": 256, "minibatch_size": 64, "epochs": 10, "learning_rate": 0.001,
        "discount": 0.98, "gae_lambda": 0.8}
SPACES = [spaces.Discrete(3), spaces.Box(-2.0, 2.0, (2,), np.float64)]


def slots(action_space: Any) -> dict[str, Slot]:
    return {"agent_0": Slot("agent_0", BOX, action_space)}


def brain(cls: type[PPOBrain], action_space: Any, **params: Any) -> PPOBrain:
    made = cls()
    made.setup(BrainContext("a", "a", slots(action_space), 5, "train", {**SMALL, **params}))
    return made


def rollout(action_space: Any) -> Any:
    """64 steps of a fresh muscle on random observations and rewards, episodes of 20 steps."""
    muscle = PPOMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", slots(action_space), 0, "train", SMALL))
    return rollout_of_64_steps(muscle)


@pytest.mark.parametrize("action_space", SPACES, ids=["discrete", "box"])
@pytest.mark.parametrize(("params", "tolerance"), [
    ({"epochs": 1, "minibatch_size": 64}, 1e-9),  # one step: the same loss and gradient
    ({}, 1e-3),  # 12 steps: Adam's epsilon, applied differently, moves tiny gradients apart
    # The rollout's 64 steps leave half of the learning rate and clip range.
    ({"epochs": 1, "minibatch_size": 64, "anneal_steps": 128}, 1e-9),
    ({"anneal_steps": 128}, 1e-3),
], ids=["one-step", "twelve-steps", "one-step-annealed", "twelve-steps-annealed"])
def test_an_update_matches_the_numpy_brain(action_space: Any, params: dict[str, Any],
                                           tolerance: float) -> None:
    experience = rollout(action_space)
    numpy_brain = brain(PPOBrain, action_space, **params)
    torch_brain = brain(TorchPPOBrain, action_space, **params)
    before = numpy_brain.weights()
    answers = [b.learn("a@env", experience) for b in (numpy_brain, torch_brain)]
    assert answers[0].keys() == answers[1].keys()
    for name, value in answers[0].items():
        np.testing.assert_allclose(answers[1][name], value, rtol=0, atol=max(tolerance, 1e-5),
                                   err_msg=name)
    assert any(not np.allclose(before[name], value) for name, value in answers[0].items())
    for name, value in numpy_brain.last_stats.items():
        assert torch_brain.last_stats[name] == pytest.approx(value, rel=tolerance, abs=1e-12), name


@pytest.mark.parametrize("action_space", SPACES, ids=["discrete", "box"])
def test_either_brain_loads_the_others_state(action_space: Any) -> None:
    experience = rollout(action_space)
    torch_brain = brain(TorchPPOBrain, action_space)
    torch_brain.learn("a@env", experience)
    state = torch_brain.state()
    numpy_brain = brain(PPOBrain, action_space)
    assert {k: v.shape for k, v in state.items()} == {
        k: v.shape for k, v in numpy_brain.state().items()}
    numpy_brain.load_state(state)
    again = brain(TorchPPOBrain, action_space)
    again.load_state(numpy_brain.state())
    for name, value in state.items():
        np.testing.assert_array_equal(again.state()[name], value, err_msg=name)
    # Restored moments and step count: the next update is the one the first brain makes.
    again.context.rng.bit_generator.state = torch_brain.context.rng.bit_generator.state
    first, second = torch_brain.learn("a@env", experience), again.learn("a@env", experience)
    for name, value in first.items():
        np.testing.assert_allclose(second[name], value, rtol=0, atol=1e-12, err_msg=name)
    with pytest.raises(MosaicError):
        again.load_state({k: v for k, v in state.items() if k != "adam.m0"})
    np.testing.assert_array_equal(again.state()["policy.W0"], second["W0"])


def test_eight_copies_learn_cartpole() -> None:
    env = vector_env("CartPole-v1", 8)
    loop = VectorLoop(env, PPOMuscle(), TorchPPOBrain(), seed=0, params=FAST)

    def solved(episodes: list[Any]) -> bool:
        return len(episodes) >= 20 and np.mean([e.total_reward for e in episodes[-20:]]) >= 195

    episodes = loop.run(solved, 30_000)
    env.close()
    assert solved(episodes), np.mean([e.total_reward for e in episodes[-20:]])
