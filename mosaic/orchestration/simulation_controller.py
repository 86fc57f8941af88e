"""The vanilla SimulationController: environment and agents alternate, step after step.

Why one file of this length: set-up, the per-step loop and the ordered shutdown share the
per-environment state (links, mappings, the digest, the rows for the store), and the hot loop is
easiest to keep lean when it can be read top to bottom in one place.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mosaic.conductors.run_context import RunContext
from mosaic.conductors.shutdown_clock import ShutdownClock
from mosaic.core.batching import row
from mosaic.core.errors import (
    CallAbandoned,
    MosaicError,
    RemoteError,
    RequestTimeout,
    RunCancelled,
)
from mosaic.core.seeding import (
    brain_seed,
    environment_seed,
    episode_seed,
    evaluation_episode_seed,
    muscle_seed,
)
from mosaic.core.vector_info import info_row
from mosaic.messages import (
    ActuatorSpec,
    AgentBatchRequest,
    AgentBatchResponse,
    AgentConductorShutdownRequest,
    AgentConductorShutdownResponse,
    AgentEvaluateRequest,
    AgentSetupRequest,
    AgentSetupResponse,
    AgentUpdateRequest,
    AgentUpdateResponse,
    EnvironmentConductorShutdownRequest,
    EnvironmentConductorShutdownResponse,
    EnvironmentResetRequest,
    EnvironmentResetResponse,
    EnvironmentSetupRequest,
    EnvironmentSetupResponse,
    EnvironmentShutdownRequest,
    EnvironmentShutdownResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    Metric,
    MusclePlan,
    MuscleShutdownRequest,
    MuscleShutdownResponse,
    Request,
    Response,
    RunConfig,
    SensorSpec,
    SimulationFinishedNotice,
    SimulationStartRequest,
    SimulationStartResponse,
    SimulationStopRequest,
    SimulationStopResponse,
    VectorResetRequest,
    VectorStepRequest,
    VectorStepResponse,
    names,
)
from mosaic.messages.codec import pack
from mosaic.orchestration.part_links import PartLinks
from mosaic.orchestration.termination import Termination
from mosaic.runtime.component import Component, handles
from mosaic.runtime.setup_wait import CEILING, SetupWait
from mosaic.transport import RequestClient

log = logging.getLogger(__name__)

#: How long one chunk of the main loop may run before control messages are looked at.
WORK_CHUNK_S = 0.005
#: How often the loop checks that every component of the run is alive, also those it is not
#: waiting on (a brain that died between updates, say).
SUPERVISION_S = 0.5
#: How many calls (batches of steps, episodes) the store may be behind before the loop waits
#: for it: a loop faster than the database (parts in threads, every step recorded) would
#: otherwise grow memory without end, and make the end of a run (Ctrl-C) wait for the backlog.
STORE_BACKLOG = 1000


def describe(error: BaseException) -> str:
    """A one-line account of ``error`` for run records and the summary."""
    if isinstance(error, MosaicError):
        return str(error)
    return f"{type(error).__name__}: {error}"


@dataclass
class _MuscleLink:
    uid: str
    agent: str
    client: RequestClient
    slots: frozenset[str]


@dataclass
class _EnvironmentLoop:
    """The state of the episode loop of one environment."""

    index: int
    uid: str
    client: RequestClient
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    mapping: dict[str, str]  # slot -> agent uid
    muscles: list[_MuscleLink] = field(default_factory=list)
    episode: int = 0
    step: int = 0
    needs_reset: bool = True
    finished: bool = False
    observations: dict[str, Any] = field(default_factory=dict)
    actions: dict[str, Any] = field(default_factory=dict)
    returns: dict[str, float] = field(default_factory=dict)
    #: self-play agent -> the snapshot it plays this episode with (the episode it was taken at).
    snapshots: dict[str, int] = field(default_factory=dict)
    #: slot -> [step, observation, action, reward so far] of its last action, until the outcome
    #: goes back to its muscle: when the slot acts again or the episode ends.
    outstanding: dict[str, list[Any]] = field(default_factory=dict)
    episode_seed: int = 0
    #: The number of the loop's first training episode in this run (not 0 when it continues a
    #: saved run).
    first_episode: int = 0
    #: What the store keeps of this environment (its ``record_steps``, else the run's), and
    #: the keys of its info kept with each step (``store_info``).
    record_steps: bool = False
    record_episodes: bool = False
    store_info: tuple[str, ...] = ()
    #: Evaluation episodes left in the round under way (0: training), the rounds done, the
    #: evaluation episodes done, and whether the loop ends once the round is over.
    evaluating: int = 0
    evaluation_round: int = 0
    evaluations_done: int = 0
    finish_after_evaluation: bool = False


@dataclass
class _VectorLoop:
    """The state of the episode loop of an environment with ``copies:``, per copy.

    The copies step in lockstep, one message per batch both ways. ``episodes_done`` counts the
    episodes ended over all copies: the run's ``episodes`` is the environment's total.
    """

    index: int
    uid: str
    client: RequestClient
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    mapping: dict[str, str]  # slot -> agent uid
    copies: int
    #: Whether the environment seeds every episode of every copy with the seeds it is sent.
    reseeds: bool
    muscles: list[_MuscleLink] = field(default_factory=list)
    needs_reset: bool = True
    finished: bool = False
    episodes_done: int = 0
    observations: Any = None
    actions: Any = None
    episode: np.ndarray = field(init=False)
    step: np.ndarray = field(init=False)
    returns: np.ndarray = field(init=False)
    seeds: np.ndarray = field(init=False)
    next_seeds: np.ndarray = field(init=False)
    record_steps: bool = False
    record_episodes: bool = False
    store_info: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.episode = np.zeros(self.copies, dtype=np.int64)
        self.step = np.zeros(self.copies, dtype=np.int64)
        self.returns = np.zeros(self.copies, dtype=np.float64)
        self.seeds = np.zeros(self.copies, dtype=np.uint64)
        self.next_seeds = np.zeros(self.copies, dtype=np.uint64)

    @property
    def slot(self) -> str:
        return self.sensors[0].uid


class SimulationController(Component):
    """Sets up the run's environments and agents, then steps them until done or told to stop.

    Set-up (on SimulationStartRequest): for each environment, EnvironmentSetupRequest to the
    EnvironmentConductor and EnvironmentStartRequest to the environment actor; then per agent
    AgentSetupRequest to the AgentConductor. The requests of each stage all go out before their
    answers are awaited, so environments and agents set up in parallel.

    The main loop then runs in chunks of :data:`WORK_CHUNK_S` between control messages: per step
    one EnvironmentUpdateRequest and one AgentUpdateRequest per muscle, over direct links (no
    broker hop). Step records go to the store writer in batches; the writer's thread encodes
    and writes them.

    Metrics ride on the muscles' answers (their own and their brains'); each is stamped with
    the run's episodes ended and steps taken once the step that brought it is accounted for,
    and goes to the store with the step rows. The last ones come with the muscles' shutdown
    answers.

    When every environment has run its episodes (or a part failed, or the run was cancelled)
    it tells the RunGovernor with a SimulationFinishedNotice. On SimulationStopRequest it shuts
    down the muscles (which shut down their brains), the environments, then both conductors.
    """

    def __init__(self, uid: str, ctx: RunContext) -> None:
        super().__init__(uid)
        self.ctx = ctx
        self.credentials = ctx.credentials
        self._loops: list[_EnvironmentLoop | _VectorLoop] = []
        self._running = False
        self._rows: list[tuple[Any, ...]] = []
        #: (agent, metrics) that came with the muscles' answers, awaiting their stamp.
        self._reported: list[tuple[str, tuple[Metric, ...]]] = []
        self._metric_rows: list[tuple[Any, ...]] = []
        self._governor: RequestClient | None = None
        self._conductors: list[tuple[RequestClient, Request, type[Response]]] = []
        config = ctx.config
        self._episodes = config.episodes
        self._max_steps = config.max_steps
        self._evaluate_every = config.evaluate_every or 0
        self._evaluate_episodes = config.evaluate_episodes
        # The run's fingerprint: every step's observation, action, reward and end flags, in
        # order, exactly as encoded on the wire. Equal digests mean equal trajectories. It is
        # a chain: each episode end starts a new hash from the last one's value (the chain),
        # so a run that continues a saved one from its chain ends with the digest of one run
        # of both.
        self._chain = config.resume.digest if config.resume is not None else ""
        self._digest = _chained(self._chain)
        self._termination = Termination.from_spec(config.termination)
        self._next_supervision = 0.0
        self._muscles_shut_down = False
        self._links = PartLinks(self, ctx, self._given_up)

    # -- set-up ---------------------------------------------------------------------------
    @handles(SimulationStartRequest)
    def _start(self, request: SimulationStartRequest) -> SimulationStartResponse:
        self._governor = self.connect(request.governor_endpoint, peer="run governor")
        try:
            self._set_up(request.config)
        except RunCancelled:
            return SimulationStartResponse(request.run_uid, False, "cancelled during set-up")
        except Exception as error:
            log.debug("set-up failed", exc_info=True)
            return SimulationStartResponse(request.run_uid, False, describe(error))
        self._running = True
        return SimulationStartResponse(request.run_uid, True)

    def _set_up(self, config: RunConfig) -> None:
        ctx = self.ctx
        timeout, check, seed = ctx.timeouts.setup, ctx.check, ctx.seed
        environment_conductor = self.connect(ctx.endpoints.inproc(names.ENVIRONMENT_CONDUCTOR),
                                             peer="environment conductor")
        agent_conductor = self.connect(ctx.endpoints.inproc(names.AGENT_CONDUCTOR),
                                       peer="agent conductor")
        # Shut down in this order: agents first, then environments (see _stop).
        self._conductors = [
            (agent_conductor, AgentConductorShutdownRequest(ctx.run_uid),
             AgentConductorShutdownResponse),
            (environment_conductor, EnvironmentConductorShutdownRequest(ctx.run_uid),
             EnvironmentConductorShutdownResponse),
        ]
        agents = [agent.uid for agent in config.agents]
        # Every request of a stage is out before any answer is awaited, so the components
        # start and set up in parallel; the answers are taken in the file's order, and every
        # seed comes from a position in the file, so nothing here depends on timing.
        placing = [(env, environment_conductor.send(
            EnvironmentSetupRequest(ctx.run_uid, env.uid, env.placement)))
            for env in config.environments]
        starting = []
        # A conductor's answer waits on its components' set-up, which it gives up on itself:
        # as much as a set-up that keeps making progress may take (see setup_wait) is a backstop.
        for index, (env, correlation_id) in enumerate(placing):
            setup = environment_conductor.receive(correlation_id, timeout * CEILING,
                                                  EnvironmentSetupResponse, check)
            client = self._links.link(env.uid, setup.endpoint, f"environment {env.uid!r}")
            starting.append((index, env, client, client.send(
                EnvironmentStartRequest(env.uid, env.env, env.params,
                                        environment_seed(seed, index), env.copies,
                                        env.vector_mode, self._max_steps, env.wrappers))))
        for index, env, client, correlation_id in starting:
            placed = ctx.supervisor.find(env.uid)
            wait = (placed.setup_wait(timeout, check, subject=client.peer) if placed is not None
                    else SetupWait(client.peer, timeout, None, check))
            started = client.receive(correlation_id, wait.budget, EnvironmentStartResponse,
                                     wait.check)
            mapping = _resolve_mapping(env.uid, env.policy_mapping, started.sensors, agents)
            records = config.records(env) if ctx.store is not None else "none"
            loop: _EnvironmentLoop | _VectorLoop
            if started.copies:
                loop = _VectorLoop(index, env.uid, client, started.sensors, started.actuators,
                                   mapping, started.copies, started.reseeds)
            else:
                loop = _EnvironmentLoop(index, env.uid, client, started.sensors,
                                        started.actuators, mapping)
            loop.record_steps = records == "all"
            loop.record_episodes = records != "none"
            at = config.resume.positions.get(env.uid) if config.resume is not None else None
            if at is not None and isinstance(loop, _EnvironmentLoop):
                loop.episode = at.episode
                loop.first_episode = at.episode if at.first_episode is None else at.first_episode
                loop.evaluation_round, loop.evaluations_done = at.evaluation_round, at.evaluations
            loop.store_info = env.store_info
            self._loops.append(loop)

        plans = [self._muscle_plans(agent.uid, agent_index)
                 for agent_index, agent in enumerate(config.agents)]
        observers: dict[str, list[str]] = {}
        for agent, muscles in zip(config.agents, plans, strict=True):
            if agent.self_play is not None:
                observers.setdefault(agent.self_play.of, []).extend(muscles)
        # Self-play agents after the others: their muscles connect to the brain they play.
        for stage in (False, True):
            setting_up = [(agent, muscles, agent_conductor.send(
                AgentSetupRequest(ctx.run_uid, agent.uid, agent, muscles,
                                  brain_seed(seed, agent_index), config.mode,
                                  config.evaluate_every is not None,
                                  tuple(observers.get(agent.uid, ())))))
                for agent_index, (agent, muscles) in enumerate(zip(config.agents, plans,
                                                                   strict=True))
                if (agent.self_play is not None) == stage]
            for agent, muscles, correlation_id in setting_up:
                answer = agent_conductor.receive(correlation_id,
                                                 timeout * CEILING * (2 + len(muscles)),
                                                 AgentSetupResponse, check)
                self._link_muscles(agent.uid, muscles, answer)
        # The muscles of each environment in the file's order of agents, whatever the stages.
        order = {agent.uid: index for index, agent in enumerate(config.agents)}
        for loop in self._loops:
            loop.muscles.sort(key=lambda link: order[link.agent])
        self.ctx.progress.episodes_total = self._episodes * len(self._loops)

    def _link_muscles(self, agent: str, muscles: dict[str, MusclePlan],
                      answer: AgentSetupResponse) -> None:
        for muscle_uid, endpoint in answer.muscle_endpoints.items():
            loop = next(lp for lp in self._loops if lp.uid == muscles[muscle_uid].environment)
            sensed = frozenset(s.uid for s in muscles[muscle_uid].sensors)
            loop.muscles.append(_MuscleLink(
                muscle_uid, agent, self._links.link(muscle_uid, endpoint, f"muscle {muscle_uid!r}"),
                sensed))

    def _muscle_plans(self, agent_uid: str, agent_index: int) -> dict[str, MusclePlan]:
        """The agent's muscles: one per environment where the policy mapping gives it slots."""
        seed = self.ctx.seed
        muscles: dict[str, MusclePlan] = {}
        for loop in self._loops:
            slots = {slot for slot, owner in loop.mapping.items() if owner == agent_uid}
            if not slots:
                continue
            muscles[names.muscle_uid(agent_uid, loop.uid)] = MusclePlan(
                environment=loop.uid,
                sensors=tuple(s for s in loop.sensors if s.uid in slots),
                actuators=tuple(a for a in loop.actuators if a.uid in slots),
                seed=muscle_seed(seed, agent_index, loop.index),
                copies=loop.copies if isinstance(loop, _VectorLoop) else 0,
            )
        if not muscles:
            raise MosaicError(f"agent {agent_uid!r} acts in no environment: "
                              "map it in an environment's policy_mapping")
        return muscles

    # -- main loop ------------------------------------------------------------------------
    def has_work(self) -> bool:
        return self._running

    def do_work(self) -> None:
        store = self.ctx.store
        if store is not None and store.queued > STORE_BACKLOG:
            time.sleep(WORK_CHUNK_S)  # the writer's turn; control messages are seen meanwhile
            return
        now = time.perf_counter()
        deadline = now + WORK_CHUNK_S
        try:
            if now >= self._next_supervision:
                self._next_supervision = now + SUPERVISION_S
                self.ctx.supervisor.check()
            while True:
                active = [loop for loop in self._loops if not loop.finished]
                if not active:
                    self._finish("finished", None)
                    return
                self._advance(active, deadline)
                if time.perf_counter() >= deadline:
                    return
        except CallAbandoned:
            return  # the watchdog has ended the run's loop in this thread's place (_given_up)
        except RunCancelled:
            self._finish("cancelled", None)
        except BaseException as error:  # user code here (a termination condition) may sys.exit()
            log.debug("main loop failed", exc_info=True)
            self._finish("failed", describe(error))
        finally:
            self._hand_over_rows()

    def _given_up(self, error: BaseException) -> None:
        """What do_work does when a wait fails, done in the watchdog's thread for this one,
        which is held in a direct call given up on (see mosaic.orchestration.part_links): it
        does nothing more, and the governor stops the run's parts without it.

        Before that, the muscles shut down in order, as :meth:`_stop` would have them, all but
        the one the call is held in: their brains save their checkpoints. The parts they talk
        to meanwhile are not the one held, whose lock the call keeps.
        """
        self.stuck = f"is held in a call given up on ({describe(error)})"
        self._running = False
        cancelled = isinstance(error, RunCancelled)
        if not cancelled:
            self.ctx.failed.set()  # the shutdown of a failed run is hurried, as in _finish
        self._shut_down_muscles(skip=self._links.abandoned_peer)
        self._hand_over_rows()
        if cancelled:
            self._finish("cancelled", None)
        else:
            self._finish("failed", describe(error))

    def _advance(self, loops: list[_EnvironmentLoop | _VectorLoop], deadline: float) -> None:
        """Rounds of ``loops`` until ``deadline``: in each, one step (or reset) of every loop.

        The environments work in parallel: every loop's request is out before any reply is
        awaited, and a loop's next request leaves as soon as its muscles have answered, so its
        environment steps while the other loops' muscles are asked. The replies are taken round
        by round in the loops' order, and each loop's muscles are asked in that order, exactly
        as if the loops stepped one after another: the digest, the store and what brains learn
        do not depend on it. The round under way at ``deadline`` is the last one, and nothing
        is left in flight on return. A loop that an earlier one finished in its round (an
        early termination) has its reply dropped.
        """
        timeout, check = self.ctx.timeouts.step, self.ctx.check
        in_flight = [(loop, *self._send(loop)) for loop in loops]
        while in_flight:
            last_round = time.perf_counter() >= deadline
            next_round = []
            for loop, correlation_id, expect in in_flight:
                reply = loop.client.receive(correlation_id, timeout, expect, check)
                if loop.finished:
                    continue
                if isinstance(reply, VectorStepResponse):
                    self._on_vector_step(loop, reply)  # type: ignore[arg-type]
                elif isinstance(reply, EnvironmentUpdateResponse):
                    self._on_update(loop, reply, loop.evaluating > 0)  # type: ignore[arg-type,union-attr]
                elif isinstance(reply, EnvironmentResetResponse):
                    self._on_reset(loop, reply, loop.evaluating > 0)  # type: ignore[arg-type,union-attr]
                if not (last_round or loop.finished):
                    next_round.append((loop, *self._send(loop)))
            in_flight = next_round

    def _send(self, loop: _EnvironmentLoop | _VectorLoop) -> tuple[int, type[Response]]:
        """Send ``loop``'s next request: its reset, or its step with the muscles' actions."""
        if isinstance(loop, _VectorLoop):
            return self._send_vector(loop), VectorStepResponse
        if loop.needs_reset:
            if loop.evaluating:
                loop.episode_seed = evaluation_episode_seed(
                    self.ctx.seed, loop.index, loop.evaluation_round,
                    self._evaluate_episodes - loop.evaluating)
            else:
                loop.episode_seed = episode_seed(self.ctx.seed, loop.index, loop.episode)
            request: Request = EnvironmentResetRequest(loop.episode_seed)
            return loop.client.send(request), EnvironmentResetResponse
        return loop.client.send(EnvironmentUpdateRequest(loop.actions)), EnvironmentUpdateResponse

    def _send_vector(self, loop: _VectorLoop) -> int:
        if not loop.needs_reset:
            return loop.client.send(VectorStepRequest(loop.actions, loop.next_seeds))
        seed, index = self.ctx.seed, loop.index
        for copy in range(loop.copies):
            loop.next_seeds[copy] = episode_seed(seed, index, 0, copy)
        return loop.client.send(VectorResetRequest(loop.next_seeds))

    def _on_vector_step(self, loop: _VectorLoop, reply: VectorStepResponse) -> None:
        """Account for one reset or step of every copy, then ask the muscle for the next."""
        outcome = reply.outcome
        if loop.needs_reset:
            loop.needs_reset = False
        else:
            self._vector_outcome(loop, outcome.rewards, outcome.terminated, outcome.truncated,
                                 outcome.acted, outcome.info, outcome.final_info)
        starts = outcome.starts.nonzero()[0].tolist()
        if starts:
            seed, index, reseeds = self.ctx.seed, loop.index, loop.reseeds
            for copy in starts:
                loop.step[copy] = 0
                loop.returns[copy] = 0.0
                loop.seeds[copy] = loop.next_seeds[copy]
                if reseeds:
                    loop.next_seeds[copy] = episode_seed(seed, index, int(loop.episode[copy]) + 1,
                                                         copy)
        loop.observations = outcome.observations
        (link,) = loop.muscles
        answer = link.client.request(AgentBatchRequest(outcome), AgentBatchResponse,
                                     self.ctx.timeouts.step, self.ctx.check)
        loop.actions = answer.actions
        if answer.metrics:
            self._reported.append((link.agent, answer.metrics))
            self._stamp_metrics()

    def _vector_outcome(self, loop: _VectorLoop, rewards: np.ndarray, terminated: np.ndarray,
                        truncated: np.ndarray, acted: np.ndarray, info: dict[str, Any],
                        final_info: dict[int, Any]) -> None:
        """The outcome of the copies' last actions: the digest, the step rows, ended episodes.

        The episodes past the environment's ``episodes`` (several copies can end in the last
        step) are not counted; the muscle still gets their outcome.
        """
        self._digest.update(pack((loop.uid, loop.observations, loop.actions, rewards, terminated,
                                  truncated, acted)))
        loop.returns += rewards
        progress = self.ctx.progress
        progress.steps += int(acted.sum())
        if progress.first_step_at is None:
            progress.first_step_at = time.time()
        if loop.record_steps:
            agent, slot, run_id = loop.mapping[loop.slot], loop.slot, self.ctx.run_id
            keys = loop.store_info if info or final_info else ()
            for copy in acted.nonzero()[0].tolist():
                stored = None
                if keys:
                    last = final_info.get(copy)
                    stored = _chosen(keys, info_row(info, copy) if last is None else last)
                self._rows.append((run_id, loop.uid, int(loop.episode[copy]),
                                   int(loop.step[copy]), agent, slot,
                                   row(loop.observations, copy), row(loop.actions, copy),
                                   float(rewards[copy]), bool(terminated[copy]),
                                   bool(truncated[copy]), copy, stored))
        loop.step += acted
        ended = (terminated | truncated) & acted
        for copy in ended.nonzero()[0].tolist():
            self._end_copy_episode(loop, copy, bool(terminated[copy]), bool(truncated[copy]))
            if loop.finished:
                return

    def _end_copy_episode(self, loop: _VectorLoop, copy: int, terminated: bool,
                          truncated: bool) -> None:
        total = float(loop.returns[copy])
        self.ctx.progress.agent_ended_episode(loop.mapping[loop.slot], total)
        self._hand_over_rows()  # an episode's record never goes to the store before its steps
        chain = self._link_chain()
        if loop.record_episodes and self.ctx.store is not None:
            # A vector that resets its copies itself seeds them all at once, not per episode.
            seed = int(loop.seeds[copy]) if loop.reseeds else None
            self.ctx.store.record_episode(self.ctx.run_id, loop.uid, int(loop.episode[copy]),
                                          int(loop.step[copy]), total, {loop.slot: total},
                                          terminated, truncated, seed, copy, chain=chain)
        loop.episode[copy] += 1
        loop.episodes_done += 1
        if loop.episodes_done >= self._episodes:
            loop.finished = True
        self._episode_ended(loop.uid, total)

    def _on_reset(self, loop: _EnvironmentLoop, reset: EnvironmentResetResponse,
                  evaluation: bool = False) -> None:
        loop.needs_reset = False
        loop.step = 0
        loop.returns = {}
        loop.outstanding = {}
        loop.snapshots = {}
        loop.observations = dict(reset.observations)
        loop.actions = self._agents_update(loop, 0, reset.observations, {}, False, False,
                                           reset.acting, reset.legal_actions,
                                           AgentEvaluateRequest if evaluation
                                           else AgentUpdateRequest, reset.infos)
        if self._reported:
            self._stamp_metrics()

    def _on_update(self, loop: _EnvironmentLoop, update: EnvironmentUpdateResponse,
                   evaluation: bool = False) -> None:
        """One step of ``loop``: rewards to the slots' last actions, the settled actions
        recorded and fed back, the muscles asked for the next. An evaluation step counts for
        nothing of the run (progress, digest, steps table) and asks the greedy instances."""
        step = loop.step
        loop.step = step + 1
        terminated = update.terminated
        truncated = update.truncated or (self._max_steps is not None
                                         and loop.step >= self._max_steps)
        outstanding, returns = loop.outstanding, loop.returns
        for slot, action in loop.actions.items():
            outstanding[slot] = [step, loop.observations[slot], action, 0.0]
        # A reward belongs to the slot's last action, whenever it arrives (in a turn-based game
        # the loser's -1 comes with the winner's move).
        for slot, reward in update.rewards.items():
            returns[slot] = returns.get(slot, 0.0) + reward
            entry = outstanding.get(slot)
            if entry is not None:
                entry[3] += reward
        if not evaluation:
            progress = self.ctx.progress
            progress.steps += 1
            if progress.first_step_at is None:
                progress.first_step_at = time.time()
        loop.observations.update(update.observations)
        done = terminated or truncated
        settled = list(outstanding) if done else [s for s in update.acting if s in outstanding]
        if evaluation:
            feedback = {slot: outstanding.pop(slot)[3] for slot in settled}
        else:
            feedback = self._settle(loop, settled, terminated, truncated, update.infos)
        loop.actions = self._agents_update(loop, loop.step, update.observations, feedback,
                                           terminated, truncated, update.acting,
                                           update.legal_actions,
                                           AgentEvaluateRequest if evaluation
                                           else AgentUpdateRequest, update.infos)
        if done:
            if evaluation:
                self._end_evaluation_episode(loop, terminated, truncated)
            else:
                self._end_episode(loop, terminated, truncated)
        if self._reported:
            self._stamp_metrics()

    def _settle(self, loop: _EnvironmentLoop, slots: list[str], terminated: bool,
                truncated: bool, infos: dict[str, Any]) -> dict[str, float]:
        """Close the outstanding actions of ``slots``: record them and return their rewards.

        Each slot gets one feedback per action, with every reward since that action, when it
        is about to act again or the episode ends: the contract of Muscle.feedback, also in
        turn-based games. A row keeps the ``store_info`` keys of the slot's info of this step.
        """
        rewards: dict[str, float] = {}
        digest, record, rows, run_id = self._digest, loop.record_steps, self._rows, self.ctx.run_id
        for slot in slots:
            step, observation, action, reward = loop.outstanding.pop(slot)
            rewards[slot] = reward
            digest.update(pack((loop.uid, slot, observation, action, reward, terminated,
                                truncated)))
            if record:
                rows.append((run_id, loop.uid, loop.episode, step, loop.mapping[slot], slot,
                             observation, action, reward, terminated, truncated, 0,
                             _chosen(loop.store_info, infos.get(slot))))
        return rewards

    def _agents_update(self, loop: _EnvironmentLoop, step: int, observations: dict[str, Any],
                       rewards: dict[str, float], terminated: bool, truncated: bool,
                       acting: tuple[str, ...], legal: dict[str, Any],
                       kind: type[AgentUpdateRequest | AgentEvaluateRequest] = AgentUpdateRequest,
                       infos: dict[str, Any] | None = None) -> dict[str, Any]:
        timeout, check = self.ctx.timeouts.step, self.ctx.check
        links = loop.muscles
        infos = infos or {}
        if len(links) == 1:
            request = kind(step, observations, rewards, terminated, truncated, acting, legal,
                           infos)
            answer = links[0].client.request(request, AgentUpdateResponse, timeout, check)
            if answer.metrics:
                self._reported.append((links[0].agent, answer.metrics))
            if answer.snapshot is not None:
                loop.snapshots[links[0].agent] = answer.snapshot
            return answer.actions
        # Several muscles: ask all first, then collect, so they work in parallel.
        everyone = step == 0 or terminated or truncated
        pending = []
        for link in links:
            mine = link.slots
            my_acting = tuple(s for s in acting if s in mine)
            my_rewards = {s: r for s, r in rewards.items() if s in mine}
            if not (everyone or my_acting or my_rewards):
                continue
            request = kind(step, {s: o for s, o in observations.items() if s in mine},
                           my_rewards, terminated, truncated, my_acting,
                           {s: m for s, m in legal.items() if s in mine},
                           {s: i for s, i in infos.items() if s in mine})
            pending.append((link, link.client.send(request)))
        actions: dict[str, Any] = {}
        for link, correlation_id in pending:
            answer = link.client.receive(correlation_id, timeout, AgentUpdateResponse, check)
            actions.update(answer.actions)
            if answer.metrics:
                self._reported.append((link.agent, answer.metrics))
            if answer.snapshot is not None:
                loop.snapshots[link.agent] = answer.snapshot
        return actions

    def _end_episode(self, loop: _EnvironmentLoop, terminated: bool, truncated: bool) -> None:
        total = sum(loop.returns.values())
        by_agent: dict[str, float] = {}
        for slot, value in loop.returns.items():
            agent = loop.mapping[slot]
            by_agent[agent] = by_agent.get(agent, 0.0) + value
        for agent, value in by_agent.items():
            self.ctx.progress.agent_ended_episode(agent, value)
        self._hand_over_rows()  # an episode's record never goes to the store before its steps
        chain = self._link_chain()
        if loop.record_episodes and self.ctx.store is not None:
            self.ctx.store.record_episode(self.ctx.run_id, loop.uid, loop.episode, loop.step, total,
                                          dict(loop.returns), terminated, truncated,
                                          loop.episode_seed, snapshots=loop.snapshots or None,
                                          chain=chain)
        loop.episode += 1
        loop.needs_reset = True
        done = loop.episode - loop.first_episode >= self._episodes
        every = self._evaluate_every
        if every and loop.episode % every == 0:
            loop.evaluating = self._evaluate_episodes
            loop.finish_after_evaluation = done
        else:
            loop.finished = done
        self._episode_ended(loop.uid, total)

    # -- evaluation episodes --------------------------------------------------------------
    # A loop whose ``evaluating`` is set runs evaluation episodes (see _on_reset/_on_update):
    # the muscles' greedy instances act (AgentEvaluateRequest), and nothing counts for the
    # digest, the steps table, the run's progress or its termination.
    def _end_evaluation_episode(self, loop: _EnvironmentLoop, terminated: bool,
                                truncated: bool) -> None:
        """Record the evaluation episode (numbered among the environment's evaluation
        episodes, from 0); after the round's last, training resumes or the loop ends."""
        if loop.record_episodes and self.ctx.store is not None:
            self.ctx.store.record_episode(self.ctx.run_id, loop.uid, loop.evaluations_done,
                                          loop.step, sum(loop.returns.values()),
                                          dict(loop.returns), terminated, truncated,
                                          loop.episode_seed, evaluation=True,
                                          snapshots=loop.snapshots or None)
        loop.evaluations_done += 1
        loop.evaluating -= 1
        loop.needs_reset = True
        if not loop.evaluating:
            loop.evaluation_round += 1
            loop.finished = loop.finished or loop.finish_after_evaluation

    def _link_chain(self) -> str:
        """An episode ended: link the digest chain, and return its new link (hex), which the
        episode's record keeps (a run resumed from this episode's end starts from it)."""
        self._chain = self._digest.digest().hex()
        self._digest = _chained(self._chain)
        return self._chain

    def _episode_ended(self, environment: str, total: float) -> None:
        """Count an ended episode (its chain linked); end the run's loops if a termination
        condition is met."""
        progress = self.ctx.progress
        progress.episodes += 1
        progress.return_sum += total
        progress.last_return = total
        progress.recent_returns.append(total)
        progress.last_step_at = time.time()
        reason = self._termination.reached(environment, total, progress)
        if reason is not None:
            log.info("run %s: %s", self.ctx.run_uid, reason)
            for other in self._loops:
                other.finished = True

    def _stamp_metrics(self) -> None:
        """Stamp the metrics that came with the muscles' answers with the run's episodes ended
        and steps taken so far, as rows for the store."""
        progress, run_id, rows = self.ctx.progress, self.ctx.run_id, self._metric_rows
        episode, step = progress.episodes, progress.steps
        for agent, metrics in self._reported:
            for metric in metrics:
                rows.append((run_id, agent, metric.source, metric.name, metric.value, episode,
                             step, metric.at))
        self._reported = []

    def _report_position(self) -> None:
        """The run's digest, and where it stands for a run that continues it: the chain at
        the last episode end and each (copy-less) environment's position."""
        progress = self.ctx.progress
        progress.digest = self._digest.hexdigest()
        progress.chain = self._chain
        progress.positions = {loop.uid: (loop.episode, loop.evaluation_round,
                                         loop.evaluations_done)
                              for loop in self._loops if isinstance(loop, _EnvironmentLoop)}

    def _hand_over_rows(self) -> None:
        store = self.ctx.store
        if store is None:
            self._rows = []
            self._metric_rows = []
            return
        if self._rows:
            store.record_steps(self._rows)
            self._rows = []
        if self._metric_rows:
            store.record_metrics(self._metric_rows)
            self._metric_rows = []

    def _finish(self, status: str, error: str | None) -> None:
        self._running = False
        if status == "failed":
            self.ctx.failed.set()
        progress = self.ctx.progress
        self._report_position()
        if progress.steps:
            progress.last_step_at = time.time()
        if self._governor is not None:
            self._governor.notify(SimulationFinishedNotice(self.ctx.run_uid, status, error,
                                                           progress.episodes, progress.steps))

    # -- shutdown -------------------------------------------------------------------------
    @handles(SimulationStopRequest)
    def _stop(self, request: SimulationStopRequest) -> SimulationStopResponse:
        self._running = False
        self._hand_over_rows()
        self._shut_down_muscles()
        self._hand_over_rows()
        for loop in self._loops:
            self._shut_down(loop.client, loop.uid, EnvironmentShutdownRequest(loop.uid),
                            EnvironmentShutdownResponse)
        killed: list[str] = []
        for client, shutdown, answer_type in self._conductors:
            try:
                answer = client.request(shutdown, answer_type, self.ctx.timeouts.shutdown * 4)
                killed.extend(answer.killed)  # type: ignore[attr-defined]
            except MosaicError as error:
                log.error("%s did not shut down: %s", client.peer, error)
        self.request_stop()
        progress = self.ctx.progress
        return SimulationStopResponse(request.run_uid, progress.episodes, progress.steps,
                                      tuple(killed))

    def _shut_down_muscles(self, skip: str | None = None) -> None:
        """Shut every muscle down (but the one whose peer is ``skip``) and stamp the last
        metrics; once only, and after the run's position is reported."""
        if self._muscles_shut_down:
            return
        self._muscles_shut_down = True
        self._report_position()
        for loop in self._loops:
            for link in loop.muscles:
                if link.client.peer == skip:
                    continue
                # A muscle's shutdown waits on its brain's (which saves the checkpoint).
                answer = self._shut_down(link.client, link.uid, MuscleShutdownRequest(link.uid),
                                         MuscleShutdownResponse, needs=(link.agent,))
                if isinstance(answer, MuscleShutdownResponse) and answer.metrics:
                    self._reported.append((link.agent, answer.metrics))
        # The last metrics, reported after the last step.
        self._stamp_metrics()

    def _shut_down(self, client: RequestClient, uid: str, request: Request,
                   answer_type: type[Response], needs: tuple[str, ...] = ()) -> Response | None:
        """Ask one component to shut down and return its answer; a dead or silent one is left
        to its conductor (``None``).

        The wait ends early when the component, or one it ``needs`` to shut down (a muscle's
        brain), dies (the run governor fails a finished run for that), and when a cancel or a
        failure meanwhile hurries the shutdown (see :class:`ShutdownClock`).
        """
        if not self.ctx.supervisor.is_alive(uid):
            return None
        clock = ShutdownClock(self.ctx)

        def check() -> None:
            self.ctx.supervisor.check(only=(uid, *needs))
            if clock.expired():
                raise RequestTimeout(f"{client.peer} did not answer before the hurried deadline "
                                     "of a cancelled or failed run")

        try:
            return client.request(request, answer_type, clock.timeout, check)
        except (MosaicError, RemoteError) as error:
            log.warning("%s did not shut down cleanly: %s", client.peer, error)
            return None

    def on_shutdown(self) -> None:
        self._links.close()


