"""The brain actor: runs a user's Brain for the muscles of one agent."""

from __future__ import annotations

from mosaic.actors.component import Component, handles
from mosaic.actors.slots import slots_from_specs
from mosaic.agents import Brain, BrainContext
from mosaic.errors import MosaicError
from mosaic.experiment.imports import import_object
from mosaic.messages import (
    BrainSetupRequest,
    BrainSetupResponse,
    BrainShutdownRequest,
    BrainShutdownResponse,
    MuscleUpdateRequest,
    MuscleUpdateResponse,
)


class BrainActor(Component):
    """Hosts one :class:`~mosaic.agents.Brain`; stops once every muscle it serves has shut down."""

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self._brain: Brain | None = None
        self._muscles: set[str] = set()

    @handles(BrainSetupRequest)
    def _setup(self, request: BrainSetupRequest) -> BrainSetupResponse:
        cls = import_object(request.brain["class"])
        if not (isinstance(cls, type) and issubclass(cls, Brain)):
            raise MosaicError(f"{request.brain['class']} is not a mosaic.agents.Brain subclass")
        context = BrainContext(agent=request.agent_uid, brain=self.uid,
                               slots=slots_from_specs(request.sensors, request.actuators),
                               seed=request.seed, mode=request.mode,  # type: ignore[arg-type]
                               params=dict(request.brain.get("params") or {}))
        brain = cls()
        brain.setup(context)
        self._brain = brain
        self._muscles = set(request.muscles)
        return BrainSetupResponse(self.uid)

    @handles(MuscleUpdateRequest)
    def _learn(self, request: MuscleUpdateRequest) -> MuscleUpdateResponse:
        if self._brain is None:
            raise MosaicError(f"brain {self.uid!r} was not set up")
        return MuscleUpdateResponse(self._brain.learn(request.muscle_uid, request.experience))

    @handles(BrainShutdownRequest)
    def _shutdown(self, request: BrainShutdownRequest) -> BrainShutdownResponse:
        self._muscles.discard(request.muscle_uid)
        if not self._muscles:
            self.request_stop()
        return BrainShutdownResponse(self.uid, len(self._muscles))

    def on_shutdown(self) -> None:
        if self._brain is not None:
            self._brain.teardown()
