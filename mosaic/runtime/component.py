"""The actor contract: init, a main loop of message handlers (and optional work), shutdown."""

from __future__ import annotations

import importlib
import logging
import threading
import traceback
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from mosaic.core.errors import MosaicError
from mosaic.core.log_limit import LogLimiter
from mosaic.messages import ErrorResponse, Message, Notice, Response
from mosaic.transport import Credentials, RequestClient

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
C = TypeVar("C", bound=RequestClient)
HandlerFn = Callable[[Any, Any], "Response | Later | None"]


class Interrupted(MosaicError):
    """A handler's wait was cut short because the actor is stopping."""


@dataclass(frozen=True, slots=True)
class Later:
    """What a handler returns for a request it answers later, under ``key``: the host keeps the
    request's sender, and sends the answer once the component gives it (:meth:`Component.answer`).

    Only over the component's socket: a direct call (:mod:`mosaic.runtime.direct`) needs its
    answer at once. Used by a brain that learns from its rollout workers in rounds.
    """

    key: Hashable


def handles(*message_types: type[Message]) -> Callable[[HandlerFn], HandlerFn]:
    """Mark a method as the handler of ``message_types``.

    A handler of a request returns its response; a handler of a notice returns ``None``.
    Adding a message to a component means adding one class and one handler, nothing else.
    """

    def mark(fn: HandlerFn) -> HandlerFn:
        fn._mosaic_handles = message_types  # type: ignore[attr-defined]
        return fn

    return mark


