"""Human worker: a person chooses each action on a terminal.

stdin and stdout carry the protocol, so the prompt and the keyboard input go through a terminal
device opened separately: ``--tty`` (default ``/dev/tty``, the controlling terminal). A worker
started in its own session (as the launcher does) has no controlling terminal, so the launcher
passes the path of its own terminal (``/dev/pts/N``) instead. The device is opened with
``O_NOCTTY`` and read line by line.

For each action the worker shows the observation and the legal actions (``index`` or
``index=name`` with ``--action-names``) and reads a line: an action index or a name
(case-insensitive). Playing PettingZoo's chess (the game ``init_agent`` names), it shows the
board and its FEN instead of the observation tensor and the legal moves in SAN, and reads a
move in SAN or UCI (:mod:`mosaic.operators.moves`); the reply names the move (``move``, UCI),
as the chess LLM worker's does. Anything else prints a short message and asks again. End of
input on the terminal (Ctrl-D on an empty line, or the device going away) gives an ``error``
reply for that action. There is no time limit: drivers should use long timeouts for human
workers, and the worker answers no other command while it waits for the person.

A terminal that cannot be opened at start gives exit code 2 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

import numpy as np

from mosaic.operators.api.llm_routing import is_chess
from mosaic.operators.moves import MoveChoice, move_choices, parse_move
from mosaic.operators.worker.runtime import (
    BasePolicy,
    add_runtime_arguments,
    discrete_actions,
    run_worker,
)

__all__ = ["PROMPT", "HumanPolicy", "main"]

#: Printed before each read; tests and wrappers can wait for it.
PROMPT = "choose action> "
MAX_OBSERVATION_CHARS = 2000


class HumanPolicy(BasePolicy):
    """Reads each action from a terminal device (see the module docstring)."""

    reproducible = False

    def __init__(self, tty_path: str, action_names: list[str] | None = None) -> None:
        try:
            self._fd = os.open(tty_path, os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            raise OSError(
                f"cannot open the terminal {tty_path} for human input ({exc.strerror}); "
                "pass --tty with a terminal device such as /dev/pts/3"
            ) from exc
        self.tty_path = tty_path
        self.action_names = action_names or []
        self._buffer = b""
        self._player: str | None = None
        self._chess = False
        self._turn = 0
        self._last_move: str | None = None

    def init_agent(
        self, player_id: str, env_name: str | None, task: str | None, settings: dict[str, Any]
    ) -> None:
        """Show the player's name in prompts; in chess, name moves as a chess player does."""
        self._player = player_id
        self._chess = is_chess(task, env_name)

    def reset(self, seed: int | None) -> None:
        """A new episode: tell the person."""
        self._turn = 0
        self._say(f"\n--- new episode (seed {seed}) ---\n")

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> int:
        """Block until the person types a legal action; ``EOFError`` when the terminal closes."""
        candidates = legal_actions if legal_actions is not None else discrete_actions(action_space)
        if not candidates:
            raise ValueError("the human worker needs legal actions or a Discrete action space")
        choices = move_choices(observation, candidates, chess=self._chess,
                               action_names=self.action_names)
        self._turn += 1
        who = f"[{self._player}] " if self._player else ""
        listing = "  ".join(self._describe(choice) for choice in choices)
        self._say(f"\n{who}turn {self._turn}\n{self._show(observation)}\n"
                  f"legal {'moves' if self._chess else 'actions'}: {listing}\n")
        while True:
            self._say(PROMPT)
            text = self._readline()
            if text is None:
                raise EOFError(f"the terminal {self.tty_path} closed while waiting for an action")
            if not text.strip():
                continue
            choice = parse_move(text, choices)
            if choice is not None:
                self._last_move = choice.aliases[0] if self._chess else None
                return choice.action
            self._say(f"invalid choice {text.strip()!r}; type one of: {listing}\n")

    def reply_fields(self) -> dict[str, Any]:
        """In chess, the move just played (UCI), as the chess LLM worker names it."""
        return {"move": self._last_move} if self._last_move is not None else {}

    def close(self) -> None:
        """Close the terminal device."""
        with contextlib.suppress(OSError):
            os.close(self._fd)

    # -- internals --

    def _describe(self, choice: MoveChoice) -> str:
        if self._chess or choice.name == str(choice.action):
            return choice.name
        return f"{choice.action}={choice.name}"

    def _show(self, observation: Any) -> str:
        if self._chess:
            from mosaic.operators.chess_position import board_from_observation

            board = board_from_observation(observation)
            return f"{board}\nFEN {board.fen()}"
        text = np.array2string(observation) if isinstance(observation, np.ndarray) else str(
            observation)
        if len(text) > MAX_OBSERVATION_CHARS:
            text = text[:MAX_OBSERVATION_CHARS] + "..."
        return f"observation: {text}"

    def _say(self, text: str) -> None:
        data = text.replace("\n", "\r\n").encode("utf-8", "replace")
        while data:
            data = data[os.write(self._fd, data):]

    def _readline(self) -> str | None:
        while b"\n" not in self._buffer:
            try:
                chunk = os.read(self._fd, 1024)
            except OSError:  # EIO: the terminal went away
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk.replace(b"\r", b"\n")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.human_worker",
        description="mosaic operator worker where a person types each action on a terminal.",
    )
    parser.add_argument("--tty", default="/dev/tty",
                        help="terminal device for the prompt and the input (default /dev/tty)")
    parser.add_argument("--action-names", default="",
                        help="comma-separated names of actions 0, 1, 2, ... (also accepted as "
                             "input)")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code (2 when the terminal cannot be opened)."""
    args = build_parser().parse_args(argv)
    names = [n.strip() for n in args.action_names.split(",") if n.strip()]
    return run_worker("human_worker", args, lambda: HumanPolicy(args.tty, names))


if __name__ == "__main__":
    sys.exit(main())
