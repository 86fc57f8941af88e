"""Vector environments: N copies of a Gymnasium environment, stepped in lockstep."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from mosaic.core.batching import row
from mosaic.core.errors import MosaicError
from mosaic.core.vector_info import info_row, stack_infos
from mosaic.environments.gymnasium_adapter import GYMNASIUM_SLOT
from mosaic.environments.info import InfoFilter
from mosaic.messages import BatchOutcome

#: How the copies of ``copies: N`` are held: in the environment actor's own thread (``sync``),
#: one process each (``async``), or by the environment's own vectorised implementation
#: (``native``, its ``vector_entry_point``).
VECTOR_MODES = ("sync", "async", "native")
#: When the copies are seeded (see :data:`mosaic.messages.run_config.Seeding`).
SEEDINGS = ("episode", "once")
_NO_FINALS: dict[int, Any] = {}
#: What SAME_STEP vectors add to a step's info; mosaic passes them on as final observations and
#: final infos instead.
_FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


class VectorAdapter:
    """A ``gymnasium.vector.VectorEnv`` seen as one slot, ``agent_0``, with N copies.

    Every copy has its own episodes. How a copy's ended episode gives way to the next depends
    on the vector environment's autoreset mode, and the outcome says it the same way for all:

    * ``DISABLED`` (what ``copies:`` builds): a copy that ends is reset in the same step, with
      the seed mosaic gives it (with ``seed_once``, without one: only the first reset takes
      seeds, and each copy then goes on from its own generator); the step limit ``max_steps``
      truncates a copy here too.
    * ``SAME_STEP`` (what ``copies:`` seeded once without ``max_steps`` builds): the same, with
      the environment's own reset inside its step (its final observation is in
      ``info["final_obs"]``); no seeds after the first reset, no step limit. Seeded once, both
      give the same episodes.
    * ``NEXT_STEP`` (Gymnasium's default): a copy that ends is reset by the next step, which
      ignores its action; that step's row says it started and did not act.

    The outcome's ``info`` is what ``info_filter`` keeps of the vector's info: of the reset for
    a copy that begins an episode, else of the step; ``final_info`` has the last step's info of
    each copy whose episode ended (not in ``NEXT_STEP``, where that step's info is the one).
    """

    def __init__(self, env: VectorEnv[Any, Any, Any], max_steps: int | None = None,
                 seed_once: bool = False) -> None:
        self.env = env
        self.copies = env.num_envs
        self.slots = {GYMNASIUM_SLOT: (env.single_observation_space, env.single_action_space)}
        self._mode = _autoreset_mode(env)
        if max_steps is not None and self._mode != AutoresetMode.DISABLED:
            raise MosaicError(f"max_steps needs a vector environment whose copies mosaic resets "
                              f"(autoreset mode DISABLED); this one resets them itself "
                              f"({self._mode.name}): wrap the environment in a TimeLimit instead")
        self._max_steps = max_steps
        self._per_copy_seeds = isinstance(env.unwrapped, (SyncVectorEnv, AsyncVectorEnv))
        self._seed_once = seed_once
        self._steps = np.zeros(self.copies, dtype=np.int64)
        self._restarting = np.zeros(self.copies, dtype=bool)  # NEXT_STEP: reset by this step
        self._none = np.zeros(self.copies, dtype=bool)
        self._all = np.ones(self.copies, dtype=bool)
        self._no_rewards = np.zeros(self.copies, dtype=np.float64)
        self._closed = False
        #: What keeps the codec-safe part of the infos; its name is the one warnings give.
        self.info_filter = InfoFilter(type(env.unwrapped).__name__)

    @property
    def reseeds(self) -> bool:
        """Whether every episode of every copy is seeded with the seeds it is given."""
        return (self._per_copy_seeds and self._mode == AutoresetMode.DISABLED
                and not self._seed_once)

    def reset(self, seeds: np.ndarray | None) -> BatchOutcome:
        """Start an episode in every copy; ``seeds`` (one per copy) seed them if given."""
        seed: Any = None
        if seeds is not None:
            # Gymnasium's Sync/AsyncVectorEnv seed each copy; its own vector implementations
            # take one seed for all.
            seed = seeds.tolist() if self._per_copy_seeds else int(seeds[0])
        observations, info = self.env.reset(seed=seed)
        self._steps[:] = 0
        self._restarting[:] = False
        return BatchOutcome(observations, self._no_rewards, self._none, self._none, self._none,
                            self._all, _NO_FINALS, _mask(info), self._info(info))

    def step(self, actions: Any, next_seeds: np.ndarray | None) -> BatchOutcome:
        """Step every copy; ``next_seeds`` seed the resets of copies whose episode ends."""
        observations, rewards, terminated, truncated, info = self.env.step(actions)
        rewards = np.asarray(rewards, dtype=np.float64)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        if self._mode == AutoresetMode.DISABLED:
            return self._reset_ended(observations, rewards, terminated, truncated, info,
                                     next_seeds)
        if self._mode == AutoresetMode.SAME_STEP:
            ended = terminated | truncated
            finals, final_info = _NO_FINALS, _NO_FINALS
            if np.count_nonzero(ended):
                copies = ended.nonzero()[0].tolist()
                finals = {c: info["final_obs"][c] for c in copies}
                last = self._info(info.get("final_info", {}))
                final_info = {c: info_row(last, c) for c in copies}
            return BatchOutcome(observations, rewards, terminated, truncated, self._all, ended,
                                finals, _mask(info), self._info(info), final_info)
        restarted = self._restarting
        self._restarting = terminated | truncated
        if not np.count_nonzero(restarted):
            return BatchOutcome(observations, rewards, terminated, truncated, self._all,
                                self._none, _NO_FINALS, _mask(info), self._info(info))
        acted = ~restarted
        return BatchOutcome(observations, np.where(acted, rewards, 0.0), terminated & acted,
                            truncated & acted, acted, restarted, _NO_FINALS, _mask(info),
                            self._info(info))

    def _reset_ended(self, observations: Any, rewards: np.ndarray, terminated: np.ndarray,
                     truncated: np.ndarray, info: dict[str, Any],
                     next_seeds: np.ndarray | None) -> BatchOutcome:
        steps = self._steps
        steps += 1
        if self._max_steps is not None:
            truncated = truncated | (steps >= self._max_steps)
        ended = terminated | truncated
        if not np.count_nonzero(ended):
            return BatchOutcome(observations, rewards, terminated, truncated, self._all,
                                self._none, _NO_FINALS, _mask(info), self._info(info))
        copies = ended.nonzero()[0].tolist()
        finals = {copy: row(observations, copy) for copy in copies}
        seeds = None if next_seeds is None or self._seed_once else next_seeds.tolist()
        observations, reset_info = self.env.reset(
            seed=seeds, options={"reset_mask": ended})
        steps[ended] = 0
        mask = _mask(info)
        if mask is not None:
            reset_mask = _mask(reset_info)
            if reset_mask is not None:
                mask = np.where(_column(ended, mask), reset_mask, mask)
        kept, started = self._info(info), self._info(reset_info)
        final_info = {copy: info_row(kept, copy) for copy in copies}
        if kept or started:
            # The info each copy acts on now: of its reset where it restarted.
            kept = stack_infos([info_row(started if ended[copy] else kept, copy)
                                for copy in range(self.copies)])
        return BatchOutcome(observations, rewards, terminated, truncated, self._all, ended,
                            finals, mask, kept, final_info)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        if not info:
            return info
        if any(key in info for key in _FINAL_KEYS):
            info = {key: value for key, value in info.items() if key not in _FINAL_KEYS}
        return self.info_filter.vector(info, self.copies)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.env.close()


def _autoreset_mode(env: VectorEnv[Any, Any, Any]) -> AutoresetMode:
    """How ``env`` resets its copies: its own ``autoreset_mode`` where it has one (Gymnasium's
    Sync- and AsyncVectorEnv), else what its metadata says (Gymnasium's default if nothing).

    Not the metadata first: Gymnasium 1.2's vectors write the mode into their first copy's
    metadata, which is the environment class's own dict, so every vector of that class in the
    process reads the mode of the one made last."""
    mode = getattr(env.unwrapped, "autoreset_mode", None)
    if isinstance(mode, AutoresetMode):
        return mode
    said = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return AutoresetMode(said)
    except ValueError:
        raise MosaicError(f"vector environment {type(env.unwrapped).__name__}: its metadata's "
                          f"autoreset_mode is {said!r}, not one of Gymnasium's "
                          f"{', '.join(mode.value for mode in AutoresetMode)}") from None


def _mask(info: dict[str, Any]) -> Any:
    return info.get("action_mask")


def _column(ended: np.ndarray, like: np.ndarray) -> np.ndarray:
    return ended.reshape((-1,) + (1,) * (like.ndim - 1))
