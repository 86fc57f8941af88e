"""Parameter sharing in the learners themselves: the agent-id feature (``agent_id: one_hot``),
and a PPO muscle serving several slots, driven in mosaic's call order for a parallel game (every
slot acts, then every slot gets its outcome), with no run around it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import Batch, Brain, BrainContext, Muscle, MuscleContext, Slot
from mosaic.agents.learners import (
    DQNBrain,
    DQNMuscle,
    PolicyGradientBrain,
    PolicyGradientMuscle,
    PPOBrain,
    PPOMuscle,
    SACBrain,
    SACMuscle,
    TabularQBrain,
    TabularQMuscle,
    TD3Brain,
    TD3Muscle,
)
from mosaic.agents.learners._common import AgentIds
from mosaic.core.errors import MosaicError
from tests.fixtures.tagged_agents import CheckedPPOBrain, reward_of

pytestmark = pytest.mark.timeout(60)

BOX = spaces.Box(-1.0, 1e6, (3,), np.float64)
DISCRETE = spaces.Discrete(3)
CONTINUOUS = spaces.Box(-1.0, 1.0, (2,), np.float32)


def slots(*uids: str, action: spaces.Space[Any] = DISCRETE) -> dict[str, Slot]:
    return {uid: Slot(uid, BOX, action) for uid in uids}


def set_up(brain_cls: type[Brain], muscle_cls: type[Muscle], brain_slots: dict[str, Slot],
           muscle_slots: dict[str, Slot], params: dict[str, Any], copies: int = 1,
           mode: str = "train") -> tuple[Brain, Muscle]:
    brain = brain_cls()
    brain.setup(BrainContext("a", "a", brain_slots, 0, "train", params))
    muscle = muscle_cls()
    muscle.setup(MuscleContext("a", "a@env", "env", muscle_slots, 1, mode, params,  # type: ignore[arg-type]
                               copies=copies))
    return brain, muscle


def test_agent_ids_are_the_one_hot_of_the_sorted_slot_ids() -> None:
    ids = AgentIds(["agent_2", "agent_0", "agent_10"], "one_hot", "PPOMuscle")
    assert ids.slots == ("agent_0", "agent_10", "agent_2")  # string order, the same anywhere
    x = np.array([[5.0, 6.0], [7.0, 8.0]])
    assert ids.appended(x, "agent_2").tolist() == [[5, 6, 0, 0, 1], [7, 8, 0, 0, 1]]
    assert ids.appended(x, "agent_0").tolist() == [[5, 6, 1, 0, 0], [7, 8, 1, 0, 0]]
    with pytest.raises(MosaicError, match="slot 'agent_3' is not one of"):
        ids.appended(x, "agent_3")
    off = AgentIds(["agent_0", "agent_1"], "none", "PPOMuscle")
    assert off.width == 0 and off.appended(x, "agent_1") is x
    with pytest.raises(MosaicError, match=r"params\.agent_id must be one of"):
        AgentIds(["agent_0"], "index", "PPOMuscle")


NETWORK_LEARNERS = {
    "ppo": (PPOBrain, PPOMuscle, DISCRETE, {"rollout_steps": 4, "hidden_sizes": [8]}),
    "ppo-box": (PPOBrain, PPOMuscle, CONTINUOUS, {"rollout_steps": 4, "hidden_sizes": [8]}),
    "policy_gradient": (PolicyGradientBrain, PolicyGradientMuscle, DISCRETE,
                        {"hidden_sizes": [8]}),
    "dqn": (DQNBrain, DQNMuscle, DISCRETE, {"hidden_sizes": [8], "epsilon_start": 0.0,
                                            "epsilon_end": 0.0}),
    "td3": (TD3Brain, TD3Muscle, CONTINUOUS, {"hidden_sizes": [8], "random_steps": 0}),
    "sac": (SACBrain, SACMuscle, CONTINUOUS, {"hidden_sizes": [8], "random_steps": 0}),
}


def first_weights(brain: Brain) -> dict[str, np.ndarray]:
    """What a starting muscle gets: the network whose first layer reads the agent id."""
    synced = brain.sync("a@env")
    return synced if synced is not None else brain.weights()  # type: ignore[attr-defined]


def first_layer_inputs(update: dict[str, np.ndarray]) -> int:
    return int(update["W0"].shape[0])


@pytest.mark.parametrize("name", NETWORK_LEARNERS)
def test_with_agent_ids_the_network_reads_one_input_more_per_slot_and_slots_act_apart(
        name: str) -> None:
    brain_cls, muscle_cls, action, params = NETWORK_LEARNERS[name]
    three = slots("agent_0", "agent_1", "agent_2", action=action)
    observation = np.array([1.0, 2.0, 0.5])
    for agent_id, inputs, different in (("one_hot", 3 + 3, True), ("none", 3, False)):
        # Greedy (test mode), so that only the network tells the slots' actions apart.
        brain, muscle = set_up(brain_cls, muscle_cls, three, three,
                               {**params, "agent_id": agent_id}, mode="test")
        weights = first_weights(brain)
        assert first_layer_inputs(weights) == inputs
        # Let the id inputs decide: large first-layer weights, different per slot; the last
        # layer, which starts at zero in some learners, as large.
        rng = np.random.default_rng(0)
        for key in [key for key in weights if key.startswith("W")]:
            weights[key] = rng.normal(0.0, 0.5, weights[key].shape)
        muscle.apply_update(weights)
        muscle.reset()
        acted = {np.asarray(muscle.act(slot, observation)).tobytes() for slot in three}
        assert (len(acted) > 1) == different, acted


@pytest.mark.parametrize("name", NETWORK_LEARNERS)
def test_a_muscle_of_other_slots_than_the_brains_is_told_why_the_network_does_not_fit(
        name: str) -> None:
    brain_cls, muscle_cls, action, params = NETWORK_LEARNERS[name]
    params = {**params, "agent_id": "one_hot"}
    brain, muscle = set_up(brain_cls, muscle_cls, slots("a0", "a1", "a2", action=action),
                           slots("a0", "a1", action=action), params)
    with pytest.raises(MosaicError) as caught:
        muscle.apply_update(first_weights(brain))
    assert "agent_id: one_hot appends one input per slot of the agent: this muscle serves 2 " \
           "(a0, a1)" in str(caught.value)


@pytest.mark.parametrize("name", NETWORK_LEARNERS)
def test_agent_ids_work_with_copies(name: str) -> None:
    """A Gymnasium environment's copies have one slot: its id is a constant input."""
    brain_cls, muscle_cls, action, params = NETWORK_LEARNERS[name]
    one = slots("agent_0", action=action)
    brain, muscle = set_up(brain_cls, muscle_cls, one, one, {**params, "agent_id": "one_hot"},
                           copies=2)
    muscle.apply_update(first_weights(brain))
    observations = np.array([[1.0, 2.0, 0.5], [3.0, 4.0, 0.5]])
    batch = Batch(observations, np.zeros(2), np.zeros(2, bool), np.zeros(2, bool),
                  np.zeros(2, bool), np.ones(2, bool), {})
    actions = np.asarray(muscle.act_batch("agent_0", batch))
    assert actions.shape[0] == 2


