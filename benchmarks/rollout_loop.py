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
Run it with PYTHONPATH pointing at the checkout to measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import cast

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from mosaic.environments.sync_copies import SyncCopies
from mosaic.messages import (
    ComponentSpec,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    MuscleSetupRequest,
    RolloutCollectRequest,
    RolloutCollectResponse,
    RolloutRunRequest,
    RolloutStopRequest,
)
from mosaic.orchestration.rollout_worker import RolloutWorker
from mosaic.runtime.component import handle_hosted

SEED = 1


def worker_loop(copies: int, episodes: int) -> tuple[float, int]:
    """Env steps per CPU second of a rollout worker, and the steps it took."""
    worker = RolloutWorker("cartpole/rollout-0")
    started = cast(EnvironmentStartResponse, handle_hosted(worker, EnvironmentStartRequest(
        "cartpole", "gymnasium:CartPole-v1", {}, SEED, copies, seeding="once")))
    handle_hosted(worker, MuscleSetupRequest(
        "random", "random@cartpole/rollout-0", "cartpole",
        ComponentSpec("mosaic.agents:RandomMuscle", {}), started.sensors, started.actuators, 5,
        "train", "", 10.0, 0, copies, False, None, ""))
    handle_hosted(worker, RolloutRunRequest("cartpole", 1, SEED, 0, 0, episodes, None, "random",
                                            False, True))
    steps = 0
    began = time.process_time()
    try:
        while True:
            worker.do_work()
            answer = cast(RolloutCollectResponse,
                          handle_hosted(worker, RolloutCollectRequest(worker.uid)))
            if answer.error:
                raise SystemExit(f"the worker failed: {answer.error}")
            steps += answer.steps
            if answer.finished:
                break
        return steps / (time.process_time() - began), steps
    finally:
        handle_hosted(worker, RolloutStopRequest(worker.uid))
        worker.on_shutdown()


def vector_loop(copies: int, steps: int, lean: bool) -> float:
    """Env steps per CPU second of ``steps`` real env steps of a plain loop over
    ``SyncVectorEnv(copies)`` (Gymnasium's next-step autoreset), or of ``SyncCopies`` resetting
    inside the step (``lean``)."""
    makers = [lambda: gymnasium.make("CartPole-v1")] * copies
    env = (SyncCopies(makers, autoreset_mode=AutoresetMode.SAME_STEP) if lean
           else SyncVectorEnv(makers))
    env.action_space.seed(SEED)
    env.reset(seed=SEED)
    resetting = np.zeros(copies, dtype=bool)
    taken = 0
    began = time.process_time()
    while taken < steps:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        taken += copies - int(np.count_nonzero(resetting))
        if not lean:
            resetting = terminated | truncated
    rate = taken / (time.process_time() - began)
    env.close()
    return rate


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
        sync = vector_loop(args.copies, steps, lean=False)
        lean = vector_loop(args.copies, steps, lean=True)
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
