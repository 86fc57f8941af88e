"""Messages that stop the conductors at the end of a run."""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.messages._base import Request, Response

__all__ = [
    "AgentConductorShutdownRequest",
    "AgentConductorShutdownResponse",
    "EnvironmentConductorShutdownRequest",
    "EnvironmentConductorShutdownResponse",
]


@dataclass(frozen=True, slots=True)
class EnvironmentConductorShutdownRequest(Request):
    """SimulationController -> EnvironmentConductor: stop every environment actor of the run."""

    run_uid: str


@dataclass(frozen=True, slots=True)
class EnvironmentConductorShutdownResponse(Response):
    """EnvironmentConductor -> SimulationController: done; ``killed`` did not stop in time."""

    run_uid: str
    killed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AgentConductorShutdownRequest(Request):
    """SimulationController -> AgentConductor: stop every brain and muscle actor of the run."""

    run_uid: str


@dataclass(frozen=True, slots=True)
class AgentConductorShutdownResponse(Response):
    """AgentConductor -> SimulationController: done; ``killed`` did not stop in time."""

    run_uid: str
    killed: tuple[str, ...]
