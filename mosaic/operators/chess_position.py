"""The position a PettingZoo chess observation shows, as a python-chess board, and the
PettingZoo action of each legal move.

PettingZoo's ``chess_v6`` observes an AlphaZero-style tensor (8x8x111), never the board, and
its infos are empty; a driver other than mosaic (MOSAIC's GUI) sends the same observation. So
the chess worker reads the position from the tensor itself, which works under any driver:
channels 0-3 are the castling rights (the mover's king side, queen side, then the
opponent's), channel 4 is set for black, channel 5 holds the fifty-move clock (halved) as one
set square, channels 7-18 the pieces (the mover's pawn, knight, bishop, rook, queen, king,
then the opponent's), with a pawn that may be taken en passant shown on the far rank
(LeelaChessZero's convention). The tensor is always from the mover's side: black's is the
board mirrored, which python-chess's ``Board.mirror`` undoes. Before the first move chess_v6
shows an empty board: the start. The move counter is not in the tensor (the FEN's is 1; the
chess worker counts its own moves).

Every legal move of the decoded board is checked against the driver's legal actions
(:func:`legal_moves`), so a tensor that is not a chess position is an error, never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import chess
import numpy as np
from pettingzoo.classic.chess import chess_utils

__all__ = ["ChessObservationError", "board_from_observation", "legal_moves"]

_PIECES = (chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN, chess.KING)


class ChessObservationError(ValueError):
    """The observation is not a PettingZoo chess position, or its moves are not the legal
    actions the driver sent."""


def _planes(observation: Any) -> np.ndarray:
    if isinstance(observation, dict):
        observation = observation.get("observation")
    planes = np.asarray(observation)
    if planes.shape != (8, 8, 111):
        raise ChessObservationError(
            f"expected PettingZoo chess's 8x8x111 observation, got shape {planes.shape}")
    return planes.astype(bool)


def board_from_observation(observation: Any) -> chess.Board:
    """The position of ``observation`` (the tensor, or PettingZoo's dict holding it), with the
    observing player to move; raises :class:`ChessObservationError`."""
    planes = _planes(observation)
    black = bool(planes[:, :, 4].all())  # the observer plays black
    if not planes[:, :, 7:19].any():  # chess_v6 shows no pieces before the first move
        return chess.Board()
    board = chess.Board(None)  # the mover's view: the mover plays white, upwards
    for index, piece in enumerate(_PIECES):
        for colour, offset in ((chess.WHITE, 7), (chess.BLACK, 13)):
            for row, column in zip(*np.nonzero(planes[:, :, offset + index]), strict=True):
                rank, file = 7 - int(row), int(column)
                if piece == chess.PAWN and colour == chess.BLACK and rank == 7:
                    rank = 4  # a pawn that may be taken en passant, shown on the far rank
                    board.ep_square = chess.square(file, 5)
                board.set_piece_at(chess.square(file, rank), chess.Piece(piece, colour))
    rights = 0
    for channel, corner in enumerate((chess.BB_H1, chess.BB_A1, chess.BB_H8, chess.BB_A8)):
        if planes[:, :, channel].all():
            rights |= corner
    board.castling_rights = rights
    clock = np.flatnonzero(planes[::-1, :, 5] if not black else planes[:, :, 5])
    board.halfmove_clock = 2 * int(clock[0]) if clock.size else 0
    board.turn = chess.WHITE
    return board.mirror() if black else board


def legal_moves(board: chess.Board, legal_actions: Sequence[int] | None = None
                ) -> dict[int, chess.Move]:
    """Each legal move of ``board`` by its PettingZoo action.

    Raises :class:`ChessObservationError` when ``legal_actions`` is given and is not exactly
    those actions (the observation was not read as the game's position).
    """
    seen = board if board.turn == chess.WHITE else board.mirror()
    moves: dict[int, chess.Move] = {}
    for move in seen.legal_moves:
        uci = move.uci()
        if uci not in chess_utils.moves_to_actions:
            chess_utils.make_move_mapping(uci)
        action = chess_utils.moves_to_actions[uci]
        moves[action] = move if board.turn == chess.WHITE else chess_utils.mirror_move(move)
    if legal_actions is not None and set(moves) != {int(a) for a in legal_actions}:
        raise ChessObservationError(
            f"the position read from the observation ({board.fen()}) has {len(moves)} legal "
            f"moves, but the driver sent {len(legal_actions)} legal actions that differ: is "
            "this PettingZoo's chess?")
    return moves
