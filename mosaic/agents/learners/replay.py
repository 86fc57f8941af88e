"""A fixed-capacity replay buffer of transitions for off-policy learners (DQN, TD3, SAC)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["COLUMNS", "ReplayBuffer", "ReplayLearner", "Transitions"]

#: The columns of the transitions a muscle sends (``truncated`` is informative: it bootstraps).
COLUMNS = ("observations", "actions", "rewards", "next_observations", "terminated", "truncated")


@dataclass(frozen=True)
class Transitions:
    """K transitions as columns: ``observations`` and ``next_observations`` (K, d) float64,
    ``actions`` (K,) int64, ``rewards`` (K,) float64, ``terminated`` (K,) bool and
    ``next_masks`` (K, n_actions) bool (the legal actions after each transition).

    Continuous actions (:meth:`from_continuous`): ``actions`` (K, n_actions) float64 and
    ``next_masks`` (K, 0), since every action is legal."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    terminated: np.ndarray
    next_masks: np.ndarray

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    @classmethod
    def from_columns(cls, columns: Any, n_inputs: int, n_actions: int) -> Transitions:
        """The transitions in a mapping of :data:`COLUMNS` (and ``next_masks``, ``None``: all
        legal), as a muscle sends them; ``ValueError`` naming what does not fit."""
        try:
            data = {name: np.asarray(columns[name]) for name in COLUMNS}
            masks = columns.get("next_masks")
            k = data["actions"].shape[0] if data["actions"].ndim == 1 else -1
            batch = cls(
                data["observations"].astype(np.float64).reshape(k, n_inputs),
                data["actions"].astype(np.int64),
                data["rewards"].astype(np.float64).reshape(k),
                data["next_observations"].astype(np.float64).reshape(k, n_inputs),
                data["terminated"].astype(bool).reshape(k),
                (np.ones((k, n_actions), bool) if masks is None
                 else np.asarray(masks, dtype=bool).reshape(k, n_actions)))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ValueError(f"expected transition columns {', '.join(COLUMNS)} for {n_inputs} "
                             f"inputs and {n_actions} actions; got {columns!r:.120} ({exc})"
                             ) from exc
        if k and (batch.actions.min() < 0 or batch.actions.max() >= n_actions):
            raise ValueError(f"actions outside 0..{n_actions - 1}: {batch.actions}")
        return batch

    @classmethod
    def from_continuous(cls, columns: Any, n_inputs: int, n_actions: int) -> Transitions:
        """The transitions in a mapping of :data:`COLUMNS` with vector actions of
        ``n_actions`` values each (``next_masks`` is ignored); ``ValueError`` naming what does
        not fit, or a value that is not finite."""
        try:
            data = {name: np.asarray(columns[name]) for name in COLUMNS}
            k = data["rewards"].reshape(-1).shape[0]
            batch = cls(
                data["observations"].astype(np.float64).reshape(k, n_inputs),
                data["actions"].astype(np.float64).reshape(k, n_actions),
                data["rewards"].astype(np.float64).reshape(k),
                data["next_observations"].astype(np.float64).reshape(k, n_inputs),
                data["terminated"].astype(bool).reshape(k),
                np.ones((k, 0), bool))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ValueError(f"expected transition columns {', '.join(COLUMNS)} for {n_inputs} "
                             f"inputs and {n_actions} action values; got {columns!r:.120} "
                             f"({exc})") from exc
        for name in ("observations", "actions", "rewards", "next_observations"):
            if not np.isfinite(getattr(batch, name)).all():
                raise ValueError(f"{name} that are not finite: {getattr(batch, name)!r:.120}")
        return batch

    def rows(self, index: np.ndarray | slice) -> Transitions:
        """The transitions at ``index``."""
        return Transitions(*(getattr(self, f.name)[index] for f in fields(self)))


