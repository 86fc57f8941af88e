"""The controller's side of the rollout loop: an environment's rollout workers, started,
collected from and stopped by the simulation controller, which stays the run's conductor.

Each worker (:mod:`mosaic.orchestration.rollout_worker`) steps its copies on its own; the
controller collects what they recorded every :data:`COLLECT_EVERY_S` (one request to every
worker, all sent before any answer is awaited), hands it to the store, counts the steps and
episodes, and checks the run's termination conditions on them. A termination condition ends
the workers at their next collect, where they stand: such a run is not reproducible step for
step, as the workers' progress between two collects depends on timing.

The run's digest: a worker's digest when the run has one worker, else the hash of every
worker's digest in the order of the file and of the workers. With one worker, the run's
trajectories are those of the per-step loop with the same ``copies:``, and so is its digest.

A run that continues a saved one (``load:``) hands each worker the saved position, from which
its copies take their next episodes, as the per-step loop's do; each worker tells its copies'
next episodes once its own are done, and the environment's position is theirs in the order of
the copies. A worker's digest starts afresh: a continued run's digest covers its own steps.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from functools import partial

from mosaic.conductors.run_context import RunContext
from mosaic.conductors.shutdown_clock import ShutdownClock
from mosaic.core.errors import MosaicError, RemoteError
from mosaic.core.seeding import muscle_seed, rollout_seed
from mosaic.messages import (
    ActuatorSpec,
    EnvironmentPlan,
    MusclePlan,
    RolloutCollectRequest,
    RolloutCollectResponse,
    RolloutHost,
    RolloutRunRequest,
    RolloutRunResponse,
    RolloutStopRequest,
    SensorSpec,
    names,
)
from mosaic.stepping.episodes import Recording, Schedule
from mosaic.stepping.ledger import Ledger
from mosaic.transport import RequestClient

__all__ = ["COLLECT_EVERY_S", "Rollout", "RolloutSet", "Worker"]

#: How often the controller collects what the workers recorded.
COLLECT_EVERY_S = 0.05
#: The records a worker may hand over, by kind: the store writer's ``record_<kind>``.
_KINDS = frozenset({"steps", "episode", "metrics"})


@dataclass
class Worker:
    """One rollout worker: its uid, client and placement, its first copy and its episodes;
    once finished, its digest and each of its copies' next episode."""

    uid: str
    client: RequestClient
    endpoint: str
    placement: str
    first_copy: int
    episodes: int
    finished: bool = False
    digest: str = ""
    copy_episodes: tuple[int, ...] = ()


@dataclass
class Rollout:
    """One environment stepped by rollout workers. A loop of the run's ledger: a termination
    condition finishes it (``finished``)."""

    index: int
    plan: EnvironmentPlan
    mapping: dict[str, str]
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    copies: int
    recording: Recording
    workers: list[Worker] = field(default_factory=list)
    finished: bool = False

    @property
    def uid(self) -> str:
        return self.plan.uid

    @property
    def position(self) -> tuple[int, int, int] | None:
        copies = self.copy_episodes
        return None if copies is None else (max(copies), 0, 0)

    @property
    def copy_episodes(self) -> tuple[int, ...] | None:
        """Each copy's next episode, the workers' in order; None unless every worker told
        its own (one that died before its end did not, and its run failed)."""
        if not all(worker.copy_episodes for worker in self.workers):
            return None
        return tuple(episode for worker in self.workers for episode in worker.copy_episodes)

    @property
    def agent(self) -> str:
        (agent,) = set(self.mapping.values())
        return agent

    def muscle_plans(self, agent: str, agent_index: int, seed: int) -> dict[str, MusclePlan]:
        """The muscles ``agent`` has in the workers: one each, hosted there."""
        if agent not in self.mapping.values():
            return {}
        base = muscle_seed(seed, agent_index, self.index)
        return {names.muscle_uid(agent, worker.uid): MusclePlan(
            environment=self.uid, sensors=self.sensors, actuators=self.actuators,
            seed=rollout_seed(base, number), copies=self.copies,
            host=RolloutHost(worker.uid, worker.endpoint, worker.placement, self.uid))
            for number, worker in enumerate(self.workers)}


def shares(episodes: int, workers: int) -> list[int]:
    """``episodes`` split between ``workers``, the first ones taking one more when it does not
    divide."""
    return [episodes // workers + (1 if number < episodes % workers else 0)
            for number in range(workers)]


