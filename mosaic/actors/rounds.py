"""Learning rounds: a brain learns from a group of rollout workers in an order of its own.

The rollout workers of one environment step at once, each in its own thread, process or Ray
node, and each sends its muscle's experience to the agent's brain when the learner asks for it
(a PPO rollout, a batch of episodes). Taken in the order they arrive, the brain's updates would
depend on how the OS schedules the workers. A :class:`Rounds` puts each worker's answer off
until every worker of its group has sent its next experience or left (its episodes are done):
round ``r`` is the ``r``-th experience of every member that has one, learnt from in the order
of the members, each member answered with what the brain returned for its own. So a run with
rollout workers gives one digest whatever the placement and the timing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from mosaic.core.errors import MosaicError

__all__ = ["Rounds"]

#: One member's experience awaiting its round: (member, experience, the key of its answer).
Offer = tuple[str, Any, Hashable]


class Rounds:
    """The learning rounds of the groups of a brain's muscles (see the module's docstring).

    ``groups`` lists each group's members in the order the brain learns from them; a muscle in
    no group is not held back (:meth:`grouped` is false for it).
    """

    def __init__(self, groups: Sequence[Sequence[str]]) -> None:
        self._group_of: dict[str, tuple[str, ...]] = {}
        for group in groups:
            members = tuple(group)
            for member in members:
                if member in self._group_of:
                    raise MosaicError(f"muscle {member!r} is in two learning groups")
                self._group_of[member] = members
        self._offers: dict[str, tuple[Any, Hashable]] = {}
        self._left: set[str] = set()

    def grouped(self, member: str) -> bool:
        """Whether ``member``'s experience waits for its group's round."""
        return member in self._group_of

    def offer(self, member: str, experience: Any, key: Hashable) -> list[Offer]:
        """``member`` sent ``experience``, to be answered under ``key``; return the round it
        completes, in the members' order (empty while members are still to send)."""
        if member in self._offers:
            raise MosaicError(f"muscle {member!r} sent experience before its last was answered")
        if member in self._left:
            raise MosaicError(f"muscle {member!r} sent experience after it left")
        self._offers[member] = (experience, key)
        return self._complete(self._group_of[member])

    def leave(self, member: str) -> list[Offer]:
        """``member`` sends no more experience; return the round its leaving completes."""
        group = self._group_of.get(member)
        if group is None or member in self._left:
            return []
        self._left.add(member)
        return self._complete(group)

    def _complete(self, group: tuple[str, ...]) -> list[Offer]:
        offers, left = self._offers, self._left
        waiting = [member for member in group if member not in left]
        if not any(member in offers for member in waiting):
            return []
        if not all(member in offers for member in waiting):
            return []
        return [(member, *offers.pop(member)) for member in waiting]
