"""A player's worker in agent mode (the driver owns the game) that misbehaves on purpose.

``--mode none`` answers every ``select_action`` with ``"action": null`` (the seeds' no-op);
``--mode error`` answers it with an ``error`` reply. ``--mode rendezvous --meet DIR`` leaves a
mark in DIR for each ``select_action`` (its player and the how-manieth) and answers action 0 once
every other player that meets there has left the same mark, or an ``error`` reply if they have
not within 10 s: it passes only when the players are asked together. ``init_agent``, ``reset``,
``ping`` and ``stop`` are answered as the protocol says. Unknown arguments (``--seed`` ...) are
ignored.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def reply(command: dict, **fields: object) -> None:
    if "id" in command:
        fields["id"] = command["id"]
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("none", "error", "rendezvous"), default="none")
    parser.add_argument("--meet", type=Path, help="the folder the rendezvous players meet in")
    parser.add_argument("--players", type=int, default=2, help="how many meet there")
    args, _unknown = parser.parse_known_args()
    asked = 0
    for line in sys.stdin:
        command = json.loads(line)
        cmd = command.get("cmd")
        if cmd == "init_agent":
            reply(command, type="agent_ready", player_id=command["player_id"])
        elif cmd == "reset":
            reply(command, type="ready", run_id="", env_id="", seed=command.get("seed"),
                  observation_shape=None)
        elif cmd == "select_action" and args.mode == "rendezvous":
            asked += 1
            (args.meet / f"{command.get('player_id')}-{asked}").touch()
            deadline = time.monotonic() + 10
            while len(list(args.meet.glob(f"*-{asked}"))) < args.players:
                if time.monotonic() > deadline:
                    reply(command, type="error", message="the other players were not asked")
                    break
                time.sleep(0.01)
            else:
                reply(command, type="action_selected", action=0,
                      player_id=command.get("player_id"))
        elif cmd == "select_action" and args.mode == "none":
            reply(command, type="action_selected", action=None,
                  player_id=command.get("player_id"))
        elif cmd == "select_action":
            reply(command, type="error", message="this player refuses to move")
        elif cmd == "ping":
            reply(command, type="pong")
        elif cmd == "stop":
            reply(command, type="stopped")
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
