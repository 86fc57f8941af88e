"""Copies of an environment for a muscle that acts on one observation at a time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mosaic.agents.batch import Batch, stack
from mosaic.agents.context import MuscleContext
from mosaic.agents.muscle import Muscle
from mosaic.core.seeding import copy_seed


class PerCopyMuscles(Muscle):
    """One instance of a muscle class per copy, driven through the single-step methods.

    This is how a muscle that does not override :meth:`Muscle.act_batch` acts in an environment
    with ``copies:``. Each instance keeps its own episode state (``reset`` when its copy starts
    an episode; ``receive_info``, ``act`` and ``feedback`` for its copy only), draws from a seed
    of its own (derived from the muscle's seed and the copy), and gets every update from the
    brain.
    """

    def __init__(self, cls: type[Muscle]) -> None:
        self._cls = cls
        self._instances: list[Muscle] = []

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        for copy in range(context.copies):
            instance = self._cls()
            instance.setup(replace(context, seed=copy_seed(context.seed, copy), copy=copy))
            self._instances.append(instance)

    def feedback_batch(self, slot: str, batch: Batch) -> list[Any]:
        experience = []
        for copy in batch.acted.nonzero()[0].tolist():
            self._instances[copy].receive_info(slot, batch.outcome_info(copy))
            item = self._instances[copy].feedback(
                slot, float(batch.rewards[copy]), bool(batch.terminated[copy]),
                bool(batch.truncated[copy]), batch.outcome_observation(copy))
            if item is not None:
                experience.append(item)
        return experience

    def act_batch(self, slot: str, batch: Batch) -> Any:
        actions = []
        for copy, instance in enumerate(self._instances):
            if batch.starts[copy]:
                instance.reset()
                instance.receive_info(slot, batch.copy_info(copy))
            actions.append(instance.act(slot, batch.observation(copy), batch.legal(copy)))
        return stack(actions)

    def apply_update(self, update: Any) -> None:
        for instance in self._instances:
            instance.apply_update(update)

    def teardown(self) -> None:
        for instance in self._instances:
            instance.teardown()
