"""BALROG-style LLM worker for BabyAI and MiniGrid: the agent's view as sentences, the mission,
and the actions as words.

MiniGrid observes ``{"image": 7x7x3, "direction": 0-3, "mission": "go to the red ball"}``: the
image encodes, for each cell of the agent's egocentric view, the object, its colour and its
state (``minigrid.core.constants``), the agent standing in the middle of the bottom row facing
up. As BALROG does (after BabyAI-Text), each turn tells the model the mission, what it sees
("a red ball 2 steps forward and 1 step left", "a closed yellow door 3 steps right", the
nearest wall straight ahead and to either side) and what it carries, and lists the actions as
words (``turn left``, ``turn right``, ``go forward``, ``pick up``, ``drop``, ``toggle``,
``done``; ``--action-names`` replaces them). The reply's first action word (or legal action
number) is the action. The prompt is the only difference from the LLM worker
(``workers/llm_worker.py``): the endpoint options, retries, fallback and the ``llm`` account
of each reply are its own.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX

from mosaic.operators.worker.runtime import run_worker
from workers.llm_worker import LLMPolicy, endpoint_options, llm_parser, parse_named_action

__all__ = ["ACTION_WORDS", "BalrogPolicy", "describe", "main"]

#: MiniGrid's actions 0-6, in BALROG's words.
ACTION_WORDS = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done")

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent playing a simple navigation game in a grid world ({env}). Each turn you "
    "get your mission, what you see from where you stand, and the actions you can take. Reply "
    "with one action, exactly as it is written."
)

_STATES = {index: name for name, index in STATE_TO_IDX.items()}
_IGNORED = {"unseen", "empty", "floor", "agent"}


def _steps(count: int, direction: str) -> str:
    return f"{count} step{'s' if count != 1 else ''} {direction}"


def _where(forward: int, right: int) -> str:
    parts = []
    if forward:
        parts.append(_steps(forward, "forward"))
    if right:
        parts.append(_steps(abs(right), "right" if right > 0 else "left"))
    return " and ".join(reversed(parts)) if right and forward else (parts[0] if parts else "here")


def describe(observation: Any) -> list[str]:
    """BALROG's sentences for a MiniGrid observation (a dict with ``image``, or the image):
    what the agent sees and carries. Raises ``ValueError`` for anything else."""
    image = observation.get("image") if isinstance(observation, dict) else observation
    grid = np.asarray(image)
    if grid.ndim != 3 or grid.shape[2] != 3 or grid.shape[0] != grid.shape[1]:
        raise ValueError(f"expected MiniGrid's view (an N x N x 3 image), got shape {grid.shape}")
    size = grid.shape[0]
    me = (size // 2, size - 1)  # column, row of the agent, facing row 0
    seen: list[tuple[int, str]] = []
    walls: dict[str, int] = {}
    carried = None
    for x in range(size):
        for y in range(size):
            kind, colour, state = (int(v) for v in grid[x, y])
            name = IDX_TO_OBJECT.get(kind, "unseen")
            if (x, y) == me:
                if name not in _IGNORED:
                    carried = f"{IDX_TO_COLOR.get(colour, '')} {name}".strip()
                continue
            if name in _IGNORED:
                continue
            forward, right = me[1] - y, x - me[0]
            if name == "wall":
                for side, straight, distance in (("forward", right == 0, forward),
                                                 ("left", forward == 0 and right < 0, -right),
                                                 ("right", forward == 0 and right > 0, right)):
                    if straight and distance < walls.get(side, size + 1):
                        walls[side] = distance
                continue
            state_word = f"{_STATES[state]} " if name == "door" and state in _STATES else ""
            text = f"a {state_word}{IDX_TO_COLOR.get(colour, '')} {name} {_where(forward, right)}"
            seen.append((abs(forward) + abs(right), text))
    lines = [f"You see {text}" for _, text in sorted(seen)]
    lines += [f"You see a wall {_steps(distance, side)}" for side, distance in
              sorted(walls.items(), key=lambda item: item[1])]
    if carried:
        lines.append(f"You carry a {carried}")
    return lines or ["You see nothing but the floor"]


class BalrogPolicy(LLMPolicy):
    """Asks a chat-completions endpoint with BALROG-style prompts (see the module docstring)."""

    def __init__(self, *, action_names: list[str] | None = None,
                 system_prompt: str = DEFAULT_SYSTEM_PROMPT, **endpoint: Any) -> None:
        super().__init__(action_names=list(action_names or ACTION_WORDS),
                         system_prompt=system_prompt, **endpoint)

    def _messages(self, observation: Any, candidates: list[int]) -> list[dict[str, Any]]:
        mission = observation.get("mission") if isinstance(observation, dict) else None
        actions = ", ".join(self._word(a) for a in candidates)
        user = "\n".join([
            *([f"Your mission: {mission}"] if mission else []),
            *describe(observation),
            f"Actions: {actions}",
            "What do you do?",
        ])
        system = self.system_prompt.replace("{env}", self.env_name)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _parse(self, reply: str, candidates: list[int]) -> int | None:
        """The first action word in ``reply`` (the longest at a place), else a number."""
        return parse_named_action(reply, candidates, self.action_names)

    def _word(self, action: int) -> str:
        return self.action_names[action] if 0 <= action < len(self.action_names) else str(action)


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    return llm_parser("python -m workers.balrog_worker",
                      "mosaic operator worker that plays BabyAI and MiniGrid by asking an "
                      "OpenAI-compatible chat-completions endpoint, with BALROG-style prompts.",
                      DEFAULT_SYSTEM_PROMPT, ACTION_WORDS)


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)

    def make_policy() -> BalrogPolicy:
        names = [n.strip() for n in args.action_names.split(",") if n.strip()]
        return BalrogPolicy(**endpoint_options(args), action_names=names or None,
                            system_prompt=args.system_prompt, env_name=args.env_id)

    return run_worker("balrog_worker", args, make_policy, plays_alone=True)


if __name__ == "__main__":
    sys.exit(main())
