"""RL worker: acts greedily with a trained policy checkpoint.

``--checkpoint`` is an ``.npz`` file in the format of :mod:`mosaic.agents.policies`
(``q_table`` or ``mlp``). The action is the arg-max over the legal actions. A checkpoint that is
missing or malformed gives exit code 2 with the reason on stderr; an observation the policy cannot
take (say, a vector for a q_table) gives an ``error`` reply.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mosaic.agents.policies import MLPPolicy, QTablePolicy, load_policy
from mosaic.operators.worker.runtime import BasePolicy, add_runtime_arguments, run_worker

__all__ = ["GreedyCheckpointPolicy", "main"]


class GreedyCheckpointPolicy(BasePolicy):
    """The greedy action of a loaded checkpoint; deterministic, so reproducible."""

    reproducible = True

    def __init__(self, policy: QTablePolicy | MLPPolicy) -> None:
        self.policy = policy

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> int:
        """``argmax`` of the policy's values over the legal actions."""
        if isinstance(observation, dict) and "observation" in observation:
            observation = observation["observation"]  # PettingZoo-style {observation, action_mask}
        return self.policy.act(observation, legal_actions)


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.rl_worker",
        description="mosaic operator worker that acts greedily with a policy checkpoint (.npz).",
    )
    parser.add_argument("--checkpoint", required=True, help="path of the .npz checkpoint")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code (2 when the checkpoint cannot be loaded)."""
    args = build_parser().parse_args(argv)
    return run_worker(
        "rl_worker", args, lambda: GreedyCheckpointPolicy(load_policy(args.checkpoint))
    )


if __name__ == "__main__":
    sys.exit(main())
