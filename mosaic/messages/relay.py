"""Messages between a run on a Ray node and the command that holds its store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mosaic.messages._base import Request, Response

__all__ = ["RECORD_KINDS", "RunRecordsRequest", "RunRecordsResponse"]

#: The kinds of record a run relays, each ``(kind, args)`` with the args of the store writer's
#: method of that name: ``record_steps(rows)``, ``record_metrics(rows)``,
#: ``record_transition(run_id, from, to, reason)`` and ``record_episode(run_id, ...)``.
RECORD_KINDS = frozenset({"steps", "metrics", "transition", "episode", "checkpoint"})


@dataclass(frozen=True, slots=True)
class RunRecordsRequest(Request):
    """Run on a Ray node -> the command: the records since the last request, in order, and the
    run's progress counters now (see mosaic.orchestration.record_relay). Also sent with no
    records, a few times a second: it is how the command knows the run is alive.

    Each item of ``records`` is a ``(kind, args)`` record, or a list of them packed with the
    codec as one ``bytes`` value (how RecordRelay sends them: the command decodes them off the
    thread that receives the request)."""

    run_uid: str
    node: str
    records: tuple[Any, ...]
    progress: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunRecordsResponse(Response):
    """The command -> the run: stored; ``cancel`` asks the run to shut down in order."""

    run_uid: str
    cancel: bool
