"""Messages between a RunGovernor and its SimulationController."""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.messages._base import Notice, Request, Response
from mosaic.messages.run_config import RunConfig

__all__ = [
    "SimulationFinishedNotice",
    "SimulationStartRequest",
    "SimulationStartResponse",
    "SimulationStopRequest",
    "SimulationStopResponse",
]


@dataclass(frozen=True, slots=True)
class SimulationStartRequest(Request):
    """RunGovernor -> SimulationController: simulate ``run_uid``, notify ``governor_endpoint``."""

    run_uid: str
    seed: int
    config: RunConfig
    governor_endpoint: str


@dataclass(frozen=True, slots=True)
class SimulationStartResponse(Response):
    """SimulationController -> RunGovernor: whether the simulation started."""

    run_uid: str
    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SimulationFinishedNotice(Notice):
    """SimulationController -> RunGovernor: the simulation ended with ``status`` and totals."""

    run_uid: str
    status: str
    error: str | None
    episodes: int
    steps: int


@dataclass(frozen=True, slots=True)
class SimulationStopRequest(Request):
    """RunGovernor -> SimulationController: stop the simulation early, for ``reason``."""

    run_uid: str
    reason: str


@dataclass(frozen=True, slots=True)
class SimulationStopResponse(Response):
    """SimulationController -> RunGovernor: stopped; totals and the components it had to kill."""

    run_uid: str
    episodes: int
    steps: int
    killed: tuple[str, ...] = ()
