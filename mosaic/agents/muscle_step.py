"""One step of a muscle in a per-player environment, in mosaic's call order.

Written once for every host of a muscle: the muscle actor (:mod:`mosaic.actors.muscle`), which
the simulation controller asks over a link, and the in-process
:class:`~mosaic.agents.learners.Harness`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mosaic.agents.muscle import Muscle
from mosaic.messages import AgentEvaluateRequest, AgentUpdateRequest

__all__ = ["MuscleCalls", "muscle_step"]

_NO_ACTIONS: dict[str, Any] = {}
_NO_INFO: dict[str, Any] = {}


class MuscleCalls:
    """Which of a muscle's optional calls its class makes worth making: most muscles ignore
    infos, and a muscle that does not learn ignores its rewards, so the hot path skips those
    calls (one per slot a step) for them."""

    __slots__ = ("informs", "learns")

    def __init__(self, cls: type[Muscle]) -> None:
        self.informs = cls.receive_info is not Muscle.receive_info
        self.learns = cls.feedback is not Muscle.feedback


def muscle_step(muscle: Muscle, request: AgentUpdateRequest | AgentEvaluateRequest,
                slots: frozenset[str], calls: MuscleCalls,
                learn: Callable[[Any], None] | None) -> dict[str, Any]:
    """Play ``request`` with ``muscle``, which acts for ``slots``; return its actions.

    ``request.step == 0`` starts an episode (``reset``); each slot that gets feedback or acts
    gets its info first (``receive_info``); unless ``step == 0``, each slot's reward goes to
    ``feedback``, and the experience it returns to ``learn`` (``None``: what feedback returns
    is dropped, as in an evaluation episode). Unless the episode ended, ``act`` picks an action
    for each acting slot of ``slots``; at the end there are none.
    """
    if request.step == 0:
        muscle.reset()
    if calls.informs:
        _inform(muscle, request, slots)
    if request.step and calls.learns:
        observations, terminated, truncated = (request.observations, request.terminated,
                                               request.truncated)
        for slot, reward in request.rewards.items():
            experience = muscle.feedback(slot, reward, terminated, truncated,
                                         observations.get(slot))
            if experience is not None and learn is not None:
                learn(experience)
    if request.terminated or request.truncated:
        return _NO_ACTIONS
    act, observations, legal = muscle.act, request.observations, request.legal_actions
    if not legal:
        return {slot: act(slot, observations[slot], None)
                for slot in request.acting if slot in slots}
    return {slot: act(slot, observations[slot], legal.get(slot))
            for slot in request.acting if slot in slots}


def _inform(muscle: Muscle, request: AgentUpdateRequest | AgentEvaluateRequest,
            slots: frozenset[str]) -> None:
    """``receive_info`` for each slot that gets feedback or acts in ``request``, before
    either."""
    infos = request.infos
    for slot in request.rewards:
        muscle.receive_info(slot, infos.get(slot, _NO_INFO))
    if request.terminated or request.truncated:
        return
    for slot in request.acting:
        if slot in slots and (not request.step or slot not in request.rewards):
            muscle.receive_info(slot, infos.get(slot, _NO_INFO))
