"""The requesting side: a DEALER socket with correlation ids, timeouts and liveness checks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import zmq

from mosaic.core.errors import CodecError, RemoteError, RequestTimeout, TransportError
from mosaic.messages import ErrorResponse, Message, Notice, Request, Response
from mosaic.messages.codec import DEFAULT_MAX_FRAME_BYTES, decode_message, encode_message
from mosaic.transport.context import context
from mosaic.transport.credentials import Credentials
from mosaic.transport.security import secure_client

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Response)

#: How often a long wait wakes up to run its liveness/cancellation check.
CHECK_INTERVAL_S = 0.1
#: How long a wait whose check failed still looks for the answer: a peer that answered and then
#: exited (a component's last answer is its shutdown's) may be found gone before the answer,
#: already written to its socket, is read here.
LAST_WORD_S = 0.05


#: The longest a send may block. Sends queue at once unless the peer's queue is full (a
#: thousand messages behind) or, over inproc, the peer is gone: then waiting longer would only
#: hang the caller, out of reach of Ctrl-C.
SEND_TIMEOUT_S = 10.0

# pyzmq's own send, without the wrapper of its ``zmq.Socket`` subclass, which only adds
# draft-API arguments and costs more than the send itself on the step loop.
_send = zmq.backend.Socket.send


def routing_id(sender: str) -> bytes:
    """The routing id a client of ``sender`` gets: its name, as ZeroMQ allows one (1-255 bytes,
    not starting with a zero byte, which ZeroMQ keeps for the ids it makes up)."""
    return b"@" + sender.encode("utf-8", "replace")[:254]


def sender_of(peer: bytes) -> str | None:
    """The sender a routing id names (see :func:`routing_id`), or None for an anonymous peer."""
    return peer[1:].decode("utf-8", "replace") if peer[:1] == b"@" else None


class RequestClient:
    """A DEALER socket connected to one component. Belongs to the thread that creates it.

    Every request carries a fresh correlation id; a reply with another id (a late answer to a
    request that already timed out) is dropped, so answers can never be paired with the wrong
    question. Waits are sliced: every :data:`CHECK_INTERVAL_S` the optional ``check`` callable
    runs and may raise (a dead peer, a cancelled run) to end the wait early.

    ``credentials`` are what an ipc or tcp server asks for (see :mod:`mosaic.transport.security`);
    ``sender`` names who sends, for servers that take some requests from one party only (it
    becomes the socket's routing id, so at most one client per sender and server).
    """

    def __init__(self, endpoint: str, *, peer: str, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 credentials: Credentials | None = None, sender: str | None = None):
        self.endpoint = endpoint
        self.peer = peer
        self.max_frame_bytes = max_frame_bytes
        sock = context().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RECONNECT_IVL, 10)
        sock.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes)
        sock.setsockopt(zmq.RCVTIMEO, int(CHECK_INTERVAL_S * 1000))
        sock.setsockopt(zmq.SNDTIMEO, int(SEND_TIMEOUT_S * 1000))
        if sender:
            sock.setsockopt(zmq.ROUTING_ID, routing_id(sender))
        secure_client(sock, endpoint, credentials)
        sock.connect(endpoint)
        self._socket = sock
        self._next_id = 0

    def send(self, message: Request | Notice) -> int:
        """Send without waiting; return the correlation id to :meth:`receive` the answer with."""
        self._next_id += 1
        try:
            _send(self._socket, encode_message(message, self._next_id))
        except zmq.Again:
            raise TransportError(
                f"could not send {type(message).__name__} to {self.peer} within "
                f"{SEND_TIMEOUT_S:g} s: it is gone or a thousand messages behind"
            ) from None
        return self._next_id

    def notify(self, notice: Notice) -> None:
        """Send a one-way notice: ZeroMQ queues it for the peer (see :data:`SEND_TIMEOUT_S`)."""
        self.send(notice)

    def receive(
        self,
        correlation_id: int,
        timeout: float,
        expect: type[R],
        check: Callable[[], None] | None = None,
    ) -> R:
        """Wait up to ``timeout`` seconds for the answer to request ``correlation_id``.

        Raises :class:`RequestTimeout` when none came, :class:`RemoteError` when the peer answered
        with an :class:`ErrorResponse`, :class:`TransportError` for an answer of another type,
        and whatever ``check`` raises.
        """
        sock = self._socket
        deadline = time.monotonic() + timeout
        while True:
            try:
                frame = sock.recv()
            except zmq.Again:
                if check is not None:
                    try:
                        check()
                    except BaseException:
                        # A peer that answers and then exits (a component's shutdown answer
                        # is its last word) can be found gone before its answer is read: an
                        # answer already on its way wins over the check's failure.
                        last = self._last_word(correlation_id)
                        if last is None:
                            raise
                        return self._answer(last, expect)
                if time.monotonic() >= deadline:
                    raise RequestTimeout(
                        f"{self.peer} did not answer within {timeout:g} s"
                    ) from None
                continue
            try:
                answer_id, message = decode_message(frame, max_bytes=self.max_frame_bytes)
            except CodecError as error:
                log.error("malformed reply from %s dropped: %s", self.peer, error)
                continue
            if answer_id != correlation_id:
                log.debug("stale reply %s from %s dropped", answer_id, self.peer)
                continue
            if type(message) is expect:  # every answer of the step loop: no call for it
                return message
            return self._answer(message, expect)

    def _answer(self, message: Message, expect: type[R]) -> R:
        if type(message) is expect:
            return message
        if isinstance(message, ErrorResponse):
            raise RemoteError(self.peer, f"{message.error_type}: {message.error}")
        raise TransportError(
            f"{self.peer} answered {type(message).__name__}, expected {expect.__name__}"
        )

    def _last_word(self, correlation_id: int) -> Message | None:
        """The answer to ``correlation_id`` if it reaches this socket within
        :data:`LAST_WORD_S`, else None (stale and malformed frames are dropped)."""
        sock = self._socket
        deadline = time.monotonic() + LAST_WORD_S
        while (left := deadline - time.monotonic()) > 0:
            if not sock.poll(int(left * 1000) + 1):
                return None
            try:
                answer_id, message = decode_message(sock.recv(zmq.NOBLOCK),
                                                    max_bytes=self.max_frame_bytes)
            except (zmq.Again, CodecError):
                continue
            if answer_id == correlation_id:
                return message
        return None

    def request(
        self,
        message: Request,
        expect: type[R],
        timeout: float,
        check: Callable[[], None] | None = None,
    ) -> R:
        """Send ``message`` and wait for its answer; see :meth:`receive` for the failures."""
        return self.receive(self.send(message), timeout, expect, check)

    def close(self) -> None:
        """Close the socket. Idempotent."""
        self._socket.close(linger=0)

