"""BDI operators: an AgentSpeak plan library (Jason's language, run by the ``agentspeak``
package) that acts in Gymnasium and PettingZoo environments.

Each observation becomes beliefs (:func:`percepts`: grid facts such as ``pos(X, Y)``,
``goal(X, Y)``, ``wall(X, Y)`` for MiniGrid, ``obs(I, V)`` for an array), the agent's
reasoning cycle runs on them, and the plan that calls ``do(A)`` gives the action
(:class:`BdiReasoner`). A decision without one is a counted fallback. :class:`BdiOperator`
runs in the caller's process; ``workers/bdi_worker.py`` is the worker program behind
``type: bdi``. Needs the ``bdi`` extra: ``pip install 'mosaic[bdi]'``.
"""

from __future__ import annotations

try:
    import agentspeak  # noqa: F401  (the extra this package needs)
except ImportError as _missing:  # said once, with the extra to install
    from mosaic.core.errors import MissingExtra

    raise MissingExtra("agentspeak", "bdi", "a BDI operator") from _missing

from mosaic.operators.bdi._actions import ACTION_FUNCTOR, UnknownAction, resolve_action
from mosaic.operators.bdi._operator import BdiOperator
from mosaic.operators.bdi._perception import (
    MINIGRID_ACTION_NAMES,
    Atom,
    Percept,
    functor_name,
    is_minigrid,
    percepts,
)
from mosaic.operators.bdi._plan_library import PlanLibrary, PlanLibraryError, load_plan_library
from mosaic.operators.bdi._reasoner import (
    DEFAULT_MAX_CYCLES,
    FALLBACKS,
    BdiError,
    BdiReasoner,
    BdiTally,
    Decision,
)

__all__ = [
    "ACTION_FUNCTOR",
    "DEFAULT_MAX_CYCLES",
    "FALLBACKS",
    "MINIGRID_ACTION_NAMES",
    "Atom",
    "BdiError",
    "BdiOperator",
    "BdiReasoner",
    "BdiTally",
    "Decision",
    "Percept",
    "PlanLibrary",
    "PlanLibraryError",
    "UnknownAction",
    "functor_name",
    "is_minigrid",
    "load_plan_library",
    "percepts",
    "resolve_action",
]
