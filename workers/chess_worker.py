"""Chess LLM worker: plays PettingZoo's ``chess_v6`` through an OpenAI-compatible endpoint,
one conversation per game.

The position comes from the observation itself (:mod:`mosaic.operators.chess_position`:
PettingZoo's tensor read into a python-chess board, its moves checked against the legal actions
the driver sent), so the worker plays under any driver. Each turn adds a user message to the game's
conversation: the opponent's last move, the board, its FEN and the legal moves in SAN (or UCI
with ``--notation uci``). The model answers with a move in SAN or UCI (``<think>`` blocks are
dropped; the first word that is a legal move wins). An answer with no legal move is asked
again with the reason (``e2e5 is not a legal move here``, ``no move found``), at most
``--move-retries`` times (default 2); then the fallback move is played and accounted as
``no_action``. A new game (``reset``) starts a new conversation; the system prompt and the last
``--history`` turns (default 8) are sent with each request.

The endpoint options, HTTP retries, fallback and accounting are the LLM worker's
(``workers/llm_worker.py``): each ``action_selected`` reply carries ``llm`` (its
``prompt_tokens`` and ``completion_tokens`` add up every request of the move, and
``illegal_replies`` counts the answers asked again) and ``tokens``, plus ``move`` (UCI) and
``fen``, the position the move was played in. ``--timeout`` bounds the whole move, every
request included.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from typing import Any

import chess

from mosaic.operators.chess_position import board_from_observation, legal_moves
from mosaic.operators.worker.runtime import add_runtime_arguments, run_worker
from workers.llm_worker import (
    LLMError,
    LLMPolicy,
    add_endpoint_arguments,
    endpoint_options,
    new_usage,
)

__all__ = ["ChessLLMPolicy", "main", "parse_move"]

log = logging.getLogger("mosaic.worker.chess")

DEFAULT_SYSTEM_PROMPT = (
    "You are a chess player. Each turn you get the position (board and FEN) and your legal "
    "moves. Reply with exactly one legal move in {notation} notation and nothing else."
)
#: A request needs at least this many seconds of the move's time, else the fallback is played.
MIN_REQUEST_S = 0.05

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9=+#\-]+")
_UCI = re.compile(r"^[a-h][1-8][a-h][1-8][qrbn]?$")


def parse_move(text: str, board: chess.Board) -> tuple[chess.Move | None, str]:
    """The first word of ``text`` (outside ``<think>`` blocks) that is a legal move of
    ``board`` in UCI or SAN, and ``""``; else None and why, for the model."""
    rejected: list[str] = []
    for word in _WORD.findall(_THINK.sub(" ", text)):
        token = word.strip("-").rstrip("+#")
        if not token:
            continue
        if _UCI.match(token.lower()):
            move = chess.Move.from_uci(token.lower())
            if move in board.legal_moves:
                return move, ""
            rejected.append(token)
            continue
        try:
            return board.parse_san(token), ""
        except chess.IllegalMoveError:
            rejected.append(token)
        except (chess.AmbiguousMoveError, chess.InvalidMoveError):
            if token[:1] in "KQRBNO" or re.match(r"^[a-h]([1-8]|x)", token):
                rejected.append(token)
    if rejected:
        return None, f"{rejected[0]} is not a legal move in this position"
    return None, "no move was found in your reply"


class ChessLLMPolicy(LLMPolicy):
    """Plays chess by asking a chat-completions endpoint (see the module docstring)."""

    def __init__(self, *, move_retries: int = 2, notation: str = "san", history: int = 8,
                 system_prompt: str = DEFAULT_SYSTEM_PROMPT, **endpoint: Any) -> None:
        if move_retries < 0:
            raise ValueError(f"move_retries must be >= 0; got {move_retries}")
        if notation not in ("san", "uci"):
            raise ValueError(f"notation must be san or uci; got {notation!r}")
        super().__init__(system_prompt=system_prompt, **endpoint)
        self.move_retries = move_retries
        self.notation = notation
        self.history = max(1, history)
        self._conversation: list[dict[str, str]] = []
        self._after_my_move: chess.Board | None = None
        self._last: dict[str, Any] = {}
        self._moves = 0
        self._note = ""

    def reset(self, seed: int | None) -> None:
        """A new game: seed the fallback and start a new conversation."""
        super().reset(seed)
        self._conversation = []
        self._after_my_move = None
        self._moves = 0
        self._note = ""

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """The PettingZoo action of the model's move, or of the fallback after
        ``move_retries`` unusable answers or a failed request.

        Raises ``ValueError`` when the observation is not a chess position whose moves are the
        legal actions given.
        """
        self._account = None
        board = board_from_observation(observation)
        board.fullmove_number = self._moves + 1  # the tensor has no move counter
        moves = legal_moves(board, legal_actions)
        by_move = {move: action for action, move in moves.items()}
        candidates = sorted(moves)
        self._conversation.append({"role": "user", "content": self._turn_text(board)})
        usage = new_usage()
        illegal = 0
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left < MIN_REQUEST_S:
                    raise LLMError("timeout", f"no legal move within {self.timeout:g} s")
                reply = self._complete(self._messages_now(), usage, timeout=left)
                self._conversation.append({"role": "assistant", "content": reply})
                move, why = parse_move(reply, board)
                if move is not None:
                    break
                if illegal >= self.move_retries:
                    raise LLMError("no_action", f"{why}: {reply[:200]!r} (after {illegal} "
                                   f"{'retry' if illegal == 1 else 'retries'} of the move)")
                illegal += 1
                self._conversation.append({"role": "user", "content": (
                    f"{why}. Legal moves: {self._move_list(board)}. Reply with one of them.")})
        except LLMError as exc:
            action = self._fall_back(exc, usage, candidates, legal_actions, action_space)
            self._played(board, moves[action], illegal)
            # Told with the next position, so that the conversation stays true to the game.
            self._note = (f"No answer could be used, so {self._name(board, moves[action])} "
                          "was played for you.\n")
            return action
        self._account = self._accounted("model", usage, None)
        self._played(board, move, illegal)
        return by_move[move]

    def reply_fields(self) -> dict[str, Any]:
        """The LLM worker's fields, ``illegal_replies`` in ``llm``, and ``move`` and ``fen``."""
        fields = super().reply_fields()
        if "llm" in fields:
            fields["llm"]["illegal_replies"] = self._last.get("illegal_replies", 0)
        fields.update({k: v for k, v in self._last.items() if k in ("move", "fen")})
        return fields

    # -- internals --

    def _played(self, board: chess.Board, move: chess.Move, illegal: int) -> None:
        self._last = {"move": move.uci(), "fen": board.fen(), "illegal_replies": illegal}
        self._moves += 1
        after = board.copy(stack=False)
        after.push(move)
        self._after_my_move = after

    def _opponent_move(self, board: chess.Board) -> str | None:
        """The opponent's move since this worker's last one, in the chosen notation."""
        before = self._after_my_move
        if before is None:
            return None
        for move in before.legal_moves:
            after = before.copy(stack=False)
            after.push(move)
            if after.board_fen() == board.board_fen() and after.turn == board.turn:
                return self._name(before, move)
        return None

    def _name(self, board: chess.Board, move: chess.Move) -> str:
        return move.uci() if self.notation == "uci" else board.san(move)

    def _move_list(self, board: chess.Board) -> str:
        if self.notation == "uci":
            return ", ".join(move.uci() for move in board.legal_moves)
        return ", ".join(board.san(move) for move in board.legal_moves)

    def _turn_text(self, board: chess.Board) -> str:
        side = "White" if board.turn == chess.WHITE else "Black"
        opponent = self._opponent_move(board)
        last = f"Your opponent played {opponent}.\n" if opponent else ""
        note, self._note = self._note, ""
        return (f"{note}{last}You play {side}.\nBoard:\n{board}\nFEN: {board.fen()}\n"
                f"Legal moves ({self.notation.upper()}): {self._move_list(board)}\n"
                "Your move?")

    def _messages_now(self) -> list[dict[str, Any]]:
        system = self.system_prompt.replace("{notation}", self.notation.upper())
        recent = self._conversation
        starts = [i for i, m in enumerate(recent) if m["content"].endswith("Your move?")]
        if len(starts) > self.history:  # the last `history` turns, each from its position
            recent = recent[starts[-self.history]:]
        return [{"role": "system", "content": system}, *recent]


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.chess_worker",
        description="mosaic operator worker that plays PettingZoo chess by asking an "
                    "OpenAI-compatible chat-completions endpoint for each move.",
    )
    add_endpoint_arguments(parser)
    parser.add_argument("--system-prompt", default=DEFAULT_SYSTEM_PROMPT,
                        help="system prompt; {notation} is replaced by SAN or UCI")
    parser.add_argument("--move-retries", type=int, default=2,
                        help="answers without a legal move asked again, with the reason, "
                             "before the fallback move (default 2)")
    parser.add_argument("--notation", choices=("san", "uci"), default="san",
                        help="notation of the legal moves shown to the model (default san; "
                             "answers are read in either)")
    parser.add_argument("--history", type=int, default=8,
                        help="turns of the game's conversation sent with each request "
                             "(default 8)")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)

    def make_policy() -> ChessLLMPolicy:
        return ChessLLMPolicy(**endpoint_options(args), move_retries=args.move_retries,
                              notation=args.notation, history=args.history,
                              system_prompt=args.system_prompt, env_name="chess")

    return run_worker("chess_worker", args, make_policy)


if __name__ == "__main__":
    sys.exit(main())
