"""The Executor: one per command; runs each run of an experiment through its RunGovernor."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from mosaic.actors.placement import ThreadPlaced, kill_all_processes
from mosaic.affinity import choose_cpu, pin_thread
from mosaic.checkpoints import CheckpointError, checkpoint_path, checkpoint_root, find_checkpoint
from mosaic.errors import MosaicError
from mosaic.messages import (
    ExperimentRunFinishedNotice,
    ExperimentRunShutdownRequest,
    ExperimentShutdownResponse,
    ExperimentStartRequest,
    ExperimentStartResponse,
)
from mosaic.orchestration import names
from mosaic.orchestration.run_context import RunContext, Timeouts
from mosaic.orchestration.run_governor import RunGovernor
from mosaic.seeding import phase_seed
from mosaic.transport import EndpointAllocator, RequestClient, RequestServer, pin_io_threads

if TYPE_CHECKING:
    from mosaic.experiment import Experiment
    from mosaic.store.writer import StoreWriter

log = logging.getLogger(__name__)

#: How often the executor looks at signals and progress while a run steps.
WAIT_SLICE_MS = 50
#: Time allowed for the store to commit everything after the last run.
FLUSH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RunResult:
    """How one run ended, for the summary."""

    uid: str
    index: int
    seed: int
    phase: str
    status: str
    error: str | None
    episodes: int
    steps: int
    mean_return: float | None
    wall_time: float
    killed: tuple[str, ...] = ()
    first_step_at: float | None = None
    last_step_at: float | None = None
    digest: str | None = None


ProgressCallback = Callable[[int, RunContext], None]


class Executor:
    """Runs the runs of one experiment, one after another, recording them in the store.

    Signals: the first SIGINT or SIGTERM cancels (the current run shuts down in order, later runs
    do not start); a second SIGINT kills every component process and exits at once with 130.
    """

    def __init__(self, experiment: Experiment, store: StoreWriter, *,
                 on_progress: ProgressCallback | None = None,
                 on_run_end: Callable[[RunResult], None] | None = None) -> None:
        self.experiment = experiment
        self.store = store
        self.on_progress = on_progress
        self.on_run_end = on_run_end
        self.cancelled_by: int | None = None
        self._current: RunContext | None = None
        self._signals = 0
        #: The CPU of every run's step loop (chosen once: the I/O threads are per process).
        self.hot_cpu = choose_cpu(experiment.cpu_affinity)
        pin_io_threads(self.hot_cpu)
        # The writer takes the GIL from the step loop's threads many times a second: a hand-over
        # on the same CPU is cheap, one across CPUs is not: this took the cost of recording every
        # step with threads from 28% to 13% of throughput (benchmarks/throughput.py).
        if store.thread_id is not None:
            pin_thread(store.thread_id, self.hot_cpu)

    # -- signals --------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1 and signum == signal.SIGINT:
            # Forced exit: nothing orderly any more, but no orphans either.
            kill_all_processes()
            os._exit(130)
        if self.cancelled_by is None:
            self.cancelled_by = signum
        if self._current is not None:
            self._current.cancelled.set()

    @contextmanager
    def _signals_handled(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- runs -----------------------------------------------------------------------------
    def execute(self) -> list[RunResult]:
        """Run every run; return their results (runs not started after a cancel are absent)."""
        experiment = self.experiment
        results: list[RunResult] = []
        with self._signals_handled():
            experiment_id = self.store.experiment_started(
                experiment.uid, str(experiment.source), experiment.run_config(0))
            stamp = time.strftime("%Y%m%d-%H%M%S")
            tag = secrets.token_hex(2)
            phases = experiment.phase_names()
            for index, run_seed in enumerate(experiment.run_seeds()):
                base = f"{experiment.uid}-{stamp}-{tag}-r{index}"
                for phase_index, phase in enumerate(phases):
                    if self.cancelled_by is not None:
                        break
                    run_uid = base if experiment.phases is None else f"{base}-{phase}"
                    config = experiment.run_config(index, phase_index)
                    problem = None
                    try:
                        self._attach_checkpoints(config, base)
                    except CheckpointError as error:
                        problem = str(error)
                    result = self._run(experiment_id, run_uid, index,
                                       phase_seed(run_seed, phase_index), config, problem)
                    results.append(result)
                    if self.on_run_end is not None:
                        self.on_run_end(result)
                    if result.status != "finished":
                        break  # later phases build on this one
            self.store.flush(FLUSH_TIMEOUT_S)
        return results

    def _attach_checkpoints(self, config: dict[str, Any], base_uid: str) -> None:
        """Give each agent its checkpoint paths: where to save this phase, what to load.

        An agent loads what its ``load`` names; without one, a phase after the first continues
        from the agent's checkpoint of the phase before in the same run, if there is one.
        """
        experiment = self.experiment.uid
        root = checkpoint_root(self.experiment.store_path)
        earlier = self.experiment.phase_names()[: config["phase_index"]]
        for agent in config["agents"]:
            spec, load = agent.get("load"), None
            if spec:
                who = spec.get("agent") or agent["uid"]
                source = spec.get("experiment") or experiment
                if source == experiment and spec.get("run") is None and spec["phase"] in earlier:
                    load = checkpoint_path(root, experiment, base_uid, spec["phase"], who)
                    if not load.exists():
                        raise CheckpointError(f"agent {agent['uid']!r}: phase {spec['phase']!r} "
                                              f"saved no checkpoint of agent {who!r} ({load})")
                else:
                    load = find_checkpoint(root, source, spec["phase"], who, spec.get("run"))
            elif earlier:
                previous = checkpoint_path(root, experiment, base_uid, earlier[-1], agent["uid"])
                load = previous if previous.exists() else None
            agent["checkpoint"] = {
                "save": str(checkpoint_path(root, experiment, base_uid, config["phase"], agent["uid"])),
                "load": str(load) if load is not None else None,
            }

    def _run(self, experiment_id: int, run_uid: str, index: int, seed: int,
             config: dict[str, Any], problem: str | None = None) -> RunResult:
        run_id = self.store.run_started(experiment_id, run_uid, index, seed)
        if problem is not None:
            log.error("run %s: %s", run_uid, problem)
            self.store.run_finished(run_id, "failed", problem, 0, 0)
            return RunResult(run_uid, index, seed, config["phase"], "failed", problem, 0, 0, None, 0.0)
        timeouts = Timeouts(**config["timeouts"])
        endpoints = EndpointAllocator(f"{run_uid}", transport=config["transport"], host=config["host"])
        ctx = RunContext(self.experiment.uid, run_uid, run_id, seed, config, endpoints, self.store,
                         timeouts)
        self._current = ctx
        if self.cancelled_by is not None:
            ctx.cancelled.set()
        ctx.hot_cpu = self.hot_cpu
        ctx.prelaunch()
        started = time.monotonic()
        notices = RequestServer(endpoints.inproc("executor"), name="executor",
                                idle_timeout_ms=WAIT_SLICE_MS)
        governor: ThreadPlaced | None = None
        client: RequestClient | None = None
        answer: ExperimentShutdownResponse | None = None
        status, error = "failed", None
        try:
            governor = ThreadPlaced(RunGovernor(names.RUN_GOVERNOR, ctx), "orchestration",
                                    endpoints.inproc(names.RUN_GOVERNOR), timeout=timeouts.setup)
            client = RequestClient(governor.endpoint, peer="run governor")
            budget = timeouts.setup * (4 + len(config["environments"]) + 2 * len(config["agents"]))
            start = client.request(
                ExperimentStartRequest(self.experiment.uid, run_uid, index, seed, config,
                                       endpoints.inproc("executor")),
                ExperimentStartResponse, budget, self._governor_check(governor))
            reason = self._wait(index, ctx, notices, governor) if start.ok else (
                "cancelled" if ctx.cancelled.is_set() else "failed")
            answer = client.request(ExperimentRunShutdownRequest(run_uid, reason),
                                    ExperimentShutdownResponse,
                                    timeouts.shutdown * (4 + len(ctx.supervisor.placed())))
            status, error = answer.status, answer.error
        except MosaicError as failure:
            status, error = ("cancelled", None) if ctx.cancelled.is_set() else ("failed", str(failure))
            log.error("run %s: %s", run_uid, failure)
        finally:
            if client is not None:
                client.close()
            notices.close()
            if governor is not None and not governor.stop(timeouts.shutdown):
                log.error("run governor of %s did not stop", run_uid)
            for placed in ctx.supervisor.placed():
                if placed.alive():
                    placed.kill()
            endpoints.cleanup()
            self._current = None
        progress = ctx.progress
        self.store.run_finished(run_id, status, error, progress.episodes, progress.steps,
                                progress.digest)
        self.store.flush(FLUSH_TIMEOUT_S)
        return RunResult(
            run_uid, index, seed, config["phase"], status, error, progress.episodes, progress.steps,
            progress.return_sum / progress.episodes if progress.episodes else None,
            time.monotonic() - started, answer.killed if answer is not None else (),
            progress.first_step_at, progress.last_step_at, progress.digest,
        )

    def _governor_check(self, governor: ThreadPlaced) -> Callable[[], None]:
        def check() -> None:
            if not governor.alive():
                raise MosaicError(f"run governor died: {governor.exit_cause()}")
        return check

    def _wait(self, index: int, ctx: RunContext, notices: RequestServer, governor: ThreadPlaced) -> str:
        """Wait for the simulation to finish, a signal, or the governor's death; return why."""
        while True:
            incoming = notices.receive()
            if incoming is not None and isinstance(incoming.message, ExperimentRunFinishedNotice):
                return incoming.message.status
            if ctx.cancelled.is_set():
                return "cancelled"
            if not governor.alive():
                return "failed"
            if self.on_progress is not None:
                self.on_progress(index, ctx)

