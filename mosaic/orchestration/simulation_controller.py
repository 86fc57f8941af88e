"""The vanilla SimulationController: environment and agents alternate, step after step.

It holds the run's links and drives them: set-up, the send/receive rounds of the per-step loop,
supervision, handing rows to the store and the ordered shutdown. The step bookkeeping (pending
actions, rewards, episode ends, the digest chain) is the step core's, which knows no socket:
:mod:`mosaic.stepping.episodes` and :mod:`mosaic.stepping.ledger`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial

from mosaic.conductors.run_context import RunContext
from mosaic.conductors.shutdown_clock import ShutdownClock
from mosaic.core.errors import (
    CallAbandoned,
    MosaicError,
    RemoteError,
    RequestTimeout,
    RunCancelled,
)
from mosaic.core.run_states import RunStatus
from mosaic.core.seeding import brain_seed, environment_seed, muscle_seed
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
    EnvironmentSetupRequest,
    EnvironmentSetupResponse,
    EnvironmentShutdownRequest,
    EnvironmentShutdownResponse,
    EnvironmentStartRequest,
    EnvironmentStartResponse,
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
    names,
)
from mosaic.messages.trusted import trusted_constructor
from mosaic.orchestration.part_links import PartLinks
from mosaic.orchestration.rollouts import Rollout, RolloutSet, Worker, shares
from mosaic.orchestration.videos import run_videos
from mosaic.runtime.component import Component, handles
from mosaic.runtime.setup_wait import CEILING, SetupWait
from mosaic.stepping.copy_episodes import CopyEpisodes
from mosaic.stepping.episodes import Episodes, Recording, Schedule
from mosaic.stepping.ledger import Ledger
from mosaic.stepping.player_episodes import PlayerEpisodes
from mosaic.stepping.termination import Termination
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
class _Environment:
    """One environment of the run: its step core, its link and its muscles' links."""

    core: Episodes
    client: RequestClient
    sensors: tuple[SensorSpec, ...]
    actuators: tuple[ActuatorSpec, ...]
    muscles: list[_MuscleLink]


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
        self._environments: list[_Environment] = []
        self._running = False
        self._governor: RequestClient | None = None
        self._conductors: list[tuple[RequestClient, Request, type[Response]]] = []
        config = ctx.config
        self._schedule = Schedule(ctx.seed, config.episodes, config.max_steps,
                                  config.evaluate_every or 0, config.evaluate_episodes)
        store = ctx.store
        pruning = None
        if config.search is not None:
            from mosaic.orchestration.pruning import Pruning  # Optuna: a search's runs only

            pruning = Pruning(config.search)
        self._ledger = Ledger(ctx.run_id, ctx.progress, Termination.from_spec(config.termination),
                              config.resume.digest if config.resume is not None else "",
                              self._hand_over_rows,
                              store.record_episode if store is not None else None, ctx.run_uid,
                              pruning)
        self._rollouts = RolloutSet(ctx, self._ledger)
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
            for env in config.environments if not env.rollouts]
        placing_workers = [(env, uid, environment_conductor.send(
            EnvironmentSetupRequest(ctx.run_uid, uid, env.placement, rollout=True)))
            for env in config.environments for uid in env.rollout_workers()]
        starting = []
        # A conductor's answer waits on its components' set-up, which it gives up on itself:
        # as much as a set-up that keeps making progress may take (see setup_wait) is a backstop.
        for env, correlation_id in placing:
            setup = environment_conductor.receive(correlation_id, timeout * CEILING,
                                                  EnvironmentSetupResponse, check)
            starting.append((env, env.uid, setup.endpoint))
        for env, uid, correlation_id in placing_workers:
            setup = environment_conductor.receive(correlation_id, timeout * CEILING,
                                                  EnvironmentSetupResponse, check)
            starting.append((env, uid, setup.endpoint))
        index_of = {env.uid: index for index, env in enumerate(config.environments)}
        started_at = []
        for env, uid, endpoint in starting:
            index = index_of[env.uid]
            kind = "rollout worker" if env.rollouts else "environment"
            client = self._links.link(uid, endpoint, f"{kind} {uid!r}")
            started_at.append((index, env, uid, endpoint, client, client.send(
                EnvironmentStartRequest(env.uid, env.env, env.params,
                                        environment_seed(seed, index), env.copies,
                                        env.vector_mode, self._schedule.max_steps, env.wrappers,
                                        run_videos(env.record_video, ctx.run_uid),
                                        env.seeding))))
        rollouts: dict[str, Rollout] = {}
        for index, env, uid, endpoint, client, correlation_id in started_at:
            placed = ctx.supervisor.find(uid)
            wait = (placed.setup_wait(timeout, check, subject=client.peer) if placed is not None
                    else SetupWait(client.peer, timeout, None, check))
            started = client.receive(correlation_id, wait.budget, EnvironmentStartResponse,
                                     wait.check)
            mapping = _resolve_mapping(env.uid, env.policy_mapping, started.sensors, agents)
            records = config.records(env) if ctx.store is not None else "none"
            recording = Recording(records == "all", records != "none", env.store_info)
            if env.rollouts:
                rollout = rollouts.get(env.uid)
                if rollout is None:
                    rollout = rollouts[env.uid] = Rollout(index, env, mapping, started.sensors,
                                                          started.actuators, started.copies,
                                                          recording)
                    self._rollouts.add(rollout)
                number = len(rollout.workers)
                rollout.workers.append(Worker(
                    uid, client, endpoint, env.placement, number * started.copies,
                    shares(self._schedule.episodes, env.rollouts)[number]))
                continue
            links: list[_MuscleLink] = []
            core: Episodes
            if started.copies:
                core = CopyEpisodes(index, env.uid, mapping, self._ledger, self._schedule,
                                    recording, partial(self._ask_batch, links),
                                    started.sensors[0].uid, started.copies, started.reseeds)
            else:
                core = PlayerEpisodes(index, env.uid, mapping, self._ledger, self._schedule,
                                      recording, partial(self._ask_muscles, links))
            at = config.resume.positions.get(env.uid) if config.resume is not None else None
            if at is not None:
                core.resume(at)
            self._environments.append(_Environment(core, client, started.sensors,
                                                   started.actuators, links))

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
        for environment in self._environments:
            environment.muscles.sort(key=lambda link: order[link.agent])
        self.ctx.progress.episodes_total = self._schedule.episodes * len(config.environments)

    def _link_muscles(self, agent: str, muscles: dict[str, MusclePlan],
                      answer: AgentSetupResponse) -> None:
        for muscle_uid, endpoint in answer.muscle_endpoints.items():
            if muscles[muscle_uid].host is not None:
                continue  # a rollout worker's: it is asked there
            environment = next(env for env in self._environments
                               if env.core.uid == muscles[muscle_uid].environment)
            sensed = frozenset(s.uid for s in muscles[muscle_uid].sensors)
            environment.muscles.append(_MuscleLink(
                muscle_uid, agent, self._links.link(muscle_uid, endpoint, f"muscle {muscle_uid!r}"),
                sensed))

    def _muscle_plans(self, agent_uid: str, agent_index: int) -> dict[str, MusclePlan]:
        """The agent's muscles: one per environment where the policy mapping gives it slots."""
        seed = self.ctx.seed
        muscles: dict[str, MusclePlan] = {}
        for rollout in self._rollouts.rollouts:
            muscles.update(rollout.muscle_plans(agent_uid, agent_index, seed))
        for environment in self._environments:
            core = environment.core
            slots = {slot for slot, owner in core.mapping.items() if owner == agent_uid}
            if not slots:
                continue
            muscles[names.muscle_uid(agent_uid, core.uid)] = MusclePlan(
                environment=core.uid,
                sensors=tuple(s for s in environment.sensors if s.uid in slots),
                actuators=tuple(a for a in environment.actuators if a.uid in slots),
                seed=muscle_seed(seed, agent_index, core.index),
                copies=core.copies,
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
            if self._rollouts:
                if not self._rollouts.stepping:
                    self._rollouts.run(self._schedule)  # once the run is running, not before
                if self._rollouts.done:
                    self._finish(RunStatus.FINISHED, None)
                else:
                    self._rollouts.collect()
                return
            while True:
                active = [env for env in self._environments if not env.core.finished]
                if not active:
                    self._finish(RunStatus.FINISHED, None)
                    return
                self._advance(active, deadline)
                if time.perf_counter() >= deadline:
                    return
        except CallAbandoned:
            return  # the watchdog has ended the run's loop in this thread's place (_given_up)
        except RunCancelled:
            self._finish(RunStatus.CANCELLED, None)
        except BaseException as error:  # user code here (a termination condition) may sys.exit()
            log.debug("main loop failed", exc_info=True)
            self._finish(RunStatus.FAILED, describe(error))
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
            self._finish(RunStatus.CANCELLED, None)
        else:
            self._finish(RunStatus.FAILED, describe(error))

    def _advance(self, environments: list[_Environment], deadline: float) -> None:
        """Rounds of ``environments`` until ``deadline``: in each, one step (or reset) of each.

        The environments work in parallel: every one's request is out before any reply is
        awaited, and an environment's next request leaves as soon as its muscles have answered,
        so it steps while the others' muscles are asked. The replies are taken round by round
        in the environments' order, and each one's muscles are asked in that order, exactly as
        if they stepped one after another: the digest, the store and what brains learn do not
        depend on it. The round under way at ``deadline`` is the last one, and nothing is left
        in flight on return. An environment that an earlier one finished in its round (an
        early termination) has its reply dropped.
        """
        timeout, check = self.ctx.timeouts.step, self.ctx.check
        in_flight = [(env, env.client.send(env.core.request())) for env in environments]
        while in_flight:
            last_round = time.perf_counter() >= deadline
            next_round = []
            for env, correlation_id in in_flight:
                core = env.core
                reply = env.client.receive(correlation_id, timeout, core.expects, check)
                if core.finished:
                    continue
                core.accept(reply)
                if not (last_round or core.finished):
                    next_round.append((env, env.client.send(core.request())))
            in_flight = next_round

    def _ask_muscles(self, links: list[_MuscleLink],
                     request: AgentUpdateRequest | AgentEvaluateRequest
                     ) -> list[tuple[str, AgentUpdateResponse]]:
        """Ask an environment's muscles (``links``) for their slots' actions (see AskMuscles):
        each the part of ``request`` about its slots, all asked before any answer is awaited,
        so they work in parallel. A muscle with nothing to act on or learn from this step is
        not asked, but at an episode's first and last steps every one is."""
        timeout, check = self.ctx.timeouts.step, self.ctx.check
        if len(links) == 1:
            link = links[0]
            return [(link.agent, link.client.request(request, AgentUpdateResponse, timeout,
                                                     check))]
        # Each part is made of the fields of ``request``, which the loop made of validated ones.
        kind = trusted_constructor(type(request))
        observations, rewards, acting = request.observations, request.rewards, request.acting
        legal, infos = request.legal_actions, request.infos
        everyone = request.step == 0 or request.terminated or request.truncated
        pending = []
        for link in links:
            mine = link.slots
            my_acting = tuple(s for s in acting if s in mine)
            my_rewards = {s: r for s, r in rewards.items() if s in mine}
            if not (everyone or my_acting or my_rewards):
                continue
            part = kind(request.step, {s: o for s, o in observations.items() if s in mine},
                        my_rewards, request.terminated, request.truncated, my_acting,
                        {s: m for s, m in legal.items() if s in mine},
                        {s: i for s, i in infos.items() if s in mine})
            pending.append((link, link.client.send(part)))
        return [(link.agent, link.client.receive(correlation_id, timeout, AgentUpdateResponse,
                                                 check))
                for link, correlation_id in pending]

    def _ask_batch(self, links: list[_MuscleLink],
                   request: AgentBatchRequest) -> tuple[str, AgentBatchResponse]:
        """Ask the one muscle of an environment with copies (``links``) for every copy's
        action (see AskBatch)."""
        (link,) = links
        return link.agent, link.client.request(request, AgentBatchResponse,
                                               self.ctx.timeouts.step, self.ctx.check)

    def _hand_over_rows(self) -> None:
        """Give the ledger's rows to the store (drop them when nothing is stored)."""
        store, ledger = self.ctx.store, self._ledger
        if store is None:
            ledger.rows = []
            ledger.metric_rows = []
            return
        if ledger.rows:
            store.record_steps(ledger.rows)
            ledger.rows = []
        if ledger.metric_rows:
            store.record_metrics(ledger.metric_rows)
            ledger.metric_rows = []

    def _finish(self, status: RunStatus, error: str | None) -> None:
        self._running = False
        if status == RunStatus.FAILED:
            self.ctx.failed.set()
        progress = self.ctx.progress
        self._report_position()
        if progress.steps:
            progress.last_step_at = time.time()
        if self._governor is not None:
            self._governor.notify(SimulationFinishedNotice(self.ctx.run_uid, status.value, error,
                                                           progress.episodes, progress.steps))

    # -- shutdown -------------------------------------------------------------------------
    def _report_position(self) -> None:
        """The run's digest and position, into its progress (see Ledger.report_position); with
        rollout workers, their digests make the run's."""
        self._ledger.report_position()
        if self._rollouts:
            self.ctx.progress.digest = self._rollouts.digest()

    @handles(SimulationStopRequest)
    def _stop(self, request: SimulationStopRequest) -> SimulationStopResponse:
        self._running = False
        self._hand_over_rows()
        if self._rollouts:
            # Their muscles shut down in the workers, before the brains' conductor stops.
            self._rollouts.stop()
            self._report_position()
        self._shut_down_muscles()
        self._hand_over_rows()
        for env in self._environments:
            uid = env.core.uid
            self._shut_down(env.client, uid, EnvironmentShutdownRequest(uid),
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
        ledger = self._ledger
        self._report_position()
        for env in self._environments:
            for link in env.muscles:
                if link.client.peer == skip:
                    continue
                # A muscle's shutdown waits on its brain's (which saves the checkpoint).
                answer = self._shut_down(link.client, link.uid, MuscleShutdownRequest(link.uid),
                                         MuscleShutdownResponse, needs=(link.agent,))
                if isinstance(answer, MuscleShutdownResponse) and answer.metrics:
                    ledger.reported.append((link.agent, answer.metrics))
        # The last metrics, reported after the last step.
        ledger.stamp_metrics()

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
            # A component ends in order right after its answer, which its process delivers
            # before it exits (mosaic.transport.context.deliver_pending) but which may still be
            # on its way here; a brain ends in order once its last muscle is shut down, maybe
            # before that muscle's answer is here. Only a failure ends the wait early.
            self.ctx.supervisor.check(only=(uid, *needs), in_order_ends=True)
            if clock.expired():
                raise RequestTimeout(f"{client.peer} did not answer before {clock.deadline()}")

        try:
            return client.request(request, answer_type, clock.timeout, check)
        except (MosaicError, RemoteError) as error:
            log.warning("%s did not shut down cleanly: %s", client.peer, error)
            return None

    def on_shutdown(self) -> None:
        self._links.close()


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
