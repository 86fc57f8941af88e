"""Copies of values as the codec would deliver them, without encoding them.

A message between two components in one process can skip the wire (see
:mod:`mosaic.runtime.direct`), but not the isolation the wire gives: what the receiver gets must
share nothing mutable with what the sender keeps, or a user's muscle that scales an observation
in place would change the controller's record of the step. :func:`detached` makes that copy at
a fraction of the cost of ``unpack(pack(value))``, and gives the same value.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

from mosaic.messages._base import _REGISTRY, _Typed, schema
from mosaic.messages.codec import pack, unpack

__all__ = ["detached"]

_Copier = Callable[[Any], Any]
_LOW, _HIGH = -(1 << 63), 1 << 64
_NDARRAY = np.ndarray


def detached(value: Any) -> Any:
    """A copy of ``value`` that shares nothing mutable with it, equal to ``unpack(pack(value))``.

    Types are kept exactly as the codec keeps them: arrays are copied (Fortran layout kept,
    anything else in C order, writable), containers and registered records and messages are
    rebuilt around copies of their contents, immutable values are shared. Whatever the common
    cases above do not cover (object or structured arrays, tuple keys, big integers, bytearray)
    takes the codec's own round trip. Raises :class:`~mosaic.core.errors.CodecError` for a
    value the codec cannot carry. Thread-safe.
    """
    kind = type(value)
    copier = _COPIERS.get(kind)
    if copier is None:
        copier = _resolve(kind)
    return copier(value)


def _same(value: Any) -> Any:
    return value


def _round_trip(value: Any) -> Any:
    return unpack(pack(value))


def _int(value: int) -> int:
    return value if _LOW <= value < _HIGH else _round_trip(value)


def _dict(value: dict[Any, Any]) -> dict[Any, Any]:
    out = {}
    # A step's dicts hold one value per slot: the common kinds are copied here, not called for.
    for key, item in value.items():
        if type(key) is not str and type(key) not in _PLAIN_KEYS:
            return _round_trip(value)  # type: ignore[no-any-return]
        kind = type(item)
        if kind in _SHARED:
            out[key] = item
        elif kind is _NDARRAY and not item.dtype.hasobject:
            out[key] = item.copy("A")
        else:
            copier = _COPIERS.get(kind)
            out[key] = copier(item) if copier is not None else detached(item)
    return out


def _list(value: list[Any]) -> list[Any]:
    return [detached(item) for item in value]


def _tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple([detached(item) for item in value])


def _array(value: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if value.dtype.hasobject:
        return _round_trip(value)  # type: ignore[no-any-return]
    return value.copy("A")  # the order positionally: a keyword costs a third of the copy


def _immutable(annotation: Any) -> bool:
    """True if every value that fits ``annotation`` is immutable: a field of such a type is
    shared, not copied (validation at construction holds the field to it)."""
    if annotation in _SCALARS:
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        return all(arg is Ellipsis or _immutable(arg) for arg in args)
    if origin in (typing.Union, types.UnionType):
        return all(_immutable(arg) for arg in args)
    return False


def _typed_copier(kind: type) -> _Copier:
    """``value -> copy`` for registered class ``kind``, generated once (as dataclasses does
    for ``__init__``): the copy is rebuilt without validation, every field being a copy of a
    validated one, or the same immutable value."""
    hints = typing.get_type_hints(kind)
    lines = ["def copy_typed(value):", "    out = new(kind)"]
    namespace: dict[str, Any] = {"new": object.__new__, "kind": kind, "detached": detached,
                                 "copy_dict": _dict, "dict": dict}
    for index, name in enumerate(schema(kind).names):
        hint = hints[name]
        if _immutable(hint):
            read = f"value.{name}"
        elif hint is dict or typing.get_origin(hint) is dict:
            # A dict field (most of a step's messages, often empty) goes straight to its copier.
            lines.append(f"    v{index} = value.{name}")
            read = (f"(copy_dict(v{index}) if v{index} else {{}}) if type(v{index}) is dict "
                    f"else detached(v{index})")
        else:
            lines.append(f"    v{index} = value.{name}")
            read = f"v{index} if v{index} is None else detached(v{index})"
        # The slot's own setter, as the schema's decoders use: object.__setattr__ would look
        # the slot up by name first (the class is frozen: setattr would refuse).
        namespace[f"set{index}"] = kind.__dict__[name].__set__
        lines.append(f"    set{index}(out, {read})")
    lines.append("    return out")
    exec(compile("\n".join(lines), f"<mosaic copy {kind.__qualname__}>", "exec"), namespace)
    copier: _Copier = namespace["copy_typed"]
    return copier


def _resolve(kind: type) -> _Copier:
    copier: _Copier
    if issubclass(kind, np.generic) and not issubclass(kind, np.void):
        copier = _same  # NumPy scalars are immutable (a structured one is not: the codec's)
        _SHARED.add(kind)
    elif issubclass(kind, _Typed) and _REGISTRY.get(kind.__name__) is kind:
        copier = _typed_copier(kind)
    else:
        copier = _round_trip  # the codec's copy, or its CodecError
    _COPIERS[kind] = copier
    return copier


_SCALARS = frozenset({bool, int, float, str, bytes, type(None)})
_PLAIN_KEYS = frozenset({str, int, bytes, bool, float, type(None)})
#: The types whose values are shared, not copied: immutable, and carried by the codec as they
#: are (NumPy scalar types join as they are met). Not int: a big one takes the codec's copy.
_SHARED: set[type] = {type(None), bool, float, str, bytes}
_COPIERS: dict[type, _Copier] = {
    type(None): _same,
    bool: _same,
    float: _same,
    str: _same,
    bytes: _same,
    int: _int,
    dict: _dict,
    list: _list,
    tuple: _tuple,
    np.ndarray: _array,
}
