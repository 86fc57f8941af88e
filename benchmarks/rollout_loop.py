"""A rollout worker's loop alone against the in-process vector: what row 1 of rollouts.py can
reach at best, and where the rest of its time goes.

The worker (:class:`~mosaic.orchestration.rollout_worker.RolloutWorker`) is driven here by its
handlers, as its host calls them: set-up, then ``do_work`` and a collect until its episodes are
done. It steps ``copies`` CartPole copies seeded once with a random muscle, with the digest, the
isolation copies and the episode records of a run, but no process, socket or store around it.
The references are the plain loops of row 1: Gymnasium's ``SyncVectorEnv(copies)`` with random
actions (real env steps: an autoreset is not one), and mosaic's own vector
(:class:`~mosaic.environments.sync_copies.SyncCopies`, resetting a copy inside the step as the
worker's copies do). All three are timed in CPU seconds of this process, one after the other,
so a busy machine slows them alike: read the ratios.

Usage: python benchmarks/rollout_loop.py [--episodes 2000] [--copies 16] [--repeat 5]
It measures the mosaic found first on the path: the repository this file is in.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.rollouts import sync_vector  # noqa: E402 (the repository root, first)
from tests.orchestration.hosted_worker import collect, hosted_worker  # noqa: E402


def worker_loop(copies: int, episodes: int) -> tuple[float, int]:
    """Env steps per CPU second of a rollout worker, and the steps it took."""
    steps = 0
    with hosted_worker("gymnasium:CartPole-v1", {}, copies, episodes, steps=False,
                       seeding="once") as worker:
        began = time.process_time()
        while True:
            worker.do_work()
            answer = collect(worker)
            if answer.error:
                raise SystemExit(f"the worker failed: {answer.error}")
            steps += answer.steps
            if answer.finished:
                break
        return steps / (time.process_time() - began), steps


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {_load()} at the start")
    ratios, lean_ratios = [], []
    for round_ in range(1, args.repeat + 1):
        worker, steps = worker_loop(args.copies, args.episodes)
        sync = sync_vector(args.copies, steps, clock=time.process_time)
        lean = sync_vector(args.copies, steps, lean=True, clock=time.process_time)
        ratios.append(worker / sync)
        lean_ratios.append(worker / lean)
        print(f"round {round_}: worker {worker:,.0f} env steps per CPU second "
              f"({1e6 / worker:.1f} µs each), SyncVectorEnv({args.copies}) {sync:,.0f}, "
              f"SyncCopies {lean:,.0f}: {worker / sync:.3f}x and {worker / lean:.3f}x")
    print(f"worker vs SyncVectorEnv({args.copies}): median {statistics.median(ratios):.3f}x "
          f"(row 1 of rollouts.py asks 0.8x of the whole run); vs SyncCopies: median "
          f"{statistics.median(lean_ratios):.3f}x; load average {_load()} at the end")


if __name__ == "__main__":
    main()
