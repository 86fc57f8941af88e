"""MAPPO's learner: what its critic sees (the global state or the slot's observation), GAE per
slot, the refusals with their reason, and a state that round-trips before and after the value
network is built."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from mosaic.agents import BrainContext, MuscleContext, Slot
from mosaic.agents.learners import MAPPOBrain, MAPPOMuscle
from mosaic.agents.learners._common import unpack_records
from mosaic.agents.learners.mappo_brain import ValueScale
from mosaic.agents.learners.ppo_policy import gae
from mosaic.core.errors import MosaicError
from mosaic.environments.global_state import GLOBAL_STATE

pytestmark = pytest.mark.timeout(60)

OBS = spaces.Box(-np.inf, np.inf, (3,), np.float64)
SLOTS = {uid: Slot(uid, OBS, spaces.Discrete(4)) for uid in ("agent_0", "agent_1")}
SMALL = {"rollout_steps": 100, "hidden_sizes": [8], "epochs": 2, "minibatch_size": 4}
FIELDS = ("observations", "critic_inputs", "actions", "log_probs", "rewards", "masks",
          "last_critic_input", "terminated")


def muscle_with(**params: Any) -> MAPPOMuscle:
    muscle = MAPPOMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", SLOTS, 0, "train", {**SMALL, **params}))
    return muscle


def brain_with(**params: Any) -> MAPPOBrain:
    brain = MAPPOBrain()
    brain.setup(BrainContext("a", "a", SLOTS, 0, "train", {**SMALL, **params}))
    return brain


def play(muscle: MAPPOMuscle, steps: int) -> dict[str, Any]:
    """An episode of ``steps`` outcomes in which both slots act together (a parallel
    environment), the state in each info being ``[t, 10 + t]``, truncated at the last; the
    rollout the muscle holds then (its segments, as its state keeps them)."""
    for t in range(steps + 1):
        state = np.array([t, 10.0 + t])
        for index, slot in enumerate(SLOTS):
            muscle.receive_info(slot, {GLOBAL_STATE: state})
            observation = np.full(3, 100.0 * index + t)
            if t:
                sent = muscle.feedback(slot, float(index + 1), False, t == steps, observation)
                assert sent is None  # rollout_steps is not reached
            if t < steps:
                muscle.act(slot, observation)
    return {"segments": unpack_records(muscle.state(), "closed.", FIELDS), "version": 0}


def test_the_centralised_critic_sees_the_global_state_and_the_slots_own_input() -> None:
    rollout = play(muscle_with(agent_id="one_hot"), 4)
    first, second = rollout["segments"]  # agent_0's, then agent_1's
    np.testing.assert_array_equal(first["critic_inputs"][2], [2.0, 12.0, 2, 2, 2, 1.0, 0.0])
    np.testing.assert_array_equal(second["critic_inputs"][2],
                                  [2.0, 12.0, 102, 102, 102, 0.0, 1.0])
    # Policies see their own observation (and id) only.
    np.testing.assert_array_equal(second["observations"][2], [102.0, 102.0, 102.0, 0.0, 1.0])
    # The bootstrap is the state that came with the outcome of the last action.
    np.testing.assert_array_equal(first["last_critic_input"], [4.0, 14.0, 4, 4, 4, 1.0, 0.0])


def test_the_state_critic_sees_the_global_state_and_the_slots_id_alone() -> None:
    first, second = play(muscle_with(critic="state", agent_id="one_hot"), 4)["segments"]
    np.testing.assert_array_equal(first["critic_inputs"][2], [2.0, 12.0, 1.0, 0.0])
    np.testing.assert_array_equal(second["critic_inputs"][2], [2.0, 12.0, 0.0, 1.0])
    np.testing.assert_array_equal(second["observations"][2], [102.0, 102.0, 102.0, 0.0, 1.0])
    np.testing.assert_array_equal(first["last_critic_input"], [4.0, 14.0, 1.0, 0.0])
    # Without agent ids, the state alone.
    first, _ = play(muscle_with(critic="state"), 4)["segments"]
    np.testing.assert_array_equal(first["critic_inputs"], [[t, 10.0 + t] for t in range(4)])
    with pytest.raises(MosaicError, match=r"params: \{global_state: true\}"):
        muscle_with(critic="state").receive_info("agent_0", {})


def test_the_local_critic_sees_the_slots_observation() -> None:
    rollout = play(muscle_with(critic="local"), 4)
    for segment in rollout["segments"]:
        np.testing.assert_array_equal(segment["critic_inputs"], segment["observations"])
    np.testing.assert_array_equal(rollout["segments"][0]["last_critic_input"], [4.0] * 3)


def test_gae_runs_per_slot_on_the_value_of_what_the_critic_saw() -> None:
    muscle = muscle_with()
    rollout = play(muscle, 4)
    brain = brain_with(normalize_values=False)
    brain.learn("a@env", rollout)  # builds the value network from the critic inputs' size
    assert brain.value is not None and brain.value.n_inputs == 2 + 3  # state, observation
    *_, advantages, _ = brain._columns(rollout["segments"])
    expected = []
    for segment in rollout["segments"]:
        values = brain.value.forward(segment["critic_inputs"])[:, 0]
        last = float(brain.value.forward(segment["last_critic_input"][None])[0, 0])
        expected.append(gae(segment["rewards"], values, last, 0.99, 0.95)[0])
    np.testing.assert_allclose(advantages, np.concatenate(expected))
    # Each slot's rewards stay its own: agent_0 earned 1 a step, agent_1 2.
    assert [list(s["rewards"]) for s in rollout["segments"]] == [[1.0] * 4, [2.0] * 4]


def test_a_centralised_critic_without_the_global_state_names_the_key_to_set() -> None:
    muscle = muscle_with()
    with pytest.raises(MosaicError, match=r"params: \{global_state: true\}.*critic: local"):
        muscle.receive_info("agent_0", {})
    muscle_with(critic="local").receive_info("agent_0", {})  # a local critic needs none


@pytest.mark.parametrize(("params", "key"), [
    ({"critic": "global"}, "critic"),
    ({"load_checkpoint": "x.npz"}, "load_checkpoint"),
    ({"agent_id": "yes"}, "agent_id"),
    ({"anneal_steps": 1000}, "anneal_steps"),  # PPOBrain's alone
])
def test_bad_params_are_refused_by_name(params: dict[str, Any], key: str) -> None:
    with pytest.raises(MosaicError, match=f"params.{key}"):
        brain_with(**params)


def test_unsupported_spaces_are_refused_naming_the_slot() -> None:
    brain = MAPPOBrain()
    slots = {"player_0": Slot("player_0", spaces.Discrete(4), spaces.Discrete(3))}
    with pytest.raises(MosaicError, match=r"needs a Box observation.*'player_0'"):
        brain.setup(BrainContext("a", "a", slots, 0, "train", {}))


def test_the_brains_state_round_trips_before_and_after_the_critic_is_built() -> None:
    fresh = brain_with()
    before = fresh.state()
    assert not any(name.startswith("value.") for name in before)
    trained = brain_with()
    trained.learn("a@env", play(muscle_with(), 4))
    after = trained.state()
    assert "value.W0" in after and "adam.t" in after
    other = brain_with()
    other.load_state(after)
    for name, array in other.state().items():
        np.testing.assert_array_equal(array, after[name])
    other.load_state(before)  # back to no value network
    assert other.value is None and set(other.state()) == set(before)


def test_the_value_scale_merges_batches_exactly() -> None:
    scale = ValueScale(True)
    data = np.arange(10.0) ** 2
    scale.add(data[:3])
    scale.add(data[3:])
    assert scale.mean == pytest.approx(data.mean()) and scale.var == pytest.approx(data.var())
    np.testing.assert_allclose(scale.values(scale.targets(data)), data, atol=1e-9)


def test_a_rollout_due_mid_step_cuts_the_other_slots_before_their_pending_step() -> None:
    """agent_0's feedback makes the rollout due; agent_1's last action awaits its reward, so
    its segment is cut before it, bootstrapping from the critic's input there."""
    muscle = muscle_with(rollout_steps=6)
    sent = None
    for t in range(4):
        state = np.array([t, 10.0 + t])
        for slot in SLOTS:
            muscle.receive_info(slot, {GLOBAL_STATE: state})
            if t:
                sent = muscle.feedback(slot, 1.0, False, False, np.zeros(3))
                if sent is not None:
                    break
            muscle.act(slot, np.zeros(3))
        if sent is not None:
            break
    assert sent is not None
    first, second = sent["segments"]
    assert len(first["actions"]) == 3 and len(second["actions"]) == 2
    np.testing.assert_array_equal(second["last_critic_input"], [2.0, 12.0, 0, 0, 0])
    assert list(second["rewards"]) == [1.0, 1.0]
    # The pending step begins agent_1's next segment, and counts towards the next rollout.
    assert muscle._steps == 1 and len(muscle._open["agent_1"].actions) == 1
