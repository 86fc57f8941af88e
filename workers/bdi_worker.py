"""BDI worker: an AgentSpeak plan library (``--plan-library``) chooses every action.

Each observation becomes beliefs (:func:`mosaic.operators.bdi.percepts`: for MiniGrid
``pos(X, Y)``, ``front(X, Y)``, ``goal(X, Y)``, ``wall(X, Y)``, ...; ``obs(I, V)`` for an
array; ``step(N)`` and ``legal(A)`` every step), the agent's reasoning cycle runs, and the plan
that calls ``do(A)`` gives the action (its number, or its name in ``--action-names``, by
default MiniGrid's for a MiniGrid observation). A step in which no plan acts within
``--max-cycles`` reasoning cycles takes the ``--fallback`` action (the no-op by default) and
is counted: every ``step`` and ``action_selected`` reply carries the decision's account,
``bdi: {source: plan | fallback, reason: no_action | cycle_limit, cycles, plan_failures}``,
and the worker logs each episode's tally. A plan library with errors is refused at start, exit
code 2, with the file, line and column agentspeak gave. Needs the ``bdi`` extra.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from mosaic.operators.worker.runtime import (
    BasePolicy,
    add_runtime_arguments,
    discrete_actions,
    run_worker,
)

__all__ = ["BdiPolicy", "main"]

log = logging.getLogger("mosaic.worker")


class BdiPolicy(BasePolicy):
    """A :class:`mosaic.operators.bdi.BdiReasoner` behind the worker's policy protocol."""

    reproducible = True  # ordered beliefs, seeded fallbacks and .random: see the reasoner

    def __init__(self, plan_library: str, *, action_names: list[str] | None = None,
                 max_cycles: int | None = None, fallback: str = "noop") -> None:
        from mosaic.operators.bdi import DEFAULT_MAX_CYCLES, BdiReasoner, load_plan_library

        self.reasoner = BdiReasoner(
            load_plan_library(plan_library), action_names=action_names,
            max_cycles=max_cycles or DEFAULT_MAX_CYCLES,
            fallback=fallback,  # type: ignore[arg-type]  # argparse checked the choice
        )
        self._account: dict[str, Any] = {}

    def reset(self, seed: int | None) -> None:
        """A new episode: a fresh agent from the plan library."""
        self.reasoner.reset(seed)

    def select_action(
        self, observation: Any, legal_actions: list[int] | None = None, action_space: Any = None
    ) -> Any:
        """The action of the plan that called ``do(A)``, else the fallback (None: no-op)."""
        decision = self.reasoner.decide(observation, legal_actions,
                                        discrete_actions(action_space))
        self._account = decision.account()
        return decision.action

    def reply_fields(self) -> dict[str, Any]:
        """``bdi``: where the last action came from (see the module docstring)."""
        return {"bdi": dict(self._account)} if self._account else {}

    def close(self) -> None:
        """Log the tally of every decision."""
        if self.reasoner.tally.actions:
            log.info("bdi %s: %s", self.reasoner.library.path, self.reasoner.tally.describe())


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m workers.bdi_worker",
        description="mosaic operator worker whose actions come from an AgentSpeak plan library "
                    "(a BDI agent).",
    )
    parser.add_argument("--plan-library", required=True,
                        help="the .asl file (relative to the working directory)")
    parser.add_argument("--action-names", default=None,
                        help="comma-separated names of actions 0, 1, ... for do(Name) "
                             "(default: MiniGrid's for a MiniGrid observation)")
    parser.add_argument("--max-cycles", type=int, default=None,
                        help="reasoning cycles a step may take before it falls back "
                             "(default 1000)")
    parser.add_argument("--fallback", choices=("noop", "first-legal", "random"), default="noop",
                        help="the action of a step in which no plan acts (default: noop)")
    add_runtime_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the worker; a plan library that cannot be used gives exit code 2."""
    args = build_parser().parse_args(argv)
    names = [n.strip() for n in args.action_names.split(",")] if args.action_names else None
    return run_worker(
        "bdi_worker", args,
        lambda: BdiPolicy(args.plan_library, action_names=names, max_cycles=args.max_cycles,
                          fallback=args.fallback),
    )


if __name__ == "__main__":
    sys.exit(main())
