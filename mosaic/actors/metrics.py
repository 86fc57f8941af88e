"""Turning what a brain or muscle reported into the records its reply carries."""

from __future__ import annotations

from mosaic.agents.metrics import MetricLog
from mosaic.messages import NO_METRICS, Metric

__all__ = ["reported"]


def reported(source: str, pending: MetricLog) -> tuple[Metric, ...]:
    """The metrics ``pending`` holds, as records from ``source``; ``pending`` is emptied.

    An empty log costs one length check: the reply then carries :data:`NO_METRICS`.
    """
    if not len(pending):
        return NO_METRICS
    return tuple(Metric(source, name, value, at) for name, value, at in pending.take())
