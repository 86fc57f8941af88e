"""Rows of batched values: arrays with the copies first, or dicts and tuples of them."""

from __future__ import annotations

from typing import Any

import numpy as np


def row(batched: Any, index: int) -> Any:
    """Row ``index`` of a batch: of an array, or of each member of a dict or tuple of them."""
    if isinstance(batched, dict):
        return {key: row(value, index) for key, value in batched.items()}
    if isinstance(batched, tuple):
        return tuple(row(value, index) for value in batched)
    return batched[index]


def stack(rows: list[Any]) -> Any:
    """The batch of ``rows`` (the inverse of :func:`row`): arrays, dicts or tuples of them."""
    first = rows[0]
    if isinstance(first, dict):
        return {key: stack([r[key] for r in rows]) for key in first}
    if isinstance(first, tuple):
        return tuple(stack([r[i] for r in rows]) for i in range(len(first)))
    return np.stack([np.asarray(r) for r in rows])