def test_tabular_q_refuses_agent_ids_with_the_reason() -> None:
    table = {"s0": Slot("s0", spaces.Discrete(4), DISCRETE)}
    for cls in (TabularQBrain, TabularQMuscle):
        learner = cls()
        context_cls = BrainContext if cls is TabularQBrain else MuscleContext
        args = (("a", "a") if cls is TabularQBrain else ("a", "a@env", "env"))
        with pytest.raises(MosaicError) as caught:
            learner.setup(context_cls(*args, table, 0, "train", {"agent_id": "one_hot"}))  # type: ignore[arg-type]
        assert "params.agent_id: expected none, got 'one_hot': tabular Q has no network" in \
            str(caught.value)


# -- a PPO muscle serving several slots ----------------------------------------------------------


def tagged(number: int, t: int) -> np.ndarray:
    return np.array([number, t, 0.5])


def play_parallel(muscle: Muscle, numbers: dict[str, int], steps: int,
                  leave: dict[str, int]) -> list[Any]:
    """One episode of a parallel game in mosaic's call order; the experience returned."""
    sent = []
    muscle.reset()
    live = list(numbers)
    for slot in live:
        muscle.act(slot, tagged(numbers[slot], 0))
    for t in range(1, steps + 1):
        done = t == steps
        # Slots that left earlier get their outcome when the episode ends, without an
        # observation (the step core settles them then).
        fed = numbers if done else live
        for slot in fed:
            left = leave.get(slot)
            observation = (None if left is not None and left < t else tagged(numbers[slot], t))
            reward = reward_of(numbers[slot], t - 1) if slot in live else 0.0
            item = muscle.feedback(slot, reward, False, done, observation)
            if item is not None:
                sent.append(item)
        live = [slot for slot in live if leave.get(slot) != t]
        if not done:
            for slot in live:
                muscle.act(slot, tagged(numbers[slot], t))
    return sent


