"""Policy gradient on CartPole-v1 with 8 copies acting through one muscle, against one copy, in
wall time to a learning target, measured in the same run.

Run: ``python benchmarks/learning_copies.py [--copies 8] [--target 475] [--seeds 0 1 2]``.
For each seed, in this process and without the orchestration, it trains ``PolicyGradientBrain``
/ ``PolicyGradientMuscle`` with their default params until the mean return of the last 20
finished episodes reaches ``--target`` (CartPole-v1 caps an episode at 500):

* one copy: the in-process :class:`~mosaic.agents.learners.Harness`, the single-step methods;
* ``--copies`` copies: a ``SyncVectorEnv`` stepped in lockstep, driven through the muscle's
  ``feedback_batch`` / ``act_batch`` in the call order of a run with ``copies:``, every item of
  experience and every update through mosaic's codec as in the harness;
* the same with the whole of mosaic: ``mosaic experiment-start`` on a file with ``copies:``
  (placement thread) and a termination at the target; its time runs from the first step to the
  last, its start-up is printed apart.

The two alternate seed by seed, so that a busy machine slows both alike. It prints, per seed
and as medians: the wall time, the part of it spent in ``Brain.learn`` (the updates, which do
the same work per env step either way), the episodes and env steps it took, the brain's
updates and the env steps per second; then the ratio of the median times (one copy / copies),
the median of the per-seed ratios, and the ratio of the median times outside ``learn`` (acting,
stepping and the codec: the part that copies speed up). The same ratio in CPU time of this
process follows, as a check on a busy machine, where other processes stretch the wall times.
Exits with 1 if a run misses the target within ``--max-steps`` env steps. Takes about half a
minute on one free core for three seeds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

# The networks are tiny: BLAS threads only contend for the cores (and with other processes,
# which made a run several times slower on a busy machine). Set before NumPy loads.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

from mosaic.agents import BrainContext, MuscleContext, Slot  # noqa: E402
from mosaic.agents.batch import Batch  # noqa: E402
from mosaic.agents.learners import Harness, PolicyGradientBrain, PolicyGradientMuscle  # noqa: E402
from mosaic.core.seeding import brain_seed, episode_seed, muscle_seed  # noqa: E402
from mosaic.messages.codec import pack, unpack  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.throughput import timed_run  # noqa: E402

EXPERIMENT = """\
uid: learning-copies
seed: {seed}
episodes: 100000
placement: thread
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    copies: {copies}
agents:
  - uid: learner
    brain: mosaic.agents.learners:PolicyGradientBrain
    muscle: mosaic.agents.learners:PolicyGradientMuscle
termination:
  reward_threshold: {target}
  window: {window}
store:
  record_steps: episodes
"""

WINDOW = 20
SLOT = "agent_0"
MUSCLE = "agent@env"


class TimedBrain(PolicyGradientBrain):
    """The policy-gradient brain, adding up the wall time of its :meth:`learn` calls."""

    seconds = 0.0

    def learn(self, muscle: str, experience: Any) -> dict[str, np.ndarray] | None:
        started = time.perf_counter()
        try:
            return super().learn(muscle, experience)
        finally:
            self.seconds += time.perf_counter() - started


@dataclass(frozen=True)
class Result:
    """How one training run reached the target (or not)."""

    seconds: float
    cpu_seconds: float
    learning: float
    episodes: int
    steps: int
    updates: int
    reached: bool


def reached(returns: list[float], target: float) -> bool:
    return len(returns) >= WINDOW and float(np.mean(returns[-WINDOW:])) >= target


def one_copy(seed: int, target: float, max_steps: int) -> Result:
    """The harness, one episode at a time, until the target."""
    env = gymnasium.make("CartPole-v1")
    returns: list[float] = []
    steps = 0
    started, cpu_started = time.perf_counter(), time.process_time()
    brain = TimedBrain()
    with Harness(env, PolicyGradientMuscle(), brain, seed=seed) as harness:
        while steps < max_steps and not reached(returns, target):
            stats = harness.run(1)[0]
            returns.append(stats.total_reward)
            steps += stats.steps
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    env.close()
    return Result(seconds, cpu_seconds, brain.seconds, len(returns), steps, brain.version,
                  reached(returns, target))


def copies_loop(seed: int, copies: int, target: float, max_steps: int) -> Result:
    """``copies`` copies through the batch methods, resetting ended copies, until the target."""
    env = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make("CartPole-v1") for _ in range(copies)],
        autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED)
    started, cpu_started = time.perf_counter(), time.process_time()
    slots = {SLOT: Slot(SLOT, env.single_observation_space, env.single_action_space)}
    brain, muscle = TimedBrain(), PolicyGradientMuscle()
    brain.setup(BrainContext("agent", "agent", slots, brain_seed(seed, 0)))
    muscle.setup(MuscleContext("agent", MUSCLE, "env", slots, muscle_seed(seed, 0, 0),
                               copies=copies))
    observations, _ = env.reset(seed=[episode_seed(seed, 0, 0, copy) for copy in range(copies)])
    batch = Batch(observations, np.zeros(copies), np.zeros(copies, bool),
                  np.zeros(copies, bool), np.zeros(copies, bool), np.ones(copies, bool), {})
    totals = np.zeros(copies)
    returns: list[float] = []
    steps = 0
    while steps < max_steps and not reached(returns, target):
        for item in muscle.feedback_batch(SLOT, batch):
            update = brain.learn(MUSCLE, unpack(pack(item)))
            if update is not None:
                muscle.apply_update(unpack(pack(update)))
        actions = muscle.act_batch(SLOT, batch)
        observations, rewards, terminated, truncated, _ = env.step(actions)
        steps += copies
        totals += rewards
        ended = terminated | truncated
        finals = {}
        if ended.any():
            for copy in np.flatnonzero(ended).tolist():
                returns.append(float(totals[copy]))
                finals[copy] = np.copy(observations[copy])
            totals[ended] = 0.0
            observations, _ = env.reset(options={"reset_mask": ended})
        batch = replace(batch, observations=observations, rewards=rewards,
                        terminated=terminated, truncated=truncated,
                        acted=np.ones(copies, bool), starts=ended, final_observations=finals)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    muscle.teardown()
    brain.teardown()
    env.close()
    return Result(seconds, cpu_seconds, brain.seconds, len(returns), steps, brain.version,
                  reached(returns, target))


def mosaic_run(seed: int, copies: int, target: float) -> tuple[Result, float]:
    """The whole stack with ``copies:``: its result (first to last step) and its start-up."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        marks = timed_run(Path(tmp), EXPERIMENT.format(seed=seed, copies=copies, target=target,
                                                       window=WINDOW), "learning-copies")
    seconds = marks["steps"] / marks["steps_per_s"]
    reached = marks["episodes"] < 100_000
    # Its CPU and learning time are in other threads of another process: not measured here.
    return Result(seconds, float("nan"), float("nan"), int(marks["episodes"]),
                  int(marks["steps"]), 0, reached), marks["startup_s"]


