"""A rollout worker without a run around it: its handlers called directly, as its host calls
them, with a real environment and a random muscle (the worker's tests and
benchmarks/rollout_loop.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

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
from mosaic.orchestration.rollout_worker import RolloutWorker
from mosaic.runtime.component import handle_hosted


@contextmanager
def hosted_worker(env: str, params: dict[str, Any], copies: int, episodes: int, steps: bool,
                  seeding: str = "episode") -> Iterator[RolloutWorker]:
    """A worker set up and running ``episodes`` over ``copies`` copies of ``env`` (``steps``:
    whether it keeps step rows); stopped and shut down on exit."""
    worker = RolloutWorker("env/rollout-0")
    started = cast(EnvironmentStartResponse, handle_hosted(
        worker, EnvironmentStartRequest("env", env, params, 1, copies, seeding=seeding)))
    handle_hosted(worker, MuscleSetupRequest(
        "random", "random@env/rollout-0", "env", ComponentSpec("mosaic.agents:RandomMuscle", {}),
        started.sensors, started.actuators, 5, "train", "", 10.0, 0, copies, False, None, ""))
    handle_hosted(worker, RolloutRunRequest("env", 1, 3, 0, 0, episodes, None, "random", steps,
                                            True))
    try:
        yield worker
    finally:
        handle_hosted(worker, RolloutStopRequest(worker.uid))
        worker.on_shutdown()

def collect(worker: RolloutWorker) -> RolloutCollectResponse:
    """What the worker kept since the last collect."""
    return cast(RolloutCollectResponse, handle_hosted(worker, RolloutCollectRequest(worker.uid)))
