"""The rollout worker without a run around it: its handlers called directly, as its host calls
them, with a real environment and muscle. What it keeps for the controller is bounded."""

from __future__ import annotations

from typing import cast

from mosaic.messages import (
    ComponentSpec,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    MuscleSetupRequest,
    RolloutCollectRequest,
    RolloutCollectResponse,
    RolloutRunRequest,
    RolloutStopRequest,
)
from mosaic.messages.codec import pack
from mosaic.orchestration.rollout_worker import MAX_UNCOLLECTED_BYTES, RolloutWorker
from mosaic.runtime.component import handle_hosted


def _worker(env: str, params: dict[str, int], copies: int, episodes: int,
            steps: bool) -> RolloutWorker:
    worker = RolloutWorker("env/rollout-0")
    started = cast(EnvironmentStartResponse, handle_hosted(
        worker, EnvironmentStartRequest("env", env, params, 1, copies)))
    handle_hosted(worker, MuscleSetupRequest(
        "random", "random@env/rollout-0", "env", ComponentSpec("mosaic.agents:RandomMuscle", {}),
        started.sensors, started.actuators, 5, "train", "", 10.0, 0, copies, False, None, ""))
    handle_hosted(worker, RolloutRunRequest("env", 1, 3, 0, 0, episodes, None, "random", steps,
                                            True))
    return worker


def _collect(worker: RolloutWorker) -> RolloutCollectResponse:
    return cast(RolloutCollectResponse, handle_hosted(worker, RolloutCollectRequest(worker.uid)))


def test_large_observations_pause_the_worker_until_they_are_collected() -> None:
    worker = _worker("tests.fixtures.envs:LargeObservations", {"size": 1 << 20, "length": 50},
                     copies=2, episodes=1000, steps=True)
    try:
        chunks = 0
        while worker.has_work():
            worker.do_work()
            chunks += 1
            assert chunks < 1000
        # Paused at the bound (one chunk of work past it at most), well within a frame.
        answer = _collect(worker)
        size = len(pack(answer.records))
        assert MAX_UNCOLLECTED_BYTES <= size < 4 * MAX_UNCOLLECTED_BYTES
        assert worker.has_work()  # collected: it steps on
    finally:
        handle_hosted(worker, RolloutStopRequest(worker.uid))
        worker.on_shutdown()


def test_a_worker_reports_its_episodes_once_and_its_digest_when_done() -> None:
    worker = _worker("gymnasium:CartPole-v1", {}, copies=3, episodes=12, steps=False)
    try:
        returns, steps, episodes = [], 0, []
        answer = _collect(worker)
        while not answer.finished:
            worker.do_work()
            answer = _collect(worker)
            returns.extend(answer.returns)
            steps += answer.steps
            episodes += [args for kind, args in answer.records if kind == "episode"]
        assert len(answer.digest) == 32 and not worker.has_work()
        # Each episode once, with its copy; the episodes past the 12th of the last step too.
        assert len(returns) == len(episodes) >= 12 and steps > 0
        assert {args[9] for args in episodes} == {0, 1, 2}
        assert [args[4] for args in episodes] == returns
    finally:
        handle_hosted(worker, RolloutStopRequest(worker.uid))
        worker.on_shutdown()
