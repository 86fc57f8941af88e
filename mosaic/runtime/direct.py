"""Calling a component placed in a thread of this process directly, without sockets or codec.

Over a socket, one request to a component in a thread of the same process costs two encodings,
two decodings and two hand-overs between threads: several times what CartPole's own step
costs. A :class:`DirectClient` runs the component's handler in the caller's thread instead,
for the requests it is told to (the step loop's). What the wire gave stays true:

* **one at a time**: the call holds the component's ``lock``, which its own thread holds while
  it handles a message of its socket (a brain's answer, a shutdown) or shuts down;
* **isolation**: the request and the answer are copied as the codec would deliver them
  (:func:`~mosaic.messages.copying.detached`), so neither side can change what the other keeps;
* **failures**: a handler that raises is logged and answered as over the socket, and the
  caller gets :class:`RemoteError`; one that raises SystemExit (or another BaseException) ends
  the component's thread as it would in its own thread, and the caller gets
  :class:`ComponentDied` naming it; a component that has ended gets no call;
* **timeouts and cancels**: a call cannot be interrupted, so a :class:`Watchdog` gives up on it
  in the caller's place (see :mod:`mosaic.runtime.watchdog`).

Every other request, and every notice, goes over the component's socket as before: set-up and
shutdown, where user code may stall, keep the socket's interruptible wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TypeVar

from mosaic.core.errors import ComponentDied, RemoteError, TransportError
from mosaic.messages import ErrorResponse, Notice, Request, Response
from mosaic.messages.copying import detached
from mosaic.runtime.component import Later
from mosaic.runtime.placement import ThreadPlaced
from mosaic.runtime.watchdog import Watchdog
from mosaic.transport import Credentials, RequestClient

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Response)


class DirectClient(RequestClient):
    """A :class:`RequestClient` of a component in a thread of this process (``placed``) that
    runs the requests of the types in ``direct`` in the caller's thread.

    A direct request runs when its answer is received (:meth:`receive`, or :meth:`request` at
    once): requests sent to several components and then received in turn run in that order,
    one after another. Its ``timeout`` and ``check`` go to ``watchdog``, which must be the
    caller thread's, shared by all its direct clients. Belongs to the thread that creates it.
    """

    def __init__(self, placed: ThreadPlaced, direct: Collection[type[Request]],
                 watchdog: Watchdog, *, peer: str, sender: str,
                 credentials: Credentials | None = None) -> None:
        super().__init__(placed.endpoint, peer=peer, credentials=credentials, sender=sender)
        self.placed = placed
        self._direct = frozenset(direct)
        self._watchdog = watchdog
        self._sender = sender
        #: Direct requests sent and not yet received, by their (negative) correlation ids.
        self._pending: dict[int, Request] = {}
        self._next_direct = 0

    def send(self, message: Request | Notice) -> int:
        if type(message) not in self._direct or not isinstance(message, Request):
            return super().send(message)
        self._next_direct -= 1
        self._pending[self._next_direct] = message
        return self._next_direct

    def receive(self, correlation_id: int, timeout: float, expect: type[R],
                check: Callable[[], None] | None = None) -> R:
        if correlation_id > 0:
            return super().receive(correlation_id, timeout, expect, check)
        message = self._pending.pop(correlation_id, None)
        if message is None:
            raise TransportError(f"no direct request {correlation_id} to {self.peer} is pending")
        return self.call(message, expect, timeout, check)

    def request(self, message: Request, expect: type[R], timeout: float,
                check: Callable[[], None] | None = None) -> R:
        if type(message) in self._direct:
            return self.call(message, expect, timeout, check)
        return super().request(message, expect, timeout, check)

    def call(self, message: Request, expect: type[R], timeout: float,
             check: Callable[[], None] | None = None) -> R:
        """Run ``message``'s handler in this thread and return a copy of its answer.

        Raises :class:`RemoteError` when the handler failed, :class:`ComponentDied` when the
        component has ended (or ended now, of a BaseException), :class:`TransportError` for an
        answer of another type than ``expect``, and
        :class:`~mosaic.core.errors.CallAbandoned` when the watchdog gave up on the call.
        """
        placed = self.placed
        component = placed.component
        request = detached(message)
        watchdog = self._watchdog
        watchdog.begin(self.peer, timeout, check)
        try:
            with component.lock:
                if placed.status.stopped.is_set():
                    raise ComponentDied(placed.describe(), placed.exit_cause() or "stopped")
                try:
                    answer = component.dispatch(request, self._sender)
                except Exception as error:  # as over the socket: logged, answered, carried on
                    answer = component.error_answer(request, error)
                except BaseException as error:
                    raise ComponentDied(placed.describe(), self._ended(error)) from None
                if isinstance(answer, Later):
                    raise TransportError(f"{self.peer} puts off its answer to "
                                         f"{type(message).__name__}, which a direct call "
                                         "cannot wait for")
                answer = detached(answer)
        finally:
            watchdog.end()
        if type(answer) is expect:
            return answer
        if isinstance(answer, ErrorResponse):
            raise RemoteError(self.peer, f"{answer.error_type}: {answer.error}")
        raise TransportError(f"{self.peer} answered {type(answer).__name__}, "
                             f"expected {expect.__name__}")

    def _ended(self, error: BaseException) -> str:
        """End the component's thread for ``error`` (SystemExit, say), as its host does when
        its own code raises one; return the cause it records."""
        placed = self.placed
        cause = f"{type(error).__name__}: {error}"
        log.error("%s: %s raised in a direct call", placed.uid, cause)
        if placed.status.failure is None:
            placed.status.failure = cause
        placed.kill()
        return placed.status.failure
