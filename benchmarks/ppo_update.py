"""What one PPO update costs: the NumPy brain against TorchPPOBrain, on the same rollout.

Run: ``python benchmarks/ppo_update.py [--rounds 5] [--updates 8]`` (needs the ``torch`` extra).
Both brains take the params of ``examples/cartpole_torch_ppo.yml`` (256-step rollouts, 10 epochs
of minibatches of 64, 64x64 networks) and learn, again and again, from one rollout that a
``PPOMuscle`` collected on CartPole-shaped random observations. Each round times ``--updates``
updates of each brain in CPU seconds (after one untimed update), the brains alternating, and the
script prints each round, the medians and the ratio of the medians: the figure behind
"TorchPPOBrain's update costs N times the NumPy one". Both run on one BLAS/torch thread, as in a
run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from gymnasium import spaces  # noqa: E402

from mosaic.agents import BrainContext, MuscleContext, Slot  # noqa: E402
from mosaic.agents.learners import PPOBrain, PPOMuscle  # noqa: E402

PARAMS = {"rollout_steps": 256, "minibatch_size": 64, "epochs": 10, "learning_rate": 0.002,
          "anneal_steps": 100_000, "discount": 0.98, "gae_lambda": 0.8,
          "hidden_sizes": [64, 64]}
SLOTS = {"agent_0": Slot("agent_0", spaces.Box(-np.inf, np.inf, (4,), np.float64),
                         spaces.Discrete(2))}


def rollout() -> Any:
    """256 steps of a fresh muscle on random observations, episodes of 20 steps."""
    muscle = PPOMuscle()
    muscle.setup(MuscleContext("a", "a@env", "env", SLOTS, 0, "train", PARAMS))
    rng = np.random.default_rng(1)
    experience = None
    for t in range(256):
        muscle.act("agent_0", rng.standard_normal(4))
        experience = muscle.feedback("agent_0", 1.0, t % 20 == 19, False,
                                     rng.standard_normal(4)) or experience
    return experience


def cpu_per_update(cls: type[PPOBrain], experience: Any, updates: int) -> float:
    """CPU milliseconds per update of a fresh ``cls`` brain on ``experience``."""
    brain = cls()
    brain.setup(BrainContext("a", "a", SLOTS, 5, "train", PARAMS))
    brain.learn("a@env", experience)  # warm: first calls, allocations
    start = time.process_time()
    for _ in range(updates):
        brain.learn("a@env", experience)
    return (time.process_time() - start) / updates * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=8, help="updates per brain and round")
    args = parser.parse_args()
    from mosaic.agents.learners.torch_ppo import TorchPPOBrain

    experience = rollout()
    print(f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    numpy_ms: list[float] = []
    torch_ms: list[float] = []
    for i in range(args.rounds):
        numpy_ms.append(cpu_per_update(PPOBrain, experience, args.updates))
        torch_ms.append(cpu_per_update(TorchPPOBrain, experience, args.updates))
        print(f"round {i}: NumPy {numpy_ms[-1]:6.1f} ms  torch {torch_ms[-1]:6.1f} ms CPU per "
              "update", flush=True)
    numpy_median, torch_median = statistics.median(numpy_ms), statistics.median(torch_ms)
    print(f"median: NumPy {numpy_median:.1f} ms, torch {torch_median:.1f} ms: "
          f"TorchPPOBrain's update costs {torch_median / numpy_median:.2f}x the NumPy one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
