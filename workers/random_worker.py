"""Random worker: uniform random actions, reproducible from the operator's seed.

Started with ``--seed S`` (as Script and Manual mode start it), the action sampling comes from the
operator's own stream: seeded from ``S`` at start and, at the *n*-th ``reset``, from a seed
derived from ``S`` and *n*; the environment's reset seed plays no part, so two random operators
on the same environment seed play differently, and the same ``S`` replays the same actions.
Without ``--seed``, ``reset`` with a seed seeds both the environment and the action sampling, so
the same seed gives the same actions and the same trajectory in any process; ``reset`` without a
seed continues the current random stream (as Gymnasium environments do). Legal-action lists and
action masks are honoured: the action is drawn uniformly from the legal actions.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from mosaic.operators.worker.runtime import (
    BasePolicy,
    add_runtime_arguments,
    copy_space,
    discrete_actions,
    run_worker,
)

__all__ = ["RandomPolicy", "main"]


class RandomPolicy(BasePolicy):
    """Uniform random actions from a generator seeded by :meth:`reset`."""

    reproducible = True

    def __init__(self) -> None:
        self._rng = np.random.default_rng()
        self._space: Any = None
        self._space_source: Any = None

    def reset(self, seed: int | None) -> None:
        """Reseed from ``seed``; with None keep drawing from the current stream."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            self._space = None

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """A uniform choice among the legal actions, else a sample of ``action_space``.

        Raises ``ValueError`` when there are neither legal actions nor an action space.
        """
        if legal_actions:
            return int(legal_actions[int(self._rng.integers(len(legal_actions)))])
        actions = discrete_actions(action_space)
        if actions:
            return actions[int(self._rng.integers(len(actions)))]
        if action_space is None:
            raise ValueError("no legal actions and no action space: cannot pick a random action")
        if self._space is None or self._space_source is not action_space:
            # Sample from a private copy seeded from our stream, so the env's own space RNG and
            # ours never interfere.
            self._space = copy_space(action_space, int(self._rng.integers(2**31)))
            self._space_source = action_space
        return self._space.sample()


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.random_worker",
        description="mosaic operator worker that acts uniformly at random (seeded by --seed, "
                    "else by reset).",
    )
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)
    return run_worker("random_worker", args, RandomPolicy)


if __name__ == "__main__":
    sys.exit(main())
