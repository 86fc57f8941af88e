"""A faster ``__init__`` for frozen slots dataclasses built on the step loop.

The ``__init__`` that ``dataclasses`` writes for a frozen class sets every field through
``object.__setattr__``, which looks the slot up by name first: for a message of seven fields
that is most of what building it costs, and the step loop builds several a step.
:func:`fast_init` gives such a class one that sets each field through its slot's own setter
instead, with the same signature, defaults and default factories.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["fast_init", "field_setters"]


class _Factory:
    """The default of a field with a default factory, in a generated ``__init__``."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def fast_init(cls: type, finish: Callable[[Any], None] | None = None) -> bool:
    """Replace the dataclass ``__init__`` of ``cls``, a frozen slots dataclass, by one that sets
    each field through its slot's setter, then calls ``finish(self)`` if given (in place of
    ``__post_init__``, which the new one does not call).

    Returns False, and leaves ``cls`` alone, when its ``__init__`` is not the plain one: a
    field left out of it or keyword-only, or a field named ``self`` or ``_mosaic_...``.
    """
    fields = dataclasses.fields(cls)
    if any(not field.init or field.kw_only or field.name == "self"
           or field.name.startswith("_mosaic_") for field in fields):
        return False
    params, body, namespace = field_setters(cls, "self")
    namespace["_mosaic_finish"] = finish
    params.insert(0, "self")
    if finish is not None:
        body.append("    _mosaic_finish(self)")
    source = "\n".join([f"def __init__({', '.join(params)}):", *(body or ["    pass"])])
    exec(compile(source, f"<mosaic init {cls.__qualname__}>", "exec"), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {**{field.name: field.type for field in fields}, "return": None}
    type.__setattr__(cls, "__init__", init)
    return True


def field_setters(cls: type, target: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """What generated code needs to set the fields of ``target``, an instance of ``cls`` (a
    frozen slots dataclass) in it: the parameters, one per field with its default (a default
    factory is called when the parameter is left out), the body's lines, which set each field
    through its slot's setter, and the namespace the code runs in.

    The parameters are the fields' names (callers pass them by keyword); every other name of
    the code starts with ``_mosaic_``, which a field's may not.
    """
    namespace: dict[str, Any] = {"_mosaic_factory": _FACTORY}
    params, body = [], []
    for index, field in enumerate(dataclasses.fields(cls)):
        name = field.name
        if name.startswith("_mosaic_"):
            raise TypeError(f"{cls.__qualname__}.{name}: a field may not be named _mosaic_...")
        namespace[f"_mosaic_set{index}"] = cls.__dict__[name].__set__
        value = name
        if field.default is not dataclasses.MISSING:
            namespace[f"_mosaic_default{index}"] = field.default
            params.append(f"{name}=_mosaic_default{index}")
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"_mosaic_make{index}"] = field.default_factory
            params.append(f"{name}=_mosaic_factory")
            value = f"_mosaic_make{index}() if {name} is _mosaic_factory else {name}"
        else:
            params.append(name)
        body.append(f"    _mosaic_set{index}({target}, {value})")
    return params, body, namespace
