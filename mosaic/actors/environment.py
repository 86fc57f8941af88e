"""The environment actor: steps one environment for the simulation controller."""

from __future__ import annotations

from mosaic.core.errors import MosaicError
from mosaic.core.seeding import check_seed
from mosaic.core.spaces import space_to_dict
from mosaic.environments import EnvironmentAdapter, make_environment
from mosaic.messages import (
    ActuatorSpec,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentShutdownRequest,
    EnvironmentShutdownResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    Message,
    SensorSpec,
)
from mosaic.messages.names import SIMULATION_CONTROLLER
from mosaic.runtime.component import Component, handles


class EnvironmentActor(Component):
    """Owns one environment instance; answers start, reset, update and shutdown requests.

    It takes them from the simulation controller only.
    """

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self._env: EnvironmentAdapter | None = None

    @property
    def env(self) -> EnvironmentAdapter:
        if self._env is None:
            raise MosaicError(f"environment {self.uid!r} was not started")
        return self._env

    def accepts(self, message: Message, sender: str | None) -> bool:
        return sender == SIMULATION_CONTROLLER

    @handles(EnvironmentStartRequest)
    def _start(self, request: EnvironmentStartRequest) -> EnvironmentStartResponse:
        self.check_import(request.env)
        self._env = make_environment(request.env, request.params)
        sensors = tuple(SensorSpec(slot, space_to_dict(obs))
                        for slot, (obs, _) in self._env.slots.items())
        actuators = tuple(ActuatorSpec(slot, space_to_dict(act))
                          for slot, (_, act) in self._env.slots.items())
        return EnvironmentStartResponse(self.uid, sensors, actuators)

    @handles(EnvironmentResetRequest)
    def _reset(self, request: EnvironmentResetRequest) -> EnvironmentResetResponse:
        outcome = self.env.reset(check_seed(request.seed))
        return EnvironmentResetResponse(outcome.observations, outcome.acting, outcome.legal_actions)

    @handles(EnvironmentUpdateRequest)
    def _update(self, request: EnvironmentUpdateRequest) -> EnvironmentUpdateResponse:
        o = self.env.step(request.actions)
        return EnvironmentUpdateResponse(o.observations, o.rewards, o.terminated, o.truncated,
                                         o.acting, o.legal_actions)

    @handles(EnvironmentShutdownRequest)
    def _shutdown(self, request: EnvironmentShutdownRequest) -> EnvironmentShutdownResponse:
        self.request_stop()
        return EnvironmentShutdownResponse(self.uid)

    def on_shutdown(self) -> None:
        if self._env is not None:
            self._env.close()
