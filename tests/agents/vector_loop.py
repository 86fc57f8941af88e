"""A loop that drives a brain and its muscle over the copies of a Gymnasium vector environment,
through the muscle's batch methods, in this thread."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import gymnasium
import numpy as np

from mosaic.agents import Brain, BrainContext, Muscle, MuscleContext, Slot
from mosaic.agents.batch import Batch
from mosaic.agents.context import Mode
from mosaic.core.seeding import brain_seed, episode_seed, muscle_seed
from mosaic.messages.codec import pack, unpack

SLOT = "agent_0"


@dataclass(frozen=True)
class Finished:
    """One finished episode of one copy."""

    copy: int
    steps: int
    total_reward: float
    terminated: bool


def vector_env(env_id: str, copies: int, **kwargs: Any) -> gymnasium.vector.SyncVectorEnv:
    """``copies`` copies of ``env_id`` that the loop resets itself when their episodes end."""
    return gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make(env_id, **kwargs) for _ in range(copies)],
        autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED)


class VectorLoop:
    """Drives ``muscle`` and ``brain`` on ``env`` in the batch call order of a run with copies.

    Per step: ``feedback_batch`` for the copies that acted (the final observation for a copy
    whose episode ended), each item through the codec to ``brain.learn`` and its answer to
    ``apply_update``; then ``act_batch``, with ``starts`` marking the copies that were reset.
    Seeds follow a run's first agent in its first environment, and copy ``c`` starts from the
    reset seed ``episode_seed(seed, 0, 0, c)``. The environment belongs to the caller.
    """

    def __init__(self, env: gymnasium.vector.SyncVectorEnv, muscle: Muscle, brain: Brain, *,
                 seed: int = 0, mode: Mode = "train",
                 params: Mapping[str, Any] | None = None) -> None:
        self.env, self.muscle, self.brain = env, muscle, brain
        self.copies = env.num_envs
        slots = {SLOT: Slot(SLOT, env.single_observation_space, env.single_action_space)}
        brain.setup(BrainContext("agent", "agent", slots, brain_seed(seed, 0), mode,
                                 dict(params or {})))
        muscle.setup(MuscleContext("agent", "agent@env", "env", slots, muscle_seed(seed, 0, 0),
                                   mode, dict(params or {}), copies=self.copies))
        self.experience: list[Any] = []
        self.actions: list[np.ndarray] = []
        observations, _ = env.reset(seed=[episode_seed(seed, 0, 0, copy)
                                          for copy in range(self.copies)])
        n = self.copies
        self._batch = Batch(observations, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool),
                            np.zeros(n, bool), np.ones(n, bool), {})
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)

    def step(self) -> list[Finished]:
        """One step of every copy; returns the episodes that ended at it."""
        batch = self._batch
        self.flush()
        actions = self.muscle.act_batch(SLOT, batch)
        self.actions.append(np.copy(actions))
        observations, rewards, terminated, truncated, _ = self.env.step(actions)
        self._returns += rewards
        self._lengths += 1
        ended = terminated | truncated
        finished = [Finished(copy, int(self._lengths[copy]), float(self._returns[copy]),
                             bool(terminated[copy])) for copy in np.flatnonzero(ended).tolist()]
        finals = {copy: np.copy(observations[copy]) for copy in np.flatnonzero(ended).tolist()}
        if ended.any():
            observations, _ = self.env.reset(options={"reset_mask": ended})
            self._returns[ended] = 0.0
            self._lengths[ended] = 0
        self._batch = Batch(observations, np.asarray(rewards, dtype=np.float64),
                            np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool),
                            np.ones(self.copies, bool), ended, finals)
        return finished

    def flush(self) -> None:
        """Feed back the outcome of the last step (once), so every ended episode has been sent."""
        batch, self._batch = self._batch, replace(self._batch, acted=np.zeros(self.copies, bool))
        for item in self.muscle.feedback_batch(SLOT, batch):
            self.experience.append(item)
            update = self.brain.learn("agent@env", unpack(pack(item)))
            if update is not None:
                self.muscle.apply_update(unpack(pack(update)))

    def run(self, until: Callable[[list[Finished]], bool], max_steps: int) -> list[Finished]:
        """Step until ``until(episodes so far)`` is true or ``max_steps`` steps have run."""
        episodes: list[Finished] = []
        for _ in range(max_steps):
            finished = self.step()
            if finished:
                episodes.extend(finished)
                if until(episodes):
                    break
        return episodes
