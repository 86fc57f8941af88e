"""An in-process loop that drives one Brain and its Muscle on a Gymnasium environment.

This is for tests, benchmarks and debugging a learner without the orchestration: no actors, no
sockets, no store. Real runs go through ``mosaic experiment-start`` with an experiment file. The
harness drives the step core a run drives (:mod:`mosaic.stepping`), so that a learner that
works here works there, step for step: a harness run of a run's first agent has that run's
digest (:attr:`Harness.digest`, as ``mosaic runs show`` prints it). It keeps:

* the call order of a run: the muscle starts with its brain's :meth:`~mosaic.agents.Brain.sync`
  answer; at an episode's first step ``reset`` and ``act``; then per step ``feedback``,
  experience to ``Brain.learn`` and its answer to ``apply_update``, then ``act`` unless the
  episode ended (:func:`~mosaic.agents.muscle_step.muscle_step`, the muscle actor's own);
* the seeds: run seed ``seed`` gives the brain ``brain_seed(seed, 0)``, the muscle
  ``muscle_seed(seed, 0, 0)`` and episode ``k`` the reset seed ``episode_seed(seed, 0, k)``, as
  for the first agent in the first environment of a run. ``seed`` is a *run's* seed, which a
  run derives from the file's ``seed`` (``load_experiment(path).run_seeds()``, or the seed
  that ``mosaic runs show`` prints): to replay a run's first agent, pass that, not the file's;
* the slots: spaces are rebuilt from their wire description, the slot is ``agent_0``, and the
  muscle uid is ``agent@environment``;
* the wire: with ``wire=True`` (the default) experience and updates pass through mosaic's codec
  (:func:`~mosaic.messages.codec.pack` / ``unpack``), so one that could not travel fails here;
* checkpoints: :meth:`Harness.save` writes what a phase's end writes (the greedy policy, the
  brain's and the muscle's states and generators, the episode position) and
  :meth:`Harness.resume` restores it as a training phase that loads it does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import gymnasium

from mosaic.agents.brain import Brain, NoOpBrain
from mosaic.agents.context import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.muscle import Muscle
from mosaic.agents.muscle_step import MuscleCalls, muscle_step
from mosaic.core.checkpoints import (
    Checkpoint,
    learner_arrays,
    read_checkpoint,
    restore_learner,
    write_checkpoint,
)
from mosaic.core.errors import MosaicError
from mosaic.core.seeding import brain_seed, muscle_seed
from mosaic.core.spaces import space_from_dict, space_to_dict
from mosaic.environments.answers import reset_answer, update_answer
from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT, GymnasiumAdapter
from mosaic.environments.info import InfoFilter
from mosaic.messages import (
    AgentEvaluateRequest,
    AgentUpdateRequest,
    AgentUpdateResponse,
    EnvironmentPosition,
    EnvironmentResetRequest,
    EnvironmentUpdateRequest,
    Request,
    Response,
)
from mosaic.messages.codec import pack, unpack
from mosaic.stepping.episodes import Recording, Schedule
from mosaic.stepping.ledger import Ledger
from mosaic.stepping.player_episodes import PlayerEpisodes

__all__ = ["EpisodeStats", "Harness"]


@dataclass(frozen=True)
class EpisodeStats:
    """One finished episode: its index (from 0 across :meth:`Harness.run` calls), steps taken,
    the sum of rewards, how it ended, and its wall time in seconds."""

    episode: int
    steps: int
    total_reward: float
    terminated: bool
    truncated: bool
    seconds: float


def _through_wire(value: Any) -> Any:
    return unpack(pack(value))


class Harness:
    """Drives ``brain`` and ``muscle`` on ``env`` in mosaic's call order, in this thread.

    The constructor calls ``brain.setup`` then ``muscle.setup`` with contexts built as mosaic
    builds them (``params`` is the agent's, overridden key by key by ``brain_params`` /
    ``muscle_params``); :meth:`close` (or leaving a ``with`` block) calls ``muscle.teardown``
    then ``brain.teardown``. The environment belongs to the caller, who closes it.

    ``brain`` defaults to a :class:`~mosaic.agents.NoOpBrain`. ``max_steps`` truncates episodes
    like the experiment file's ``max_steps``. Exceptions from the learner or the environment
    propagate unchanged.
    """

    def __init__(
        self,
        env: gymnasium.Env[Any, Any],
        muscle: Muscle,
        brain: Brain | None = None,
        *,
        seed: int = 0,
        mode: Mode = "train",
        params: Mapping[str, Any] | None = None,
        brain_params: Mapping[str, Any] | None = None,
        muscle_params: Mapping[str, Any] | None = None,
        agent: str = "agent",
        environment: str = "env",
        max_steps: int | None = None,
        wire: bool = True,
    ) -> None:
        if mode not in ("train", "test"):
            raise MosaicError(f"mode must be 'train' or 'test'; got {mode!r}")
        self.env = env
        self.muscle = muscle
        self.brain = brain if brain is not None else NoOpBrain()
        self.seed = int(seed)
        self.mode = mode
        self.max_steps = max_steps
        self.agent = agent
        self.muscle_uid = f"{agent}@{environment}"
        self._wire = wire
        self._closed = False
        slot = Slot(GYMNASIUM_SLOT, space_from_dict(space_to_dict(env.observation_space)),
                    space_from_dict(space_to_dict(env.action_space)))
        slots = {GYMNASIUM_SLOT: slot}
        agent_params = dict(params or {})
        self.environment = environment
        self.brain.setup(BrainContext(agent=agent, brain=agent, slots=slots,
                                      seed=brain_seed(self.seed, 0), mode=mode,
                                      params={**agent_params, **(brain_params or {})}))
        self.muscle.setup(MuscleContext(agent=agent, muscle=self.muscle_uid,
                                        environment=environment, slots=slots,
                                        seed=muscle_seed(self.seed, 0, 0), mode=mode,
                                        params={**agent_params, **(muscle_params or {})}))
        self._slots = frozenset(slots)
        self._calls = MuscleCalls(type(muscle))
        self._sync()
        self._adapter = GymnasiumAdapter(env)
        self._info = InfoFilter(environment)
        # The step core as a run's first environment: its seeds, its truncation at max_steps,
        # its digest. The harness says when to stop, so the schedule's episodes never end it.
        self._ledger = Ledger.in_process(self._episode_ended)
        self._loop = PlayerEpisodes(0, environment, {GYMNASIUM_SLOT: agent}, self._ledger,
                                    Schedule(self.seed, sys.maxsize, max_steps),
                                    Recording(episodes=True), self._ask)
        self._ended: list[tuple[int, int, float, bool, bool]] = []

    @property
    def episodes_done(self) -> int:
        """The episodes played so far (and resumed from)."""
        return self._loop.episode

    @property
    def digest(self) -> str:
        """The digest of every step so far, as a run's (hex): a harness run of a run's first
        agent, with the run's seed, gives the digest ``mosaic runs show`` prints for the run.
        It starts afresh after :meth:`resume`."""
        return self._ledger.digest.hexdigest()

    def save(self, path: str) -> None:
        """Write a checkpoint between episodes, as the end of a phase writes it."""
        brain, muscle = self.brain, self.muscle
        write_checkpoint(path, Checkpoint(
            brain.greedy_policy(), learner_arrays(brain.state(), brain.context.rng),
            {self.muscle_uid: learner_arrays(muscle.state(), muscle.context.rng)},
            positions={self.environment: (self.episodes_done, 0, 0)}))

    def resume(self, path: str) -> None:
        """Go on from the checkpoint at ``path`` as a training phase that loads it does: the
        brain's and the muscle's states and generators, the brain's sync answer, and the
        episode numbering."""
        saved = read_checkpoint(path)
        self.brain.load_state(restore_learner(saved.brain, self.brain.context.rng))
        part = saved.muscles.get(self.muscle_uid)
        if part is not None:
            self.muscle.load_state(restore_learner(part, self.muscle.context.rng))
        self._sync()
        self._loop.resume(EnvironmentPosition(
            episode=saved.positions.get(self.environment, (0, 0, 0))[0]))

    def _sync(self) -> None:
        """The brain's sync answer to the muscle, as a muscle that starts in a run gets it."""
        self._apply(self.brain.sync(self.muscle_uid))

    def run(
        self,
        episodes: int,
        on_episode: Callable[[EpisodeStats], None] | None = None,
    ) -> list[EpisodeStats]:
        """Run ``episodes`` more episodes; return their stats (``on_episode`` sees each one)."""
        if self._closed:
            raise MosaicError("this harness is closed")
        results = []
        for _ in range(episodes):
            stats = self._episode()
            results.append(stats)
            if on_episode is not None:
                on_episode(stats)
        return results

    def _episode(self) -> EpisodeStats:
        loop, ended = self._loop, self._ended
        started = time.perf_counter()
        while not ended:
            loop.advance(self._step)
        episode, steps, total, terminated, truncated = ended.pop()
        return EpisodeStats(episode, steps, total, terminated, truncated,
                            time.perf_counter() - started)

    def _step(self, request: Request) -> Response:
        """The environment's answer to the step core's ``request``."""
        if isinstance(request, EnvironmentUpdateRequest):
            return update_answer(self._adapter, request, self._info)
        if isinstance(request, EnvironmentResetRequest):
            return reset_answer(self._adapter, request, self._info)
        raise MosaicError(f"the harness cannot answer a {type(request).__name__}")

    def _ask(self, request: AgentUpdateRequest | AgentEvaluateRequest
             ) -> tuple[tuple[str, AgentUpdateResponse]]:
        actions = muscle_step(self.muscle, request, self._slots, self._calls, self._learn)
        return ((self.agent, AgentUpdateResponse(actions)),)

    def _episode_ended(self, run_id: int, environment: str, episode: int, steps: int,
                       total_return: float | None, returns: Mapping[str, float],
                       terminated: bool, truncated: bool, seed: int | None, copy: int = 0,
                       evaluation: bool = False, snapshots: Mapping[str, int] | None = None,
                       chain: str | None = None) -> None:
        self._ended.append((episode, steps, total_return or 0.0, terminated, truncated))

    def _learn(self, experience: Any) -> None:
        if self._wire:
            experience = _through_wire(experience)
        self._apply(self.brain.learn(self.muscle_uid, experience))

    def _apply(self, update: Any) -> None:
        """The brain's answer (``None``: none) to the muscle, through the wire if asked."""
        if update is not None:
            self.muscle.apply_update(_through_wire(update) if self._wire else update)

    def close(self) -> None:
        """Tear down the muscle, then the brain (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.muscle.teardown()
        finally:
            self.brain.teardown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

