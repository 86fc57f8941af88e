"""An environment's ``info``, cut to what the codec carries: what muscles get, the store keeps.

``info`` is free-form: an environment may put anything in it. mosaic passes on the part its
codec carries exactly and drops the rest, logging one warning per key and environment; it
never fails a run for it. What is kept:

* ``None``, ``bool``, ``int`` (within 64 bits), ``float``, and ``str`` or ``bytes`` of at most
  :data:`MAX_TEXT` characters or bytes;
* NumPy scalars and arrays of booleans and numbers, arrays of at most :data:`MAX_ELEMENTS`
  elements (per copy of a vector environment);
* ``dict`` with ``str`` keys, ``list`` and ``tuple`` of the above, nested at most
  :data:`MAX_DEPTH` levels and holding at most :data:`MAX_ITEMS` items each.

``info`` itself drops the keys whose values are not kept; a nested dict, list or tuple holding
anything that is not kept is dropped whole (dropping an element would shift the others).
Subclasses of ``int``, ``float`` and ``str`` (an ``IntEnum``, say) become the plain type.

A vector environment's ``info`` has Gymnasium's vector layout (a key's values in an array with
the copies first, and a ``_key`` mask of the copies that have it): it is kept in that layout,
an object array only if every element is kept. :mod:`mosaic.core.vector_info` reads a copy's
row of it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["MAX_DEPTH", "MAX_ELEMENTS", "MAX_ITEMS", "MAX_TEXT", "InfoFilter"]

log = logging.getLogger(__name__)

#: The longest ``str`` or ``bytes`` value kept, in characters or bytes.
MAX_TEXT = 4096
#: The most elements of a NumPy array kept (per copy of a vector environment).
MAX_ELEMENTS = 1024
#: The most items of a dict, list or tuple kept.
MAX_ITEMS = 256
#: How deep dicts, lists and tuples may nest.
MAX_DEPTH = 8

_INT64 = (-(2**63), 2**63 - 1)
_NUMBER_KINDS = frozenset("biufc")
_EMPTY: dict[str, Any] = {}


class _Dropped(Exception):
    """A value the codec cannot carry; ``reason`` says why, for the warning."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InfoFilter:
    """Makes the infos of one environment codec-safe, warning once per key it drops.

    Used by the thread that steps the environment only.
    """

    def __init__(self, environment: str) -> None:
        self.environment = environment
        self._warned: set[str] = set()

    def single(self, info: Any) -> dict[str, Any]:
        """The kept part of one environment's ``info`` (``{}`` for an empty one or a non-dict)."""
        if not info:
            return _EMPTY
        if not isinstance(info, Mapping):
            self._warn("", f"info is a {type(info).__name__}, not a dict")
            return _EMPTY
        return self._mapping(info, "", 0, MAX_ELEMENTS)

    def per_slot(self, infos: dict[str, Any]) -> dict[str, Any]:
        """slot -> the kept part of its info, for the slots of ``infos`` whose part is not
        empty (a per-player environment's outcome)."""
        if not infos:
            return infos
        kept = {slot: self.single(info) for slot, info in infos.items()}
        return {slot: info for slot, info in kept.items() if info}

    def vector(self, info: Any, copies: int) -> dict[str, Any]:
        """The kept part of a vector environment's ``info`` of ``copies`` copies."""
        if not info:
            return _EMPTY
        if not isinstance(info, Mapping):
            self._warn("", f"info is a {type(info).__name__}, not a dict")
            return _EMPTY
        return self._columns(info, "", copies)

    def _columns(self, info: Mapping[Any, Any], path: str, copies: int) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, value in info.items():
            if not isinstance(key, str):
                self._warn(f"{path}{key!r}", "its key is not a str")
                continue
            where = f"{path}{key}"
            if isinstance(value, Mapping):
                kept[key] = self._columns(value, f"{where}.", copies)
                continue
            if isinstance(value, np.ndarray) and value.ndim and len(value) == copies:
                try:
                    kept[key] = _column(value, copies)
                except _Dropped as dropped:
                    self._warn(where, dropped.reason)
                continue
            try:
                kept[key] = _clean(value, 1, MAX_ELEMENTS * copies)
            except _Dropped as dropped:
                self._warn(where, dropped.reason)
        # A mask without its values would claim values that are not there.
        for key in [key for key in kept if key.startswith("_") and key[1:] not in kept
                    and key[1:] in info]:
            del kept[key]
        return kept

    def _mapping(self, info: Mapping[Any, Any], path: str, depth: int,
                 elements: int) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, value in info.items():
            if not isinstance(key, str):
                self._warn(f"{path}{key!r}", "its key is not a str")
                continue
            if len(kept) == MAX_ITEMS:
                self._warn(f"{path}{key}", f"more than {MAX_ITEMS} keys")
                break
            try:
                kept[key] = _clean(value, depth + 1, elements)
            except _Dropped as dropped:
                self._warn(f"{path}{key}", dropped.reason)
        return kept

    def _warn(self, key: str, reason: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        what = f"info key {key!r}" if key else "info"
        log.warning("environment %r: %s dropped: %s (mosaic passes on numbers, booleans, text, "
                    "small numeric arrays and dicts and lists of them)",
                    self.environment, what, reason)


def _column(values: np.ndarray, copies: int) -> np.ndarray:
    """A vector info's array of values, one row per copy: kept as it is, or raises _Dropped."""
    kind = values.dtype.kind
    if kind in _NUMBER_KINDS:
        if values.size > MAX_ELEMENTS * copies:
            raise _Dropped(f"an array of {values.size} elements (at most {MAX_ELEMENTS} per "
                           "copy are kept)")
        return values
    if kind != "O" or values.ndim != 1:
        raise _Dropped(f"an array of dtype {values.dtype}")
    column = np.empty(copies, dtype=object)
    for copy, item in enumerate(values):
        column[copy] = _clean(item, 1, MAX_ELEMENTS)
    return column


def _clean(value: Any, depth: int, elements: int) -> Any:
    """``value`` as the codec carries it, or raises _Dropped saying why not."""
    kind = type(value)
    if value is None or kind is bool or kind is float:
        return value
    if kind is int:
        if _INT64[0] <= value <= _INT64[1]:
            return value
        raise _Dropped("an int beyond 64 bits")
    if kind is str or kind is bytes:
        if len(value) <= MAX_TEXT:
            return value
        raise _Dropped(f"a {kind.__name__} of length {len(value)} (at most {MAX_TEXT} are kept)")
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _NUMBER_KINDS:
            raise _Dropped(f"an array of dtype {value.dtype}")
        if value.size > elements:
            raise _Dropped(f"an array of {value.size} elements (at most {elements} are kept)")
        return value
    if isinstance(value, np.generic):
        if value.dtype.kind in _NUMBER_KINDS:
            return value
        if isinstance(value, np.str_ | np.bytes_):
            return _clean(value.item(), depth, elements)
        raise _Dropped(f"a NumPy {value.dtype} scalar")
    if isinstance(value, bool | int | float | str):  # IntEnum, str subclasses and the like
        plain = (bool if isinstance(value, bool) else int if isinstance(value, int)
                 else float if isinstance(value, float) else str)(value)
        return _clean(plain, depth, elements)
    if depth > MAX_DEPTH and isinstance(value, Mapping | list | tuple):
        raise _Dropped(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        if len(value) > MAX_ITEMS:
            raise _Dropped(f"a dict of {len(value)} items (at most {MAX_ITEMS} are kept)")
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Dropped("a dict with a key that is not a str")
            out[key] = _clean(item, depth + 1, elements)
        return out
    if kind is list or kind is tuple:
        if len(value) > MAX_ITEMS:
            raise _Dropped(f"a {kind.__name__} of {len(value)} items (at most {MAX_ITEMS} are "
                           "kept)")
        items = [_clean(item, depth + 1, elements) for item in value]
        return items if kind is list else tuple(items)
    raise _Dropped(f"a {kind.__module__}.{kind.__qualname__}")
