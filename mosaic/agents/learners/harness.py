"""An in-process loop that drives one Brain and its Muscle on a Gymnasium environment.

This is for tests, benchmarks and debugging a learner without the orchestration: no actors, no
sockets, no store. Real runs go through ``mosaic experiment-start`` with an experiment file. The
harness keeps mosaic's contract so that a learner that works here works there:

* the call order of :class:`~mosaic.actors.muscle.MuscleActor`: ``reset`` and ``act`` at an
  episode's first step; then per step ``feedback``, experience to ``Brain.learn`` and its
  answer to ``apply_update``, then ``act`` unless the episode ended;
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

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import gymnasium

from mosaic.agents.brain import Brain, NoOpBrain
from mosaic.agents.context import BrainContext, Mode, MuscleContext, Slot
from mosaic.agents.muscle import Muscle
from mosaic.core.checkpoints import (
    Checkpoint,
    learner_arrays,
    read_checkpoint,
    restore_learner,
    write_checkpoint,
)
from mosaic.core.errors import MosaicError
from mosaic.core.seeding import brain_seed, episode_seed, muscle_seed
from mosaic.core.spaces import space_from_dict, space_to_dict
from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT
from mosaic.messages.codec import pack, unpack

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
        self.muscle_uid = f"{agent}@{environment}"
        self.episodes_done = 0
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
        update = self.brain.sync(self.muscle_uid)
        if update is not None:
            self.muscle.apply_update(_through_wire(update) if self._wire else update)
        self.episodes_done = saved.positions.get(self.environment, (0, 0, 0))[0]

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
        env, muscle, slot = self.env, self.muscle, GYMNASIUM_SLOT
        index = self.episodes_done
        started = time.perf_counter()
        observation, info = env.reset(seed=episode_seed(self.seed, 0, index))
        muscle.reset()
        action = muscle.act(slot, observation, info.get("action_mask"))
        steps, total = 0, 0.0
        while True:
            observation, reward, terminated, truncated, info = env.step(action)
            steps += 1
            reward, terminated = float(reward), bool(terminated)
            truncated = bool(truncated) or (self.max_steps is not None and steps >= self.max_steps)
            total += reward
            experience = muscle.feedback(slot, reward, terminated, truncated, observation)
            if experience is not None:
                self._learn(experience)
            if terminated or truncated:
                break
            action = muscle.act(slot, observation, info.get("action_mask"))
        self.episodes_done += 1
        return EpisodeStats(index, steps, total, terminated, truncated,
                            time.perf_counter() - started)

    def _learn(self, experience: Any) -> None:
        if self._wire:
            experience = _through_wire(experience)
        update = self.brain.learn(self.muscle_uid, experience)
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
