"""What a component trusts past the handshake: who sends what, what it may import, which seeds.

Components run in a thread here; ``tests/e2e/test_hostile_endpoints.py`` shows the same from
outside a live run's processes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import pytest

from mosaic.actors.brain import BrainActor
from mosaic.actors.environment import EnvironmentActor
from mosaic.core.errors import RemoteError
from mosaic.core.imports import ImportPathError, allow_only, import_object
from mosaic.core.spaces import space_to_dict
from mosaic.messages import (
    ActuatorSpec,
    BrainSetupRequest,
    BrainSetupResponse,
    ComponentSpec,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    MuscleUpdateRequest,
    MuscleUpdateResponse,
    SensorSpec,
)
from mosaic.messages.names import AGENT_CONDUCTOR, SIMULATION_CONTROLLER
from mosaic.runtime.bootstrap import Bootstrap, named_strings, read, write
from mosaic.runtime.placement import ThreadPlaced
from mosaic.transport import Credentials, RequestClient
from mosaic.transport.endpoints import remove_stale_folders

pytestmark = pytest.mark.timeout(60)

CARTPOLE = "gymnasium:CartPole-v1"
_unique = iter(range(10**6))


@pytest.fixture
def environment() -> Iterator[ThreadPlaced]:
    actor = EnvironmentActor("cartpole")
    actor.allowed_imports = frozenset({CARTPOLE})
    placed = ThreadPlaced(actor, "environment", f"inproc://trust-{next(_unique)}")
    yield placed
    assert placed.stop(5)


def client(placed: ThreadPlaced, sender: str | None) -> RequestClient:
    return RequestClient(placed.endpoint, peer=placed.uid, sender=sender)


def test_an_environment_takes_requests_from_its_controller_only(environment):
    controller, stranger = client(environment, SIMULATION_CONTROLLER), client(environment, "x")
    anonymous = client(environment, None)
    try:
        controller.request(EnvironmentStartRequest("cartpole", CARTPOLE, {}, 1),
                           EnvironmentStartResponse, 30)
        for other in (stranger, anonymous):
            with pytest.raises(RemoteError, match="WrongSender: cartpole does not take "
                                                  "EnvironmentResetRequest"):
                other.request(EnvironmentResetRequest(3), EnvironmentResetResponse, 5)
        assert controller.request(EnvironmentResetRequest(3), EnvironmentResetResponse, 5)
    finally:
        for each in (controller, stranger, anonymous):
            each.close()


def test_an_environment_imports_only_what_the_experiment_file_named(environment, tmp_path):
    controller = client(environment, SIMULATION_CONTROLLER)
    marker = tmp_path / "ran"
    try:
        with pytest.raises(RemoteError, match="refusing to import 'subprocess:run'"):
            controller.request(EnvironmentStartRequest(
                "cartpole", "subprocess:run", {"args": ["touch", str(marker)]}, 1),
                EnvironmentStartResponse, 30)
        assert not marker.exists()
        controller.request(EnvironmentStartRequest("cartpole", CARTPOLE, {}, 1),
                           EnvironmentStartResponse, 30)
    finally:
        controller.close()


@pytest.mark.parametrize("seed", [2**64, -1, 2**1000])
def test_a_seed_beyond_64_bits_is_refused_at_once(environment, seed):
    controller = client(environment, SIMULATION_CONTROLLER)
    try:
        controller.request(EnvironmentStartRequest("cartpole", CARTPOLE, {}, 1),
                           EnvironmentStartResponse, 30)
        with pytest.raises(RemoteError, match=r"seed must be within 0 and 2\*\*64 - 1"):
            controller.request(EnvironmentResetRequest(seed), EnvironmentResetResponse, 5)
        assert controller.request(EnvironmentResetRequest(2**64 - 1), EnvironmentResetResponse, 5)
    finally:
        controller.close()


def test_a_brain_serves_the_muscles_of_its_set_up_only():
    env = gymnasium.make("CartPole-v1")
    sensors = (SensorSpec("agent_0", space_to_dict(env.observation_space)),)
    actuators = (ActuatorSpec("agent_0", space_to_dict(env.action_space)),)
    env.close()
    placed = ThreadPlaced(BrainActor("brain"), "brain", f"inproc://trust-{next(_unique)}")
    conductor, muscle, stranger = (client(placed, who) for who in
                                   (AGENT_CONDUCTOR, "agent@env", "agent@elsewhere"))
    try:
        with pytest.raises(RemoteError, match="WrongSender"):  # not set up yet
            muscle.request(MuscleUpdateRequest("agent@env", 1), MuscleUpdateResponse, 5)
        spec = ComponentSpec("tests.fixtures.agents:CountingBrain", {})
        conductor.request(BrainSetupRequest("agent", "brain", spec,
                                            sensors, actuators, 1, "train", ("agent@env",)),
                          BrainSetupResponse, 10)
        muscle.request(MuscleUpdateRequest("agent@env", 1), MuscleUpdateResponse, 5)
        with pytest.raises(RemoteError, match="WrongSender"):
            stranger.request(MuscleUpdateRequest("agent@env", 1), MuscleUpdateResponse, 5)
        with pytest.raises(RemoteError, match="WrongSender"):  # set up once, by its conductor
            conductor.request(BrainSetupRequest("agent", "brain", ComponentSpec("x:y", {}), sensors,
                                                actuators, 1, "train", ("agent@elsewhere",)),
                              BrainSetupResponse, 10)
    finally:
        for each in (conductor, muscle, stranger):
            each.close()
        assert placed.stop(5)


def test_a_bootstrap_crosses_a_pipe_whole():
    sent = Bootstrap(Credentials.fresh(), frozenset({CARTPOLE, "mosaic.agents:RandomMuscle"}))
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=write, args=(write_fd, sent))
    writer.start()
    assert read(read_fd) == sent
    writer.join(5)
    read_fd, write_fd = os.pipe()
    write(write_fd, Bootstrap(None, None))
    assert read(read_fd) == Bootstrap(None, None)


def test_named_strings_are_every_string_of_a_config():
    config = {"uid": "e", "environments": [{"env": CARTPOLE, "params": {"mode": ("a", 1)}}],
              "agents": [{"muscle": {"class": "m:M", "params": {}}}], "seed": 3}
    assert named_strings(config) == {"e", CARTPOLE, "a", "m:M"}


def test_a_component_process_imports_only_what_it_was_allowed():
    try:
        allow_only(frozenset({"os.path:join"}))
        assert import_object("os.path:join") is os.path.join
        with pytest.raises(ImportPathError, match="the experiment file does not name it"):
            import_object("subprocess:run")
    finally:
        allow_only(None)
    assert import_object("os.path:basename") is os.path.basename


def test_ipc_folders_of_processes_that_are_gone_are_removed(tmp_path: Path):
    gone = 2**22 + 12345  # above the kernel's default pid_max: no such process
    stale = tmp_path / f"mosaic-{gone}-abc"
    live = tmp_path / f"mosaic-{os.getpid()}-def"
    other = tmp_path / "mosaic-bench-xyz"
    for folder in (stale, live, other):
        folder.mkdir()
        (folder / "socket").touch()
    assert remove_stale_folders(str(tmp_path)) == [stale]
    assert not stale.exists() and live.exists() and other.exists()
