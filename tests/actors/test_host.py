"""The actor host: lifecycle, error replies, and the same behaviour in a thread or a process."""

from __future__ import annotations

import pytest

from mosaic.actors.environment import EnvironmentActor
from mosaic.actors.kinds import component_path
from mosaic.core.errors import RemoteError
from mosaic.messages import (
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentShutdownRequest,
    EnvironmentShutdownResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    PingRequest,
    PongResponse,
)
from mosaic.messages.names import SIMULATION_CONTROLLER
from mosaic.runtime.bootstrap import Bootstrap
from mosaic.runtime.placement import ProcessPlaced, ThreadPlaced
from mosaic.transport import Credentials, RequestClient

ENVIRONMENT = component_path("environment")

CREDENTIALS = Credentials.fresh()

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["thread", "process"])
def environment(request, tmp_path, process_tag):
    if request.param == "thread":
        placed = ThreadPlaced(EnvironmentActor("env"), "environment", f"inproc://host-{id(request)}")
    else:
        placed = ProcessPlaced("environment", "env", f"ipc://{tmp_path}/env", component=ENVIRONMENT,
                               trust=Bootstrap(CREDENTIALS, None)).wait_bound(30)
    client = RequestClient(placed.endpoint, peer="env", credentials=CREDENTIALS,
                           sender=SIMULATION_CONTROLLER)
    yield placed, client
    client.close()
    placed.stop(5)
    assert not placed.alive()


def test_an_environment_actor_serves_its_lifecycle(environment):
    placed, client = environment
    started = client.request(EnvironmentStartRequest("env", "gymnasium:CartPole-v1", {}, 1),
                             EnvironmentStartResponse, 30)
    assert [s.uid for s in started.sensors] == ["agent_0"]
    reset = client.request(EnvironmentResetRequest(3), EnvironmentResetResponse, 5)
    again = client.request(EnvironmentResetRequest(3), EnvironmentResetResponse, 5)
    assert (reset.observations["agent_0"] == again.observations["agent_0"]).all()
    update = client.request(EnvironmentUpdateRequest({"agent_0": 1}), EnvironmentUpdateResponse, 5)
    assert update.rewards == {"agent_0": 1.0}
    client.request(EnvironmentShutdownRequest("env"), EnvironmentShutdownResponse, 5)
    assert placed.wait(10)
    assert placed.exit_cause() in ("stopped", "exit code 0")


def test_failures_are_answered_and_the_actor_keeps_running(environment):
    placed, client = environment
    with pytest.raises(RemoteError, match="was not started"):
        client.request(EnvironmentResetRequest(None), EnvironmentResetResponse, 5)
    with pytest.raises(RemoteError, match="UnhandledMessage"):
        client.request(PingRequest(), PongResponse, 5)
    with pytest.raises(RemoteError, match=r"NameNotFound|No registered env"):
        client.request(EnvironmentStartRequest("env", "gymnasium:NoSuchEnv-v0", {}, 1),
                       EnvironmentStartResponse, 30)
    assert placed.alive()
    client.request(EnvironmentStartRequest("env", "gymnasium:CartPole-v1", {}, 1),
                   EnvironmentStartResponse, 30)


def test_a_process_that_cannot_start_reports_why(tmp_path, process_tag):
    placed = ProcessPlaced("environment", "x", f"ipc://{tmp_path}/x",
                           component="mosaic.actors.environment:NoSuchActor")
    with pytest.raises(Exception, match="is not a component class"):
        placed.wait_bound(30)
    assert not placed.alive()
