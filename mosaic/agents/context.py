"""What a brain or muscle is told about its place in a run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium
import numpy as np

from mosaic.agents.metrics import MetricLog

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

    :meth:`log_metric` reports a named scalar to the store; ``metrics`` holds what was reported
    until mosaic sends it (leave it at its default).
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
    #: Shared by the per-copy instances of one muscle, which ``dataclasses.replace`` makes.
    metrics: MetricLog = field(default_factory=MetricLog, repr=False, compare=False)
    rng: np.random.Generator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rng", np.random.default_rng(self.seed))
        if not self.metrics.owner:
            self.metrics.owner = f"muscle {self.muscle!r}"

    def log_metric(self, name: str, value: float) -> None:
        """Report ``value`` under ``name`` (a loss, an epsilon) to the run's ``metrics`` table.

        Cheap and non-blocking: the metric rides on the muscle's next answer to the simulation
        controller, which stamps it with the run's ended episodes and steps. At most
        :data:`~mosaic.agents.metrics.METRICS_PER_REPLY` are held per step; beyond that the
        oldest are dropped (with a warning). Metrics reported in :meth:`Muscle.teardown` are
        not recorded. Consumes no random numbers.

        Raises :class:`~mosaic.agents.metrics.MetricError`, naming the metric, if ``name`` is
        not a non-empty str of at most 255 characters or ``value`` is not a finite int, float
        or NumPy scalar.
        """
        self.metrics.log(name, value)


@dataclass(frozen=True)
class BrainContext:
    """Everything a brain needs at setup. ``slots`` are those of all the brain's muscles.

    :meth:`log_metric` reports a named scalar to the store; ``metrics`` holds what was reported
    until mosaic sends it (leave it at its default).
    """

    agent: str
    brain: str
    slots: Mapping[str, Slot]
    seed: int
    mode: Mode = "train"
    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: MetricLog = field(default_factory=MetricLog, repr=False, compare=False)
    rng: np.random.Generator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rng", np.random.default_rng(self.seed))
        if not self.metrics.owner:
            self.metrics.owner = f"brain {self.brain!r}"

    def log_metric(self, name: str, value: float) -> None:
        """Report ``value`` under ``name`` (a loss, a gradient norm) to the run's ``metrics``
        table.

        Cheap and non-blocking: the metric rides on the brain's next answer to a muscle, which
        passes it on to the simulation controller with its own next answer; the controller
        stamps it with the run's ended episodes and steps. At most
        :data:`~mosaic.agents.metrics.METRICS_PER_REPLY` are held between two answers; beyond
        that the oldest are dropped (with a warning). Metrics reported in
        :meth:`Brain.teardown` are not recorded. Consumes no random numbers.

        Raises :class:`~mosaic.agents.metrics.MetricError`, naming the metric, if ``name`` is
        not a non-empty str of at most 255 characters or ``value`` is not a finite int, float
        or NumPy scalar.
        """
        self.metrics.log(name, value)
