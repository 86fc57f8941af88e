"""Do PPO and DQN reach their learning targets through mosaic? Each example file is run as
``mosaic experiment-start`` runs it (through :func:`mosaic.run`), seed after seed.

Run: ``python benchmarks/learning_targets.py [--tasks ppo-cartpole dqn-cartpole ...]
[--seeds 0 1 2 3]``. For every task and seed it runs the task's example with its train phase
only, until the mean return of the last 20 training episodes (sampled actions, with the
exploration of training) reaches the target or the env-step budget is spent (a termination
``condition``; episodes of all copies count, and the episode that crosses the budget ends), and
prints per seed: whether the target was reached, the last-20 mean, the env steps and episodes
it took, and the wall time from the first step to the last. Then per task how many seeds met
it, against the issue's bar.

| task | example | target | budget | bar |
| --- | --- | --- | --- | --- |
| ppo-cartpole | cartpole_ppo.yml | 475 | 100k | 3 of 4 seeds |
| dqn-cartpole | cartpole_dqn.yml | 475 | 100k | 3 of 4 seeds |
| torch-ppo-cartpole | cartpole_torch_ppo.yml (the torch extra) | 475 | 100k | 3 of 4 seeds |
| ppo-acrobot | acrobot_ppo.yml | -100 | 200k | every seed run |
| ppo-pendulum | pendulum_ppo.yml | -400 | 500k | every seed run |

Exits with 1 if a task misses its bar. Runs are CPU-bound (about 20-60 s each for CartPole on
a quiet machine, minutes for Pendulum); they run one at a time, so that the machine's other
work slows each alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the budget conditions below are named by import path

import mosaic  # noqa: E402

WINDOW = 20


def within_100k(stats: Any) -> bool:
    """Termination condition: the phase has taken 100,000 env steps."""
    return int(stats["steps"]) >= 100_000


def within_200k(stats: Any) -> bool:
    """Termination condition: the phase has taken 200,000 env steps."""
    return int(stats["steps"]) >= 200_000


def within_500k(stats: Any) -> bool:
    """Termination condition: the phase has taken 500,000 env steps."""
    return int(stats["steps"]) >= 500_000


@dataclass(frozen=True)
class Task:
    example: str
    target: float
    budget: str  # the name of a condition above
    needed: int | None  # seeds that must meet the target (None: all run)


TASKS = {
    "ppo-cartpole": Task("cartpole_ppo.yml", 475.0, "within_100k", 3),
    "dqn-cartpole": Task("cartpole_dqn.yml", 475.0, "within_100k", 3),
    "torch-ppo-cartpole": Task("cartpole_torch_ppo.yml", 475.0, "within_100k", 3),
    "ppo-acrobot": Task("acrobot_ppo.yml", -100.0, "within_200k", None),
    "ppo-pendulum": Task("pendulum_ppo.yml", -400.0, "within_500k", None),
}


def run_task(task: Task, seed: int, folder: Path) -> tuple[bool, float, int, int, float]:
    """(reached, last-20 mean, env steps, episodes, wall seconds) of one seed's training."""
    train = {"name": "train", "mode": "train", "episodes": 10_000_000,
             "termination": {"reward_threshold": task.target, "window": WINDOW,
                             "condition": f"benchmarks.learning_targets:{task.budget}"}}
    results = mosaic.run(REPO / "examples" / task.example, seed=seed, progress=False,
                         phases=[train], store={"path": str(folder / f"{seed}.sqlite"),
                                                "record_steps": "episodes"})
    run = results[0]
    if run.status != "finished":
        raise SystemExit(f"{task.example}, seed {seed}: the run {run.status}: {run.error}")
    frame = results.episodes()
    returns = frame[~frame["evaluation"]]["total_return"].to_numpy()
    last = float(returns[-WINDOW:].mean())
    return last >= task.target, last, run.steps, run.episodes, run.wall_time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    args = parser.parse_args()
    missed = []
    for name in args.tasks:
        task = TASKS[name]
        met = 0
        print(f"{name}: examples/{task.example}, target: last-{WINDOW} mean >= {task.target:g} "
              f"{task.budget.replace('_', ' ')} env steps", flush=True)
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                reached, last, steps, episodes, wall = run_task(task, seed, Path(tmp))
            met += reached
            print(f"  seed {seed}: {'reached' if reached else 'MISSED '}  last-{WINDOW} mean "
                  f"{last:8.1f}  {steps:7d} env steps  {episodes:5d} episodes  {wall:6.1f} s "
                  f"wall ({steps / wall:.0f} steps/s)", flush=True)
        needed = len(args.seeds) if task.needed is None else min(task.needed, len(args.seeds))
        ok = met >= needed
        print(f"  {met} of {len(args.seeds)} seeds met it (needed: {needed}): "
              f"{'ok' if ok else 'MISSED'}", flush=True)
        if not ok:
            missed.append(name)
    print("every target met" if not missed else f"TARGETS MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
