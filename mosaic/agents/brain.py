"""The Brain: the part of an agent that learns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mosaic.agents.context import BrainContext

if TYPE_CHECKING:
    from pydantic import BaseModel


class Brain:
    """Base class for brains. Subclass it and implement :meth:`learn`.

    A brain serves one or more muscles (parameter sharing, or one muscle per environment). mosaic
    calls, always from the brain actor's own thread:

    1. :meth:`setup` once, with the :class:`BrainContext`.
    2. :meth:`learn` whenever one of its muscles sends experience. Its return value goes back to
       that muscle's :meth:`Muscle.apply_update`; ``None`` means "nothing to apply". The brain thus
       chooses the schedule: answer with weights every step, every N steps, or at episode end.
    3. :meth:`teardown` once, at shutdown.

    :meth:`state` and :meth:`load_state` exchange the brain's learnable state as a flat mapping of
    NumPy arrays; mosaic stores it as ``.npz`` (never pickle), with the state of
    ``context.rng``. For a continued run to pick up exactly where the saved one stopped, the
    state must hold everything the brain's future depends on (weights, optimizer moments,
    counters, experience not yet learnt from), and every draw must come from ``context.rng``.
    """

    context: BrainContext

    @classmethod
    def params_model(cls) -> type[BaseModel] | None:
        """The pydantic model of this brain's ``params``, or ``None`` (the default) for any.

        Loading an experiment file validates each agent's brain params (the agent's ``params``
        with the brain's own over them) with it, so that bad params are reported with the file,
        line and key path before anything starts. Override it to return a model; import the
        model inside, so that importing the brain in a component process stays light.
        """
        return None

    def setup(self, context: BrainContext) -> None:
        """Remember the context. Override to build models; call ``super().setup(context)``."""
        self.context = context

    def learn(self, muscle: str, experience: Any) -> Any:
        """Learn from ``experience`` sent by ``muscle``; return an update for it, or ``None``."""
        raise NotImplementedError(f"{type(self).__name__} must implement learn()")

    def sync(self, muscle: str) -> Any:
        """What ``muscle`` needs to act as this brain would now (weights, a table), or ``None``.

        Called once when each muscle starts, after any checkpoint was loaded: a test phase's
        muscle, which sends no experience, still acts on what training learned.
        """
        return None

    def state(self) -> dict[str, np.ndarray]:
        """Return the learnable state as NumPy arrays (empty for a brain that does not learn)."""
        return {}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state` returned."""

    def greedy_policy(self) -> dict[str, np.ndarray]:
        """The greedy policy as the arrays of a policy checkpoint
        (:func:`~mosaic.agents.policies.q_table_arrays`,
        :func:`~mosaic.agents.policies.mlp_arrays`), or empty for none.

        A phase's checkpoint holds them beside :meth:`state`, so it can be given to a
        ``load_checkpoint`` param or to the RL worker as it is.
        """
        return {}

    def teardown(self) -> None:
        """Release resources. Called once at shutdown, also after a failure."""


class NoOpBrain(Brain):
    """A brain that learns nothing: for scripted or random muscles."""

    def learn(self, muscle: str, experience: Any) -> Any:
        return None
