"""The EnvironmentConductor on its own, in the test's process, in every placement of its actor.

The conductor is given the context a run gives it (``RunContext.for_run``), is driven by a client
that speaks as the simulation controller, and must place, register and reap what it starts:
stopped in time when the part answers, killed and reported when it does not.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.conductors.environment_conductor import EnvironmentConductor
from mosaic.conductors.run_context import RunContext
from mosaic.experiment import load_experiment
from mosaic.messages import (
    EnvironmentConductorShutdownRequest,
    EnvironmentConductorShutdownResponse,
    EnvironmentSetupRequest,
    EnvironmentSetupResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    names,
)
from mosaic.runtime.placement import ProcessPlaced, ThreadPlaced
from mosaic.transport import RequestClient
from tests.e2e.cli import cartpole, write_experiment
from tests.orchestration.placements import Placement

pytestmark = pytest.mark.timeout(60)

RUN = "run-1"


@contextlib.contextmanager
def environment_conductor(kind: str, tmp_path: Path) -> Iterator[tuple[RunContext, RequestClient]]:
    """A run's context and a client, as the simulation controller, of its environment conductor,
    for a run whose environment is placed in a ``kind`` (thread or process)."""
    text = cartpole(placement=kind, timeouts="{shutdown: 1}")
    experiment = load_experiment(write_experiment(tmp_path, text))
    ctx = RunContext.for_run(experiment.uid, RUN, 1, 7, experiment.run_config(0), None)
    placed = ThreadPlaced(EnvironmentConductor(names.ENVIRONMENT_CONDUCTOR, ctx), "orchestration",
                          ctx.endpoints.inproc(names.ENVIRONMENT_CONDUCTOR))
    client = RequestClient(placed.endpoint, peer="environment conductor",
                           sender=names.SIMULATION_CONTROLLER)
    try:
        yield ctx, client
    finally:
        client.close()
        placed.stop(5)
        for part in ctx.supervisor.placed():
            part.kill()
        ctx.endpoints.cleanup()  # the run's ipc folder, as the executor removes it
        assert not placed.alive()


def set_up_environment(ctx: RunContext, client: RequestClient, placement: str) -> None:
    setup = client.request(EnvironmentSetupRequest(RUN, "cartpole", placement),
                           EnvironmentSetupResponse, 30)
    environment = RequestClient(setup.endpoint, peer="environment", credentials=ctx.credentials,
                                sender=names.SIMULATION_CONTROLLER)
    try:
        started = environment.request(
            EnvironmentStartRequest("cartpole", "gymnasium:CartPole-v1", {}, 1),
            EnvironmentStartResponse, 30)
    finally:
        environment.close()
    assert [sensor.uid for sensor in started.sensors] == ["agent_0"]


def shut_down(client: RequestClient) -> EnvironmentConductorShutdownResponse:
    return client.request(EnvironmentConductorShutdownRequest(RUN),
                          EnvironmentConductorShutdownResponse, 30)


@pytest.fixture
def conductor(placement: Placement, tmp_path: Path) -> Iterator[tuple[RunContext, RequestClient]]:
    with environment_conductor(placement.kind, tmp_path) as parts:
        yield parts


def test_it_places_registers_and_reaps_an_environment(
        placement: Placement, conductor: tuple[RunContext, RequestClient]) -> None:
    ctx, client = conductor
    set_up_environment(ctx, client, placement.kind)
    [part] = ctx.supervisor.placed()
    assert part.describe() == f"environment 'cartpole' ({placement.kind})"
    assert part.alive()
    assert shut_down(client).killed == ()
    assert not part.alive()
    ctx.supervisor.check()  # reaped on purpose: not a failure of the run


def test_a_process_that_does_not_stop_is_killed_and_reported(tmp_path: Path,
                                                             process_tag: str) -> None:
    # Only a process can be frozen from outside (SIGSTOP): a thread cannot be killed at all.
    with environment_conductor("process", tmp_path) as (ctx, client):
        set_up_environment(ctx, client, "process")
        [part] = ctx.supervisor.placed()
        assert isinstance(part, ProcessPlaced)
        os.kill(part.pid, signal.SIGSTOP)
        try:
            assert shut_down(client).killed == ("environment 'cartpole' (process)",)
            assert not part.alive()
        finally:
            if part.alive():
                os.kill(part.pid, signal.SIGKILL)