def test_a_ppo_rollout_of_several_slots_holds_each_slots_steps_apart_and_up_to_date() -> None:
    numbers = {"p0": 0, "p1": 1, "p2": 2}
    three = slots(*numbers)
    brain = CheckedPPOBrain()
    params = {"rollout_steps": 10, "hidden_sizes": [8], "epochs": 1}
    brain.setup(BrainContext("a", "a", three, 0, "train", params))
    muscle = PPOMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", three, 1, "train", params))
    rollouts = []
    for _ in range(3):
        for rollout in play_parallel(muscle, numbers, 9, leave={"p2": 4}):
            brain.learn("a@env", rollout)  # fails on a segment that mixes slots
            muscle.apply_update(brain.weights())
            rollouts.append(rollout)
    assert rollouts
    for rollout in rollouts:
        steps = sum(len(segment["actions"]) for segment in rollout["segments"])
        # Due at 10 steps: every step with its outcome, so all but the one awaited of each of
        # the two other slots that still act.
        assert steps >= 10 - 2, steps
        assert {int(s["observations"][0][0]) for s in rollout["segments"]} <= {0, 1, 2}
    # The slot that left early ends its last segment as terminated: nothing to bootstrap from.
    left = [s for r in rollouts for s in r["segments"]
            if s["observations"][0][0] == 2 and s["observations"][-1][1] == 3]
    assert left and all(s["terminated"] and s["last_observation"] is None for s in left)


def test_the_checking_brain_refuses_a_segment_that_mixes_two_slots() -> None:
    """The end-to-end check of tests/e2e/test_parameter_sharing.py can fail."""
    brain = CheckedPPOBrain()
    brain.setup(BrainContext("a", "a", slots("p0", "p1"), 0, "train", {"hidden_sizes": [8]}))
    mixed = {"observations": np.array([tagged(0, 0), tagged(1, 1)]),
             "actions": np.array([0, 1]), "log_probs": np.log(np.full(2, 1 / 3)),
             "rewards": np.array([reward_of(0, 0), reward_of(1, 1)]), "masks": None,
             "last_observation": None, "terminated": True}
    with pytest.raises(MosaicError, match="one trajectory holds the steps of agents"):
        brain.learn("a@env", {"segments": [mixed], "version": 0})


def test_the_torch_ppo_brain_takes_the_agent_ids_too() -> None:
    pytest.importorskip("torch")
    from mosaic.agents.learners.torch_ppo import TorchPPOBrain

    numbers = {"p0": 0, "p1": 1}
    two = slots(*numbers)
    params = {"rollout_steps": 6, "hidden_sizes": [8], "epochs": 1, "agent_id": "one_hot"}
    brain, muscle = set_up(TorchPPOBrain, PPOMuscle, two, two, params)
    muscle.apply_update(first_weights(brain))
    [rollout, *_] = play_parallel(muscle, numbers, 5, leave={})
    assert rollout["segments"][0]["observations"].shape[1] == 3 + 2
    muscle.apply_update(brain.learn("a@env", rollout))
    assert int(brain.version) == 1  # type: ignore[attr-defined]
