"""Does the policy-gradient learner solve CartPole-v1? Against a random agent measured in the
same run.

Run: ``python benchmarks/learning_cartpole.py [--episodes 500] [--seed 0]``. Trains
``PolicyGradientBrain`` / ``PolicyGradientMuscle`` with their default params through the
in-process :class:`~mosaic.agents.learners.Harness` (mosaic's call order, seeds and codec, without
the orchestration), then prints:

* the mean return of the last 20 training episodes (sampled actions; the target is >= 400,
  CartPole-v1 caps an episode at 500), the episode count, the steps and the wall time;
* the first episode at which the mean of the last 20 reached 400;
* the mean return of 20 greedy test episodes played from the brain's ``mlp`` checkpoint;
* the random agent's mean return over 100 episodes, and the ratios to it.

Exits with 1 when the target is missed. Takes about half a minute on one free core; the run is
deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# The networks are tiny: BLAS threads only contend for the cores (and with other processes,
# which made a run several times slower on a busy machine). Set before NumPy loads.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

from mosaic.agents import NoOpBrain, RandomMuscle  # noqa: E402
from mosaic.agents.learners import (  # noqa: E402
    Harness,
    PolicyGradientBrain,
    PolicyGradientMuscle,
)

TARGET = 400.0
WINDOW = 20


def mean_return(stats: list) -> float:
    return float(np.mean([s.total_reward for s in stats]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500, help="training episodes")
    parser.add_argument("--seed", type=int, default=0, help="run seed")
    args = parser.parse_args()

    env = gymnasium.make("CartPole-v1")
    with Harness(env, RandomMuscle(), NoOpBrain(), seed=args.seed) as harness:
        random_return = mean_return(harness.run(100))

    started = time.perf_counter()
    returns: list[float] = []
    reached: int | None = None

    def watch(stats) -> None:
        nonlocal reached
        returns.append(stats.total_reward)
        if reached is None and len(returns) >= WINDOW and np.mean(returns[-WINDOW:]) >= TARGET:
            reached = stats.episode + 1

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "cartpole_policy.npz"
        brain = PolicyGradientBrain()
        with Harness(env, PolicyGradientMuscle(), brain, seed=args.seed) as harness:
            harness.run(args.episodes, watch)
            brain.greedy_checkpoint(checkpoint)
        seconds = time.perf_counter() - started
        with Harness(env, PolicyGradientMuscle(), None, seed=args.seed + 1, mode="test",
                     params={"load_checkpoint": str(checkpoint)}) as harness:
            greedy_return = mean_return(harness.run(20))
    env.close()

    last = float(np.mean(returns[-WINDOW:]))
    print(f"CartPole-v1, seed {args.seed}: policy gradient, default params")
    print(f"  training: {len(returns)} episodes, {int(sum(returns))} steps, {seconds:.1f} s "
          f"wall ({sum(returns) / seconds:.0f} steps/s, updates included)")
    print(f"  mean return of the last {WINDOW} training episodes: {last:.1f} "
          f"(target >= {TARGET:.0f}; {last / random_return:.1f}x random)")
    print(f"  first episode with a {WINDOW}-episode mean >= {TARGET:.0f}: "
          f"{reached if reached is not None else 'never'}")
    print(f"  greedy test, 20 episodes from the checkpoint: mean return {greedy_return:.1f} "
          f"({greedy_return / random_return:.1f}x random)")
    print(f"  baseline: random agent, 100 episodes: mean return {random_return:.1f}")
    ok = last >= TARGET
    print("target met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
