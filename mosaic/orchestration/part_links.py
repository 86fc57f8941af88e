"""How the simulation controller reaches the environments and muscles of its run.

A part in a thread of the controller's process is called directly on the step loop (see
:mod:`mosaic.runtime.direct`): no sockets, no codec, no hand-over between threads. Every other
part, and every set-up and shutdown request, goes over the part's socket. Which one a part gets
follows from its placement alone: there is nothing to configure.
"""

from __future__ import annotations

from collections.abc import Callable

from mosaic.conductors.run_context import RunContext
from mosaic.messages import (
    AgentBatchRequest,
    AgentEvaluateRequest,
    AgentUpdateRequest,
    EnvironmentResetRequest,
    EnvironmentUpdateRequest,
    Request,
    VectorResetRequest,
    VectorStepRequest,
)
from mosaic.runtime.component import Component
from mosaic.runtime.direct import DirectClient
from mosaic.runtime.placement import ThreadPlaced
from mosaic.runtime.watchdog import Watchdog
from mosaic.transport import RequestClient

#: The requests of the step loop: what a part in a thread of the controller's process answers
#: in the controller's own thread.
STEP_REQUESTS: frozenset[type[Request]] = frozenset({
    EnvironmentResetRequest,
    EnvironmentUpdateRequest,
    VectorResetRequest,
    VectorStepRequest,
    AgentUpdateRequest,
    AgentEvaluateRequest,
    AgentBatchRequest,
})


class PartLinks:
    """Makes the clients of ``owner`` (the controller, in its own thread) to the parts of the
    run of ``ctx``; ``give_up(error)`` runs when the watchdog of the direct calls gives one up
    (see :class:`~mosaic.runtime.watchdog.Watchdog`)."""

    def __init__(self, owner: Component, ctx: RunContext,
                 give_up: Callable[[BaseException], None]) -> None:
        self._owner = owner
        self._ctx = ctx
        self._give_up = give_up
        self._watchdog: Watchdog | None = None

    def link(self, uid: str, endpoint: str, peer: str) -> RequestClient:
        """A client of part ``uid`` bound at ``endpoint``: direct on the step loop when the run
        placed it in a thread of this process, its socket otherwise. Closed with the owner's
        other clients."""
        owner = self._owner
        placed = next((p for p in self._ctx.supervisor.placed() if p.uid == uid), None)
        if not (isinstance(placed, ThreadPlaced) and placed.endpoint == endpoint):
            return owner.connect(endpoint, peer)
        if self._watchdog is None:
            self._watchdog = Watchdog(owner.uid, self._give_up)
        return owner.adopt(DirectClient(placed, STEP_REQUESTS, self._watchdog, peer=peer,
                                        sender=owner.uid, credentials=owner.credentials))

    @property
    def abandoned_peer(self) -> str | None:
        """The peer of the direct call the watchdog gave up on, if it gave one up."""
        return None if self._watchdog is None else self._watchdog.abandoned_peer

    def close(self) -> None:
        """End the watchdog's thread, if one was started. Idempotent."""
        if self._watchdog is not None:
            self._watchdog.close()
