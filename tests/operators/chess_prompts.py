"""What a fake chess model reads in the chess worker's prompt: the last position shown, its
legal moves and FEN; and the simplest model, which plays the first legal move."""

from __future__ import annotations

import re
import threading
from typing import Any

import chess

from tests.operators.llm_server import Reply


def last_turn(body: dict[str, Any]) -> str:
    """The last position shown in a request's conversation (re-asks come after it)."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user"
                and m["content"].endswith("Your move?"))


def shown_moves(body: dict[str, Any]) -> list[str]:
    """The legal moves (SAN) listed in the last position shown."""
    found = re.search(r"Legal moves \(SAN\): (.*)\n", last_turn(body))
    assert found is not None
    return found.group(1).split(", ")


def shown_fen(body: dict[str, Any]) -> str:
    """The FEN of the last position shown."""
    found = re.search(r"FEN: (.*)\n", last_turn(body))
    assert found is not None
    return found.group(1)


def first_move(body: dict[str, Any]) -> Reply:
    """Always the first legal move shown, in SAN, with words around it."""
    return Reply(f"After some thought, I play {shown_moves(body)[0]}.")


class LastMoveModel:
    """The last legal move shown, in UCI; but the calls numbered in ``bad`` (from 0, across the
    run) get the text given there instead (an illegal move, a refusal: asked again, or the
    fallback once the worker gives up). Thread-safe: ``calls`` counts the requests."""

    def __init__(self, bad: dict[int, str]) -> None:
        self.bad = dict(bad)
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            call, self.calls = self.calls, self.calls + 1
        if call in self.bad:
            return Reply(self.bad[call])
        return Reply(chess.Board(shown_fen(body)).parse_san(shown_moves(body)[-1]).uci())
