"""The legal moves of a turn, named as a person types them, and a typed move read back.

A person playing (the human worker at its terminal, the dashboard's move field) sees each legal
action by a name and types one. In PettingZoo's chess the name is the move in SAN (``Nf3``),
read from the observation by :mod:`mosaic.operators.chess_position`, and UCI (``g1f3``) is
accepted too; elsewhere it is the operator's ``action_names`` entry, or the action's index. The
index is always accepted. :func:`move_choices` lists the names, :func:`parse_move` reads a
typed move against them: one code for the terminal and the browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MoveChoice", "move_choices", "parse_move"]


@dataclass(frozen=True)
class MoveChoice:
    """One legal action and how a person names it."""

    action: int
    #: The name shown (SAN in chess, the action's name, else its index).
    name: str
    #: Other spellings accepted for it (UCI in chess); the index is always accepted.
    aliases: tuple[str, ...] = ()


def move_choices(observation: Any, legal_actions: Sequence[int], *, chess: bool = False,
                 action_names: Sequence[str] = ()) -> list[MoveChoice]:
    """The choices of a turn: each of ``legal_actions`` named by the chess position of
    ``observation`` (``chess``: PettingZoo's chess, needs the ``chess`` extra), else by
    ``action_names``, else by its index; in the order of ``legal_actions``.

    In chess, raises :class:`~mosaic.operators.chess_position.ChessObservationError` when the
    observation is not the position whose moves are ``legal_actions``.
    """
    if chess:
        from mosaic.operators.chess_position import board_from_observation, legal_moves

        board = board_from_observation(observation)
        moves = legal_moves(board, legal_actions)
        return [MoveChoice(int(action), board.san(moves[int(action)]),
                           (moves[int(action)].uci(),)) for action in legal_actions]
    return [MoveChoice(int(action), _named(int(action), action_names))
            for action in legal_actions]


def _named(action: int, names: Sequence[str]) -> str:
    return str(names[action]) if 0 <= action < len(names) else str(action)


def parse_move(text: str, choices: Sequence[MoveChoice]) -> MoveChoice | None:
    """The choice ``text`` names, or None: a name or alias as written (SAN's ``Bc4`` and
    ``bc4`` are different moves), else one of them ignoring case when only one choice matches
    so, else an index."""
    typed = text.strip()
    if not typed:
        return None
    for choice in choices:
        if typed == choice.name or typed in choice.aliases:
            return choice
    folded = typed.casefold()
    matches = [c for c in choices
               if folded in {c.name.casefold(), *(alias.casefold() for alias in c.aliases)}]
    if len(matches) == 1:
        return matches[0]
    if typed.lstrip("-").isdigit():
        return next((c for c in choices if c.action == int(typed)), None)
    return None
