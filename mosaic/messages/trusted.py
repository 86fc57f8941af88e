"""Building a message from values that are validated already, without validating them again.

A message's constructor validates every field (see :mod:`mosaic.messages._base`): that is what
makes user code's answers safe to use. The step loop also builds messages of its own on every
step, each field taken from a message that was validated when it was built (an environment's
observations, a muscle's actions) or made by mosaic itself to fit its annotation (a step count,
a dict of rewards). Checking those again finds nothing and costs about as much as the rest of
building the message. :func:`trusted_constructor` gives such a caller a constructor that only
sets the fields.

Use it only where every argument is of that kind; a value from user code goes through the
class itself, so that a muscle or environment that returns garbage is refused with the field
named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from mosaic.core.frozen import field_setters
from mosaic.messages._base import _Typed, schema

__all__ = ["trusted_constructor"]

P = ParamSpec("P")
T = TypeVar("T")

_MADE: dict[Any, Callable[..., Any]] = {}


def trusted_constructor(cls: Callable[P, T]) -> Callable[P, T]:
    """A constructor of message or record class ``cls`` with its signature (defaults and
    default factories included) that sets the fields as given: no validation, no
    normalisation (a list given for a ``tuple`` field stays a list). Made once per class.

    Raises ``TypeError`` for a class that is not a registered message or record.
    """
    made = _MADE.get(cls)
    if made is None:
        if not (isinstance(cls, type) and issubclass(cls, _Typed)):
            raise TypeError(f"{cls!r} is not a mosaic message or record class")
        made = _MADE[cls] = _generate(cls)
    return cast("Callable[P, T]", made)


def _generate(cls: type) -> Callable[..., Any]:
    schema(cls)  # a registered frozen slots dataclass, or TypeError
    params, body, namespace = field_setters(cls, "_mosaic_self")
    namespace.update({"_mosaic_new": object.__new__, "_mosaic_cls": cls})
    source = "\n".join([f"def make({', '.join(params)}):",
                        "    _mosaic_self = _mosaic_new(_mosaic_cls)", *body,
                        "    return _mosaic_self"])
    exec(compile(source, f"<mosaic trusted {cls.__qualname__}>", "exec"), namespace)
    made: Callable[..., Any] = namespace["make"]
    made.__qualname__ = f"trusted {cls.__qualname__}"
    return made
