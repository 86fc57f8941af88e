"""The Muscle: the part of an agent that acts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mosaic.agents.context import MuscleContext

if TYPE_CHECKING:
    from pydantic import BaseModel


class Muscle:
    """Base class for muscles. Subclass it and implement :meth:`act`.

    A muscle lives in its own actor (a thread or a process, as the experiment file places it).
    mosaic calls its methods in this order, always from the same thread:

    1. :meth:`setup` once, with the muscle's :class:`MuscleContext`.
    2. For each episode: :meth:`reset`, then for each step :meth:`act` for every slot that must act,
       then :meth:`feedback` with the outcome of that action.
    3. :meth:`teardown` once, at shutdown, also after a failure.

    A muscle that learns returns experience from :meth:`feedback`; mosaic sends it to the agent's
    brain (a MuscleUpdateRequest) and hands the brain's answer, if any, to :meth:`apply_update`.
    Returning ``None`` from :meth:`feedback` costs nothing: no message is sent.

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

    def apply_update(self, update: Any) -> None:
        """Apply the brain's answer to experience this muscle sent (new weights, for example)."""

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

    def act(self, slot: str, observation: Any, legal_actions: Any = None) -> Any:
        space = self._spaces[slot]
        if legal_actions is not None:
            return space.sample(mask=legal_actions)
        return space.sample()
