"""Self-play: the pool of frozen snapshots a self-play muscle plays, and its sampling rule."""

from __future__ import annotations

from typing import Any

import numpy as np

from mosaic.messages import SelfPlayPlan

__all__ = ["SnapshotPool"]

#: Keeps the pool's draws apart from every other stream derived from the muscle's seed.
_POOL_STREAM = 7


class SnapshotPool:
    """The last ``plan.pool_size`` snapshots taken, each named by the episode it was taken at.

    :meth:`due` says when a snapshot is to be taken (every ``plan.snapshot_every`` episodes,
    from the first); :meth:`draw` picks the one to play an episode with by ``plan.sample``:
    ``latest``; ``uniform`` over the pool; ``mix``, the latest with probability
    ``plan.latest_share``, else uniform over the pool. The draws come from a generator seeded
    with ``seed`` alone (one or two uniforms per draw), so the same seed and the same
    snapshots give the same choices whatever the placement.
    """

    def __init__(self, plan: SelfPlayPlan, seed: int) -> None:
        self.plan = plan
        self._rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_POOL_STREAM,)))
        self._snapshots: list[tuple[int, Any]] = []

    def __len__(self) -> int:
        return len(self._snapshots)

    def due(self, episode: int) -> bool:
        """Whether a snapshot is to be taken before episode ``episode`` (0-based)."""
        return episode % self.plan.snapshot_every == 0 or not self._snapshots

    def add(self, episode: int, snapshot: Any) -> None:
        """Keep ``snapshot``, taken before episode ``episode``; the oldest leaves a full pool."""
        self._snapshots.append((episode, snapshot))
        del self._snapshots[:-self.plan.pool_size]

    def draw(self) -> tuple[int, Any]:
        """The snapshot to play the next episode with, and the episode it was taken at.

        Raises ``LookupError`` when the pool is empty.
        """
        if not self._snapshots:
            raise LookupError("the snapshot pool is empty")
        sample, rng, count = self.plan.sample, self._rng, len(self._snapshots)
        if sample == "latest" or (sample == "mix" and rng.random() < self.plan.latest_share):
            return self._snapshots[-1]
        return self._snapshots[int(rng.integers(count))]
