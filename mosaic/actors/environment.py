"""The environment actor: steps one environment for the simulation controller."""

from __future__ import annotations

from typing import Any

import numpy as np

from mosaic.core.errors import MosaicError
from mosaic.core.spaces import space_to_dict
from mosaic.environments import EnvironmentAdapter
from mosaic.environments.answers import reset_answer, update_answer
from mosaic.environments.factory import make_any
from mosaic.environments.info import InfoFilter
from mosaic.environments.vector import VectorAdapter
from mosaic.environments.video import EpisodeVideo, episode_video
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
    VectorResetRequest,
    VectorStepRequest,
    VectorStepResponse,
)
from mosaic.messages.names import SIMULATION_CONTROLLER
from mosaic.runtime.component import Component, handles


class EnvironmentActor(Component):
    """Owns one environment instance, or one vector of copies; answers start, reset, update
    and shutdown requests (and the vector's reset and step).

    It takes them from the simulation controller only. Of the environment's ``info`` it sends
    what the codec carries (:mod:`mosaic.environments.info`), warning once per key it drops.
    """

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self._env: EnvironmentAdapter | VectorAdapter | None = None
        self._info = InfoFilter(uid)
        self._video: EpisodeVideo | None = None

    @property
    def env(self) -> EnvironmentAdapter:
        if not isinstance(self._env, EnvironmentAdapter):
            raise MosaicError(f"environment {self.uid!r} was not started as one environment")
        return self._env

    @property
    def vector(self) -> VectorAdapter:
        if not isinstance(self._env, VectorAdapter):
            raise MosaicError(f"environment {self.uid!r} was not started with copies")
        return self._env

    def accepts(self, message: Message, sender: str | None) -> bool:
        return sender == SIMULATION_CONTROLLER

    @handles(EnvironmentStartRequest)
    def _start(self, request: EnvironmentStartRequest) -> EnvironmentStartResponse:
        self.check_import(request.env)
        for wrapper in request.wrappers:
            self.check_import(wrapper.class_path)
        env = make_any(request.env, request.params, request.copies, request.vector_mode,
                       request.max_steps, request.wrappers, request.video,
                       request.environment_uid, request.seeding)
        self._env = env
        self._video = episode_video(env)
        if isinstance(env, VectorAdapter):
            env.info_filter = self._info
        sensors = tuple(SensorSpec(slot, space_to_dict(obs))
                        for slot, (obs, _) in env.slots.items())
        actuators = tuple(ActuatorSpec(slot, space_to_dict(act))
                          for slot, (_, act) in env.slots.items())
        if isinstance(env, VectorAdapter):
            return EnvironmentStartResponse(self.uid, sensors, actuators, env.copies,
                                            env.reseeds)
        return EnvironmentStartResponse(self.uid, sensors, actuators)

    @handles(EnvironmentResetRequest)
    def _reset(self, request: EnvironmentResetRequest) -> EnvironmentResetResponse:
        if self._video is not None:
            self._video.next_episode(request.episode)
        return reset_answer(self.env, request, self._info)

    @handles(EnvironmentUpdateRequest)
    def _update(self, request: EnvironmentUpdateRequest) -> EnvironmentUpdateResponse:
        return update_answer(self.env, request, self._info)

    @handles(VectorResetRequest)
    def _vector_reset(self, request: VectorResetRequest) -> VectorStepResponse:
        return VectorStepResponse(self.vector.reset(_seeds(request.seeds)))

    @handles(VectorStepRequest)
    def _vector_step(self, request: VectorStepRequest) -> VectorStepResponse:
        return VectorStepResponse(self.vector.step(request.actions, _seeds(request.next_seeds)))

    @handles(EnvironmentShutdownRequest)
    def _shutdown(self, request: EnvironmentShutdownRequest) -> EnvironmentShutdownResponse:
        self.request_stop()
        return EnvironmentShutdownResponse(self.uid)

    def on_shutdown(self) -> None:
        if self._env is not None:
            self._env.close()


def _seeds(seeds: Any) -> np.ndarray | None:
    """The copies' seeds from the wire: None, or unsigned 64-bit integers, one per copy."""
    if seeds is None:
        return None
    if not (isinstance(seeds, np.ndarray) and seeds.dtype == np.uint64 and seeds.ndim == 1):
        raise MosaicError("seeds must be a one-dimensional uint64 array")
    return seeds
