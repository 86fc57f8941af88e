"""Messages that set up, drive and stop agents: their muscles (acting) and brains (learning)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mosaic.messages._base import Record, Request, Response
from mosaic.messages.common import ActuatorSpec, SensorSpec
from mosaic.messages.metric import Metric
from mosaic.messages.rollout import RolloutHost
from mosaic.messages.run_config import AgentPlan, CheckpointPaths, ComponentSpec, SelfPlayPlan

__all__ = [
    "AgentEvaluateRequest",
    "AgentSetupRequest",
    "AgentSetupResponse",
    "AgentUpdateRequest",
    "AgentUpdateResponse",
    "BrainSetupRequest",
    "BrainSetupResponse",
    "BrainShutdownRequest",
    "BrainShutdownResponse",
    "MusclePlan",
    "MuscleSetupRequest",
    "MuscleSetupResponse",
    "MuscleShutdownRequest",
    "MuscleShutdownResponse",
    "MuscleUpdateRequest",
    "MuscleUpdateResponse",
]


@dataclass(frozen=True, slots=True)
class MusclePlan(Record):
    """One muscle of an agent: the environment it acts in, its slots there, and its seed.

    ``copies`` is the number of copies of a vector environment (0: one environment).
    ``host``: the rollout worker that hosts the muscle (``None``: the agent conductor places
    it).
    """

    environment: str
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    seed: int
    copies: int = 0
    host: RolloutHost | None = None


@dataclass(frozen=True, slots=True)
class AgentSetupRequest(Request):
    """SimulationController -> AgentConductor: create an agent's brain and ``muscles``.

    ``observers`` are the muscles of self-play agents that may ask this agent's brain for
    snapshots (:class:`BrainSyncRequest`). A self-play agent is set up after the agent it
    plays, whose brain the conductor then knows.
    """

    run_uid: str
    agent_uid: str
    config: AgentPlan
    muscles: dict[str, MusclePlan]
    seed: int
    mode: str
    evaluate: bool = False
    observers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AgentSetupResponse(Response):
    """AgentConductor -> SimulationController: where each of the agent's muscles listens."""

    agent_uid: str
    muscle_endpoints: dict[str, str]


@dataclass(frozen=True, slots=True)
class BrainSetupRequest(Request):
    """AgentConductor -> brain actor: build the brain that serves ``muscles``.

    ``checkpoints`` says where the brain saves its state at the end of the phase, and what it
    loads before it starts (``None``: neither). ``observers`` (muscles of self-play agents) may
    ask it for snapshots (:class:`BrainSyncRequest`) but are not served: the brain stops once
    ``muscles`` have shut down. ``groups``: the muscles of rollout workers whose experience the
    brain learns from in rounds, each group in its order (:mod:`mosaic.actors.rounds`); a brain
    with groups stays after its last muscle until its conductor stops it.
    """

    agent_uid: str
    brain_uid: str
    brain: ComponentSpec
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    seed: int
    mode: str
    muscles: tuple[str, ...]
    checkpoints: CheckpointPaths | None = None
    observers: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class BrainSetupResponse(Response):
    """Brain actor -> AgentConductor: the brain is ready."""

    brain_uid: str


@dataclass(frozen=True, slots=True)
class MuscleSetupRequest(Request):
    """AgentConductor -> muscle actor: build a muscle; its brain is at ``brain_endpoint``.

    ``brain_timeout`` bounds each exchange with the brain, in seconds; with ``checkpoint_every``
    N > 0 the muscle asks its brain to save a checkpoint every N episodes. With ``copies`` N > 0
    the muscle acts in the N copies of a vector environment, one batch per step. With
    ``evaluate`` the muscle also keeps a greedy instance (``mode="test"``, a seed of its own)
    for :class:`AgentEvaluateRequest`, given every update the training instance is given.
    With ``self_play`` the muscle plays snapshots of the brain at ``snapshot_endpoint`` (see
    :class:`~mosaic.messages.SelfPlayPlan`) and says in its first answer of each episode which
    one (:attr:`AgentUpdateResponse.snapshot`).
    """

    agent_uid: str
    muscle_uid: str
    environment_uid: str
    muscle: ComponentSpec
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    seed: int
    mode: str
    brain_endpoint: str | None
    brain_timeout: float = 60.0
    checkpoint_every: int = 0
    copies: int = 0
    evaluate: bool = False
    self_play: SelfPlayPlan | None = None
    snapshot_endpoint: str | None = None


