"""The AgentConductor: creates and supervises each agent's brain and muscles."""

from __future__ import annotations

from typing import Any

from mosaic.conductors.base import Conductor
from mosaic.messages import (
    ActuatorSpec,
    AgentConductorShutdownRequest,
    AgentConductorShutdownResponse,
    AgentSetupRequest,
    AgentSetupResponse,
    BrainSetupRequest,
    BrainSetupResponse,
    MuscleSetupRequest,
    MuscleSetupResponse,
    SensorSpec,
)
from mosaic.runtime.component import handles


def _unique(specs: list[Any]) -> tuple[Any, ...]:
    seen: dict[str, Any] = {}
    for spec in specs:
        seen.setdefault(spec.uid, spec)
    return tuple(seen.values())


class AgentConductor(Conductor):
    """On AgentSetupRequest: places the agent's brain, then one muscle per environment it acts
    in, sets each up, and answers with the muscles' endpoints.

    The brain is reachable from other processes whenever one of its muscles runs in one.
    """

    @handles(AgentSetupRequest)
    def _setup(self, request: AgentSetupRequest) -> AgentSetupResponse:
        config = request.config
        placement = config["placement"]
        timeout = self.ctx.timeouts.setup
        check = self.ctx.check
        sensors: list[SensorSpec] = []
        actuators: list[ActuatorSpec] = []
        for muscle in request.muscles.values():
            sensors.extend(muscle["sensors"])
            actuators.extend(muscle["actuators"])

        brain_uid = request.agent_uid
        brain = self.place("brain", brain_uid, placement["brain"],
                           reachable_from_process=placement["muscle"] == "process")
        client = self.connect(brain.endpoint, peer=f"brain {brain_uid!r}")
        try:
            brain_config = {**config["brain"], "checkpoint": config.get("checkpoint")}
            client.request(BrainSetupRequest(request.agent_uid, brain_uid, brain_config,
                                             _unique(sensors), _unique(actuators), request.seed,
                                             request.mode, tuple(request.muscles)),
                           BrainSetupResponse, timeout, check)
        finally:
            self.disconnect(client)

        muscle_config = {**config["muscle"], "timeout": self.ctx.timeouts.step}
        endpoints: dict[str, str] = {}
        for index, (muscle_uid, muscle) in enumerate(request.muscles.items()):
            # One muscle per agent keeps the checkpoint schedule, so the brain saves once.
            every = config.get("checkpoint_every", 0) if index == 0 else 0
            muscle_config = {**muscle_config, "checkpoint_every": every}
            placed = self.place("muscle", muscle_uid, placement["muscle"], reachable_from_process=False)
            client = self.connect(placed.endpoint, peer=f"muscle {muscle_uid!r}")
            try:
                client.request(MuscleSetupRequest(request.agent_uid, muscle_uid, muscle["environment"],
                                                  muscle_config, tuple(muscle["sensors"]),
                                                  tuple(muscle["actuators"]), muscle["seed"],
                                                  request.mode, brain.endpoint),
                               MuscleSetupResponse, timeout, check)
            finally:
                self.disconnect(client)
            endpoints[muscle_uid] = placed.endpoint
        return AgentSetupResponse(request.agent_uid, endpoints)

    @handles(AgentConductorShutdownRequest)
    def _shutdown(self, request: AgentConductorShutdownRequest) -> AgentConductorShutdownResponse:
        killed = self.reap()
        self.request_stop()
        return AgentConductorShutdownResponse(request.run_uid, killed)
