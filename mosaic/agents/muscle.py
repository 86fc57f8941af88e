"""The Muscle: the part of an agent that acts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium.vector.utils import batch_space

from mosaic.agents.batch import Batch, stack
from mosaic.agents.context import MuscleContext

if TYPE_CHECKING:
    from pydantic import BaseModel


class Muscle:
    """Base class for muscles. Subclass it and implement :meth:`act`.

    A muscle lives in its own actor (a thread or a process, as the experiment file places it).
    mosaic calls its methods in this order, always from the same thread:

    1. :meth:`setup` once, with the muscle's :class:`MuscleContext`.
    2. For each episode: :meth:`reset`, then for each step :meth:`act` for every slot that must act,
       then :meth:`feedback` with the outcome of that action. Before a slot's first
       :meth:`feedback` or :meth:`act` of a step (or reset), :meth:`receive_info` gets the
       environment's ``info`` that came with it.
    3. :meth:`teardown` once, at shutdown, also after a failure.

    A muscle that learns returns experience from :meth:`feedback`; mosaic sends it to the agent's
    brain (a MuscleUpdateRequest) and hands the brain's answer, if any, to :meth:`apply_update`.
    Returning ``None`` from :meth:`feedback` costs nothing: no message is sent.

    In an environment with ``copies:``, mosaic calls :meth:`feedback_batch` and
    :meth:`act_batch` once per step for all copies instead. A muscle that does not override
    :meth:`act_batch` still works there: it gets one instance per copy, each driven through the
    single-step methods above.

    An exception from any method fails the run and names this muscle; it is never swallowed.
    """

    context: MuscleContext

    @classmethod
    def params_model(cls) -> type[BaseModel] | None:
        """The pydantic model of this muscle's ``params``, or ``None`` (the default) for any.

        Loading an experiment file validates each agent's muscle params (the agent's ``params``
        with the muscle's own over them) with it, so that bad params are reported with the file,
        line and key path before anything starts. Override it to return a model; import the
        model inside, so that importing the muscle in a component process stays light.
        """
        return None

    def setup(self, context: MuscleContext) -> None:
        """Remember the context. Override to build models; call ``super().setup(context)``."""
        self.context = context

    def reset(self) -> None:
        """A new episode begins."""

    def receive_info(self, slot: str, info: Mapping[str, Any]) -> None:
        """The environment's ``info`` for ``slot`` that came with the observation or outcome
        the next :meth:`feedback` or :meth:`act` for ``slot`` is given (``{}`` when it gave none).

        It is what mosaic's codec carries of the info (see :mod:`mosaic.environments.info`):
        numbers, booleans, text, small numeric NumPy arrays, and dicts and lists of them; the
        rest is dropped, with a warning. Does nothing unless overridden. In a turn-based game it
        is the slot's info when the slot is about to act again or the episode ends.
        """

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        """Return the action for ``slot`` given ``observation``.

        ``legal_actions`` is the environment's action mask for this slot, when it has one.
        The action must belong to the slot's action space.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement act()")

    def feedback(
        self,
        slot: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        observation: Any,
    ) -> Any:
        """Receive the outcome of the last action for ``slot``.

        Return experience for the brain, or ``None`` to send nothing. When ``terminated`` or
        ``truncated`` is true the episode is over and :meth:`act` is not called again before
        :meth:`reset`.
        """
        return None

    def feedback_batch(self, slot: str, batch: Batch) -> list[Any]:
        """Receive the outcome of the last actions of the copies in ``batch.acted``.

        ``batch.outcome_observation(copy)`` is what followed a copy's action (the final
        observation where its episode ended), and ``batch.outcome_info(copy)`` its info.
        Return the experience for the brain as a list,
        each item sent as one update in order; an empty list sends nothing. Called before
        :meth:`act_batch` of the same step.
        """
        return []

    def act_batch(self, slot: str, batch: Batch) -> Any:
        """Return one action per copy for ``slot``, batched with the copies first.

        Override it to act on every copy at once (one forward pass for the whole batch).
        ``batch.starts`` marks the copies that begin an episode with this observation.
        """
        raise NotImplementedError(f"{type(self).__name__} does not act on batches")

    @classmethod
    def acts_on_batches(cls) -> bool:
        """Whether the class overrides :meth:`act_batch`; if not, copies get an instance each."""
        return cls.act_batch is not Muscle.act_batch

    def apply_update(self, update: Any) -> None:
        """Apply the brain's answer to experience this muscle sent (new weights, for example)."""

    def state(self) -> dict[str, np.ndarray]:
        """What the muscle's future depends on besides the brain's answers and ``context.rng``
        (an exploration schedule's counter, experience not sent yet), as NumPy arrays.

        It is saved in the agent's checkpoint with the state of ``context.rng``; a training
        phase that loads the checkpoint gives both back (:meth:`load_state`) after
        :meth:`setup`, so the muscle acts on as if it had never stopped. Called between
        episodes. Empty by default: a muscle whose only state is its generator and the brain's
        weights needs nothing more.
        """
        return {}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`state` returned (``MosaicError`` if it does not fit)."""

    def teardown(self) -> None:
        """Release resources. Called once at shutdown, also after a failure."""


class RandomMuscle(Muscle):
    """Samples uniformly from each slot's action space, honouring action masks.

    The draws come from the muscle's own seed, so the same run seed gives the same actions
    whatever the placement.
    """

    def setup(self, context: MuscleContext) -> None:
        super().setup(context)
        self._spaces = {}
        for index, (uid, slot) in enumerate(sorted(context.slots.items())):
            space = slot.action_space
            space.seed(int(context.rng.integers(0, 2**32 - 1)) + index)
            self._spaces[uid] = space
        self._batched: dict[str, Any] = {}

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        space = self._spaces[slot]
        if legal_actions is not None:
            return space.sample(mask=legal_actions)
        return space.sample()

    def act_batch(self, slot: str, batch: Batch) -> Any:
        if batch.legal_actions is None:
            # All copies in one draw: a Discrete space batches into a MultiDiscrete.
            batched = self._batched.get(slot)
            if batched is None:
                batched = self._batched[slot] = batch_space(self._spaces[slot], batch.copies)
                batched.seed(int(self.context.rng.integers(0, 2**32 - 1)))
            return batched.sample()
        space = self._spaces[slot]
        return stack([space.sample(mask=batch.legal(copy)) for copy in range(batch.copies)])
