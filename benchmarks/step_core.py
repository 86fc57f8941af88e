"""The step core alone against the plain in-process loop: what a run's loop can reach at best.

The in-process :class:`~mosaic.agents.learners.Harness` drives the step core
(:mod:`mosaic.stepping`) with no message between threads, no isolation copy and no watchdog: the
environment's answers, the digest of every step, the reward settlement and the muscle's calls,
in this thread. The plain loop is Gymnasium alone: CartPole-v1 from ``gymnasium.make``, an
action from ``action_space.sample()`` each step, a seed per episode, as the harness has them.
Both are timed in CPU seconds of this process, one after the other, so a busy machine slows
both alike: read the ratio.

Usage: python benchmarks/step_core.py [--episodes 1000] [--repeat 3]
Run it with PYTHONPATH pointing at the checkout to measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium

from mosaic.agents import RandomMuscle
from mosaic.agents.learners import Harness
from mosaic.core.seeding import episode_seed

SEED = 1


def plain_loop(episodes: int) -> float:
    """Steps per CPU second of the plain Gymnasium loop."""
    env = gymnasium.make("CartPole-v1")
    env.action_space.seed(SEED)
    steps = 0
    started = time.process_time()
    for episode in range(episodes):
        env.reset(seed=episode_seed(SEED, 0, episode))
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += 1
            done = terminated or truncated
    rate = steps / (time.process_time() - started)
    env.close()
    return rate


def step_core(episodes: int) -> float:
    """Steps per CPU second of the harness: a random muscle on the step core."""
    env = gymnasium.make("CartPole-v1")
    with Harness(env, RandomMuscle(), seed=SEED) as harness:
        started = time.process_time()
        steps = sum(stats.steps for stats in harness.run(episodes))
        rate = steps / (time.process_time() - started)
    env.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start")
    ratios = []
    for round_ in range(1, args.repeat + 1):
        plain, core = plain_loop(args.episodes), step_core(args.episodes)
        ratios.append(core / plain)
        print(f"round {round_}: plain loop {plain:,.0f} steps per CPU second, step core "
              f"{core:,.0f}: {core / plain:.3f}x")
    print(f"step core vs plain loop: median {statistics.median(ratios):.3f}x "
          f"(the all-threads row's target is 0.5x); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
