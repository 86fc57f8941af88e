"""A worker that speaks the operator protocol correctly for a while, then misbehaves on purpose.

``--die-after N``: the first N steps (over all episodes) are answered; then, on the next step,
``--mode crash`` exits with code 3 after a line on stderr, ``--mode hang`` goes silent, and
``--mode garbage`` writes a line that is not JSON. ``--mode no-end`` never misbehaves but sends
no ``episode_end`` after the step that ends an episode. Episodes last 5 steps, reward 1 per step.
Unknown arguments (``--env-id`` ...) are accepted and ignored.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def reply(command: dict, **fields: object) -> None:
    if "id" in command:
        fields["id"] = command["id"]
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--die-after", type=int, default=3)
    parser.add_argument("--mode", choices=("crash", "hang", "garbage", "no-end"), default="crash")
    args, _unknown = parser.parse_known_args()
    steps_total = 0
    episode_steps = 0
    episode_reward = 0.0
    for line in sys.stdin:
        command = json.loads(line)
        cmd = command.get("cmd")
        if cmd == "reset":
            episode_steps, episode_reward = 0, 0.0
            reply(command, type="ready", run_id="", env_id="fixture", seed=command.get("seed"),
                  observation_shape=None)
        elif cmd == "step":
            if steps_total >= args.die_after and args.mode != "no-end":
                if args.mode == "crash":
                    print("flaky_worker: giving up on purpose", file=sys.stderr, flush=True)
                    return 3
                if args.mode == "hang":
                    time.sleep(3600)
                sys.stdout.write("this is not a protocol line\n")
                sys.stdout.flush()
                continue
            steps_total += 1
            episode_steps += 1
            episode_reward += 1.0
            done = episode_steps >= 5
            reply(command, type="step", step_index=episode_steps - 1, action=0, reward=1.0,
                  terminated=done, truncated=False, episode_reward=episode_reward)
            if done and args.mode != "no-end":
                reply(command, type="episode_end", total_reward=episode_reward,
                      episode_length=episode_steps, terminated=True, truncated=False)
        elif cmd == "ping":
            reply(command, type="pong")
        elif cmd == "stop":
            reply(command, type="stopped")
            return 0
        else:
            reply(command, type="error", message=f"unsupported command {cmd!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
