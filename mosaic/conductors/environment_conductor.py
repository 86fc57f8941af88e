"""The EnvironmentConductor: creates and supervises the run's environment actors."""

from __future__ import annotations

from mosaic.conductors.base import Conductor
from mosaic.messages import (
    EnvironmentConductorShutdownRequest,
    EnvironmentConductorShutdownResponse,
    EnvironmentSetupRequest,
    EnvironmentSetupResponse,
)
from mosaic.runtime.component import handles
from mosaic.runtime.placement import PlacementKind


class EnvironmentConductor(Conductor):
    """Places one environment actor (or rollout worker) per EnvironmentSetupRequest and answers
    with its endpoint.

    The environment itself is built by the actor on EnvironmentStartRequest, which the
    simulation controller sends it directly.
    """

    @handles(EnvironmentSetupRequest)
    def _setup(self, request: EnvironmentSetupRequest) -> EnvironmentSetupResponse:
        placement: PlacementKind = request.placement  # type: ignore[assignment]
        kind = "rollout" if request.rollout else "environment"
        placed = self.place(kind, request.environment_uid, placement,
                            reachable_from_process=False)
        return EnvironmentSetupResponse(request.environment_uid, placed.endpoint)

    @handles(EnvironmentConductorShutdownRequest)
    def _shutdown(
        self, request: EnvironmentConductorShutdownRequest
    ) -> EnvironmentConductorShutdownResponse:
        killed = self.reap()
        self.request_stop()
        return EnvironmentConductorShutdownResponse(request.run_uid, killed)
