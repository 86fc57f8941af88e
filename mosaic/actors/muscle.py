"""The muscle actor: runs a user's Muscle, answers the controller, talks to the brain."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mosaic.actors.metrics import reported
from mosaic.actors.slots import slots_from_specs
from mosaic.actors.snapshots import SnapshotPool
from mosaic.agents import Muscle, MuscleContext
from mosaic.agents.batch import Batch
from mosaic.agents.metrics import MetricLog, PendingMetrics
from mosaic.agents.muscle_step import MuscleCalls, muscle_step
from mosaic.agents.per_copy import PerCopyMuscles
from mosaic.core.checkpoints import learner_arrays, restore_learner
from mosaic.core.errors import MosaicError
from mosaic.core.imports import import_object
from mosaic.core.seeding import check_seed, evaluation_seed
from mosaic.messages import (
    AgentBatchRequest,
    AgentBatchResponse,
    AgentEvaluateRequest,
    AgentUpdateRequest,
    AgentUpdateResponse,
    BrainCheckpointRequest,
    BrainCheckpointResponse,
    BrainShutdownRequest,
    BrainShutdownResponse,
    BrainSyncRequest,
    Message,
    Metric,
    MuscleSetupRequest,
    MuscleSetupResponse,
    MuscleShutdownRequest,
    MuscleShutdownResponse,
    MuscleUpdateRequest,
    MuscleUpdateResponse,
)
from mosaic.messages.names import AGENT_CONDUCTOR, SIMULATION_CONTROLLER
from mosaic.runtime.component import Component, handles
from mosaic.transport import RequestClient

DEFAULT_BRAIN_TIMEOUT_S = 60.0


class MuscleActor(Component):
    """Hosts one :class:`~mosaic.agents.Muscle` for one agent in one environment.

    Per :class:`AgentUpdateRequest`: ``step == 0`` starts an episode (``reset``); each slot that
    gets feedback or acts gets its info first (``receive_info``); unless ``step == 0``, each
    slot's reward goes to ``feedback``, and experience it returns is sent to the brain, whose
    answer goes to ``apply_update``. Unless the episode ended, ``act`` picks an action for each
    acting slot of this muscle.

    Metrics: what the muscle reported (``context.log_metric``) and what its brain's answers
    carried ride on the muscle's next answer to the controller (the last ones on its
    MuscleShutdownResponse). The brain's are held up to
    :data:`~mosaic.agents.metrics.METRICS_PER_REPLY` between two answers, as the muscle's own.

    Evaluation (set up with ``evaluate``): a second instance of the muscle class, in
    ``mode="test"`` with a seed of its own, plays :class:`AgentEvaluateRequest` steps; it gets
    the brain's sync answer and every update the training instance gets. What it returns from
    ``feedback`` is dropped, its episodes count for no checkpoint, and what it reports through
    its context is not recorded.

    Self-play (set up with ``self_play``): the muscle, in ``mode="test"``, plays frozen
    snapshots of another agent's brain. Before each episode it takes that brain's current
    weights (:meth:`~mosaic.agents.Brain.sync`) into a :class:`SnapshotPool` when one is due,
    applies the snapshot the pool draws, and names it in the episode's first answer. It plays
    evaluation episodes itself, with the snapshot of the episode before.

    Checkpoints: in a training phase, the muscle's :meth:`~mosaic.agents.Muscle.state` and
    generator go to the brain with each checkpoint request and with the shutdown request, to be
    saved with the brain's; a part that comes back with the brain's sync answer (a loaded
    checkpoint) is restored right after set-up.
    """

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self._muscle: Muscle | None = None
        self._context: MuscleContext | None = None
        self._greedy: Muscle | None = None
        self._greedy_metrics = MetricLog()
        self._brain: RequestClient | None = None
        self._brain_timeout = DEFAULT_BRAIN_TIMEOUT_S
        self._slots: frozenset[str] = frozenset()
        self._checkpoint_every = 0
        self._calls = MuscleCalls(Muscle)
        self._episodes = 0
        self._metrics = MetricLog()
        self._relayed: PendingMetrics[Metric] = PendingMetrics(f"the brain of muscle {uid!r}")
        self._pool: SnapshotPool | None = None
        self._source: RequestClient | None = None
        self._playing: int | None = None  # the snapshot of the episode under way

    def accepts(self, message: Message, sender: str | None) -> bool:
        if isinstance(message, MuscleSetupRequest):
            return sender == AGENT_CONDUCTOR
        return sender == SIMULATION_CONTROLLER

    @handles(MuscleSetupRequest)
    def _setup(self, request: MuscleSetupRequest) -> MuscleSetupResponse:
        self.check_import(request.muscle.class_path)
        cls = import_object(request.muscle.class_path)
        if not (isinstance(cls, type) and issubclass(cls, Muscle)):
            raise MosaicError(f"{request.muscle.class_path} is not a mosaic.agents.Muscle subclass")
        slots = slots_from_specs(request.sensors, request.actuators)
        copies = request.copies
        if copies and len(slots) != 1:
            raise MosaicError(f"muscle {self.uid!r}: the copies of a vector environment have one "
                              f"slot, not {len(slots)}")
        context = MuscleContext(agent=request.agent_uid, muscle=self.uid,
                                environment=request.environment_uid, slots=slots,
                                seed=check_seed(request.seed), mode=request.mode,  # type: ignore[arg-type]
                                params=dict(request.muscle.params), copies=max(copies, 1))
        self._metrics = context.metrics
        muscle = cls() if not copies or cls.acts_on_batches() else PerCopyMuscles(cls)
        muscle.setup(context)
        self._muscle = muscle
        self._context = context
        if request.self_play is not None:
            self._set_up_self_play(request, copies)
        elif request.evaluate:
            if copies:
                raise MosaicError(f"muscle {self.uid!r}: evaluation episodes are not supported "
                                  "with copies")
            # Its metrics are its own, emptied at every step: evaluation reports nothing.
            self._greedy_metrics = MetricLog()
            greedy = cls()
            greedy.setup(dataclasses.replace(
                context, seed=evaluation_seed(check_seed(request.seed) or 0), mode="test",
                params=dict(request.muscle.params), metrics=self._greedy_metrics))
            self._greedy = greedy
        self._slots = frozenset(slots)
        self._calls = MuscleCalls(cls)
        self._brain_timeout = request.brain_timeout
        self._checkpoint_every = request.checkpoint_every
        if request.brain_endpoint:
            self._brain = self.connect(request.brain_endpoint, peer=f"brain of {request.agent_uid}")
            answer = self._brain.request(BrainSyncRequest(self.uid), MuscleUpdateResponse,
                                         self._brain_timeout, self.check_interrupted)
            if answer.metrics:
                self._relayed.extend(answer.metrics)
            if answer.restore is not None:
                muscle.load_state(restore_learner(answer.restore, context.rng))
            if answer.update is not None:
                self._apply(answer.update)
        return MuscleSetupResponse(self.uid)

    def _set_up_self_play(self, request: MuscleSetupRequest, copies: int) -> None:
        plan = request.self_play
        if plan is None or not request.snapshot_endpoint:
            raise MosaicError(f"muscle {self.uid!r}: self-play needs the endpoint of the brain "
                              "whose snapshots it plays")
        if copies:
            raise MosaicError(f"muscle {self.uid!r}: self-play is not supported with copies")
        self._pool = SnapshotPool(plan, check_seed(request.seed) or 0)
        self._source = self.connect(request.snapshot_endpoint, peer=f"brain of {plan.of}")

    def _play_snapshot(self, muscle: Muscle) -> int:
        """Take a snapshot if one is due, draw the one to play this episode with, apply it;
        return the episode it was taken at."""
        pool, source = self._pool, self._source
        if pool is None or source is None:
            raise MosaicError(f"muscle {self.uid!r} was not set up for self-play")
        if pool.due(self._episodes):
            answer = source.request(BrainSyncRequest(self.uid), MuscleUpdateResponse,
                                    self._brain_timeout, self.check_interrupted)
            if answer.update is None:
                raise MosaicError(f"muscle {self.uid!r}: the brain of {pool.plan.of!r} gives no "
                                  "snapshot to play (its Brain.sync returned None)")
            pool.add(self._episodes, answer.update)
        taken, snapshot = pool.draw()
        muscle.apply_update(snapshot)
        self._playing = taken
        return taken

    @handles(AgentUpdateRequest)
    def _update(self, request: AgentUpdateRequest) -> AgentUpdateResponse:
        muscle = self._muscle
        if muscle is None:
            raise MosaicError(f"muscle {self.uid!r} was not set up")
        snapshot = None
        if request.step == 0:
            if self._pool is not None:
                snapshot = self._play_snapshot(muscle)
            self._episode_starts(1)
        # The snapshot is named at an episode's first step, which never ends it.
        return AgentUpdateResponse(
            muscle_step(muscle, request, self._slots, self._calls, self._learn),
            self._reported(), snapshot)

    @handles(AgentEvaluateRequest)
    def _evaluate(self, request: AgentEvaluateRequest) -> AgentUpdateResponse:
        """A step of an evaluation episode, played by the greedy instance: what its feedback
        returns is dropped (evaluation teaches nothing)."""
        # A self-play muscle acts greedily already: it plays evaluation episodes itself.
        greedy = self._greedy if self._pool is None else self._muscle
        if greedy is None:
            raise MosaicError(f"muscle {self.uid!r} was not set up for evaluation")
        self._greedy_metrics.take()
        return AgentUpdateResponse(muscle_step(greedy, request, self._slots, self._calls, None),
                                   self._reported(), self._playing if request.step == 0 else None)

    @handles(AgentBatchRequest)
    def _batch(self, request: AgentBatchRequest) -> AgentBatchResponse:
        """One step of every copy: the outcome of their last actions, then their next ones."""
        muscle = self._muscle
        if muscle is None:
            raise MosaicError(f"muscle {self.uid!r} was not set up")
        o = request.outcome
        batch = Batch(o.observations, o.rewards, o.terminated, o.truncated, o.acted, o.starts,
                      o.final_observations, o.legal_actions, o.info, o.final_info)
        (slot,) = self._slots
        if np.count_nonzero(o.acted):
            for experience in muscle.feedback_batch(slot, batch):
                self._learn(experience)
        self._episode_starts(int(np.count_nonzero(o.starts)))
        actions = muscle.act_batch(slot, batch)
        return AgentBatchResponse(actions, self._reported())

    def _reported(self) -> tuple[Metric, ...] | None:
        """The metrics for the next answer: the brain's passed on, then the muscle's own."""
        relayed, own = self._relayed, self._metrics
        if not relayed.held:
            return None if not own.held else reported(self.uid, own)
        return (*relayed.take(), *(reported(self.uid, self._metrics) or ()))

    def _episode_starts(self, count: int) -> None:
        """``count`` episodes begin: ask the brain for the checkpoints that are due."""
        every = self._checkpoint_every
        for _ in range(count):
            if every and self._episodes and self._episodes % every == 0 and self._brain is not None:
                saved = self._brain.request(BrainCheckpointRequest(self.uid, self._episodes,
                                                                   self._state()),
                                            BrainCheckpointResponse, self._brain_timeout,
                                            self.check_interrupted)
                if saved.metrics:
                    self._relayed.extend(saved.metrics)
            self._episodes += 1

    def _state(self) -> dict[str, Any] | None:
        """The muscle's part of the agent's checkpoint (``None`` in a test phase)."""
        context, muscle = self._context, self._muscle
        if context is None or muscle is None or context.mode == "test":
            return None
        return learner_arrays(muscle.state(), context.rng)

    def _learn(self, experience: Any) -> None:
        """The training instance's ``experience`` to the brain; its answer to both instances."""
        if self._brain is None:
            raise MosaicError(f"muscle {self.uid!r} returned experience but has no brain")
        answer = self._brain.request(MuscleUpdateRequest(self.uid, experience),
                                     MuscleUpdateResponse, self._brain_timeout,
                                     self.check_interrupted)
        if answer.metrics:
            self._relayed.extend(answer.metrics)
        if answer.update is not None:
            self._apply(answer.update)

    def _apply(self, update: Any) -> None:
        """Give ``update`` to the training instance, and to the greedy instance too."""
        if self._muscle is not None:
            self._muscle.apply_update(update)
        if self._greedy is not None:
            self._greedy.apply_update(update)

    @handles(MuscleShutdownRequest)
    def _shutdown(self, request: MuscleShutdownRequest) -> MuscleShutdownResponse:
        self.request_stop()
        if self._brain is not None:
            answer = self._brain.request(BrainShutdownRequest(self.uid, self._state()),
                                         BrainShutdownResponse,
                                         self._brain_timeout, self.check_interrupted)
            if answer.metrics:
                self._relayed.extend(answer.metrics)
        return MuscleShutdownResponse(self.uid, self._reported())

    def on_shutdown(self) -> None:
        if self._muscle is not None:
            self._muscle.teardown()
        if self._greedy is not None:
            self._greedy.teardown()
