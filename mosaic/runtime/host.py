"""ActorHost: a pykka actor that serves one component on one ZeroMQ endpoint."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pykka

from mosaic.core.affinity import pin_current_thread
from mosaic.messages import Message, Request, Response
from mosaic.runtime.component import Component, Later
from mosaic.transport import RequestServer, sender_of

log = logging.getLogger(__name__)

#: How long an idle host blocks on its socket before it looks at its pykka inbox again.
#: Bounds how late a pykka stop is noticed; messages on the socket wake it at once.
IDLE_POLL_MS = 100

_SERVE = object()
_UNKNOWN: Any = object()
#: Routing ids whose sender is remembered: a component has a handful of peers, and the bound
#: keeps many peers (each one authenticated, but still) from growing the table without end.
_SENDERS_KEPT = 64


class HostStatus:
    """What a host reports to whoever placed it, safe to read from any thread.

    ``bound`` is set once the endpoint is bound (``endpoint`` then holds the address peers
    connect to) or start-up failed; ``stopped`` once the host has shut down; ``failure`` says
    why it failed, if it did. ``thread_id`` is the kernel's id of the host's thread once it
    runs (where its set-up's CPU time is booked, see :mod:`mosaic.runtime.setup_wait`).
    """

    def __init__(self) -> None:
        self.bound = threading.Event()
        self.stopped = threading.Event()
        self.thread_id: int | None = None
        self.endpoint: str | None = None
        self.failure: str | None = None


class ActorHost(pykka.ThreadingActor):
    """Runs a :class:`Component`'s lifecycle in a pykka actor thread.

    ``on_start`` binds the endpoint (the socket is created, used and closed by this thread only)
    and calls the component's ``on_setup``; the main loop is a message to itself that serves
    the socket until something arrives in the pykka inbox (a stop, usually), so pykka's own
    ``stop()`` always works; ``on_stop``/``on_failure`` call ``on_shutdown`` and close every
    socket. The same host runs in a thread of the run's process and as the main actor of a
    spawned process: placement changes nothing here.

    What it does is reported through its :class:`HostStatus`, which its placer keeps. A host on
    the step loop is given a ``cpu`` to run on (see :mod:`mosaic.core.affinity`).
    """

    use_daemon_thread = True

    def __init__(self, component: Component, endpoint: str, status: HostStatus,
                 cpu: int | None = None) -> None:
        super().__init__()
        self.component = component
        self.cpu = cpu
        self.requested_endpoint = endpoint
        self.status = status
        component._stop_pending = lambda: not self.actor_inbox.empty()
        self._server: RequestServer | None = None
        self._senders: dict[bytes, str | None] = {}
        #: Requests whose answer the component put off (Later), by their keys.
        self._later: dict[Any, Any] = {}
        self._shut_down = False

    def on_start(self) -> None:
        # pykka skips on_stop/on_failure when on_start raises: clean up here before re-raising.
        self.status.thread_id = threading.get_native_id()
        try:
            pin_current_thread(self.cpu)
            self._server = RequestServer(self.requested_endpoint, name=self.component.uid,
                                         idle_timeout_ms=IDLE_POLL_MS,
                                         credentials=self.component.credentials)
            self.component.on_setup()
            self.status.endpoint = self._server.endpoint
        except BaseException as error:
            self.status.failure = f"start-up failed: {type(error).__name__}: {error}"
            self._shutdown()
            self.status.bound.set()
            raise
        self.status.bound.set()
        self.actor_ref.tell(_SERVE)

    def on_receive(self, message: Any) -> Any:
        if message is _SERVE:
            try:
                self._serve()
            except Exception:
                raise
            except BaseException as error:
                # SystemExit or KeyboardInterrupt from a component's code (signals reach only
                # the main thread): this actor fails, alone. Let through, it would make pykka
                # stop every actor of the process, other runs' too.
                self.status.failure = f"{type(error).__name__}: {error}"
                log.error("%s: %s raised in its thread", self.component.uid, self.status.failure)
                self.stop()
            return None
        return super().on_receive(message)

    def _serve(self) -> None:
        inbox = self.actor_inbox
        component = self.component
        server = self._server
        if server is None:
            return
        # Hoisted out of the loop: it runs once per message on the step loop.
        receive, reply_to, handle = server.receive, server.reply, self._handle
        senders = self._senders
        while inbox.empty():
            busy = component.has_work()
            incoming = receive(not busy)
            if incoming is not None:
                message = incoming.message
                peer = incoming.peer
                sender = senders.get(peer, _UNKNOWN)
                if sender is _UNKNOWN:
                    sender = sender_of(peer)
                    if len(senders) < _SENDERS_KEPT:
                        senders[peer] = sender
                reply = handle(message, sender)
                if isinstance(reply, Later):
                    self._later[reply.key] = incoming
                elif reply is not None and isinstance(message, Request):
                    reply_to(incoming, reply)
                if component._answers:
                    self._send_answers()
            # Asked again: the message just handled may have ended the work (a stop request
            # shuts down what the next chunk would talk to).
            if busy and component.has_work() and not component.stop_requested:
                try:
                    with component.lock:
                        component.do_work()
                except Exception as error:
                    self.status.failure = f"{type(error).__name__}: {error}"
                    raise
                if component._answers:
                    self._send_answers()
            if component.stop_requested:
                self.stop()
                return
        self.actor_ref.tell(_SERVE)

    def _send_answers(self) -> None:
        """Send the answers the component gave to requests it had put off."""
        server = self._server
        for key, response in self.component.take_answers():
            incoming = self._later.pop(key, None)
            if incoming is None:
                log.error("%s: an answer to no request put off (%r) was dropped",
                          self.component.uid, key)
            elif server is not None:
                server.reply(incoming, response)

    def _handle(self, message: Message, sender: str | None) -> Response | Later | None:
        """The component's answer to ``message``; a refusal or a failure becomes an error reply."""
        component = self.component
        with component.lock:  # a direct caller in another thread takes turns with this loop
            try:
                return component.dispatch(message, sender)
            except Exception as error:  # a handler failure goes back to its sender
                return component.error_answer(message, error)

    def on_stop(self) -> None:
        self._shutdown()

    def on_failure(self, exception_type: Any, exception_value: Any, tb: Any) -> None:
        if self.status.failure is None:
            name = getattr(exception_type, "__name__", exception_type)
            self.status.failure = f"{name}: {exception_value}"
        self._shutdown()

    def _shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        component = self.component
        # Not while a direct caller is inside the component; and once stopped is set, under the
        # lock, no direct call gets in any more.
        with component.lock:
            try:
                component.on_shutdown()
            except Exception:
                log.exception("%s: on_shutdown failed", component.uid)
            finally:
                component.unhandled_log.flush(force=True)
                component.refused_log.flush(force=True)
                component.close_clients()
                if self._server is not None:
                    self._server.close()
                self.status.stopped.set()
