"""Messages of the rollout loop: a rollout worker steps its copies where they are, and the
simulation controller collects what it recorded, a chunk at a time (no message per step)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mosaic.messages._base import Record, Request, Response
from mosaic.messages.run_config import EnvironmentPosition

__all__ = [
    "RolloutCollectRequest",
    "RolloutCollectResponse",
    "RolloutHost",
    "RolloutRunRequest",
    "RolloutRunResponse",
    "RolloutStopRequest",
]


@dataclass(frozen=True, slots=True)
class RolloutHost(Record):
    """The rollout worker that hosts a muscle (see :class:`~mosaic.messages.MusclePlan`): its
    uid, where it listens, how it is placed, and its ``group``, the environment whose workers
    the brain learns from in rounds (:mod:`mosaic.actors.rounds`)."""

    worker: str
    endpoint: str
    placement: str
    group: str


@dataclass(frozen=True, slots=True)
class RolloutRunRequest(Request):
    """SimulationController -> rollout worker: step the copies (started and given their
    muscle before) until ``episodes`` of them ended.

    ``index`` is the environment's position in the file and ``first_copy`` the number of the
    worker's first copy among the environment's (seeds and records follow from both); ``steps``
    and ``episodes_recorded`` say what the store keeps; ``store_info`` the info keys kept with
    each step; ``resume`` where the environment's loop stood in the saved run this one
    continues (None: a fresh start), whose copies the worker's take their episodes' numbers
    from.
    """

    environment_uid: str
    run_id: int
    seed: int
    index: int
    first_copy: int
    episodes: int
    max_steps: int | None
    agent_uid: str
    steps: bool
    episodes_recorded: bool
    store_info: tuple[str, ...] = ()
    resume: EnvironmentPosition | None = None


@dataclass(frozen=True, slots=True)
class RolloutRunResponse(Response):
    """Rollout worker -> SimulationController: stepping."""

    worker: str


@dataclass(frozen=True, slots=True)
class RolloutCollectRequest(Request):
    """SimulationController -> rollout worker: what you recorded since the last collect."""

    worker: str


@dataclass(frozen=True, slots=True)
class RolloutStopRequest(Request):
    """SimulationController -> rollout worker: stop stepping, shut the muscle down (its brain
    saves the checkpoint once its last muscle has) and answer with the last records."""

    worker: str


@dataclass(frozen=True, slots=True)
class RolloutCollectResponse(Response):
    """Rollout worker -> SimulationController: the records since the last collect, in order,
    each ``(kind, args)`` of the store writer's ``record_<kind>`` (steps, episode, metrics);
    the steps taken and the returns of the episodes ended meanwhile, in order; whether its
    episodes are done (``finished``, with the ``digest`` of its trajectories); ``error``: why it
    stopped stepping before they were (its environment or muscle raised), ``None`` if it did
    not. Once ``finished``, ``copy_episodes`` holds each of its copies' next episode (see
    :class:`~mosaic.messages.EnvironmentPosition`), for a run that continues this one."""

    worker: str
    records: tuple[Any, ...]
    steps: int
    returns: tuple[float, ...]
    finished: bool
    digest: str = ""
    error: str | None = None
    copy_episodes: tuple[int, ...] = ()
