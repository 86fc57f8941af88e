"""One step of every copy of a vector environment, as a muscle sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mosaic.core.batching import row, stack
from mosaic.core.vector_info import info_row

__all__ = ["Batch", "row", "stack"]


@dataclass(frozen=True, slots=True)
class Batch:
    """What a muscle gets, per step, for a slot of an environment with ``copies:``.

    The copies step in lockstep. After each step, every copy that acted has an outcome
    (``acted``); a copy whose episode ended has begun its next one in the same step, so its
    ``observations`` row is the first observation of the new episode (``starts``) and the last
    observation of the ended one is in ``final_observations``. At the first step of the run
    every copy starts and none acted.

    Arrays have the copies first. Observations and action masks are batched the way Gymnasium's
    vector environments batch them: one array for Box and Discrete spaces, a dict or tuple of
    such arrays for Dict and Tuple spaces.
    """

    #: What each copy acts on now.
    observations: Any
    #: float64 (N,): the reward of each copy's last action (0 where it did not act).
    rewards: np.ndarray
    #: bool (N,): the copy's episode ended by its own rules after its last action.
    terminated: np.ndarray
    #: bool (N,): the copy's episode was cut short after its last action.
    truncated: np.ndarray
    #: bool (N,): the copy acted at the last step, so the three arrays above are its outcome.
    acted: np.ndarray
    #: bool (N,): the copy begins an episode with its row of ``observations``.
    starts: np.ndarray
    #: copy -> the last observation of the episode that ended at this step.
    final_observations: Mapping[int, Any]
    #: The action masks of the copies, batched like the observations, or ``None``.
    legal_actions: Any = None
    #: The copies' ``info`` as Gymnasium's vector environments give it: ``key`` -> its values
    #: (copies first), ``_key`` -> bool (N,) of the copies that have it. Of the reset for a copy
    #: that starts, else of its last step; what mosaic's codec carries of it (numbers, booleans,
    #: text, small numeric arrays and dicts and lists of them).
    info: Mapping[str, Any] = field(default_factory=dict)
    #: copy -> the info of the last step of the episode that ended at this step.
    final_info: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def copies(self) -> int:
        """How many copies the batch holds."""
        return len(self.acted)

    def observation(self, copy: int) -> Any:
        """The observation ``copy`` acts on now."""
        return row(self.observations, copy)

    def outcome_observation(self, copy: int) -> Any:
        """The observation that followed ``copy``'s last action: the final one if it ended."""
        final = self.final_observations.get(copy)
        return final if final is not None else row(self.observations, copy)

    def copy_info(self, copy: int) -> dict[str, Any]:
        """The info of ``copy`` now: the keys it has, with its values."""
        return info_row(self.info, copy) if self.info else {}

    def outcome_info(self, copy: int) -> Mapping[str, Any]:
        """The info that came with ``copy``'s last outcome: its final step's if it ended."""
        final = self.final_info.get(copy)
        return final if final is not None else self.copy_info(copy)

    def legal(self, copy: int) -> Any:
        """The action mask of ``copy``, or ``None``."""
        return None if self.legal_actions is None else row(self.legal_actions, copy)
