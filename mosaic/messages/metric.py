"""The record of one metric a brain or muscle reported, as it rides on their replies."""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.messages._base import Record

__all__ = ["NO_METRICS", "Metric"]


@dataclass(frozen=True, slots=True)
class Metric(Record):
    """``value`` reported under ``name`` by ``source`` (a brain's or muscle's uid) at ``at``
    (seconds since the epoch, the reporter's clock)."""

    source: str
    name: str
    value: float
    at: float


#: The ``metrics`` of a reply that carries none: the default, and cheap on the wire.
NO_METRICS: tuple[Metric, ...] = ()
