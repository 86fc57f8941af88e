"""TD3 and SAC on PyTorch: TorchTD3Brain and TorchSACBrain (with gSDE too) update as the NumPy
brains do, share their state format (either loads the other's checkpoint), and continue from a
state exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mosaic.agents import BrainContext
from mosaic.agents.learners import SACBrain, TD3Brain
from mosaic.agents.learners.actor_critic_brain import ActorCriticBrain
from tests.agents.test_actor_critic import GSDE, SMALL, rows, slots

pytest.importorskip("torch", reason="the torch extra: pip install -e '.[torch]'")

from mosaic.agents.learners.torch_actor_critic import TorchSACBrain, TorchTD3Brain

pytestmark = pytest.mark.timeout(120)

# gSDE: torch's autograd against the NumPy brain's hand-written gradients.
PAIRS = [(TD3Brain, TorchTD3Brain, {}), (SACBrain, TorchSACBrain, {}),
         (SACBrain, TorchSACBrain, GSDE),
         (SACBrain, TorchSACBrain, {**GSDE, "sde_learn_features": False})]
IDS = ["td3", "sac", "gsde", "gsde-features-held"]


def made(cls: type[ActorCriticBrain], **params: Any) -> ActorCriticBrain:
    brain = cls()
    brain.setup(BrainContext("a", "a", slots(), 7, "train", {**SMALL, **params}))
    return brain


def _adams(brain: Any) -> list[Any]:
    return [getattr(brain, name) for name in ("critic_optimizer", "actor_optimizer",
                                              "alpha_optimizer") if hasattr(brain, name)]


@pytest.mark.parametrize(("numpy_cls", "torch_cls", "params"), PAIRS, ids=IDS)
@pytest.mark.parametrize("learns", [1, 6], ids=["first-update", "twenty-one-updates"])
def test_updates_match_the_numpy_brain(numpy_cls: type[ActorCriticBrain],
                                       torch_cls: type[ActorCriticBrain], params: dict[str, Any],
                                       learns: int) -> None:
    """The same losses, gradients and Adam steps. torch's Adam adds its epsilon to the
    bias-corrected root of the second moment, the NumPy Adam to the uncorrected one: the steps
    of gradients near epsilon (the actor's first layers, behind its small last layer) differ by
    up to 1e-3 at the first step. With an epsilon of 1e-30 both are the same step."""
    tolerance = 1e-9
    # sync_every 1 and learning_starts 4: the first learn of 4 rows makes one update.
    numpy_brain, torch_brain = (made(cls, sync_every=1, policy_delay=1) if cls in
                                (TD3Brain, TorchTD3Brain) else made(cls, sync_every=1, **params)
                                for cls in (numpy_cls, torch_cls))
    for numpy_adam in _adams(numpy_brain):
        numpy_adam.eps = 1e-30
    for _, optimizer in torch_brain._adams:
        for group in optimizer.param_groups:
            group["eps"] = 1e-30
    logs: list[list[tuple[str, float]]] = [[], []]
    before = numpy_brain.state()
    for i in range(learns):
        answers = [b.learn("m", rows(4, seed=i)) for b in (numpy_brain, torch_brain)]
        assert answers[0] is not None and answers[1] is not None
        assert answers[0].keys() == answers[1].keys()
        for log, brain in zip(logs, (numpy_brain, torch_brain), strict=True):
            log.extend((name, value) for name, value, *_ in brain.context.metrics.take())
    assert torch_brain.updates == numpy_brain.updates == 1 + 4 * (learns - 1)
    states = [b.state() for b in (numpy_brain, torch_brain)]
    assert states[0].keys() == states[1].keys()
    for name, value in states[0].items():
        np.testing.assert_allclose(states[1][name], value, rtol=0, atol=tolerance, err_msg=name)
    # Every network and optimizer moved.
    moved = {name.split(".")[0] for name, value in states[0].items()
             if value.dtype == np.float64 and not np.array_equal(before[name], value)}
    assert {"actor", "critic1", "critic2", "critic1_target", "critic2_target", "actor_adam",
            "critic_adam", *(["log_std"] if params else [])} <= moved, moved
    assert [name for name, _ in logs[1]] == [name for name, _ in logs[0]]
    for (name, torch_value), (_, numpy_value) in zip(logs[1], logs[0], strict=True):
        assert torch_value == pytest.approx(numpy_value, rel=max(tolerance, 1e-9),
                                            abs=1e-9), name


@pytest.mark.parametrize(("numpy_cls", "torch_cls", "params"), PAIRS, ids=IDS)
def test_either_brain_loads_the_others_state_and_continues_exactly(
        numpy_cls: type[ActorCriticBrain], torch_cls: type[ActorCriticBrain],
        params: dict[str, Any]) -> None:
    assert torch_cls.params_model() is numpy_cls.params_model()
    torch_brain = made(torch_cls, **params)
    for i in range(3):
        torch_brain.learn("m", rows(4, seed=i))
    state = torch_brain.state()
    numpy_brain = made(numpy_cls, **params)
    # The same keys and shapes (the replay buffer's rows apart: the NumPy brain's is empty).
    assert {k: v.shape[1:] if k.startswith("replay.") else v.shape for k, v in state.items()} \
        == {k: v.shape[1:] if k.startswith("replay.") else v.shape
            for k, v in numpy_brain.state().items()}
    numpy_brain.load_state(state)
    again = made(torch_cls, **params)
    again.load_state(numpy_brain.state())
    for name, value in state.items():
        np.testing.assert_array_equal(again.state()[name], value, err_msg=name)
    # Restored networks, moments and step counts: the next updates are the first brain's.
    again.context.rng.bit_generator.state = torch_brain.context.rng.bit_generator.state
    for i in range(3, 6):
        first, second = torch_brain.learn("m", rows(4, seed=i)), again.learn("m", rows(4, i))
        assert (first is None) == (second is None)
    for name, value in torch_brain.state().items():
        np.testing.assert_array_equal(again.state()[name], value, err_msg=name)
