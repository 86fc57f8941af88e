"""Named scalars a brain or muscle reports (``context.log_metric``), held until mosaic sends them.

A component's metrics travel on its next reply: a muscle's on its answer to the simulation
controller, a brain's on its answer to a muscle, which passes them on with its own next answer.
Between two replies a component holds at most :data:`METRICS_PER_REPLY` of them; beyond that
the oldest are dropped, the latest kept, and the drop is logged as a warning when they are sent.
"""

from __future__ import annotations

import logging
import math
import numbers
import time
from collections import deque
from typing import Generic, TypeVar

import numpy as np

from mosaic.core.errors import MosaicError
from mosaic.core.log_limit import LogLimiter

__all__ = ["MAX_METRIC_NAME", "METRICS_PER_REPLY", "MetricError", "MetricLog", "PendingMetrics"]

log = logging.getLogger(__name__)

#: How many metrics one brain or muscle may report between two of its replies (a step, an
#: update); beyond it the oldest are dropped and counted.
METRICS_PER_REPLY = 1000
#: The longest metric name, in characters (the store's column width).
MAX_METRIC_NAME = 255

T = TypeVar("T")

#: One reported metric: (name, value, seconds since the epoch when it was reported).
MetricEntry = tuple[str, float, float]


class MetricError(MosaicError):
    """``log_metric`` was given a name or value it cannot record."""


class PendingMetrics(Generic[T]):
    """A bounded buffer of metrics waiting for the next reply; the latest ``limit`` win.

    :meth:`take` returns what is held, oldest first, and empties the buffer; if some were
    dropped since the last take, it logs one warning naming ``owner`` and the count (rate
    limited, so that a component that always reports too much does not flood the log).
    """

    def __init__(self, owner: str = "", limit: int = METRICS_PER_REPLY) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.owner = owner
        self.limit = limit
        self._items: deque[T] = deque(maxlen=limit)
        #: What is held, oldest first (read only): empty, a cheap test on every reply that
        #: carries no metrics, without a call to ``len``.
        self.held = self._items
        self._dropped = 0
        self._warnings: LogLimiter | None = None

    def __len__(self) -> int:
        return len(self._items)

    @property
    def dropped(self) -> int:
        """How many were dropped since the last :meth:`take`."""
        return self._dropped

    def add(self, item: T) -> None:
        """Hold ``item``; if the buffer is full the oldest one is dropped."""
        items = self._items
        if len(items) == self.limit:
            self._dropped += 1
        items.append(item)

    def extend(self, items: tuple[T, ...] | list[T]) -> None:
        """Hold each of ``items`` in order, as :meth:`add` does."""
        for item in items:
            self.add(item)

    def take(self) -> list[T]:
        """Everything held, oldest first; the buffer is empty afterwards."""
        items = list(self._items)
        self._items.clear()
        if self._dropped:
            if self._warnings is None:
                self._warnings = LogLimiter(log, self.owner or "metrics",
                                            "warnings of dropped metrics",
                                            level=logging.WARNING)
            if self._warnings.allow("dropped"):
                log.warning("%s: %d metrics dropped: more than %d between two replies; the "
                            "latest %d were kept", self.owner or "a component", self._dropped,
                            self.limit, len(items))
            self._dropped = 0
        return items


class MetricLog(PendingMetrics[MetricEntry]):
    """The metrics one brain or muscle reported and mosaic has not sent yet."""

    def log(self, name: str, value: float) -> None:
        """Validate and hold one metric, stamped with the current time.

        Raises :class:`MetricError`, naming the metric, if ``name`` is not a non-empty str of
        at most :data:`MAX_METRIC_NAME` characters or ``value`` is not a finite real number (an
        int, a float or a NumPy integer or floating scalar; not a bool).
        """
        self.add((check_name(name), check_value(name, value), time.time()))


def check_name(name: object) -> str:
    """``name`` if it is a valid metric name; :class:`MetricError` otherwise."""
    if not isinstance(name, str):
        raise MetricError(f"a metric name must be a str, got {type(name).__name__} "
                          f"({name!r:.60})")
    if not name:
        raise MetricError("a metric name must not be empty")
    if len(name) > MAX_METRIC_NAME:
        raise MetricError(f"metric name {name[:40]!r}... is {len(name)} characters long; at "
                          f"most {MAX_METRIC_NAME} are stored")
    return name


def check_value(name: str, value: object) -> float:
    """``value`` as a float if it is a finite real number; :class:`MetricError` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (numbers.Real, np.integer, np.floating)):
        raise MetricError(f"metric {name!r}: the value must be a real number (int, float or a "
                          f"NumPy scalar), got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise MetricError(f"metric {name!r}: the value must be finite, got {value!r:.60}")
    return number
