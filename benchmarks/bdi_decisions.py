"""What a BDI operator's reasoning costs per step, against the same MiniGrid loop without it.

Prints steps per second, in the same run, of:
  * the baseline: an in-process MiniGrid loop whose actions come from a Python function that
    reads the same view (walk to the goal's row, turn to it, else follow the walls);
  * ``BdiOperator`` with ``examples/bdi/gridworld.asl`` in process (beliefs from each
    observation, agentspeak's reasoning cycle, ``do(A)``);
  * the ``bdi`` worker driven over the JSON-lines protocol (OperatorProcessHandle.step);
and each one's ratio to the baseline (medians of interleaved repeats, since a shared machine is
noisy). Every episode of every loop must reach the goal, or the benchmark fails.

    python benchmarks/bdi_decisions.py [--episodes 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import minigrid  # noqa: F401  (registers the MiniGrid environments)
import numpy as np

from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.bdi import BdiOperator
from mosaic.operators.driver.launcher import OperatorLauncher

ROOM = "MiniGrid-Empty-Random-5x5-v0"
PLANS = str(Path(__file__).resolve().parents[1] / "examples" / "bdi" / "gridworld.asl")
GOAL, WALL = 8, 2


def scripted(observation: dict[str, Any]) -> int:
    """The plan library's rules in Python: the baseline's policy."""
    image = np.asarray(observation["image"])
    x, y = image.shape[0] // 2, image.shape[1] - 1
    goals = np.argwhere(image[:, :, 0] == GOAL)
    if len(goals):
        gx, gy = (int(v) for v in goals[0])
        if gx == x and gy < y:
            return 2
        if gy == y:
            return 1 if gx > x else 0
        if gy < y and image[x, y - 1, 0] != WALL:
            return 2
    return 2 if image[x, y - 1, 0] != WALL else 1


def in_process(choose: Callable[[Any], int], reset: Callable[[int], None],
               episodes: int) -> float:
    env = gym.make(ROOM)
    steps = 0
    start = time.perf_counter()
    for seed in range(episodes):
        observation, _ = env.reset(seed=seed)
        reset(seed)
        for _ in range(100):
            observation, reward, terminated, truncated, _ = env.step(choose(observation))
            steps += 1
            if terminated or truncated:
                break
        if not (terminated and float(reward) > 0):
            raise SystemExit(f"episode {seed} did not reach the goal")
    seconds = time.perf_counter() - start
    env.close()
    return steps / seconds


def worker(episodes: int) -> float:
    config = OperatorConfig.single_agent("bdi", "bdi", "bdi", "BDI", "gymnasium",
                                         f"minigrid:{ROOM}", settings={"plan_library": PLANS})
    handle = OperatorLauncher().launch(config)
    try:
        handle.reset(seed=0, timeout=60)  # the start-up is not part of the measurement
        steps = 0
        start = time.perf_counter()
        for seed in range(episodes):
            if seed:
                handle.reset(seed=seed, timeout=30)
            while True:
                reply, end = handle.step(timeout=30)
                steps += 1
                if end is not None:
                    break
            if not (reply["terminated"] and reply["episode_reward"] > 0):
                raise SystemExit(f"worker episode {seed} did not reach the goal")
        return steps / (time.perf_counter() - start)
    finally:
        handle.stop(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    operator = BdiOperator(PLANS)
    runs: dict[str, list[float]] = {"python function": [], "BdiOperator": [], "bdi worker": []}
    for _ in range(args.repeats):
        runs["python function"].append(in_process(scripted, lambda seed: None, args.episodes))
        runs["BdiOperator"].append(in_process(operator.select_action, operator.reset,
                                              args.episodes))
        runs["bdi worker"].append(worker(args.episodes))
    print(f"{ROOM}, {args.episodes} episodes x {args.repeats} repeats; load "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    baseline = statistics.median(runs["python function"])
    for name, values in runs.items():
        median = statistics.median(values)
        print(f"  {name:<16} {median:>9.0f} steps/s  ({median / baseline:.4f}x the baseline)")
    print(f"  fallbacks of the BdiOperator: {operator.reasoner.tally.describe()}")


if __name__ == "__main__":
    main()
