"""The actions of an environment's copies that await their outcome, for the muscles of the
transition learners (tabular Q, DQN, TD3, SAC): :class:`PendingCopies`."""

from __future__ import annotations

from typing import Any

import numpy as np

from mosaic.agents.batch import Batch
from mosaic.core.errors import MosaicError

__all__ = ["PendingCopies"]


class PendingCopies:
    """For each slot, each of ``copies`` copies' input (observation, state) and action awaiting
    the outcome that completes its transition.

    :meth:`checked` refuses a batch of another number of copies; :meth:`starts` forgets the
    actions of copies that begin an episode; :meth:`hold` keeps a slot's inputs and actions;
    :meth:`completed` gives back those of the copies that acted, once each.
    """

    def __init__(self, copies: int) -> None:
        self.copies = copies
        # slot -> (inputs, actions, whether each copy still waits for its outcome)
        self._by_slot: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def checked(self, batch: Batch) -> int:
        """``batch.copies``; ``MosaicError`` when the muscle was set up for another number."""
        if batch.copies != self.copies:
            raise MosaicError(f"a batch of {batch.copies} copies for a muscle set up for "
                              f"{self.copies}")
        return batch.copies

    def starts(self, starts: np.ndarray) -> None:
        """The copies marked in ``starts`` begin an episode: nothing of theirs waits."""
        begun = np.asarray(starts, dtype=bool)
        for _, _, waiting in self._by_slot.values():
            waiting[begun] = False

    def hold(self, slot: str, inputs: np.ndarray, actions: np.ndarray) -> None:
        """Every copy of ``slot`` took ``actions[copy]`` on ``inputs[copy]`` (kept as given)."""
        self._by_slot[slot] = (inputs, actions, np.ones(self.copies, dtype=bool))

    def completed(self, slot: str, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(inputs, actions, rows)``: the copies of ``slot`` that acted in ``batch`` and had
        an action waiting (``rows``, possibly none), which no longer wait."""
        pending = self._by_slot.get(slot)
        if pending is None:
            return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
        inputs, actions, waiting = pending
        rows = np.flatnonzero(np.asarray(batch.acted, dtype=bool) & waiting)
        waiting[rows] = False
        return inputs, actions, rows

    @staticmethod
    def outcomes(batch: Batch, rows: np.ndarray) -> dict[str, Any]:
        """The ``rewards``, ``terminated`` and ``truncated`` columns of ``rows``."""
        return {"rewards": np.asarray(batch.rewards, dtype=np.float64)[rows],
                "terminated": np.asarray(batch.terminated, dtype=bool)[rows],
                "truncated": np.asarray(batch.truncated, dtype=bool)[rows]}
