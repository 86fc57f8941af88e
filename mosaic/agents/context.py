"""What a brain or muscle is told about its place in a run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium
import numpy as np

Mode = Literal["train", "test"]


@dataclass(frozen=True)
class Slot:
    """One place in an environment where an agent acts: its sensor and its actuator.

    ``uid`` is the environment's own agent id (``agent_0`` for a Gymnasium env, ``player_1`` for a
    PettingZoo game). The observation space describes the sensor, the action space the actuator;
    both are the environment's own space objects, rebuilt on this side of the wire.
    """

    uid: str
    observation_space: gymnasium.Space[Any]
    action_space: gymnasium.Space[Any]


@dataclass(frozen=True)
class MuscleContext:
    """Everything a muscle needs at setup.

    ``seed`` is derived from the run seed for this muscle alone; ``rng`` is a generator seeded with
    it, so a muscle that draws from ``rng`` is reproducible whatever its placement.
    """

    agent: str
    muscle: str
    environment: str
    slots: Mapping[str, Slot]
    seed: int
    mode: Mode = "train"
    params: Mapping[str, Any] = field(default_factory=dict)
    #: How many copies of its environment the muscle acts in at once (``copies:`` in the
    #: file). An environment with ``copies:`` calls the batch methods (see
    #: :meth:`Muscle.act_batch`).
    copies: int = 1
    #: The copy a per-copy instance acts in (see :class:`~mosaic.agents.batch.PerCopyMuscles`),
    #: else ``None``.
    copy: int | None = None
    rng: np.random.Generator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rng", np.random.default_rng(self.seed))


@dataclass(frozen=True)
class BrainContext:
    """Everything a brain needs at setup. ``slots`` are those of all the brain's muscles."""

    agent: str
    brain: str
    slots: Mapping[str, Slot]
    seed: int
    mode: Mode = "train"
    params: Mapping[str, Any] = field(default_factory=dict)
    rng: np.random.Generator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rng", np.random.default_rng(self.seed))
