"""The action a plan takes in the environment, ``do(A)``, and what it names.

``do(A)`` is an environment action in Jason's sense (no leading dot). ``A`` is the action's
number (``do(2)``) or its name (``do(forward)``, ``do("forward")``): the operator's
``action_names`` in order, else MiniGrid's names when the observation is MiniGrid's
(:data:`~mosaic.operators.bdi._perception.MINIGRID_ACTION_NAMES`). Every other action a plan
may call is agentspeak's standard library (``.print``, ``.random``, ``.findall``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import agentspeak
import agentspeak.stdlib

__all__ = ["ACTION_FUNCTOR", "UnknownAction", "make_actions", "resolve_action"]

#: The functor of the environment action.
ACTION_FUNCTOR = "do"


class UnknownAction(ValueError):
    """``do(A)`` with an ``A`` that names no action."""


def make_actions(on_do: Callable[[Any], None]) -> Any:
    """agentspeak's standard library plus ``do/1``, which hands its argument (grounded) to
    ``on_do`` and succeeds."""
    actions = agentspeak.Actions(agentspeak.stdlib.actions)

    @actions.add(ACTION_FUNCTOR, 1)  # type: ignore[untyped-decorator]
    def _do(agent: Any, term: Any, intention: Any) -> Any:
        on_do(agentspeak.grounded(term.args[0], intention.scope))
        yield

    return actions


def resolve_action(argument: Any, names: Sequence[str] | None) -> int:
    """The action number ``do(argument)`` names. Raises :class:`UnknownAction` (saying what
    would have been understood) for an unbound variable, an unknown name or anything else."""
    if isinstance(argument, bool):
        raise UnknownAction(f"do({_show(argument)}): expected an action number or name")
    if isinstance(argument, int):
        return argument
    if isinstance(argument, float) and argument.is_integer():
        return int(argument)
    name: str | None = None
    if isinstance(argument, str):
        name = argument
    elif agentspeak.is_atom(argument):
        name = str(argument.functor)
    if name is None:
        raise UnknownAction(f"do({_show(argument)}): expected an action number or name")
    if names and name in names:
        return list(names).index(name)
    known = (f"the action names are {', '.join(names)}" if names else
             "there are no action names: give settings.action_names, or do(N) with the "
             "action's number")
    raise UnknownAction(f"do({name}): {name!r} names no action; {known}")


def _show(term: Any) -> str:
    try:
        return str(agentspeak.asl_str(term))
    except Exception:  # an unbound variable or an odd term: its Python form will do
        return repr(term)
