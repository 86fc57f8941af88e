"""What a BDI operator believes about an observation: :func:`percepts`.

Each observation becomes a list of percepts, ``(functor, args)`` pairs that the reasoner adds
to the agent's belief base (annotated ``[source(percept)]``, as Jason's percepts are). The
mapping, in the order the percepts are listed:

* every step: ``step(N)``, the decisions taken so far in the episode (0 at the first), and
  ``legal(A)`` for each legal action when the driver knows them (an action mask);
* a MiniGrid observation (a mapping with an ``image`` of W x H x 3 cells, each object, colour
  and state as ``minigrid.core.constants`` encodes them) becomes grid facts: ``Object(X, Y)``
  (``wall``, ``goal``, ``door``, ``key``, ``ball``, ``box``, ``lava``, ``floor``) and
  ``cell(X, Y, Object, Colour, State)`` for every cell that holds an object, X the column and
  Y the row of the image; ``pos(X, Y)`` where the agent stands and ``front(X, Y)`` the cell it
  faces; and ``view(egocentric)`` for MiniGrid's own partial view (the agent in the middle of
  the bottom row, facing up: forward is Y - 1, right is X + 1) or ``view(full)`` for an image
  that shows the agent itself (``minigrid.wrappers:FullyObsWrapper``). The mapping's other
  keys follow the rules below (``direction(D)``, ``mission("...")``);
* any other mapping: each key by the rules below, its name made a functor (``Pole Angle`` ->
  ``pole_Angle``);
* a number, bool or string ``V``: ``obs(V)`` (under a mapping's key ``k``: ``k(V)``);
* an array or list of numbers: ``obs(I, V)`` for each element, ``I`` its index in the flattened
  array (C order); under a key ``k``: ``k(I, V)``.

Atoms (``wall``, ``egocentric``, ``red``, ``closed``) are :class:`Atom`; strings stay strings.
Values that fit none of the rules (a nested mapping in a list) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "MINIGRID_ACTION_NAMES",
    "MINIGRID_COLOURS",
    "MINIGRID_OBJECTS",
    "MINIGRID_STATES",
    "Atom",
    "Percept",
    "functor_name",
    "is_minigrid",
    "percepts",
]


class Atom(str):
    """An AgentSpeak atom (``wall``), as opposed to a string (``"wall"``)."""

    __slots__ = ()


#: A percept: a functor and its arguments (numbers, bools, strings or atoms).
Percept = tuple[str, tuple[Any, ...]]

#: MiniGrid's encoding of a cell (``minigrid.core.constants``), by index: kept here so that
#: reading an observation needs no MiniGrid (the driver may own the environment).
MINIGRID_OBJECTS = ("unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal",
                    "lava", "agent")
MINIGRID_COLOURS = ("red", "green", "blue", "purple", "yellow", "grey")
MINIGRID_STATES = ("open", "closed", "locked")
#: MiniGrid's actions 0-6 (``minigrid.core.actions.Actions``), the names ``do(Name)`` takes.
MINIGRID_ACTION_NAMES = ("left", "right", "forward", "pickup", "drop", "toggle", "done")

_NO_OBJECT = {"unseen", "empty"}
#: Where a direction (0 east, 1 south, 2 west, 3 north) points on MiniGrid's grid.
_DIRECTION_STEPS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_NOT_FUNCTOR = re.compile(r"[^A-Za-z0-9_]")


def functor_name(key: str) -> str:
    """``key`` as an AgentSpeak functor: other characters become ``_``, and the name starts
    with a lower-case letter (``Pole Angle`` -> ``pole_Angle``, ``0`` -> ``k0``)."""
    name = _NOT_FUNCTOR.sub("_", str(key)) or "k"
    if not name[0].isalpha():
        name = "k" + name
    return name[0].lower() + name[1:]


def is_minigrid(observation: Any) -> bool:
    """Whether ``observation`` is a MiniGrid observation: a mapping with a W x H x 3 image."""
    if not isinstance(observation, Mapping) or "image" not in observation:
        return False
    try:
        image = np.asarray(observation["image"])
    except (TypeError, ValueError):
        return False
    return image.ndim == 3 and image.shape[2] == 3 and image.dtype.kind in "iuf"


def percepts(observation: Any, step: int, legal_actions: list[int] | None = None
             ) -> list[Percept]:
    """The percepts of ``observation`` at decision ``step`` (see the module docstring), in a
    deterministic order: the same observation gives the same list in any process."""
    found: list[Percept] = [("step", (step,))]
    if legal_actions is not None:
        found += [("legal", (int(action),)) for action in legal_actions]
    if is_minigrid(observation):
        found += _grid(np.asarray(observation["image"]))
        for key, value in observation.items():
            if key != "image":
                found += _value(functor_name(str(key)), value)
    elif isinstance(observation, Mapping):
        for key, value in observation.items():
            found += _value(functor_name(str(key)), value)
    else:
        found += _value("obs", observation)
    return found


def _scalar(value: Any) -> Any:
    """A number, bool or string as a term; None for anything else."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, str):
        return value
    return None


def _value(name: str, value: Any) -> list[Percept]:
    term = _scalar(value)
    if term is not None:
        return [(name, (term,))]
    if isinstance(value, list | tuple | np.ndarray):
        try:
            flat = np.asarray(value).ravel()
        except (TypeError, ValueError):
            return []
        found = []
        for index, element in enumerate(flat.tolist()):
            element_term = _scalar(element)
            if element_term is not None:
                found.append((name, (index, element_term)))
        return found
    return []


def _grid(image: np.ndarray) -> list[Percept]:
    width, height = image.shape[0], image.shape[1]
    found: list[Percept] = []
    agent: tuple[int, int, int] | None = None
    for x in range(width):
        for y in range(height):
            obj, colour, state = (int(v) for v in image[x, y])
            name = _name(MINIGRID_OBJECTS, obj)
            if name == "agent":
                agent = (x, y, state)  # a full view encodes the agent's direction as its state
                continue
            if name in _NO_OBJECT:
                continue
            found.append((name, (x, y)))
            found.append(("cell", (x, y, Atom(name), Atom(_name(MINIGRID_COLOURS, colour)),
                                   Atom(_name(MINIGRID_STATES, state)))))
    if agent is None:  # MiniGrid's own view: the agent stands in the bottom row, facing up
        x, y = width // 2, height - 1
        found += [("pos", (x, y)), ("front", (x, y - 1)), ("view", (Atom("egocentric"),))]
    else:
        x, y, direction = agent
        dx, dy = _DIRECTION_STEPS[direction % 4]
        found += [("pos", (x, y)), ("front", (x + dx, y + dy)), ("view", (Atom("full"),))]
    return found


def _name(names: tuple[str, ...], index: int) -> str:
    return names[index] if 0 <= index < len(names) else f"unknown{index}"
