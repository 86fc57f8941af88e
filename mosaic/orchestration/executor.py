"""The Executor: one per command; runs each run of an experiment through its RunGovernor."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from mosaic.conductors.run_context import RunContext
from mosaic.core.affinity import available_cpus, choose_cpu, pin_thread
from mosaic.core.checkpoints import (
    CheckpointError,
    checkpoint_name,
    checkpoint_path,
    find_checkpoint,
    previous_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from mosaic.core.errors import StoreLost
from mosaic.core.exit_codes import EXIT_SIGNAL
from mosaic.core.run_states import RunStatus
from mosaic.core.seeding import phase_seed
from mosaic.messages import (
    CheckpointPaths,
    EnvironmentPosition,
    ResumePoint,
    RunConfig,
)
from mosaic.orchestration.checkpoint_sync import (
    CheckpointSync,
    checkpoint_files,
    restore_checkpoints,
)
from mosaic.orchestration.governing import WAIT_SLICE_MS, govern
from mosaic.orchestration.videos import record_videos
from mosaic.runtime.placement import kill_all_processes
from mosaic.stepping.progress import Progress
from mosaic.store.reader import SEARCH_SOURCE
from mosaic.store.resume import RestartPoint, StoredExperiment, StoredRun
from mosaic.store.writer import CALL_TIMEOUT_S
from mosaic.transport import pin_io_threads
from mosaic.transport.keys import CurveKeys, load_keys

if TYPE_CHECKING:
    from mosaic.experiment import Experiment
    from mosaic.orchestration.ray_runs import RayRuns
    from mosaic.orchestration.search import Search
    from mosaic.store.writer import StoreWriter

log = logging.getLogger(__name__)

#: The most runs on a Ray cluster waited for at once (each waits in a thread of the command);
#: the cluster's scheduler decides how many of them step at once.
RAY_JOBS = 64
#: Time allowed for the store to commit everything after the last run.
FLUSH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RunResult:
    """How one run ended, for the summary."""

    uid: str
    index: int
    seed: int
    phase: str
    status: RunStatus
    error: str | None
    episodes: int
    steps: int
    mean_return: float | None
    wall_time: float
    killed: tuple[str, ...] = ()
    first_step_at: float | None = None
    last_step_at: float | None = None
    digest: str | None = None
    #: agent uid -> mean episode return; in a zero-sum game the overall mean says nothing.
    agent_means: dict[str, float] = field(default_factory=dict)
    #: The mean return of the last RECENT_EPISODES episodes, overall and per agent.
    recent_mean: float | None = None
    agent_recent_means: dict[str, float] = field(default_factory=dict)
    #: The values of the experiment's sweep this run was given, by key path.
    params: dict[str, Any] = field(default_factory=dict)
    #: The Ray node the run ran on (runs on a cluster only).
    node: str | None = None
    #: A run resumed with ``--resume`` that had finished before: not run again.
    earlier: bool = False
    #: Why a termination condition ended the run before its episodes (None: it did not), or
    #: why its search's pruner did (its status is then ``pruned``).
    ended_early: str | None = None
    #: A run of a search: (episodes, value) of its metric at each episode end.
    reported: tuple[tuple[int, float], ...] = ()


ProgressCallback = Callable[[int, RunContext], None]


class Executor:
    """Runs the runs of one experiment, ``jobs`` at a time, recording them in the store.

    Signals: the first SIGINT, SIGTERM or SIGHUP (a closed terminal) cancels (the current run
    shuts down in order, later runs do not start); a second SIGINT kills every component
    process and, with ``exit_at_once`` (a command's choice), exits at once with 130; without it
    (a library's), the runs then end within their shutdown timeouts, every component of theirs
    already gone.

    ``jobs`` (``None``: the default) is 1 on this machine. With ``ray`` (a Ray address or
    ``auto``) or the file's ``executor: {ray: ...}``, each run is a task on that Ray cluster
    (:mod:`mosaic.orchestration.ray_runs`); ``jobs`` runs are submitted at once, by default
    every run, up to :data:`RAY_JOBS` (the cluster decides how many step at once). A run whose
    task waits on the cluster's queue longer than ``executor.ray.queue_timeout_s`` fails. The
    store stays here; a second SIGINT also ends every run's task.
    """

    def __init__(self, experiment: Experiment, store: StoreWriter, *,
                 on_progress: ProgressCallback | None = None,
                 on_run_end: Callable[[RunResult], None] | None = None,
                 jobs: int | None = None,
                 exit_at_once: bool = True, ray: str | None = None,
                 resume: StoredExperiment | None = None) -> None:
        self.experiment = experiment
        self.store = store
        #: The stored experiment this invocation continues (``--resume``), if any.
        self.resume = resume
        self.on_progress = on_progress
        self.on_run_end = on_run_end
        self.cancelled_by: int | None = None
        if jobs is not None and jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.exit_at_once = exit_at_once
        #: A synchronous call to the store waits out an outage before it gives up.
        self._store_timeout = store.outage_s + CALL_TIMEOUT_S
        self._active: set[RunContext] = set()
        self._lock = threading.Lock()
        self._signals = 0
        self._keys: CurveKeys | None = None
        #: A sweep's search: the points asked for and told (see mosaic.orchestration.search).
        self.search: Search | None = None
        #: Runs on a Ray cluster (``ray``: its address, else the file's ``executor: {ray: ...}``).
        self._cluster: RayRuns | None = None
        settings = experiment.executor.ray
        if ray is not None or (settings is not None and settings.runs):
            from mosaic.experiment.schema import RayExecutorConfig
            from mosaic.orchestration.ray_runs import RayRuns

            settings = settings or RayExecutorConfig()
            self._cluster = RayRuns(ray or settings.address, store, settings.cpus_per_component,
                                    queue_timeout_s=settings.queue_timeout_s)
            if jobs is None:
                jobs = min(RAY_JOBS, experiment.run_count)
        self.jobs = jobs = jobs or 1
        #: The CPU of the step loop (of the first run, with several jobs; see mosaic.core.affinity).
        self.hot_cpu = choose_cpu(experiment.cpu_affinity)
        if jobs == 1:
            # The I/O threads are the process's: they can follow one step loop only.
            pin_io_threads(self.hot_cpu)
        # The writer takes the GIL from the step loop's threads many times a second: a hand-over
        # on the same CPU is cheap, one across CPUs is not: this took the cost of recording every
        # step with threads from 28% to 13% of throughput (benchmarks/throughput.py).
        if store.thread_id is not None and jobs == 1:
            pin_thread(store.thread_id, self.hot_cpu)
        store.on_lost(self._on_store_lost)

    def _on_store_lost(self, error: StoreLost) -> None:
        """The store is lost (on the writer's thread): stop every active run in order; they
        are failed for it, and no other run starts."""
        log.error("%s; stopping the runs", error)
        for ctx in list(self._active):
            ctx.failed.set()
            ctx.cancelled.set()

    # -- signals --------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1 and signum == signal.SIGINT:
            # Forced exit: nothing orderly any more, but no orphans and no ipc folders either.
            kill_all_processes()
            if self._cluster is not None:
                self._cluster.cancel_all()
            if self.exit_at_once:
                for ctx in list(self._active):
                    ctx.endpoints.cleanup()
                os._exit(130)
        if self.cancelled_by is None:
            self.cancelled_by = signum
        for ctx in list(self._active):
            ctx.cancelled.set()

    @contextmanager
    def _signals_handled(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in EXIT_SIGNAL}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- runs -----------------------------------------------------------------------------
    def execute(self) -> list[RunResult]:
        """Run every run (every seed of every sweep point), up to ``jobs`` at once; return
        their results in run order.

        Runs not started because of a cancel are absent. A run that fails does not stop the
        others; it only skips its own later phases. Every run gets fresh credentials (see
        :mod:`mosaic.transport.credentials`); with ``curve_keys``, its tcp keys are those.
        """
        experiment = self.experiment
        results: list[RunResult] = []
        self._keys = load_keys(experiment.curve_keys_dir) if experiment.curve_keys_dir else None
        with self._signals_handled():
            if self.resume is not None:
                experiment_id, prefix = self.resume.id, self.resume.run_prefix
            else:
                prefix = (f"{experiment.uid}-{time.strftime('%Y%m%d-%H%M%S')}-"
                          f"{secrets.token_hex(2)}")
                experiment_id = self.store.experiment_started(
                    experiment.uid, str(experiment.source), experiment.run_config(0).to_dict(),
                    text=_text_of(experiment), run_prefix=prefix)
            seeds = experiment.run_seeds()
            if experiment.search is not None:
                results = self._run_search(experiment_id, prefix)
            elif self.jobs == 1:
                for index, seed in enumerate(seeds):
                    results.extend(
                        self._run_phases(experiment_id, prefix, index, seed, self.hot_cpu))
            else:
                results = self._run_concurrently(experiment_id, prefix, seeds)
            if self.store.lost is None:
                self.store.flush(FLUSH_TIMEOUT_S)
        return results

    def _run_search(self, experiment_id: int, prefix: str) -> list[RunResult]:
        """The runs of a search, a wave of points at a time (see mosaic.orchestration.search):
        each wave asked for once the one before is told."""
        from mosaic.orchestration.search import Search

        search = self.search = Search(self.experiment, self.jobs)
        runs = self.experiment.runs
        results: list[RunResult] = []
        while self.cancelled_by is None and self.store.lost is None:
            points = search.ask()
            if not points:
                break
            self.experiment = search.experiment
            seeds = self.experiment.run_seeds()  # a point may set the seed
            indexes = [point * runs + k for point in points for k in range(runs)]
            if self.jobs == 1:
                wave = [result for index in indexes for result in self._run_phases(
                    experiment_id, prefix, index, seeds[index], self.hot_cpu)]
            else:
                wave = self._run_concurrently(experiment_id, prefix, seeds, indexes)
            results.extend(wave)
            if self.cancelled_by is not None or self.store.lost is not None:
                break  # a point cut short says nothing of its values
            for point in points:
                search.tell(point, [result for result in wave if result.index // runs == point])
        return results

    def _run_concurrently(self, experiment_id: int, prefix: str, seeds: list[int],
                          indexes: list[int] | None = None) -> list[RunResult]:
        """Up to ``jobs`` runs at once (those of ``indexes``, default all), each on its own
        step-loop CPU where there are enough."""
        cpus = available_cpus()
        first = cpus.index(self.hot_cpu) if self.hot_cpu in cpus else 0
        done: dict[int, list[RunResult]] = {}
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="mosaic-run") as pool:
            futures = {
                pool.submit(self._run_phases, experiment_id, prefix, index, seeds[index],
                            None if self.hot_cpu is None
                            else cpus[(first + index) % len(cpus)]): index
                for index in (range(len(seeds)) if indexes is None else indexes)
            }
            pending = set(futures)
            while pending:
                # Short waits keep the main thread ready for signals.
                finished, pending = wait(pending, timeout=WAIT_SLICE_MS / 1000)
                for future in finished:
                    done[futures[future]] = future.result()
        return [result for index in sorted(done) for result in done[index]]

    def _restart(self, run: StoredRun, config: RunConfig,
                 reason: str) -> tuple[RestartPoint, RunConfig]:
        """Make ``run`` (of ``config``) run again in its row: from the latest periodic
        checkpoint of its agents that the store has every record before, where it can continue
        from there exactly, else from its start. Return where it continues and the config to
        run it with."""
        restore_checkpoints(checkpoint_files(config),
                            functools.partial(self.store.saved_checkpoint, run.uid))
        saved = _periodic_checkpoints(config)
        environment = config.environments[0].uid if saved else None
        point = self.store.run_restarted(run, reason, environment, sorted(saved, reverse=True),
                                         self._store_timeout)
        if not point.episode:
            return point, config
        files = saved[point.episode]
        earlier = config.resume.positions.get(environment) if (
            config.resume is not None and environment is not None) else None
        first = earlier.episode if earlier is not None else 0
        agents = tuple(agent if agent.checkpoints is None else dataclasses.replace(
            agent, checkpoints=CheckpointPaths(agent.checkpoints.save, files[agent.uid]))
            for agent in config.agents)
        resume = ResumePoint(point.chain, {str(environment): EnvironmentPosition(
            point.episode, 0, 0, first)})
        log.info("run %s continues from episode %d, where its agents saved their checkpoints",
                 run.uid, point.episode)
        return point, dataclasses.replace(config, agents=agents, resume=resume)

    def _attempt(self, ctx: RunContext, index: int, cpu: int | None,
                 ) -> tuple[RunStatus, str | None, tuple[str, ...], str | None, float | None]:
        """Run ``ctx``'s run once, here or on the Ray cluster; its status, error, the parts
        killed at shutdown, its Ray node and when it started there (``time.time()``)."""
        with self._lock:
            self._active.add(ctx)
        if self.cancelled_by is not None or self.store.lost is not None:
            ctx.cancelled.set()
        ctx.hot_cpu = cpu
        on_wait = (None if self.on_progress is None
                   else functools.partial(self.on_progress, index, ctx))
        node = started_at = None
        sync = CheckpointSync(ctx.config, ctx.run_id, self.store)
        try:
            if self._cluster is not None:
                status, error, killed, node, started_at = self._cluster.run(ctx, index, on_wait)
            else:
                status, error, killed = govern(ctx, self.experiment.uid, index,
                                               sync.polling(on_wait))
        finally:
            with self._lock:
                self._active.discard(ctx)
        if on_wait is not None:
            on_wait()  # where the run ended: a run shorter than the wait's slice shows it too
        return status, error, killed, node, started_at

    def _run_phases(self, experiment_id: int, prefix: str, index: int, run_seed: int,
                    cpu: int | None) -> list[RunResult]:
        """The phases of run ``index``, in order, until one does not finish."""
        experiment = self.experiment
        base = f"{prefix}-r{index}"
        results = []
        for phase_index, phase in enumerate(experiment.phase_names(index)):
            if self.cancelled_by is not None or self.store.lost is not None:
                break
            run_uid = phase_run_uid(experiment, base, phase)
            config = experiment.run_config(index, phase_index)
            problem = None
            if self.search is not None:
                config = self.search.plan(config)
                problem = self.search.problems.get(index // experiment.runs)
            try:
                config = self._with_checkpoints(config, base)
            except CheckpointError as error:
                problem = problem or str(error)
            result = self._run(experiment_id, run_uid, index, phase_seed(run_seed, phase_index),
                               config, cpu, problem)
            results.append(result)
            if self.on_run_end is not None:
                self.on_run_end(result)
            if result.status != RunStatus.FINISHED:
                break  # later phases build on this one
        return results

    def _with_checkpoints(self, config: RunConfig, base_uid: str) -> RunConfig:
        """``config`` with each agent's checkpoint paths: where to save this phase (nowhere in
        a test phase), what to load; and, for a training phase, where to resume.

        An agent loads what its ``load`` names; without one, a phase after the first continues
        from the agent's checkpoint of the latest phase before it in the same run that saved
        one, if any. A training phase resumes at the position saved in the first (in file
        order) of the loaded checkpoints that has one.
        """
        experiment = self.experiment.uid
        root = self.experiment.checkpoints_dir
        earlier = self.experiment.phase_names(config.run_index)[: config.phase_index]
        # The checkpoints of earlier phases saved on another machine (a Ray node) are here once
        # written back from the store.
        uids = {agent.uid for agent in config.agents} | {
            agent.load.agent for agent in config.agents
            if agent.load is not None and agent.load.agent is not None}
        for phase in earlier:
            restore_checkpoints(
                {checkpoint_name(path): path for path in (
                    checkpoint_path(root, experiment, base_uid, phase, uid) for uid in uids)},
                functools.partial(self.store.saved_checkpoint,
                                  phase_run_uid(self.experiment, base_uid, phase)))
        agents = []
        resume: ResumePoint | None = None
        loaded: Path | None = None  # where the position comes from, or the first checkpoint
        for agent in config.agents:
            spec, load = agent.load, None
            if spec is not None:
                who = spec.agent or agent.uid
                source = spec.experiment or experiment
                if source == experiment and spec.run is None and spec.phase in earlier:
                    load = checkpoint_path(root, experiment, base_uid, spec.phase, who)
                    if not load.exists():
                        raise CheckpointError(f"agent {agent.uid!r}: phase {spec.phase!r} "
                                              f"saved no checkpoint of agent {who!r} ({load})")
                else:
                    # Never the run's own: a run resumed after its command died may have
                    # saved one (checkpoint_every) that is newer than what it loaded.
                    load = find_checkpoint(root, source, spec.phase, who, spec.run,
                                           besides=base_uid if source == experiment else None)
            else:
                load = next((path for path in (checkpoint_path(root, experiment, base_uid, phase,
                                                               agent.uid)
                                               for phase in reversed(earlier))
                             if path.exists()), None)
            save = (None if config.mode == "test"
                    else checkpoint_path(root, experiment, base_uid, config.phase, agent.uid))
            paths = CheckpointPaths(None if save is None else str(save),
                                    None if load is None else str(load))
            agents.append(dataclasses.replace(agent, checkpoints=paths))
            if resume is None and load is not None and config.mode != "test":
                resume = _resume_point(load)
                if resume is not None or loaded is None:
                    loaded = load
        if loaded is not None:
            _warn_of_copies_without_position(config, resume, loaded)
        return dataclasses.replace(config, agents=tuple(agents), resume=resume)

    def _run(self, experiment_id: int, run_uid: str, index: int, seed: int,
             config: RunConfig, cpu: int | None, problem: str | None = None) -> RunResult:
        params = self.experiment.run_params(index)
        stored = self.resume.runs.get(run_uid) if self.resume is not None else None
        if stored is not None and stored.status == RunStatus.FINISHED:
            log.info("run %s finished before; it is not run again", run_uid)
            return RunResult(run_uid, index, seed, config.phase, RunStatus.FINISHED, None,
                             stored.episodes, stored.steps, None, 0.0, digest=stored.digest,
                             params=params, earlier=True)
        point = RestartPoint()
        attempt_config = config
        if stored is not None:
            run_id = stored.id
            point, attempt_config = self._restart(stored, config,
                                                  f"resumed (it was {stored.status})")
        else:
            run_id = self.store.run_started(
                experiment_id, run_uid, index, seed, self._store_timeout, params=params or None,
                agents={env.uid: env.policy_mapping for env in config.environments
                        if env.policy_mapping is not None} or None)
        if problem is not None:
            log.error("run %s: %s", run_uid, problem)
            self.store.run_finished(run_id, RunStatus.FAILED, problem, 0, 0)
            return RunResult(run_uid, index, seed, config.phase, RunStatus.FAILED, problem, 0, 0,
                             None, 0.0, params=params)
        started = time.monotonic()
        attempt, attempts = 0, self.experiment.executor.max_failures + 1
        started_at: float | None = None
        while True:
            ctx = RunContext.for_run(self.experiment.uid, run_uid, run_id, seed, attempt_config,
                                     self.store, self._keys)
            _carry_over(ctx.progress, point)
            status, error, killed, node, began = self._attempt(ctx, index, cpu)
            started_at = started_at or began
            if not (status == RunStatus.FAILED and ctx.supervisor.crashed is not None
                    and attempt + 1 < attempts
                    and self.cancelled_by is None and self.store.lost is None):
                break
            attempt += 1
            log.warning("run %s failed (%s); attempt %d of %d", run_uid, error, attempt + 1,
                        attempts)
            again = StoredRun(run_id, run_uid, index, RunStatus.FAILED.value, 0, 0, None, None,
                              None, None)
            point, attempt_config = self._restart(
                again, config, f"attempt {attempt + 1} of {attempts} after: {error};")
        progress = ctx.progress
        status, error = self._checked(run_id, run_uid, status, error)
        files = checkpoint_files(config)
        if status != RunStatus.FAILED:  # else a brain may have died before its last save
            # Saved on a Ray node, a checkpoint is here once written back from the store.
            restore_checkpoints(files, functools.partial(self.store.saved_checkpoint, run_uid))
            _save_position(config, progress.chain, progress.positions, progress.copy_episodes)
        if status == RunStatus.FINISHED:  # nothing to continue from any more
            for agent in config.agents:
                if agent.checkpoints is not None and agent.checkpoints.save is not None:
                    previous_checkpoint(agent.checkpoints.save).unlink(missing_ok=True)
            if progress.pruned:  # its search's pruner ended it: not a failure
                status = RunStatus.PRUNED
        if config.search is not None and progress.reported:
            # What the pruner decided from, kept with the run's metrics.
            reporter = config.default_agent or config.agents[0].uid
            now = time.time()
            self.store.record_metrics([(run_id, reporter, SEARCH_SOURCE, config.search.metric,
                                        value, episode, None, now)
                                       for episode, value in progress.reported])
        CheckpointSync(config, run_id, self.store).poll(force=True)
        record_videos(config, run_id, run_uid, self.store)
        # A run on Ray starts once a node has room for it: its start there, not its submission.
        self.store.run_finished(run_id, status, error, progress.episodes, progress.steps,
                                progress.digest, started_at=started_at)
        if self.store.lost is None:
            with contextlib.suppress(StoreLost):  # the run's end is in the spill file then
                self.store.flush(FLUSH_TIMEOUT_S)
        return RunResult(
            run_uid, index, seed, config.phase, status, error, progress.episodes, progress.steps,
            progress.return_sum / progress.episodes if progress.episodes else None,
            time.monotonic() - started, killed,
            progress.first_step_at, progress.last_step_at, progress.digest,
            # Over the episodes each agent played, as every reader of the store counts them.
            {agent: total / progress.agent_episodes[agent]
             for agent, total in progress.agent_return_sums.items()
             if progress.agent_episodes.get(agent)},
            progress.recent_mean,
            {agent: sum(recent) / len(recent)
             for agent, recent in progress.agent_recent_returns.items() if recent},
            params,
            node,
            ended_early=(progress.ended_early
                         if status in (RunStatus.FINISHED, RunStatus.PRUNED) else None),
            reported=tuple(progress.reported) if config.search is not None else (),
        )

    def _checked(self, run_id: int, run_uid: str, status: RunStatus,
                 error: str | None) -> tuple[RunStatus, str | None]:
        """The run's status and error once the store has written everything it was given of
        the run: a run whose records the store lost, or does not hold all of, has failed."""
        problem = None
        if self.store.lost is None:
            with contextlib.suppress(StoreLost):  # said below
                problem = self.store.verify_run(run_id, self._store_timeout)
        lost = self.store.lost
        if lost is not None:
            return RunStatus.FAILED, str(lost)
        if problem is None:
            return status, error
        log.error("run %s: %s", run_uid, problem)
        if status == RunStatus.FINISHED:
            return RunStatus.FAILED, problem
        return status, problem if error is None else f"{error}; {problem}"


def phase_run_uid(experiment: Experiment, base: str, phase: str) -> str:
    """The uid of the run of ``phase`` whose runs' uids start with ``base``
    (``<prefix>-r<index>``)."""
    return base if experiment.phases is None else f"{base}-{phase}"


def run_uids(experiment: Experiment, prefix: str) -> list[str]:
    """The uid of every run (and phase) of ``experiment`` whose uids start with ``prefix``."""
    return [phase_run_uid(experiment, f"{prefix}-r{index}", phase)
            for index in range(experiment.run_count) for phase in experiment.phase_names(index)]


def _periodic_checkpoints(config: RunConfig) -> dict[int, dict[str, str]]:
    """The periodic checkpoints every agent of ``config`` saved in this phase (the latest and
    the one before, see previous_checkpoint), by the episode they were saved at: agent uid ->
    file. Empty unless the run can continue from one exactly: a training run of one
    environment without copies, evaluation rounds or self-play."""
    if (config.mode == "test" or len(config.environments) != 1 or config.environments[0].copies
            or config.evaluate_every or any(a.self_play is not None for a in config.agents)):
        return {}
    found: dict[int, dict[str, str]] = {}
    for agent in config.agents:
        save = agent.checkpoints.save if agent.checkpoints is not None else None
        if save is None:
            return {}
        for path in (save, str(previous_checkpoint(save))):
            if not os.path.exists(path):
                continue
            try:
                episode = read_checkpoint(path).episodes
            except CheckpointError as error:
                log.warning("%s: %s; it is not continued from", path, error)
                continue
            if episode:
                found.setdefault(episode, {})[agent.uid] = path
    return {episode: files for episode, files in found.items()
            if len(files) == len(config.agents)}


def _carry_over(progress: Progress, point: RestartPoint) -> None:
    """Count the episodes a run continued from a checkpoint keeps as its own."""
    progress.episodes = len(point.returns)
    progress.steps = point.steps
    progress.return_sum = sum(point.returns)
    progress.recent_returns.extend(point.returns)
    if point.returns:
        progress.last_return = point.returns[-1]


def _text_of(experiment: Experiment) -> str | None:
    """The experiment's text (see Experiment.recorded_text), kept in the store for
    ``--resume`` (None if its file cannot be read)."""
    try:
        return experiment.recorded_text()
    except (OSError, UnicodeDecodeError) as error:
        log.warning("%s cannot be read again (%s): this experiment cannot be resumed",
                    experiment.source, error)
        return None


def _resume_point(path: Path) -> ResumePoint | None:
    """The position saved in the checkpoint at ``path``, if it has one."""
    saved = read_checkpoint(path)
    if not (saved.digest or saved.positions):
        return None
    return ResumePoint(saved.digest, {
        uid: EnvironmentPosition(*at, copy_episodes=saved.copy_episodes.get(uid, ()))
        for uid, at in saved.positions.items()})


def _warn_of_copies_without_position(config: RunConfig, resume: ResumePoint | None,
                                     path: Path) -> None:
    """Say so when an environment with copies continues from a checkpoint that keeps no
    position for it (one saved before mosaic kept the copies', one saved every N episodes, or
    one of another environment): its copies number their episodes from 0, with the seeds of a
    fresh run."""
    for env in config.environments:
        if env.copies and (resume is None or env.uid not in resume.positions):
            log.warning("run of %s: %s keeps no position for environment %r; its copies "
                        "number their episodes from 0 again, with the seeds of a fresh run "
                        "(a checkpoint saved before mosaic kept the copies' positions has "
                        "none)", config.experiment, path, env.uid)


def _save_position(config: RunConfig, chain: str, positions: dict[str, tuple[int, int, int]],
                   copy_episodes: dict[str, tuple[int, ...]]) -> None:
    """Add where the run stood (its digest chain, each environment's position and copies'
    next episodes) to the checkpoints its brains saved, so that a run that loads one continues
    from there.

    A checkpoint that cannot be read or written is logged and left as it is: the run's own
    outcome does not depend on it.
    """
    for agent in config.agents:
        save = agent.checkpoints.save if agent.checkpoints is not None else None
        if save is None or not os.path.exists(save):
            continue
        try:
            saved = read_checkpoint(save)
            saved.digest, saved.positions = chain, dict(positions)
            saved.copy_episodes = dict(copy_episodes)
            write_checkpoint(save, saved)
        except CheckpointError as error:
            log.error("run of %s: the position was not saved: %s", config.experiment, error)
