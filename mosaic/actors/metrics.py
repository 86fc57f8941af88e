"""Turning what a brain or muscle reported into the records its reply carries."""

from __future__ import annotations

from mosaic.agents.metrics import MetricLog
from mosaic.messages import Metric

__all__ = ["reported"]


def reported(source: str, pending: MetricLog) -> tuple[Metric, ...] | None:
    """The metrics ``pending`` holds, as records from ``source``; ``pending`` is emptied.

    An empty log costs one length check and gives ``None``, what a reply without metrics carries.
    """
    if not len(pending):
        return None
    return tuple(Metric(source, name, value, at) for name, value, at in pending.take())
