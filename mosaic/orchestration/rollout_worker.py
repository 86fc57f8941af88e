"""The rollout worker: an environment's copies, the muscle that acts for them and a step core,
stepped where they are, with no message per step or per batch.

An environment entry with ``rollouts: M`` gets M rollout workers, each placed like an
environment (a thread, a process, a Ray node) and holding ``copies:`` copies of it. The
simulation controller starts each one as it starts an environment
(:class:`~mosaic.messages.EnvironmentStartRequest`); the agent conductor sets up its muscle
(:class:`~mosaic.messages.MuscleSetupRequest`), which talks to its brain over the brain's socket
as any muscle does; then, on :class:`~mosaic.messages.RolloutRunRequest`, the worker steps its
copies through the step core (:class:`~mosaic.stepping.copy_episodes.CopyEpisodes`), calling
the environment and the muscle in its own thread, until its share of the episodes has ended. In a
run that continues a saved one, its copies start at their next episodes in the saved position;
once done, it tells where they stand, for the run after.

What the step core records (step rows, episode records, metrics) waits in the worker until the
controller collects it (:class:`~mosaic.messages.RolloutCollectRequest`, a few times a second);
past :data:`MAX_UNCOLLECTED` records the worker pauses, so a store that falls behind slows it.
Its experience goes to the brain as every muscle's does, and the brain learns from the workers
of one environment in rounds (:mod:`mosaic.actors.rounds`): with the same file and seed, the
same trajectories whatever the placement and the timing.

Once its episodes are done the muscle shuts down at once (its brain learns no more from it,
and saves the checkpoint when the last muscle has), and the worker idles until it is stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from mosaic.actors.environment import EnvironmentActor
from mosaic.actors.muscle import MuscleActor
from mosaic.core.errors import MosaicError
from mosaic.messages import (
    AgentBatchRequest,
    AgentBatchResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    Message,
    MuscleSetupRequest,
    MuscleSetupResponse,
    MuscleShutdownRequest,
    MuscleShutdownResponse,
    Request,
    Response,
    RolloutCollectRequest,
    RolloutCollectResponse,
    RolloutRunRequest,
    RolloutRunResponse,
    RolloutStopRequest,
)
from mosaic.messages.copying import detached
from mosaic.messages.names import AGENT_CONDUCTOR, SIMULATION_CONTROLLER
from mosaic.runtime.component import Component, handle_hosted, handles
from mosaic.stepping.copy_episodes import CopyEpisodes
from mosaic.stepping.episodes import Recording, Schedule
from mosaic.stepping.ledger import EpisodeRecorder, Ledger
from mosaic.stepping.progress import Progress
from mosaic.stepping.termination import Termination

__all__ = ["MAX_UNCOLLECTED", "RolloutWorker"]

log = logging.getLogger(__name__)

#: How long one chunk of stepping may run before control messages are looked at.
WORK_CHUNK_S = 0.005
#: How many records (step rows count one each) wait for the controller before the worker
#: pauses until they are collected.
MAX_UNCOLLECTED = 50_000
#: How many bytes of observations and actions may wait for the controller before the worker
#: pauses: a collect's answer stays far below the codec's frame limit with images too.
MAX_UNCOLLECTED_BYTES = 16 * 1024 * 1024


class RolloutWorker(Component):
    """One rollout worker (see the module's docstring). It hosts an
    :class:`~mosaic.actors.environment.EnvironmentActor` and a
    :class:`~mosaic.actors.muscle.MuscleActor` and calls their handlers in its own thread."""

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self._environment = EnvironmentActor(uid)
        self._muscle: MuscleActor | None = None
        self._agent = ""
        self._core: CopyEpisodes | None = None
        self._ledger: _WorkerLedger | None = None
        self._records: list[tuple[str, Any]] = []
        self._uncollected = 0
        self._uncollected_bytes = 0
        self._steps_reported = 0
        self._muscle_done = False
        #: Why the worker stopped stepping before its episodes were done (None: it did not).
        self.failure: str | None = None

    def accepts(self, message: Message, sender: str | None) -> bool:
        if isinstance(message, MuscleSetupRequest):
            return sender == AGENT_CONDUCTOR
        return sender == SIMULATION_CONTROLLER

    def on_setup(self) -> None:
        environment = self._environment
        environment.credentials = self.credentials
        environment.allowed_imports = self.allowed_imports

    # -- set-up ---------------------------------------------------------------------------
    @handles(EnvironmentStartRequest)
    def _start(self, request: EnvironmentStartRequest) -> EnvironmentStartResponse:
        return cast(EnvironmentStartResponse, handle_hosted(self._environment, request))

    @handles(MuscleSetupRequest)
    def _set_up_muscle(self, request: MuscleSetupRequest) -> MuscleSetupResponse:
        if self._muscle is not None:
            raise MosaicError(f"rollout worker {self.uid!r} hosts one muscle, which is set up")
        if not request.copies:
            raise MosaicError(f"rollout worker {self.uid!r} steps copies: its muscle must act "
                              "on them")
        muscle = MuscleActor(request.muscle_uid)
        muscle.credentials = self.credentials
        muscle.allowed_imports = self.allowed_imports
        muscle._stop_pending = self._stop_pending  # its waits on the brain end with this worker
        self._muscle = muscle
        self._agent = request.agent_uid
        return cast(MuscleSetupResponse, handle_hosted(muscle, request))

    @handles(RolloutRunRequest)
    def _run(self, request: RolloutRunRequest) -> RolloutRunResponse:
        muscle = self._muscle
        if muscle is None:
            raise MosaicError(f"rollout worker {self.uid!r} has no muscle to step with")
        vector = self._environment.vector
        # The worker's own book: its digest chain, and counters the controller adds up; a
        # termination condition is the controller's to check, over every worker.
        self._ledger = ledger = _WorkerLedger(request.run_id, self._hand_over,
                                              self._keep_episode, self.uid)
        schedule = Schedule(request.seed, request.episodes, request.max_steps)
        recording = Recording(request.steps, request.episodes_recorded, request.store_info)
        slot = next(iter(vector.slots))
        self._core = CopyEpisodes(request.index, request.environment_uid,
                                  {slot: request.agent_uid}, ledger, schedule, recording,
                                  self._ask, slot, vector.copies, vector.reseeds,
                                  first_copy=request.first_copy)
        if request.resume is not None:
            self._core.resume(request.resume)
        if request.episodes <= 0:
            self._core.finished = True
            self._retire_muscle()
        return RolloutRunResponse(self.uid)

    # -- stepping -------------------------------------------------------------------------
    def has_work(self) -> bool:
        core = self._core
        return (core is not None and not core.finished
                and self._uncollected < MAX_UNCOLLECTED
                and self._uncollected_bytes < MAX_UNCOLLECTED_BYTES)

    def do_work(self) -> None:
        core = self._core
        if core is None:
            return
        deadline = time.perf_counter() + WORK_CHUNK_S
        step = self._step_environment
        try:
            while not core.finished:
                core.advance(step)
                if time.perf_counter() >= deadline:
                    break
        except Exception as error:  # the environment's or the muscle's: the run fails with it
            self._fail(error)
        self._hand_over()
        if core.finished:
            self._retire_muscle()

    def _fail(self, error: Exception) -> None:
        """Stop stepping for ``error``, which the next chunk reports to the controller (the
        run fails naming this worker); the muscle leaves its brain's rounds."""
        self.failure = f"{type(error).__name__}: {error}"
        log.error("%s: %s (log level DEBUG shows the traceback)", self.uid, self.failure)
        log.debug("%s failed", self.uid, exc_info=True)
        if self._core is not None:
            self._core.finished = True
        try:
            self._retire_muscle()
        except Exception as also:
            log.warning("%s: its muscle did not shut down: %s", self.uid, also)

    def _step_environment(self, request: Request) -> Response:
        # A copy, as a reply over the wire would be: the muscle may keep what it is given,
        # and the environment reuse its buffers.
        return cast(Response, detached(handle_hosted(self._environment, request)))

    def _ask(self, request: AgentBatchRequest) -> tuple[str, AgentBatchResponse]:
        muscle = self._muscle
        if muscle is None:
            raise MosaicError(f"rollout worker {self.uid!r} has no muscle")
        answer = cast(AgentBatchResponse, handle_hosted(muscle, request))
        return self._agent, cast(AgentBatchResponse, detached(answer))

    def _hand_over(self) -> None:
        """Keep the ledger's rows (before an episode's record, see Ledger) for the controller."""
        ledger = self._ledger
        if ledger is None:
            return
        if ledger.rows:
            rows = ledger.rows
            self._records.append(("steps", (rows,)))
            self._uncollected += len(rows)
            # The rows of a hand-over have the same shapes: the first one sizes them all.
            self._uncollected_bytes += len(rows) * _row_bytes(rows[0])
            ledger.rows = []
        if ledger.metric_rows:
            self._records.append(("metrics", (ledger.metric_rows,)))
            self._uncollected += len(ledger.metric_rows)
            ledger.metric_rows = []

    def _keep_episode(self, run_id: int, environment: str, episode: int, steps: int,
                      total_return: float | None, returns: Mapping[str, float],
                      terminated: bool, truncated: bool, seed: int | None, copy: int = 0,
                      evaluation: bool = False, snapshots: Mapping[str, int] | None = None,
                      chain: str | None = None) -> None:
        """Keep an ended episode's record for the controller (see EpisodeRecorder)."""
        self._records.append(("episode", (run_id, environment, episode, steps, total_return,
                                          dict(returns), terminated, truncated, seed, copy,
                                          evaluation, snapshots, chain)))
        self._uncollected += 1

    def _retire_muscle(self) -> None:
        """Shut the muscle down (once): its brain learns no more from it; its last metrics are
        recorded."""
        muscle, ledger = self._muscle, self._ledger
        if self._muscle_done or muscle is None:
            return
        self._muscle_done = True
        answer = cast(MuscleShutdownResponse,
                      handle_hosted(muscle, MuscleShutdownRequest(muscle.uid)))
        if ledger is not None:
            if answer.metrics:
                ledger.reported.append((self._agent, answer.metrics))
            ledger.stamp_metrics()
            self._hand_over()

    # -- collecting -----------------------------------------------------------------------
    @handles(RolloutCollectRequest)
    def _collect(self, request: RolloutCollectRequest) -> RolloutCollectResponse:
        return self._chunk()

    @handles(RolloutStopRequest)
    def _stop(self, request: RolloutStopRequest) -> RolloutCollectResponse:
        self.request_stop()
        core = self._core
        if core is not None:
            core.finished = True
        if self.failure is None:
            self._retire_muscle()
        return self._chunk()

    def _chunk(self) -> RolloutCollectResponse:
        """What was recorded since the last chunk, with the counters the controller adds up."""
        self._hand_over()
        ledger, core = self._ledger, self._core
        records, self._records = tuple(self._records), []
        self._uncollected = 0
        self._uncollected_bytes = 0
        if ledger is None or core is None:
            return RolloutCollectResponse(self.uid, records, 0, (), False, "", self.failure)
        progress = ledger.progress
        steps = progress.steps - self._steps_reported
        self._steps_reported = progress.steps
        returns, ledger.ended = tuple(ledger.ended), []
        finished = core.finished and self._muscle_done
        digest = ""
        copy_episodes: tuple[int, ...] = ()
        if finished:
            ledger.report_position()
            digest = progress.digest or ""
            copy_episodes = core.copy_episodes
        return RolloutCollectResponse(self.uid, records, steps, returns, finished, digest,
                                      self.failure, copy_episodes)

    def on_shutdown(self) -> None:
        muscle = self._muscle
        if muscle is not None:
            try:
                muscle.on_shutdown()
            finally:
                muscle.close_clients()
        self._environment.on_shutdown()


def _row_bytes(row: tuple[Any, ...]) -> int:
    """About how many bytes a step row takes on the wire: its observation and action (the
    rest is a few numbers)."""
    observation, action = row[6], row[7]
    return 64 + int(getattr(observation, "nbytes", 8)) + int(getattr(action, "nbytes", 8))


class _WorkerLedger(Ledger):
    """A worker's ledger: its own digest chain and counters, and the returns of the episodes
    ended since the last chunk. Termination conditions are the controller's, over every
    worker: none is checked here."""

    def __init__(self, run_id: int, hand_over: Callable[[], None],
                 record_episode: EpisodeRecorder, uid: str) -> None:
        super().__init__(run_id, Progress(), Termination.from_spec(None), "", hand_over,
                         record_episode, uid)
        self.ended: list[float] = []

    def episode_ended(self, environment: str, total: float) -> None:
        self.ended.append(total)
        super().episode_ended(environment, total)
