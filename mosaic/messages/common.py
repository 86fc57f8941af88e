"""Messages and records used by every component."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mosaic.messages._base import Record, Request, Response

__all__ = ["ActuatorSpec", "ErrorResponse", "PingRequest", "PongResponse", "SensorSpec"]


@dataclass(frozen=True, slots=True)
class SensorSpec(Record):
    """One agent slot's observation side, carried in start and setup messages.

    ``uid`` is the environment's agent id (the slot); ``space`` is
    ``space_to_dict(observation_space)``.
    """

    uid: str
    space: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ActuatorSpec(Record):
    """One agent slot's action side, carried in start and setup messages.

    ``uid`` is the environment's agent id (the slot); ``space`` is ``space_to_dict(action_space)``.
    """

    uid: str
    space: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorResponse(Response):
    """Any component -> the requester, in place of the expected response to a failed request.

    ``request`` is the tag of the request that failed; handling it raised ``error_type`` with the
    message ``error``.
    """

    request: str
    error_type: str
    error: str


@dataclass(frozen=True, slots=True)
class PingRequest(Request):
    """Any component -> any component: a liveness check, answered by :class:`PongResponse`."""


@dataclass(frozen=True, slots=True)
class PongResponse(Response):
    """Answer to :class:`PingRequest`: the responder's ``uid``."""

    uid: str
