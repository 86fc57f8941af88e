"""The AgentConductor: creates and supervises each agent's brain and muscles."""

from __future__ import annotations

from typing import Any

from mosaic.conductors.base import ComponentPlan, Conductor
from mosaic.conductors.run_context import RunContext
from mosaic.core.errors import MosaicError
from mosaic.messages import (
    ActuatorSpec,
    AgentConductorShutdownRequest,
    AgentConductorShutdownResponse,
    AgentSetupRequest,
    AgentSetupResponse,
    BrainSetupRequest,
    BrainSetupResponse,
    MusclePlan,
    MuscleSetupRequest,
    MuscleSetupResponse,
    SensorSpec,
)
from mosaic.runtime.component import handles
from mosaic.runtime.setup_wait import SetupWait


def _groups(muscles: dict[str, MusclePlan]) -> tuple[tuple[str, ...], ...]:
    """The muscles of each environment's rollout workers, in the workers' order: the brain
    learns from each group in rounds (see mosaic.actors.rounds)."""
    groups: dict[str, list[str]] = {}
    for muscle_uid, plan in muscles.items():
        if plan.host is not None:
            groups.setdefault(plan.host.group, []).append(muscle_uid)
    return tuple(tuple(members) for members in groups.values())


def _unique(specs: list[Any]) -> tuple[Any, ...]:
    seen: dict[str, Any] = {}
    for spec in specs:
        seen.setdefault(spec.uid, spec)
    return tuple(seen.values())


class AgentConductor(Conductor):
    """On AgentSetupRequest: places the agent's brain and one muscle per environment it acts
    in, all at once (see :meth:`Conductor.place_all`), sets up the brain, then each muscle, and
    answers with the muscles' endpoints. Each of these waits is given ``timeouts.setup``, and
    more while the component is still working (see :mod:`mosaic.runtime.setup_wait`).

    The brain is reachable from other processes whenever one of its muscles runs in one.

    Self-play: an agent with ``self_play`` acts in ``mode="test"`` and its muscles play
    snapshots of the brain of the agent it names, which must have been set up before it (the
    conductor remembers each brain's endpoint); that agent's request lists these muscles as
    its brain's ``observers``.
    """

    def __init__(self, uid: str, ctx: RunContext) -> None:
        super().__init__(uid, ctx)
        #: agent uid -> its brain's endpoint, for self-play agents set up later.
        self._brains: dict[str, str] = {}

    @handles(AgentSetupRequest)
    def _setup(self, request: AgentSetupRequest) -> AgentSetupResponse:
        agent = request.config
        timeout = self.ctx.timeouts.setup
        check = self.ctx.check
        sensors: list[SensorSpec] = []
        actuators: list[ActuatorSpec] = []
        for muscle in request.muscles.values():
            sensors.extend(muscle.sensors)
            actuators.extend(muscle.actuators)

        brain_uid = request.agent_uid
        # A rollout worker hosts its muscle: it is set up there, not placed here.
        placing = [muscle_uid for muscle_uid, plan in request.muscles.items() if plan.host is None]
        hosts = [plan.host for plan in request.muscles.values() if plan.host is not None]
        reachable = ((bool(placing) and agent.muscle_placement != "thread")
                     or any(host.placement != "thread" for host in hosts))
        brain, *placed_muscles = self.place_all([
            ComponentPlan("brain", brain_uid, agent.brain_placement,
                          reachable_from_process=reachable),
            *(ComponentPlan("muscle", muscle_uid, agent.muscle_placement)
              for muscle_uid in placing),
        ])
        placed_by_uid = dict(zip(placing, placed_muscles, strict=True))
        self_play = agent.self_play
        snapshots = None if self_play is None else self._brains.get(self_play.of)
        if self_play is not None and snapshots is None:
            raise MosaicError(f"agent {request.agent_uid!r} plays snapshots of "
                              f"{self_play.of!r}, whose brain is not set up")
        mode = request.mode if self_play is None else "test"
        client = self.connect(brain.endpoint, peer=f"brain {brain_uid!r}")
        try:
            wait = brain.setup_wait(timeout, check, subject=client.peer)
            client.request(BrainSetupRequest(request.agent_uid, brain_uid, agent.brain,
                                             _unique(sensors), _unique(actuators), request.seed,
                                             mode, tuple(request.muscles),
                                             agent.checkpoints, request.observers,
                                             _groups(request.muscles)),
                           BrainSetupResponse, wait.budget, wait.check)
        finally:
            self.disconnect(client)
        self._brains[request.agent_uid] = brain.endpoint

        endpoints: dict[str, str] = {}
        # One after another: a muscle's set-up syncs with the brain (Brain.sync), and the
        # brain sees its muscles in the order of the file whatever the timing.
        for index, (muscle_uid, muscle) in enumerate(request.muscles.items()):
            # One muscle per agent keeps the checkpoint schedule, so the brain saves once.
            every = agent.checkpoint_every if index == 0 else 0
            placed = placed_by_uid.get(muscle_uid)
            if placed is None and muscle.host is not None:
                endpoint, host = muscle.host.endpoint, self.ctx.supervisor.find(muscle.host.worker)
                peer = f"muscle {muscle_uid!r} in rollout worker {muscle.host.worker!r}"
            elif placed is not None:
                endpoint, host, peer = placed.endpoint, placed, f"muscle {muscle_uid!r}"
            else:
                raise MosaicError(f"muscle {muscle_uid!r} was neither placed nor hosted")
            client = self.connect(endpoint, peer=peer)
            try:
                wait = (host.setup_wait(timeout, check, subject=peer) if host is not None
                        else SetupWait(peer, timeout, None, check))
                client.request(MuscleSetupRequest(request.agent_uid, muscle_uid, muscle.environment,
                                                  agent.muscle, muscle.sensors, muscle.actuators,
                                                  muscle.seed, mode, brain.endpoint,
                                                  self.ctx.timeouts.step, every,
                                                  muscle.copies, request.evaluate, self_play,
                                                  snapshots),
                               MuscleSetupResponse, wait.budget, wait.check)
            finally:
                self.disconnect(client)
            endpoints[muscle_uid] = endpoint
        return AgentSetupResponse(request.agent_uid, endpoints)

    @handles(AgentConductorShutdownRequest)
    def _shutdown(self, request: AgentConductorShutdownRequest) -> AgentConductorShutdownResponse:
        killed = self.reap()
        self.request_stop()
        return AgentConductorShutdownResponse(request.run_uid, killed)
