"""A stand-in for MOSAIC's workers: speaks MOSAIC's dialect exactly, and nothing of mosaic's.

Started the way MOSAIC's launcher starts its workers::

    python mosaic_dialect_worker.py --run-id R --env-name gym --task CartPole-v1 \\
        --telemetry-dir D --interactive --seed S

It prints an unsolicited ``init`` line first, echoes no request id, knows no ``ping``, puts
``episode_index`` and ``step_index`` in ``ready`` and ``step``, and ends an episode the way the
worker it imitates does (``--imitate``):

* ``random`` (and passive): ``episode_end`` with ``episode_steps`` / ``episode_return``;
* ``llm`` (and human, trainer): ``episode_done`` with ``num_steps`` / ``total_reward``;
* ``cleanrl``: like ``random``, with ``step_index`` counted from 1.

Selector mode (``--task`` is not a Gymnasium id): ``init_agent {game_name, player_id}`` is
answered with ``agent_ready`` (``--agent-reply``), ``agent_initialized`` (without player_id), or
``both`` (``agent_initialized`` then an extra ``agent_ready``); ``select_action`` picks uniformly
among the legal actions, else among ``--n-actions``.

Test knobs, none of them MOSAIC's: ``--slow-first-step S`` sleeps before answering the first
step; ``--bad-return`` reports an episode return off by one. Uses gymnasium and numpy only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np


def write(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class StandIn:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.env: Any = None
        try:
            gym.spec(args.task)
            self.env = gym.make(args.task)
        except gym.error.Error:
            self.env = None  # selector mode: the driver owns the game
        self.rng = np.random.default_rng(args.seed)
        self.episode = -1
        self.steps = 0
        self.episode_return = 0.0
        self.first_step = True

    def reset(self, command: dict[str, Any]) -> None:
        if not self.args.task:  # as MOSAIC's random and passive workers answer it
            write({"type": "error",
                   "message": "Reset failed: --task is required for autonomous mode"})
            return
        seed = command.get("seed")
        self.rng = np.random.default_rng(seed)
        self.episode += 1
        self.steps, self.episode_return = 0, 0.0
        shape = None
        if self.env is not None:
            self.env.reset(seed=seed)
            shape = list(self.env.observation_space.shape or [])
        write({"type": "ready", "run_id": self.args.run_id, "env_id": self.args.task,
               "seed": seed, "observation_shape": shape, "episode_index": self.episode,
               "step_index": 0})

    def step(self) -> None:
        if self.first_step and self.args.slow_first_step:
            time.sleep(self.args.slow_first_step)
        self.first_step = False
        if self.env is None:
            write({"type": "error", "message": "no environment in selector mode"})
            return
        action = int(self.rng.integers(self.env.action_space.n))
        _, reward, terminated, truncated, _ = self.env.step(action)
        index = self.steps + (1 if self.args.imitate == "cleanrl" else 0)
        self.steps += 1
        self.episode_return += float(reward)
        write({"type": "step", "run_id": self.args.run_id, "episode_index": self.episode,
               "step_index": index, "action": action, "reward": float(reward),
               "terminated": bool(terminated), "truncated": bool(truncated),
               "episode_reward": self.episode_return})
        if not (terminated or truncated):
            return
        total = self.episode_return + (1.0 if self.args.bad_return else 0.0)
        end: dict[str, Any] = {"run_id": self.args.run_id, "episode_index": self.episode,
                               "terminated": bool(terminated), "truncated": bool(truncated)}
        if self.args.imitate == "llm":
            write({"type": "episode_done", **end, "total_reward": total, "num_steps": self.steps})
        else:
            write({"type": "episode_end", **end, "episode_steps": self.steps,
                   "episode_return": total})

    def init_agent(self, command: dict[str, Any]) -> None:
        player = command.get("player_id")
        if self.args.agent_reply in ("agent_initialized", "both"):
            write({"type": "agent_initialized", "game_name": command.get("game_name")})
        if self.args.agent_reply in ("agent_ready", "both"):
            write({"type": "agent_ready", "player_id": player})

    def select_action(self, command: dict[str, Any]) -> None:
        legal = command.get("legal_actions")
        if legal is None and command.get("action_mask") is not None:
            legal = [i for i, m in enumerate(command["action_mask"]) if m]
        if legal is None:
            legal = list(range(self.args.n_actions))
        action = int(legal[int(self.rng.integers(len(legal)))])
        write({"type": "action_selected", "action": action, "player_id": command.get("player_id")})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-id", default="")
    parser.add_argument("--env-name", default="")
    parser.add_argument("--task", default="")
    parser.add_argument("--telemetry-dir", default="")
    parser.add_argument("--interactive", action="store_true")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--imitate", choices=("random", "llm", "cleanrl"), default="random")
    parser.add_argument("--agent-reply", default="agent_ready",
                        choices=("agent_ready", "agent_initialized", "both"))
    parser.add_argument("--n-actions", type=int, default=2)
    parser.add_argument("--slow-first-step", type=float, default=0.0)
    parser.add_argument("--bad-return", action="store_true")
    args = parser.parse_args()
    if not args.interactive:
        sys.stderr.write("this stand-in only runs with --interactive\n")
        return 2
    worker = StandIn(args)
    write({"type": "init", "run_id": args.run_id, "worker": f"{args.imitate}_worker",
           "behavior": args.imitate})
    handlers = {"reset": worker.reset, "init_agent": worker.init_agent,
                "select_action": worker.select_action}
    for line in sys.stdin:
        try:
            command = json.loads(line)
        except ValueError as exc:
            write({"type": "error", "message": f"Invalid JSON: {exc}"})
            continue
        cmd = command.get("cmd") if isinstance(command, dict) else None
        if cmd == "stop":
            write({"type": "stopped"})
            return 0
        if cmd == "step":
            worker.step()
        elif cmd in handlers:
            handlers[cmd](command)
        else:
            write({"type": "error", "message": f"Unknown command: {cmd}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
