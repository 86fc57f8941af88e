"""The brain actor: runs a user's Brain for the muscles of one agent."""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from mosaic.actors.metrics import reported
from mosaic.actors.rounds import Offer, Rounds
from mosaic.actors.slots import slots_from_specs
from mosaic.agents import Brain, BrainContext
from mosaic.agents.metrics import MetricLog
from mosaic.core.checkpoints import (
    Checkpoint,
    learner_arrays,
    previous_checkpoint,
    read_checkpoint,
    restore_learner,
    write_checkpoint,
)
from mosaic.core.errors import MosaicError
from mosaic.core.imports import import_object
from mosaic.core.seeding import check_seed
from mosaic.messages import (
    BrainCheckpointRequest,
    BrainCheckpointResponse,
    BrainSetupRequest,
    BrainSetupResponse,
    BrainShutdownRequest,
    BrainShutdownResponse,
    BrainSyncRequest,
    ErrorResponse,
    Message,
    MuscleUpdateRequest,
    MuscleUpdateResponse,
)
from mosaic.messages.names import AGENT_CONDUCTOR
from mosaic.runtime.component import Component, Later, handles

log = logging.getLogger(__name__)


class BrainActor(Component):
    """Hosts one :class:`~mosaic.agents.Brain`; stops once every muscle it serves has shut down.

    Checkpoints (:mod:`mosaic.core.checkpoints`): ``checkpoints`` in the setup request may
    name a ``load`` path (the brain's state and generator are restored before the first step)
    and a ``save`` path, written when the last muscle shuts down (the end of the phase) and
    whenever a muscle asks (every N episodes). The file holds the brain's greedy policy, its
    state and generator, and the part of each muscle that sent one with its request (the
    latest it sent). In a training phase each muscle gets its part of the loaded file back
    with its sync answer. A brain whose :meth:`~mosaic.agents.Brain.state` is empty saves
    nothing.

    It is set up by the agent conductor, and from then on serves the muscles named in its
    set-up only. Its ``observers`` (the muscles of self-play agents) may ask for its weights
    (:class:`BrainSyncRequest`) as snapshots; the metrics stay for its own muscles.

    Metrics the brain reports (``context.log_metric``) ride on its next answer to any muscle,
    which passes them on to the simulation controller.

    Rollout workers: the muscles of an environment's rollout workers form a group (``groups``
    in the set-up request), whose experience the brain learns from in rounds, in the group's
    order, whatever order it arrives in (see :mod:`mosaic.actors.rounds`); each worker's answer
    waits for its round. A worker leaves its group with its shutdown request, once its episodes
    are done, while the run goes on: such a brain saves its checkpoint when its last muscle has
    shut down, but stays until its conductor stops it (its end would be a failure of the run).
    """

    def __init__(self, uid: str) -> None:
        super().__init__(uid)
        self._brain: Brain | None = None
        self._muscles: set[str] = set()
        self._served: frozenset[str] = frozenset()
        self._observers: frozenset[str] = frozenset()
        self._save_path: str | None = None
        self._metrics = MetricLog()
        #: muscle uid -> its part of the checkpoint: loaded (until its sync takes it), or sent.
        self._loaded_muscles: dict[str, dict[str, np.ndarray]] = {}
        self._muscle_states: dict[str, dict[str, np.ndarray]] = {}
        self._rounds = Rounds(())
        self._stays = False
        self._next_key = 0

    def accepts(self, message: Message, sender: str | None) -> bool:
        if isinstance(message, BrainSetupRequest):
            return sender == AGENT_CONDUCTOR and self._brain is None
        return sender in self._served

    @handles(BrainSetupRequest)
    def _setup(self, request: BrainSetupRequest) -> BrainSetupResponse:
        self.check_import(request.brain.class_path)
        cls = import_object(request.brain.class_path)
        if not (isinstance(cls, type) and issubclass(cls, Brain)):
            raise MosaicError(f"{request.brain.class_path} is not a mosaic.agents.Brain subclass")
        context = BrainContext(agent=request.agent_uid, brain=self.uid,
                               slots=slots_from_specs(request.sensors, request.actuators),
                               seed=check_seed(request.seed), mode=request.mode,  # type: ignore[arg-type]
                               params=dict(request.brain.params))
        self._metrics = context.metrics
        brain = cls()
        brain.setup(context)
        checkpoints = request.checkpoints
        if checkpoints is not None and checkpoints.load:
            loaded = read_checkpoint(checkpoints.load)
            brain.load_state(restore_learner(loaded.brain, context.rng))
            if request.mode != "test":
                self._loaded_muscles = dict(loaded.muscles)
        self._save_path = None if checkpoints is None else checkpoints.save
        self._brain = brain
        self._muscles = set(request.muscles)
        self._observers = frozenset(request.observers)
        self._served = frozenset(request.muscles) | self._observers
        self._rounds = Rounds(request.groups)
        self._stays = bool(request.groups)
        return BrainSetupResponse(self.uid)

    def _save(self, episodes: int = 0) -> str:
        """Save the checkpoint (``episodes``: the episodes the asking muscle had begun, for a
        periodic one); return its path, or "" if there is nothing to save."""
        if self._brain is None or self._save_path is None:
            return ""
        brain = self._brain
        state = brain.state()
        if not state:
            return ""
        try:
            policy = brain.greedy_policy()
        except (ValueError, MosaicError) as error:
            # A policy the format refuses (NaN weights, say) must not cost the state itself.
            log.warning("brain %s: the checkpoint holds no greedy policy: %s", self.uid, error)
            policy = {}
        if episodes and os.path.exists(self._save_path):
            # The periodic one before stays beside it (see previous_checkpoint).
            os.replace(self._save_path, previous_checkpoint(self._save_path))
        write_checkpoint(self._save_path, Checkpoint(
            policy, learner_arrays(state, brain.context.rng), dict(self._muscle_states),
            episodes=episodes))
        return self._save_path

    def _keep(self, muscle: str, muscle_state: dict[str, Any] | None) -> None:
        """Remember the latest part of ``muscle`` for the checkpoints to come."""
        if muscle_state is not None:
            self._muscle_states[muscle] = {name: np.asarray(value)
                                           for name, value in muscle_state.items()}

    @handles(BrainSyncRequest)
    def _sync(self, request: BrainSyncRequest) -> MuscleUpdateResponse:
        if self._brain is None:
            raise MosaicError(f"brain {self.uid!r} was not set up")
        update = self._brain.sync(request.muscle_uid)
        if request.muscle_uid in self._observers:
            return MuscleUpdateResponse(update)
        return MuscleUpdateResponse(update, reported(self.uid, self._metrics),
                                    self._loaded_muscles.pop(request.muscle_uid, None))

    @handles(BrainCheckpointRequest)
    def _checkpoint(self, request: BrainCheckpointRequest) -> BrainCheckpointResponse:
        self._keep(request.muscle_uid, request.muscle_state)
        path = self._save(request.episodes)
        return BrainCheckpointResponse(self.uid, path, reported(self.uid, self._metrics))

    @handles(MuscleUpdateRequest)
    def _learn(self, request: MuscleUpdateRequest) -> MuscleUpdateResponse | Later:
        brain = self._brain
        if brain is None:
            raise MosaicError(f"brain {self.uid!r} was not set up")
        muscle = request.muscle_uid
        if not self._rounds.grouped(muscle):
            return MuscleUpdateResponse(brain.learn(muscle, request.experience),
                                        reported(self.uid, self._metrics))
        self._next_key += 1
        key = (muscle, self._next_key)
        self._learn_round(self._rounds.offer(muscle, request.experience, key))
        return Later(key)

    def _learn_round(self, offers: list[Offer]) -> None:
        """Learn from a complete round, in its order, and answer each of its members. A
        failure of ``learn`` is every waiting member's answer, and ends the round."""
        brain = self._brain
        if brain is None:
            return
        failed: ErrorResponse | None = None
        for muscle, experience, key in offers:
            if failed is None:
                try:
                    update = brain.learn(muscle, experience)
                except Exception as error:
                    failed = self.error_answer(MuscleUpdateRequest(muscle, None), error)
                else:
                    self.answer(key, MuscleUpdateResponse(update,
                                                          reported(self.uid, self._metrics)))
                    continue
            self.answer(key, failed)

    @handles(BrainShutdownRequest)
    def _shutdown(self, request: BrainShutdownRequest) -> BrainShutdownResponse:
        self._learn_round(self._rounds.leave(request.muscle_uid))
        self._muscles.discard(request.muscle_uid)
        self._keep(request.muscle_uid, request.muscle_state)
        if not self._muscles:
            self._save()
            if not self._stays:
                self.request_stop()
        return BrainShutdownResponse(self.uid, len(self._muscles),
                                     reported(self.uid, self._metrics))

    def on_shutdown(self) -> None:
        if self._brain is not None:
            self._brain.teardown()