@dataclass(frozen=True, slots=True)
class MuscleSetupResponse(Response):
    """Muscle actor -> AgentConductor: the muscle is ready."""

    muscle_uid: str


@dataclass(frozen=True, slots=True)
class AgentUpdateRequest(Request):
    """SimulationController -> muscle actor (hot path): the environment's step, to act on.

    ``infos``: slot -> the environment's ``info`` that came with this step (or reset), for the
    muscle's slots that have a non-empty one.
    """

    step: int
    observations: dict[str, Any]
    rewards: dict[str, float]
    terminated: bool
    truncated: bool
    acting: tuple[str, ...]
    legal_actions: dict[str, Any]
    infos: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentEvaluateRequest(Request):
    """SimulationController -> muscle actor: a step of an evaluation episode, to act on
    greedily. As :class:`AgentUpdateRequest`, but played by the muscle's greedy instance: its
    experience reaches no brain, and its episodes count for no checkpoint. The answer is an
    :class:`AgentUpdateResponse`."""

    step: int
    observations: dict[str, Any]
    rewards: dict[str, float]
    terminated: bool
    truncated: bool
    acting: tuple[str, ...]
    legal_actions: dict[str, Any]
    infos: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentUpdateResponse(Response):
    """Muscle actor -> SimulationController (hot path): one action per acting slot.

    ``metrics``: what the muscle, and its brain through it, reported since its last answer.
    ``snapshot``: at an episode's first step, the snapshot a self-play muscle plays it with
    (the episode at which it was taken); ``None`` otherwise.
    """

    actions: dict[str, Any]
    metrics: tuple[Metric, ...] | None = None
    snapshot: int | None = None


@dataclass(frozen=True, slots=True)
class MuscleUpdateRequest(Request):
    """Muscle -> brain: ``experience`` to learn from."""

    muscle_uid: str
    experience: Any


@dataclass(frozen=True, slots=True)
class MuscleUpdateResponse(Response):
    """Brain -> muscle: what the brain's ``learn`` returned (None: nothing to apply).

    ``metrics``: what the brain reported since its last answer; the muscle passes them on.
    ``restore``: in the answer to a BrainSyncRequest of a training phase that loaded a
    checkpoint, the muscle's part of it (``state/<name>`` and ``rng`` arrays), to resume from.
    """

    update: Any
    metrics: tuple[Metric, ...] | None = None
    restore: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MuscleShutdownRequest(Request):
    """SimulationController -> muscle actor: tear the muscle down and stop."""

    muscle_uid: str


@dataclass(frozen=True, slots=True)
class MuscleShutdownResponse(Response):
    """Muscle actor -> SimulationController: stopped; ``metrics`` are the last the muscle and
    its brain reported."""

    muscle_uid: str
    metrics: tuple[Metric, ...] | None = None


@dataclass(frozen=True, slots=True)
class BrainShutdownRequest(Request):
    """Muscle -> brain: muscle ``muscle_uid`` is done; the brain stops after its last muscle.

    ``muscle_state``: the muscle's part of the checkpoint (``state/<name>`` and ``rng``
    arrays), saved with the brain's; ``None`` in a test phase, which saves nothing.
    """

    muscle_uid: str
    muscle_state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class BrainShutdownResponse(Response):
    """Brain -> muscle: acknowledged; ``remaining`` muscles still use the brain. ``metrics``
    are what the brain reported since its last answer."""

    brain_uid: str
    remaining: int
    metrics: tuple[Metric, ...] | None = None


@dataclass(frozen=True, slots=True)
class BrainCheckpointRequest(Request):
    """Muscle -> brain: ``episodes`` episodes are done; save the brain's state now, with
    ``muscle_state`` (as in :class:`BrainShutdownRequest`)."""

    muscle_uid: str
    episodes: int
    muscle_state: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class BrainCheckpointResponse(Response):
    """Brain -> muscle: the state was saved at ``path`` (empty: nothing to save). ``metrics``
    are what the brain reported since its last answer."""

    brain_uid: str
    path: str
    metrics: tuple[Metric, ...] | None = None


@dataclass(frozen=True, slots=True)
class BrainSyncRequest(Request):
    """Muscle -> brain, once at set-up: what do I need to act as you would now? The answer is a
    MuscleUpdateResponse (its ``update`` may be None)."""

    muscle_uid: str