def describe(label: str, result: Result) -> str:
    mark = "" if result.reached else "  TARGET MISSED"
    return (f"  {label:<10} {result.seconds:6.1f} s ({result.learning:4.1f} s learning, "
            f"{result.cpu_seconds:4.1f} s CPU)  "
            f"{result.episodes:5d} episodes  "
            f"{result.steps:7d} steps  {result.updates:3d} updates  "
            f"{result.steps / result.seconds:7.0f} steps/s{mark}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8, help="copies of the batched run")
    parser.add_argument("--target", type=float, default=475.0,
                        help=f"mean return of the last {WINDOW} episodes to reach")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="run seeds")
    parser.add_argument("--max-steps", type=int, default=300_000,
                        help="env steps a run may take to reach the target")
    args = parser.parse_args()

    print(f"CartPole-v1, policy gradient (default params): wall time until the mean return of "
          f"the last {WINDOW} episodes >= {args.target:.0f}")
    singles, batched, stacks = [], [], []
    for seed in args.seeds:
        print(f"seed {seed}:")
        singles.append(one_copy(seed, args.target, args.max_steps))
        print(describe("1 copy", singles[-1]), flush=True)
        batched.append(copies_loop(seed, args.copies, args.target, args.max_steps))
        print(describe(f"{args.copies} copies", batched[-1]), flush=True)
        stack, startup = mosaic_run(seed, args.copies, args.target)
        stacks.append(stack)
        print(describe("mosaic", stack) + f"  (start-up {startup:.1f} s)", flush=True)

    def median(results: list[Result], field: str) -> float:
        return float(statistics.median(getattr(result, field) for result in results))

    print(f"medians over {len(args.seeds)} seeds:")
    for label, results in (("1 copy", singles), (f"{args.copies} copies", batched)):
        print(f"  {label:<10} {median(results, 'seconds'):6.1f} s "
              f"({median(results, 'learning'):4.1f} s learning, "
              f"{median(results, 'cpu_seconds'):4.1f} s CPU)  "
              f"{median(results, 'episodes'):7.0f} episodes  {median(results, 'steps'):9.0f} "
              f"steps")
    ratio = median(singles, "seconds") / median(batched, "seconds")
    per_seed = statistics.median(s.seconds / b.seconds for s, b in zip(singles, batched,
                                                                        strict=True))
    outside = (statistics.median(r.seconds - r.learning for r in singles)
               / statistics.median(r.seconds - r.learning for r in batched))
    print(f"time to target, 1 copy / {args.copies} copies: {ratio:.2f}x (ratio of medians), "
          f"{per_seed:.2f}x (median of per-seed ratios); outside learn(): {outside:.2f}x")
    whole = median(singles, "seconds") / median(stacks, "seconds")
    print(f"time to target, Harness on 1 copy / mosaic experiment-start with copies: "
          f"{args.copies}: {whole:.2f}x (ratio of medians; > 1: mosaic is faster)")
    cpu = median(singles, "cpu_seconds") / median(batched, "cpu_seconds")
    print(f"CPU time to target, 1 copy / {args.copies} copies: {cpu:.2f}x (ratio of medians)")
    ok = all(result.reached for result in singles + batched + stacks)
    print("target met by every run" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
