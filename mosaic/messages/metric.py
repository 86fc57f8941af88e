"""The record of one metric a brain or muscle reported, as it rides on their replies."""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.messages._base import Record

__all__ = ["Metric"]


@dataclass(frozen=True, slots=True)
class Metric(Record):
    """``value`` reported under ``name`` by ``source`` (a brain's or muscle's uid) at ``at``
    (seconds since the epoch, the reporter's clock).

    A reply's ``metrics`` field holds a tuple of these, or ``None`` when there are none: ``None``
    rather than an empty tuple, because msgpack packs it natively, so the hot path pays next to
    nothing for the field.
    """

    source: str
    name: str
    value: float
    at: float

