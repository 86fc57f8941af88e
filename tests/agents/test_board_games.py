"""PettingZoo's classic games as they are: every built-in learner takes the
``{"observation", "action_mask"}`` Dict, plays only legal moves when it explores and when it is
greedy, and DQN's target maximises over the legal next moves also when masks come apart from
the observation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.classic import connect_four_v3, tictactoe_v3

from mosaic.agents import Brain, BrainContext, Muscle, MuscleContext, Slot
from mosaic.agents.learners import (
    DQNBrain,
    DQNMuscle,
    PolicyGradientBrain,
    PolicyGradientMuscle,
    PPOBrain,
    PPOMuscle,
    TabularQBrain,
    TabularQMuscle,
)
from mosaic.core.errors import MosaicError
from mosaic.environments.pettingzoo_adapter import AECAdapter

NETWORK_LEARNERS = [(PolicyGradientBrain, PolicyGradientMuscle, {}),
                    (DQNBrain, DQNMuscle, {"epsilon_start": 0.5, "epsilon_end": 0.5}),
                    (PPOBrain, PPOMuscle, {"rollout_steps": 10_000})]


def game_slots(adapter: AECAdapter) -> dict[str, Slot]:
    return {uid: Slot(uid, obs, act) for uid, (obs, act) in adapter.slots.items()}


def set_up(brain_cls: type[Brain], muscle_cls: type[Muscle], slots: dict[str, Slot],
           params: dict[str, Any], mode: str = "train", seed: int = 0) -> tuple[Brain, Muscle]:
    brain = brain_cls()
    brain.setup(BrainContext("a", "a", slots, seed, "train", params))
    muscle = muscle_cls()
    muscle.setup(MuscleContext("a", "a@env", "env", slots, seed, mode, params))  # type: ignore[arg-type]
    return brain, muscle


def play(adapter: AECAdapter, muscle: Muscle, games: int, seed: int = 0) -> int:
    """Play ``games`` with ``muscle`` in every seat; fail on an illegal move; return the moves."""
    moves = 0
    for game in range(games):
        outcome = adapter.reset(seed + game)
        muscle.reset()
        while outcome.acting:
            (slot,) = outcome.acting
            mask = np.asarray(outcome.legal_actions[slot], dtype=bool)
            action = muscle.act(slot, outcome.observations[slot], outcome.legal_actions[slot])
            assert mask[action], (action, mask)
            outcome = adapter.step({slot: action})
            moves += 1
    return moves


@pytest.mark.parametrize(("brain_cls", "muscle_cls", "params"), NETWORK_LEARNERS)
@pytest.mark.parametrize("mode", ["train", "test"])
def test_network_learners_play_connect_four_as_it_is_and_only_legal_moves(
        brain_cls: type[Brain], muscle_cls: type[Muscle], params: dict[str, Any],
        mode: str) -> None:
    adapter = AECAdapter(connect_four_v3.env())
    try:
        brain, muscle = set_up(brain_cls, muscle_cls, game_slots(adapter), params, mode)
        # Full columns come up often in long games; the brain's first weights make it greedy
        # towards some columns, so that a learner that ignored masks would play a full one.
        muscle.apply_update(brain.sync("a@env") or brain.weights())  # type: ignore[attr-defined]
        assert play(adapter, muscle, 20) > 20 * 7
    finally:
        adapter.close()


def test_a_greedy_learner_never_plays_the_best_column_once_it_is_full() -> None:
    adapter = AECAdapter(connect_four_v3.env())
    try:
        slots = game_slots(adapter)
        for brain_cls, muscle_cls, params in NETWORK_LEARNERS:
            brain, muscle = set_up(brain_cls, muscle_cls, slots, params, "test")
            weights = brain.weights()  # type: ignore[attr-defined]
            last = max(int(key[1:]) for key in weights if key.startswith("b"))
            weights[f"W{last}"][...] = 0.0
            weights[f"b{last}"][...] = np.arange(7.0)  # column 6 is the best everywhere
            muscle.apply_update(weights)
            board = np.zeros((6, 7, 2), np.int8)
            mask = np.array([1, 1, 1, 1, 1, 1, 0], np.int8)  # column 6 is full
            observation = {"observation": board, "action_mask": mask}
            assert muscle.act("player_0", observation) == 5, muscle_cls.__name__
            assert muscle.act("player_0", observation, mask) == 5, muscle_cls.__name__
    finally:
        adapter.close()


def test_tabular_q_takes_a_dict_with_a_discrete_observation_and_refuses_a_board() -> None:
    game = spaces.Dict({"observation": spaces.Discrete(5),
                        "action_mask": spaces.Box(0, 1, (3,), np.int8)})
    slots = {"player_0": Slot("player_0", game, spaces.Discrete(3))}
    _, muscle = set_up(TabularQBrain, TabularQMuscle, slots, {"epsilon": 1.0})
    mask = np.array([0, 1, 0], np.int8)
    for _ in range(20):
        assert muscle.act("player_0", {"observation": np.int64(2), "action_mask": mask}) == 1
    adapter = AECAdapter(tictactoe_v3.env())
    try:
        with pytest.raises(MosaicError, match="TabularQBrain needs Discrete observation"):
            set_up(TabularQBrain, TabularQMuscle, game_slots(adapter), {})
    finally:
        adapter.close()


def test_a_dict_with_other_entries_is_still_refused() -> None:
    other = spaces.Dict({"observation": spaces.Box(0, 1, (4,)), "position": spaces.Discrete(2)})
    slots = {"player_0": Slot("player_0", other, spaces.Discrete(3))}
    for brain_cls, muscle_cls, params in NETWORK_LEARNERS:
        with pytest.raises(MosaicError, match="needs a Box observation"):
            set_up(brain_cls, muscle_cls, slots, params)


def test_dqn_targets_the_legal_next_moves_when_masks_come_as_legal_actions_only() -> None:
    box = spaces.Box(0, 1, (2,), np.float64)
    slots = {"p": Slot("p", box, spaces.Discrete(3))}
    _, muscle = set_up(DQNBrain, DQNMuscle, slots, {"epsilon_start": 0.0, "epsilon_end": 0.0})
    assert isinstance(muscle, DQNMuscle)
    first, second = np.array([1, 1, 0], np.int8), np.array([0, 1, 1], np.int8)
    muscle.reset()
    muscle.act("p", np.zeros(2), first)
    # The next observation carries no mask: the transition waits for the next act's mask.
    assert muscle.feedback("p", 0.5, False, False, np.ones(2)) is None
    muscle.act("p", np.ones(2), second)
    item = muscle.feedback("p", 1.0, True, False, np.zeros(2))
    assert item is not None
    assert item["rewards"].tolist() == [0.5, 1.0]
    assert item["next_masks"].tolist() == [[False, True, True], [True, True, True]]
    assert item["terminated"].tolist() == [False, True]
    DQNBrain.learn(set_up(DQNBrain, DQNMuscle, slots, {})[0], "a@env", item)


def test_dqn_learns_from_the_end_of_a_game_whose_final_mask_allows_nothing() -> None:
    adapter = AECAdapter(tictactoe_v3.env())
    try:
        slots = game_slots(adapter)
        brain, muscle = set_up(DQNBrain, DQNMuscle, slots, {"learning_starts": 1,
                                                            "batch_size": 4})
        items = []
        for game in range(3):
            outcome = adapter.reset(game)
            muscle.reset()
            while True:
                for slot, reward in outcome.rewards.items():
                    done = not outcome.acting
                    item = muscle.feedback(slot, reward, done, False,
                                           outcome.observations.get(slot))
                    if item is not None:
                        items.append(item)
                        brain.learn("a@env", item)
                if not outcome.acting:
                    break
                (slot,) = outcome.acting
                outcome = adapter.step({slot: muscle.act(slot, outcome.observations[slot],
                                                         outcome.legal_actions[slot])})
        assert any(item["terminated"].any() for item in items)
    finally:
        adapter.close()


def test_dqn_without_masks_sends_each_transition_at_once() -> None:
    box = spaces.Box(0, 1, (2,), np.float64)
    slots = {"p": Slot("p", box, spaces.Discrete(3))}
    _, muscle = set_up(DQNBrain, DQNMuscle, slots, {})
    muscle.reset()
    muscle.act("p", np.zeros(2))
    item = muscle.feedback("p", 0.5, False, False, np.ones(2))
    assert item is not None and item["next_masks"] is None and item["rewards"].tolist() == [0.5]