class RolloutSet:
    """The rollout workers of a run, for its simulation controller (see the module)."""

    def __init__(self, ctx: RunContext, ledger: Ledger) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.rollouts: list[Rollout] = []
        #: Whether the workers were set stepping (:meth:`run`).
        self.stepping = False
        self._next_collect = 0.0

    def __bool__(self) -> bool:
        return bool(self.rollouts)

    def add(self, rollout: Rollout) -> None:
        self.rollouts.append(rollout)
        self.ledger.loops.append(rollout)

    def workers(self) -> list[tuple[Rollout, Worker]]:
        return [(rollout, worker) for rollout in self.rollouts for worker in rollout.workers]

    def run(self, schedule: Schedule) -> None:
        """Set every worker stepping (their muscles set up)."""
        ctx = self.ctx
        self.stepping = True
        resume = ctx.config.resume
        sent = [(worker, worker.client.send(RolloutRunRequest(
            rollout.uid, ctx.run_id, schedule.seed, rollout.index, worker.first_copy,
            worker.episodes, schedule.max_steps, rollout.agent, rollout.recording.steps,
            rollout.recording.episodes, rollout.recording.info,
            None if resume is None else resume.positions.get(rollout.uid))))
            for rollout, worker in self.workers()]
        for worker, correlation_id in sent:
            worker.client.receive(correlation_id, ctx.timeouts.setup, RolloutRunResponse,
                                  ctx.check)

    @property
    def done(self) -> bool:
        """Whether every environment is finished: its workers' episodes done, or a
        termination condition met."""
        return all(rollout.finished or all(worker.finished for worker in rollout.workers)
                   for rollout in self.rollouts)

    def collect(self) -> None:
        """Collect from every worker still stepping, once :data:`COLLECT_EVERY_S` has passed
        since the last time (else wait a moment, the control messages' turn)."""
        now = time.perf_counter()
        if now < self._next_collect:
            time.sleep(min(self._next_collect - now, 0.005))
            return
        self._next_collect = now + COLLECT_EVERY_S
        ctx = self.ctx
        # All sent before any is awaited: a worker waiting on its brain's round needs the
        # others to step on, and they do, whatever this loop waits on.
        sent = [(rollout, worker, worker.client.send(RolloutCollectRequest(worker.uid)))
                for rollout, worker in self.workers()
                if not (worker.finished or rollout.finished)]
        for rollout, worker, correlation_id in sent:
            answer = worker.client.receive(correlation_id, ctx.timeouts.step,
                                           RolloutCollectResponse, ctx.check)
            error = self._take(rollout, worker, answer)
            if error is not None:
                raise MosaicError(f"rollout {worker.uid!r}: {error}")

    def stop(self) -> None:
        """Stop every worker that serves (all asked before any answer is awaited) and take
        their last records; a dead or silent one is left to its conductor."""
        ctx = self.ctx
        clock = ShutdownClock(ctx)
        sent = []
        for rollout, worker in self.workers():
            if ctx.supervisor.is_alive(worker.uid):
                sent.append((rollout, worker, worker.client.send(RolloutStopRequest(worker.uid))))
        for rollout, worker, correlation_id in sent:
            try:
                answer = worker.client.receive(correlation_id, clock.timeout,
                                               RolloutCollectResponse,
                                               partial(_alive, ctx, worker.uid, clock))
            except (MosaicError, RemoteError):
                continue
            self._take(rollout, worker, answer)

    def _take(self, rollout: Rollout, worker: Worker,
              answer: RolloutCollectResponse) -> str | None:
        """Hand ``answer``'s records to the store and count its steps and episodes; return why
        the worker stopped stepping early, if it did."""
        store, ledger = self.ctx.store, self.ledger
        if store is not None:
            for kind, args in answer.records:
                if kind not in _KINDS:
                    raise MosaicError(f"rollout worker {worker.uid!r} sent a record of kind "
                                      f"{kind!r}")
                getattr(store, f"record_{kind}")(*args)
        if answer.steps:
            ledger.count_steps(answer.steps)
        progress, agent = ledger.progress, rollout.agent
        for total in answer.returns:
            progress.agent_ended_episode(agent, total)
            ledger.episode_ended(rollout.uid, total)
        if answer.finished:
            worker.finished = True
            worker.digest = answer.digest
            worker.copy_episodes = answer.copy_episodes
        return answer.error

    def digest(self) -> str:
        """The run's digest (see the module)."""
        workers = [worker for _, worker in self.workers()]
        if len(workers) == 1:
            return workers[0].digest
        combined = hashlib.blake2b(digest_size=16)
        for worker in workers:
            combined.update(f"{worker.uid}:{worker.digest}\n".encode())
        return combined.hexdigest()


def _alive(ctx: RunContext, uid: str, clock: ShutdownClock) -> None:
    ctx.supervisor.check(only=(uid,))
    if clock.expired():
        raise MosaicError(f"rollout worker {uid!r} did not stop before {clock.deadline()}")