class ReplayBuffer:
    """The last ``capacity`` transitions added, in a ring: once full, each new one replaces the
    oldest.

    :meth:`sample` draws uniformly with replacement from what it holds, using only the generator
    it is given, so the same generator state and the same additions give the same samples.
    """

    def __init__(self, capacity: int, n_inputs: int, n_actions: int, *,
                 continuous: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"a replay buffer needs a capacity >= 1; got {capacity}")
        self.capacity = capacity
        # Continuous: the Transitions.from_continuous layout (vector actions, no masks).
        actions = np.zeros((capacity, n_actions)) if continuous else np.zeros(capacity, np.int64)
        masks = np.ones((capacity, 0 if continuous else n_actions), bool)
        self._data = Transitions(np.zeros((capacity, n_inputs)), actions,
                                 np.zeros(capacity), np.zeros((capacity, n_inputs)),
                                 np.zeros(capacity, bool), masks)
        self._next = 0  # where the next transition goes
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, batch: Transitions) -> None:
        """Append ``batch`` in row order (the oldest rows are overwritten once full)."""
        if len(batch) > self.capacity:
            batch = batch.rows(slice(len(batch) - self.capacity, None))  # only these survive
        if not len(batch):
            return
        rows = (self._next + np.arange(len(batch))) % self.capacity
        for f in fields(Transitions):
            getattr(self._data, f.name)[rows] = getattr(batch, f.name)
        self._next = int((rows[-1] + 1) % self.capacity)
        self._size = min(self.capacity, self._size + len(batch))

    def sample(self, rng: np.random.Generator, size: int) -> Transitions:
        """``size`` transitions drawn uniformly with replacement (``ValueError`` when empty)."""
        if not self._size:
            raise ValueError("cannot sample from an empty replay buffer")
        return self._data.rows(rng.integers(self._size, size=size))

    def contents(self) -> Transitions:
        """Copies of what the buffer holds, oldest first."""
        start = self._next if self._size == self.capacity else 0
        return self._data.rows((start + np.arange(self._size)) % self.capacity)

    def refill(self, batch: Transitions | None) -> None:
        """Hold ``batch`` only (as :meth:`contents` gave it; ``None``: nothing)."""
        self._next = self._size = 0
        if batch is not None:
            self.add(batch)


class ReplayLearner:
    """How an off-policy brain (DQN, TD3, SAC) takes experience: :meth:`_take`.

    The brain has ``params`` (with ``learning_starts`` and ``train_every``), ``buffer``, the
    counters ``transitions``, ``updates`` and ``version``, ``_stats``, ``_sent`` (muscle ->
    the version it last got), ``_update()`` (one training step) and ``weights()`` (the answer
    to a muscle). :meth:`_replay_state` and :meth:`_load_replay_state` are their share of the
    brain's state.
    """

    params: Any
    buffer: ReplayBuffer
    transitions: int
    updates: int
    version: int
    _sent: dict[str, int]
    #: The metric sums not reported yet.
    _stats: np.ndarray

    def _update(self) -> None:
        raise NotImplementedError

    def weights(self) -> dict[str, np.ndarray]:
        """What a muscle is answered with."""
        raise NotImplementedError

    def _take(self, muscle: str, batch: Transitions) -> dict[str, np.ndarray] | None:
        """Store ``batch``, train every ``train_every`` transitions once ``learning_starts`` are
        in, and answer ``muscle`` with :meth:`weights` when its version is behind (else None)."""
        p = self.params
        first, self.transitions = self.transitions + 1, self.transitions + len(batch)
        # The rows go in first: an update due at one of them may sample all of them.
        self.buffer.add(batch)
        for count in range(first, self.transitions + 1):
            if count >= max(p.learning_starts, 1) and count % p.train_every == 0:
                self._update()
        if self._sent.get(muscle, 0) < self.version:
            self._sent[muscle] = self.version
            return self.weights()
        return None

    def _replay_state(self) -> dict[str, np.ndarray]:
        """The part of the state every off-policy brain has: the counters, the metric sums not
        reported yet (``stats``) and the buffer's transitions (``replay.*``, oldest first), so
        that a continued run samples what the saved one would have."""
        state = {name: np.array(getattr(self, name), dtype=np.int64) for name in _COUNTERS}
        state["stats"] = self._stats.copy()
        replay = self.buffer.contents()
        state.update({f"replay.{f.name}": getattr(replay, f.name) for f in fields(Transitions)})
        return state

    def _load_replay_state(self, state: Mapping[str, np.ndarray]) -> None:
        """Take back what :meth:`_replay_state` gave (``stats`` may be missing: zeros);
        ``ValueError`` when the sums do not fit."""
        self.transitions, self.updates, self.version = (int(state[name]) for name in _COUNTERS)
        stats = np.asarray(state.get("stats", np.zeros_like(self._stats)), dtype=np.float64)
        if stats.shape != self._stats.shape:
            raise ValueError(f"stats of shape {stats.shape}; expected {self._stats.shape}")
        self._stats = stats.copy()
        self.buffer.refill(Transitions(*(np.asarray(state[f"replay.{f.name}"])
                                         for f in fields(Transitions)))
                           if "replay.actions" in state else None)


#: The counters of a :class:`ReplayLearner`'s state.
_COUNTERS = ("transitions", "updates", "version")
