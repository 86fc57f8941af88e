"""The ``info`` of a vector environment, in Gymnasium's layout, read and built copy by copy.

Gymnasium's vector environments gather their copies' infos column-wise: the values of a key
in an array with the copies first, beside a ``_key`` boolean array of the copies that have it;
a dict value becomes a dict of such columns. :func:`info_row` reads one copy's info back, and
:func:`stack_infos` builds the columns from the copies' infos.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["info_row", "stack_infos"]


def info_row(info: Mapping[str, Any], copy: int) -> dict[str, Any]:
    """The info of copy ``copy``: each key whose ``_key`` mask is set for it (or that has no
    mask), with the copy's value."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not mask[copy]:
            continue
        if isinstance(value, Mapping):
            out[key] = info_row(value, copy)
        elif isinstance(value, np.ndarray) and value.ndim:
            out[key] = value[copy]
        else:
            out[key] = value
    return out


def stack_infos(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The vector info of copies whose infos are ``rows`` (one per copy, in order).

    A key's column is an array of the values' common NumPy type when they are all numbers,
    booleans, or arrays of one shape, else an object array; copies without the key hold a zero
    (or ``None``) there, and its mask says so.
    """
    copies = len(rows)
    keys: dict[str, None] = {}
    for info in rows:
        keys.update(dict.fromkeys(info))
    out: dict[str, Any] = {}
    for key in keys:
        has = np.array([key in info for info in rows], dtype=bool)
        values = [info[key] for info in rows if key in info]
        if all(isinstance(value, Mapping) for value in values):
            out[key] = stack_infos([info.get(key, {}) for info in rows])
        else:
            out[key] = _column(values, has, copies)
        out[f"_{key}"] = has
    return out


def _column(values: list[Any], has: np.ndarray, copies: int) -> np.ndarray:
    shapes = {np.shape(value) for value in values}
    numeric = all(isinstance(value, bool | int | float | np.number | np.bool_ | np.ndarray)
                  and np.asarray(value).dtype.kind in "biufc" for value in values)
    if numeric and len(shapes) == 1:
        dtype = np.result_type(*[np.asarray(value) for value in values])
        (shape,) = shapes
        column = np.zeros((copies, *shape), dtype=dtype)
        column[has] = np.stack([np.asarray(value, dtype=dtype) for value in values])
        return column
    column = np.full(copies, None, dtype=object)
    for index, value in zip(has.nonzero()[0].tolist(), values, strict=True):
        column[index] = value
    return column