class Component:
    """Base of every actor: environments, brains, muscles, conductors and controllers.

    Lifecycle, driven by :class:`~mosaic.runtime.host.ActorHost` in the actor's own thread:

    * **init**: :meth:`on_setup` once, after the component's endpoint is bound;
    * **main loop**: each received message goes to the handler registered for its type with
      :func:`handles`; between messages, :meth:`do_work` runs while :meth:`has_work` is true
      (a bounded chunk each time, so control messages are never starved);
    * **shutdown**: :meth:`on_shutdown` once, also after a failure. A handler calls
      :meth:`request_stop` to end the loop after its reply is sent.

    A handler that raises is answered with an :class:`ErrorResponse` to the sender and logged;
    the component keeps running.

    **One at a time.** ``lock`` is held while a handler, a chunk of work or the shutdown runs,
    by the host in the actor's thread and by whoever calls the component directly from another
    thread of the process (:mod:`mosaic.runtime.direct`): the component never runs in two
    threads at once. ``stuck`` says why the component's thread no longer serves, when a direct
    call it made was given up on by its watchdog (``None`` otherwise).

    **Trust.** ``credentials`` are the run's secrets: the host's server demands them of every
    peer, and :meth:`connect` proves them to others. Past the handshake, :meth:`accepts` says
    whether a request may come from a given sender (a component takes its control requests from
    the one that drives it only), and ``allowed_imports`` bounds what a request may name for
    import to what the run's validated experiment file named (``None``: no bound, for
    components built directly in library code).
    """

    _handlers: ClassVar[dict[type[Message], str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        handlers: dict[type[Message], str] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                for message_type in getattr(member, "_mosaic_handles", ()):
                    handlers[message_type] = name
        cls._handlers = handlers

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.credentials: Credentials | None = None
        self.allowed_imports: frozenset[str] | None = None
        self.stop_requested = False
        self.lock = threading.Lock()
        self.stuck: str | None = None
        self._clients: list[RequestClient] = []
        #: Answers to requests a handler put off (:class:`Later`), for the host to send.
        self._answers: list[tuple[Hashable, Response]] = []
        self._stop_pending: Callable[[], bool] = lambda: False
        #: Bounds the log of messages nobody handles: anyone who reaches the endpoint can send them.
        self.unhandled_log = LogLimiter(log, uid, "messages without a handler dropped")
        #: Bounds the log of requests refused for their sender (see :meth:`accepts`).
        self.refused_log = LogLimiter(log, uid, "requests from the wrong sender refused",
                                      level=logging.WARNING)

    # -- lifecycle hooks ------------------------------------------------------------------
    def on_setup(self) -> None:
        """Initialise; runs in the actor's thread once its endpoint is bound."""

    def on_shutdown(self) -> None:
        """Release resources; runs once in the actor's thread, also after a failure."""

    def has_work(self) -> bool:
        """True while the component has main-loop work besides answering messages."""
        return False

    def do_work(self) -> None:
        """Run one bounded chunk of main-loop work (a few milliseconds at most)."""

    def check_interrupted(self) -> None:
        """Raise :class:`Interrupted` if this actor's host was asked to stop.

        Pass it as ``check`` to long waits in handlers, so that stopping an actor that waits on
        a dead peer takes a moment, not the wait's full timeout.
        """
        if self._stop_pending():
            raise Interrupted(f"{self.uid} was asked to stop")

    def request_stop(self) -> None:
        """Ask the host to stop once the current message has been answered."""
        self.stop_requested = True

    def answer(self, key: Hashable, response: Response) -> None:
        """Answer the request a handler put off under ``key`` (see :class:`Later`); the host
        sends it once the handler or the chunk of work under way returns."""
        self._answers.append((key, response))

    def take_answers(self) -> list[tuple[Hashable, Response]]:
        """The answers given by :meth:`answer` since the last call, in order."""
        answers, self._answers = self._answers, []
        return answers

    def accepts(self, message: Message, sender: str | None) -> bool:
        """Whether ``message`` may come from ``sender`` (the uid a client was made with by
        :meth:`connect`, or None). Every message, unless a component narrows it."""
        return True

    def check_import(self, name: str) -> None:
        """Raise :class:`MosaicError` unless the run's experiment file named ``name``."""
        if self.allowed_imports is not None and name not in self.allowed_imports:
            raise MosaicError(f"{self.uid}: refusing to import {name!r}: the experiment file "
                              "does not name it")

    # -- helpers --------------------------------------------------------------------------
    def connect(self, endpoint: str, peer: str) -> RequestClient:
        """A client socket owned by this actor's thread, closed automatically at shutdown.

        It proves the run's credentials and names this component as its sender.
        """
        return self.adopt(RequestClient(endpoint, peer=peer, credentials=self.credentials,
                                        sender=self.uid))

    def adopt(self, client: C) -> C:
        """Keep ``client`` (made in this actor's thread) to close it at shutdown; return it."""
        self._clients.append(client)
        return client

    def disconnect(self, client: RequestClient) -> None:
        """Close a client made by :meth:`connect` before shutdown."""
        if client in self._clients:
            self._clients.remove(client)
        client.close()

    def close_clients(self) -> None:
        """Close every client made by :meth:`connect`. Idempotent."""
        for client in self._clients:
            client.close()
        self._clients.clear()

    def dispatch(self, message: Message, sender: str | None = None) -> Response | Later | None:
        """Run the handler for ``message`` from ``sender``; a message of an unknown type, or
        one this component does not take from ``sender``, gets an :class:`ErrorResponse`."""
        name = self._handlers.get(type(message))
        if name is not None and self.accepts(message, sender):
            return getattr(self, name)(message)  # type: ignore[no-any-return]
        tag = type(message).__name__
        if name is None:
            if self.unhandled_log.allow(tag):
                log.error("%s: no handler for %s", self.uid, tag)
            if isinstance(message, Notice):
                return None
            return ErrorResponse(request=tag, error_type="UnhandledMessage",
                                 error=f"{self.uid} does not handle {tag}")
        who = sender or "an anonymous peer"
        if self.refused_log.allow(tag):
            log.warning("%s: refused %s from %s", self.uid, tag, who)
        return ErrorResponse(request=tag, error_type="WrongSender",
                             error=f"{self.uid} does not take {tag} from {who}")

    def error_answer(self, message: Message, error: Exception) -> ErrorResponse:
        """The answer to ``message`` whose handler raised ``error``, logged: a warning for a
        refusal (a :class:`MosaicError`), an error otherwise (its traceback at DEBUG)."""
        what = type(message).__name__
        if isinstance(error, MosaicError):
            log.warning("%s: %s failed: %s", self.uid, what, error)
        else:
            log.error("%s: %s failed: %s: %s (log level DEBUG shows the traceback)",
                      self.uid, what, type(error).__name__, error)
            log.debug("%s: %s failed:\n%s", self.uid, what, traceback.format_exc())
        return ErrorResponse(request=what, error_type=type(error).__name__, error=str(error))


def handle_hosted(component: Component, message: Message) -> Response | None:
    """Run ``component``'s handler for ``message`` in this thread, with no sender check: for a
    component hosted inside another one, which took the message from its own socket and
    checked its sender itself. Errors of the handler propagate."""
    name = component._handlers.get(type(message))
    if name is None:
        raise MosaicError(f"{component.uid} does not handle {type(message).__name__}")
    return getattr(component, name)(message)  # type: ignore[no-any-return]


def make_component(path: str, uid: str) -> Component:
    """Build an idle component from its class path (``mosaic.package.module:Class``).

    The component is configured later, by its setup message. Only mosaic's own classes can be
    named: a component process takes this path from its command line. Raises
    :class:`ValueError` for a path that does not name a :class:`Component` subclass.
    """
    module_name, _, class_name = path.partition(":")
    if not module_name.startswith("mosaic.") or not class_name:
        raise ValueError(f"not a mosaic component class path: {path!r}")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise ValueError(f"{path!r} is not a component class")
    return cls(uid)
