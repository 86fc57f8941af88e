"""Vector environments: env-steps/s of ``copies: N`` against Gymnasium's ``SyncVectorEnv(N)``.

The run has one CartPole entry with ``copies: N`` (its actor in a process of its own, the
random muscle in a thread by default), so one message carries the whole batch each way. The
reference is the in-process loop of ``gymnasium.make_vec(..., vectorization_mode="sync")``
with random actions, measured between the runs, because these machines are shared and noisy.

It prints, for each N, mosaic's env-steps/s, the in-process vector loop's, and the ratio.

Usage: python benchmarks/vector_environments.py [--copies 1 4 16] [--episodes 3000]
       [--repeat 3] [--muscle-placement thread] [--vector-mode sync]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import timed_run  # noqa: E402 (the repository root, first)

EXPERIMENT = """\
uid: vector
seed: 1
episodes: {episodes}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    copies: {copies}
    vector_mode: {vector_mode}
    placement: process
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
    placement: {muscle_placement}
store:
  record_steps: none
"""


def in_process_vector(copies: int, steps: int) -> float:
    """Env-steps/s of a plain loop over ``SyncVectorEnv(copies)`` of CartPole, random actions."""
    env = gymnasium.make_vec("CartPole-v1", num_envs=copies, vectorization_mode="sync")
    env.action_space.seed(1)
    env.reset(seed=1)
    batches = max(1, steps // copies)
    started = time.perf_counter()
    for _ in range(batches):
        env.step(env.action_space.sample())
    elapsed = time.perf_counter() - started
    env.close()
    return batches * copies / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--episodes", type=int, default=3000,
                        help="episodes per run (over all copies)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per N (median)")
    parser.add_argument("--muscle-placement", choices=["thread", "process"], default="thread")
    parser.add_argument("--vector-mode", choices=["sync", "async"], default="sync")
    args = parser.parse_args()

    rows = measure(args.copies, args.episodes, args.repeat, args.vector_mode,
                   args.muscle_placement)
    print(f"CartPole, environment in a process ({args.vector_mode}), muscle in a "
          f"{args.muscle_placement}; median of {args.repeat}")
    print(f"{'copies':>6}{'mosaic env-steps/s':>20}{'SyncVectorEnv':>15}{'ratio':>8}")
    for copies, ours_rate, their_rate in rows:
        print(f"{copies:>6}{ours_rate:>20,.0f}{their_rate:>15,.0f}{ours_rate / their_rate:>8.2f}")


def measure(counts: list[int], episodes: int, repeat: int, vector_mode: str = "sync",
            muscle_placement: str = "thread") -> list[tuple[int, float, float]]:
    """(copies, mosaic's median env-steps/s, SyncVectorEnv's median) per number of copies."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        for copies in counts:
            ours, theirs = [], []
            for _ in range(repeat):
                marks = timed_run(Path(tmp), EXPERIMENT.format(
                    episodes=episodes, copies=copies, vector_mode=vector_mode,
                    muscle_placement=muscle_placement), f"vector-{copies}")
                ours.append(marks["steps_per_s"])
                # Between the runs, so that both see the same load.
                theirs.append(in_process_vector(copies, int(marks["steps"])))
            rows.append((copies, statistics.median(ours), statistics.median(theirs)))
    return rows

if __name__ == "__main__":
    main()
