"""Every kind of component, hosted in a thread as a run hosts it, under the hostile set.

An inproc endpoint is out of reach of other processes, so in a thread placement this is no
attack surface; but a component must not depend on its peers' good manners, whatever its
placement. Each kind is brought into a working state, sent every hostile message of
:mod:`tests.hostile` (the oversized one included: over inproc it reaches mosaic), and must then
still be alive, in the same state, and answer a valid request as it did before, with each kind of
rejection logged. The transport-level test with a bare server is in tests/transport; the same
set against a live run's process-placed components is in tests/e2e/test_hostile_endpoints.py.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

from mosaic.actors.brain import BrainActor
from mosaic.actors.environment import EnvironmentActor
from mosaic.actors.muscle import MuscleActor
from mosaic.conductors.agent_conductor import AgentConductor
from mosaic.conductors.environment_conductor import EnvironmentConductor
from mosaic.conductors.run_context import RunContext
from mosaic.core.spaces import space_to_dict
from mosaic.messages import (
    ActuatorSpec,
    AgentConductorShutdownRequest,
    AgentConductorShutdownResponse,
    AgentUpdateRequest,
    AgentUpdateResponse,
    BrainCheckpointRequest,
    BrainCheckpointResponse,
    BrainSetupRequest,
    BrainSetupResponse,
    CheckpointPaths,
    ComponentSpec,
    EnvironmentConductorShutdownRequest,
    EnvironmentConductorShutdownResponse,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    ErrorResponse,
    ExperimentRunShutdownRequest,
    ExperimentShutdownResponse,
    MuscleSetupRequest,
    MuscleSetupResponse,
    MuscleUpdateRequest,
    MuscleUpdateResponse,
    RunConfig,
    RunTimeouts,
    SensorSpec,
    SimulationStopRequest,
    SimulationStopResponse,
)
from mosaic.messages.names import AGENT_CONDUCTOR, SIMULATION_CONTROLLER
from mosaic.orchestration.run_governor import RunGovernor
from mosaic.orchestration.simulation_controller import SimulationController
from mosaic.runtime.component import Component
from mosaic.runtime.placement import ThreadPlaced
from mosaic.transport import EndpointAllocator, RequestClient
from tests.hostile import hostile_messages, send_and_collect

pytestmark = pytest.mark.timeout(60)

_CARTPOLE = gymnasium.make("CartPole-v1")
SENSORS = (SensorSpec("agent_0", space_to_dict(_CARTPOLE.observation_space)),)
ACTUATORS = (ActuatorSpec("agent_0", space_to_dict(_CARTPOLE.action_space)),)
_CARTPOLE.close()
OBSERVATION = {"agent_0": np.zeros(4, np.float32)}

#: Every kind of rejection the hostile set provokes over inproc.
REJECTIONS = {"MalformedFrame", "MessageFieldError", "UnknownMessageType",
              "ProtocolVersionMismatch", "CodecError", "FrameTooLarge"}

_unique = itertools.count()


@dataclass(frozen=True)
class Case:
    """How to bring one kind into a working state, and how to tell it still works after.

    ``prepare`` returns what ``probe`` compares against: the probe asks the same as the
    preparation did, or the next thing a run would ask, and checks the answer.
    """

    make: Callable[[RunContext, Path], Component]
    prepare: Callable[[RequestClient, Path], Any]
    probe: Callable[[RequestClient, Path, Any], None]
    #: Who may send the preparation, and the probe (see Component.accepts).
    setup_sender: str | None = None
    probe_sender: str | None = None


def _environment_prepare(client: RequestClient, folder: Path) -> Any:
    client.request(EnvironmentStartRequest("environment", "gymnasium:CartPole-v1", {}, 1),
                   EnvironmentStartResponse, 30)
    return client.request(EnvironmentResetRequest(3), EnvironmentResetResponse, 5)


def _environment_probe(client: RequestClient, folder: Path, before: Any) -> None:
    again = client.request(EnvironmentResetRequest(3), EnvironmentResetResponse, 5)
    assert np.array_equal(again.observations["agent_0"], before.observations["agent_0"])
    stepped = client.request(EnvironmentUpdateRequest({"agent_0": 1}), EnvironmentUpdateResponse, 5)
    assert stepped.rewards == {"agent_0": 1.0}


def _muscle_prepare(client: RequestClient, folder: Path) -> Any:
    return client.request(MuscleSetupRequest("agent", "muscle", "environment",
                                             ComponentSpec("mosaic.agents:RandomMuscle", {}),
                                             SENSORS, ACTUATORS, 5, "train", None),
                          MuscleSetupResponse, 10)


def _muscle_probe(client: RequestClient, folder: Path, before: Any) -> None:
    answer = client.request(AgentUpdateRequest(0, OBSERVATION, {}, False, False, ("agent_0",),
                                               {}), AgentUpdateResponse, 5)
    assert answer.actions["agent_0"] in (0, 1)


def _brain_prepare(client: RequestClient, folder: Path) -> Any:
    brain = ComponentSpec("tests.fixtures.agents:CountingBrain", {})
    return client.request(BrainSetupRequest("agent", "brain", brain, SENSORS, ACTUATORS, 5,
                                            "train", ("muscle",),
                                            CheckpointPaths(str(folder / "brain.npz"))),
                          BrainSetupResponse, 10)


def _brain_probe(client: RequestClient, folder: Path, before: Any) -> None:
    client.request(MuscleUpdateRequest("muscle", 1), MuscleUpdateResponse, 5)
    saved = client.request(BrainCheckpointRequest("muscle", 1), BrainCheckpointResponse, 5)
    with np.load(saved.path, allow_pickle=False) as state:
        # The probe's experience, and nothing hostile.
        assert int(state["brain/state/count"][0]) == 1


def _nothing(client: RequestClient, folder: Path) -> None:
    return None


def _answers(request: Any, expect: type, check: Callable[[Any], bool]) -> Callable[..., None]:
    def probe(client: RequestClient, folder: Path, before: Any) -> None:
        assert check(client.request(request, expect, 10))
    return probe


CASES = {
    "environment": Case(lambda ctx, folder: EnvironmentActor("environment"), _environment_prepare,
                        _environment_probe, SIMULATION_CONTROLLER, SIMULATION_CONTROLLER),
    "muscle": Case(lambda ctx, folder: MuscleActor("muscle"), _muscle_prepare, _muscle_probe,
                   AGENT_CONDUCTOR, SIMULATION_CONTROLLER),
    "brain": Case(lambda ctx, folder: BrainActor("brain"), _brain_prepare, _brain_probe,
                  AGENT_CONDUCTOR, "muscle"),
    "environment-conductor": Case(
        lambda ctx, folder: EnvironmentConductor("environment-conductor", ctx), _nothing,
        _answers(EnvironmentConductorShutdownRequest("r"), EnvironmentConductorShutdownResponse,
                 lambda answer: answer.killed == ())),
    "agent-conductor": Case(
        lambda ctx, folder: AgentConductor("agent-conductor", ctx), _nothing,
        _answers(AgentConductorShutdownRequest("r"), AgentConductorShutdownResponse,
                 lambda answer: answer.killed == ())),
    "simulation-controller": Case(
        lambda ctx, folder: SimulationController("simulation-controller", ctx), _nothing,
        _answers(SimulationStopRequest("r", "finished"), SimulationStopResponse,
                 lambda answer: (answer.episodes, answer.steps) == (0, 0))),
    "run-governor": Case(
        lambda ctx, folder: RunGovernor("run-governor", ctx), _nothing,
        _answers(ExperimentRunShutdownRequest("r", "cancelled"), ExperimentShutdownResponse,
                 lambda answer: answer.status == "cancelled")),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_component_rejects_hostile_messages_and_keeps_working(kind, tmp_path, caplog):
    case = CASES[kind]
    config = RunConfig(experiment="hostile", run_index=0, phase="main", phase_index=0, phases=1,
                       seed=1, experiment_seed=1, episodes=1, max_steps=None, termination=None,
                       mode="train", transport="ipc", host="127.0.0.1", cpu_affinity="none",
                       record_steps="episodes", store_path="", timeouts=RunTimeouts(),
                       default_agent=None, environments=(), agents=())
    ctx = RunContext("hostile", "r", 0, 1, config, EndpointAllocator(f"hostile-{next(_unique)}"),
                     None)
    component = case.make(ctx, tmp_path)
    placed = ThreadPlaced(component, kind, ctx.endpoints.inproc(kind))
    # One client per sender: a router hears one connection per routing id.
    client = RequestClient(placed.endpoint, peer=kind, sender=case.probe_sender)
    setup = client if case.setup_sender == case.probe_sender else RequestClient(
        placed.endpoint, peer=kind, sender=case.setup_sender)
    items = hostile_messages()
    try:
        before = case.prepare(setup, tmp_path)
        with caplog.at_level(logging.ERROR):
            answers = send_and_collect(placed.endpoint, items)
            assert len(answers) == sum(item.answered_on(placed.endpoint) for item in items)
            assert all(isinstance(answer, ErrorResponse) for answer in answers), answers
            assert placed.alive()
            case.probe(client, tmp_path, before)
    finally:
        setup.close()
        client.close()
        assert placed.stop(10)
    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith(kind + ":")]
    rejected = {m.split(": ")[2] for m in messages if "rejected a malformed message" in m}
    assert rejected == REJECTIONS
    assert f"{kind}: no handler for PongResponse" in messages
    # Closing the server summarised what the log limit held back.
    assert any("more malformed messages rejected" in m for m in messages)
