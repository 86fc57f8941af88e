"""Messages that set up, drive and stop an environment actor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mosaic.messages._base import Request, Response
from mosaic.messages.common import ActuatorSpec, SensorSpec
from mosaic.messages.run_config import VideoPlan, WrapperPlan

__all__ = [
    "EnvironmentResetRequest",
    "EnvironmentResetResponse",
    "EnvironmentSetupRequest",
    "EnvironmentSetupResponse",
    "EnvironmentShutdownRequest",
    "EnvironmentShutdownResponse",
    "EnvironmentStartRequest",
    "EnvironmentStartResponse",
    "EnvironmentUpdateRequest",
    "EnvironmentUpdateResponse",
]


@dataclass(frozen=True, slots=True)
class EnvironmentSetupRequest(Request):
    """SimulationController -> EnvironmentConductor: create an env actor at ``placement``
    (with ``rollout``, a rollout worker of uid ``environment_uid``)."""

    run_uid: str
    environment_uid: str
    placement: str
    rollout: bool = False


@dataclass(frozen=True, slots=True)
class EnvironmentSetupResponse(Response):
    """EnvironmentConductor -> SimulationController: the environment actor is at ``endpoint``."""

    environment_uid: str
    endpoint: str


@dataclass(frozen=True, slots=True)
class EnvironmentStartRequest(Request):
    """SimulationController -> environment actor: build environment ``env`` with ``params``.

    With ``copies`` it builds that many copies in one vector (``vector_mode``), and applies the
    run's step limit ``max_steps`` to each copy itself. ``wrappers`` wrap the environment (each
    copy), innermost first; ``seeding`` says when the copies are seeded (``episode`` or
    ``once``, see :data:`~mosaic.messages.run_config.Seeding`). With ``video`` it is made with
    ``render_mode="rgb_array"`` and records the episodes ``video`` names in ``video.folder``
    (see :class:`VideoPlan`).
    """

    environment_uid: str
    env: str
    params: dict[str, Any]
    seed: int
    copies: int | None = None
    vector_mode: str = "sync"
    max_steps: int | None = None
    wrappers: tuple[WrapperPlan, ...] = ()
    video: VideoPlan | None = None
    seeding: str = "episode"


@dataclass(frozen=True, slots=True)
class EnvironmentStartResponse(Response):
    """Environment actor -> SimulationController: the environment's agent slots.

    ``copies`` is 0 for one environment, else the number of copies of a vector environment,
    whose slots these are (each copy has the same); ``reseeds`` says whether the vector seeds
    each copy's episodes with the seeds it is sent (else it resets them itself).
    """

    environment_uid: str
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    copies: int = 0
    reseeds: bool = False


@dataclass(frozen=True, slots=True)
class EnvironmentResetRequest(Request):
    """SimulationController -> environment actor: start an episode (``seed`` None: unseeded),
    training episode ``episode`` of the run (None: an evaluation episode)."""

    seed: int | None
    episode: int | None = None


@dataclass(frozen=True, slots=True)
class EnvironmentResetResponse(Response):
    """Environment actor -> SimulationController: first observations and who acts next.

    ``infos``: slot -> the environment's ``info``, what the codec carries of it
    (:mod:`mosaic.environments.info`), for the slots that have a non-empty one.
    """

    observations: dict[str, Any]
    acting: tuple[str, ...]
    legal_actions: dict[str, Any]
    infos: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EnvironmentUpdateRequest(Request):
    """SimulationController -> environment actor (hot path): apply one step's ``actions``."""

    actions: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EnvironmentUpdateResponse(Response):
    """Environment actor -> SimulationController (hot path): the step's outcome; ``infos`` as
    in :class:`EnvironmentResetResponse`."""

    observations: dict[str, Any]
    rewards: dict[str, float]
    terminated: bool
    truncated: bool
    acting: tuple[str, ...]
    legal_actions: dict[str, Any]
    infos: dict[str, Any] = field(default_factory=dict)

    @property
    def is_terminal(self) -> bool:
        """True when the episode ended, by termination or truncation."""
        return self.terminated or self.truncated


@dataclass(frozen=True, slots=True)
class EnvironmentShutdownRequest(Request):
    """SimulationController -> environment actor: close the environment and stop."""

    environment_uid: str


@dataclass(frozen=True, slots=True)
class EnvironmentShutdownResponse(Response):
    """Environment actor -> SimulationController: closed."""

    environment_uid: str
