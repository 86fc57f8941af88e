"""The legal moves of a turn as a person names and types them (mosaic.operators.moves)."""

from __future__ import annotations

import pytest
from pettingzoo.classic import chess_v6

from mosaic.operators.chess_position import ChessObservationError
from mosaic.operators.moves import MoveChoice, move_choices, parse_move

pytestmark = pytest.mark.timeout(60)


def _chess_start() -> tuple[dict, list[int]]:
    env = chess_v6.env()
    env.reset(seed=0)
    try:
        observation = env.observe("player_0")
    finally:
        env.close()
    return observation, [int(i) for i, legal in enumerate(observation["action_mask"]) if legal]


def test_chess_moves_are_named_in_san_with_uci_accepted() -> None:
    observation, legal = _chess_start()
    choices = move_choices(observation, legal, chess=True)
    assert [c.action for c in choices] == legal
    by_name = {c.name: c for c in choices}
    assert len(by_name) == 20 and by_name["Nf3"].aliases == ("g1f3",)
    assert parse_move("e4", choices) is by_name["e4"]
    assert parse_move(" g1f3 ", choices) is by_name["Nf3"]
    assert parse_move("NF3", choices) is by_name["Nf3"]
    assert parse_move(str(by_name["d4"].action), choices) is by_name["d4"]
    for refused in ("e5", "Ke2", "", "   ", "-1", "4672"):
        assert parse_move(refused, choices) is None, refused


def test_chess_moves_of_other_legal_actions_are_refused() -> None:
    observation, legal = _chess_start()
    with pytest.raises(ChessObservationError, match="is this PettingZoo's chess"):
        move_choices(observation, legal[:3], chess=True)


def test_other_games_name_actions_by_their_names_else_their_index() -> None:
    named = move_choices(None, [0, 2, 5], action_names=["left", "down", "right"])
    assert named == [MoveChoice(0, "left"), MoveChoice(2, "right"), MoveChoice(5, "5")]
    assert parse_move("RIGHT", named) == MoveChoice(2, "right")
    assert parse_move("2", named) == MoveChoice(2, "right")
    assert parse_move("down", named) is None  # not legal now
    assert parse_move("1", named) is None


def test_a_name_that_differs_only_in_case_must_be_typed_as_written() -> None:
    choices = move_choices(None, [0, 1], action_names=["Bc4", "bc4"])
    assert parse_move("bc4", choices) == MoveChoice(1, "bc4")
    assert parse_move("Bc4", choices) == MoveChoice(0, "Bc4")
    assert parse_move("BC4", choices) is None  # both match ignoring case
