"""A BDI operator in the caller's own process: :class:`BdiOperator`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mosaic.operators.bdi._plan_library import load_plan_library
from mosaic.operators.bdi._reasoner import DEFAULT_MAX_CYCLES, BdiReasoner, Decision, Fallback

__all__ = ["BdiOperator"]


class BdiOperator:
    """An AgentSpeak plan library behind the Operator protocol
    (:class:`mosaic.operators.Operator`), in process.

    ``plan_library`` is the ``.asl`` file (relative to the working directory), read and checked
    here: a bad one raises :class:`~mosaic.operators.bdi.PlanLibraryError` naming the file and
    line. ``action_names``, ``max_cycles`` and ``fallback`` are the
    :class:`~mosaic.operators.bdi.BdiReasoner`'s; ``action_space`` (a ``Discrete`` space, which
    an ``OperatorMuscle`` passes in) gives the actions a random or first-legal fallback picks
    from. ``seed`` seeds the first episode when :meth:`reset` brings none.

    In an experiment::

        muscle:
          class: mosaic.operators:OperatorMuscle
          params:
            operator:
              class: mosaic.operators.bdi:BdiOperator
              params: {plan_library: examples/bdi/gridworld.asl}

    :attr:`last_decision` is the account of the last action (:class:`Decision`); the reasoner's
    ``tally`` counts the fallbacks. Errors: ``select_action`` raises
    :class:`~mosaic.operators.bdi.BdiError` when a plan names no action with ``do(A)``.
    """

    def __init__(self, plan_library: str, *, action_names: Sequence[str] | None = None,
                 max_cycles: int = DEFAULT_MAX_CYCLES, fallback: Fallback = "noop",
                 action_space: Any = None, seed: int | None = None,
                 operator_id: str = "bdi", name: str | None = None) -> None:
        self._id = operator_id
        self._name = name if name is not None else f"BDI ({plan_library})"
        self.reasoner = BdiReasoner(load_plan_library(plan_library), action_names=action_names,
                                    max_cycles=max_cycles, fallback=fallback)
        self._actions = _discrete_actions(action_space)
        self._seed = seed
        self.last_decision: Decision | None = None

    @property
    def id(self) -> str:
        """The operator's id (``operator_id``)."""
        return self._id

    @property
    def name(self) -> str:
        """The operator's name (default: ``BDI (<plan library>)``)."""
        return self._name

    def reset(self, seed: int | None = None) -> None:
        """A new episode (a fresh agent from the plan library), seeded with ``seed``."""
        self.reasoner.reset(seed if seed is not None else self._seed)
        self._seed = None

    def select_action(self, observation: Any, legal_actions: Sequence[Any] | None = None) -> Any:
        """The action a plan chose with ``do(A)``, or the fallback (None: the no-op)."""
        legal = [int(a) for a in legal_actions] if legal_actions is not None else None
        self.last_decision = self.reasoner.decide(observation, legal, self._actions)
        return self.last_decision.action

    def on_step_result(self, observation: Any, action: Any, reward: float, terminated: bool,
                       truncated: bool) -> None:
        """Nothing: the next observation brings the percepts."""
        return None

    def on_episode_end(self, summary: Any) -> None:
        """Nothing: the tally of the episode is logged at the next reset."""
        return None


def _discrete_actions(space: Any) -> list[int] | None:
    start, n = getattr(space, "start", None), getattr(space, "n", None)
    if start is None or n is None or getattr(space, "shape", None) not in ((), None):
        return None
    return list(range(int(start), int(start) + int(n)))
