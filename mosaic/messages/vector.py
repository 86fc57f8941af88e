"""Messages of the step loop of an environment with ``copies:``: one message per batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mosaic.messages._base import Record, Request, Response
from mosaic.messages.metric import Metric

__all__ = [
    "AgentBatchRequest",
    "AgentBatchResponse",
    "BatchOutcome",
    "VectorResetRequest",
    "VectorStepRequest",
    "VectorStepResponse",
]


@dataclass(frozen=True, slots=True)
class BatchOutcome(Record):
    """What a reset or step of every copy produced; the fields of :class:`mosaic.agents.Batch`.

    Arrays have the copies first: ``rewards`` float64, the four masks bool. A copy whose
    episode ended in this step has begun the next one: its row of ``observations`` is the new
    episode's first, and ``final_observations`` holds the last of the ended one.

    ``info`` is the copies' ``info`` in Gymnasium's vector layout (``key`` -> values, copies
    first; ``_key`` -> bool mask of the copies that have it), what the codec carries of it
    (:mod:`mosaic.environments.info`): of the reset for a copy that begins an episode, else of
    the step. ``final_info`` holds, per copy whose episode ended, the info of its last step.
    """

    observations: Any
    rewards: Any
    terminated: Any
    truncated: Any
    acted: Any
    starts: Any
    final_observations: dict[int, Any]
    legal_actions: Any
    info: dict[str, Any] = field(default_factory=dict)
    final_info: dict[int, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VectorResetRequest(Request):
    """SimulationController -> environment actor: start an episode in every copy.

    ``seeds`` (uint64, one per copy) seed the copies' resets.
    """

    seeds: Any


@dataclass(frozen=True, slots=True)
class VectorStepRequest(Request):
    """SimulationController -> environment actor (hot path): one action per copy.

    ``next_seeds`` (uint64, one per copy) seed the reset of a copy whose episode ends in this
    step.
    """

    actions: Any
    next_seeds: Any


@dataclass(frozen=True, slots=True)
class VectorStepResponse(Response):
    """Environment actor -> SimulationController (hot path): the outcome of a reset or step."""

    outcome: BatchOutcome


@dataclass(frozen=True, slots=True)
class AgentBatchRequest(Request):
    """SimulationController -> muscle (hot path): the outcome of every copy; act for each."""

    outcome: BatchOutcome


@dataclass(frozen=True, slots=True)
class AgentBatchResponse(Response):
    """Muscle -> SimulationController (hot path): one action per copy, batched.

    ``metrics``: what the muscle, and its brain through it, reported since its last answer.
    """

    actions: Any
    metrics: tuple[Metric, ...] | None = None