def _chained(chain: str) -> hashlib.blake2b:
    """A digest that starts from ``chain`` (hex; empty: from nothing)."""
    digest = hashlib.blake2b(digest_size=16)
    if chain:
        digest.update(bytes.fromhex(chain))
    return digest


def _chosen(keys: tuple[str, ...], info: Any) -> dict[str, Any] | None:
    """The ``keys`` of ``info`` that it has, for the store; ``None`` when it has none."""
    if not keys or not info:
        return None
    chosen = {key: info[key] for key in keys if key in info}
    return chosen or None


def _resolve_mapping(env_uid: str, mapping: dict[str, str] | None, sensors: tuple[SensorSpec, ...],
                     agents: list[str]) -> dict[str, str]:
    """slot -> agent uid. Without a mapping, the only agent takes every slot."""
    slots = [s.uid for s in sensors]
    if mapping is None:
        if len(agents) != 1:
            raise MosaicError(f"environment {env_uid!r} needs a policy_mapping: the file has "
                              f"{len(agents)} agents")
        return {slot: agents[0] for slot in slots}
    unknown = sorted(set(mapping) - set(slots))
    if unknown:
        raise MosaicError(f"environment {env_uid!r}: policy_mapping names {unknown}, but its "
                          f"agents are {slots}")
    unmapped = [s for s in slots if s not in mapping]
    if unmapped:
        raise MosaicError(f"environment {env_uid!r}: no agent mapped for {unmapped} in "
                          "policy_mapping")
    return dict(mapping)
