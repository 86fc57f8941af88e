"""Passive worker: the no-op action every step.

The no-op is ``--noop-action`` when given and legal; otherwise 0 when legal, else the first legal
action; without a legal-action list, the action space's origin (``Discrete.start``, zeros for
``Box``/``MultiBinary``, ``MultiDiscrete.start``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mosaic.operators.worker.runtime import (
    BasePolicy,
    add_runtime_arguments,
    noop_action,
    run_worker,
)

__all__ = ["PassivePolicy", "main"]


class PassivePolicy(BasePolicy):
    """Always the no-op action (see the module docstring)."""

    reproducible = True

    def __init__(self, noop: int | None = None) -> None:
        self.noop = noop

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """The no-op; ``ValueError`` when neither legal actions nor a known space are given."""
        if self.noop is not None and (legal_actions is None or self.noop in legal_actions):
            return self.noop
        return noop_action(action_space, legal_actions)


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.passive_worker",
        description="mosaic operator worker that always takes the no-op action.",
    )
    parser.add_argument("--noop-action", type=int, default=None,
                        help="the action index that means 'do nothing' (default: 0 / the "
                             "space's origin)")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns its exit code."""
    args = build_parser().parse_args(argv)
    return run_worker("passive_worker", args, lambda: PassivePolicy(args.noop_action))


if __name__ == "__main__":
    sys.exit(main())
