"""The serving side of a component: a ROUTER socket that decodes requests and sends replies."""

from __future__ import annotations

import contextlib
import logging
import struct
from typing import NamedTuple

import zmq

from mosaic.core.errors import CodecError
from mosaic.core.log_limit import LogLimiter
from mosaic.messages import ErrorResponse, Message, Response
from mosaic.messages.codec import DEFAULT_MAX_FRAME_BYTES, decode_message, encode_message
from mosaic.transport.context import REPLY_LINGER_MS, context
from mosaic.transport.credentials import Credentials
from mosaic.transport.security import release, secure_server

log = logging.getLogger(__name__)

#: Handshakes that a peer failed: it did not prove the run's credentials, or spoke no ZeroMQ.
_REFUSED_EVENTS: dict[int, str] = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "wrong credentials",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "no credentials (handshake refused)",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "a failed handshake",
}
#: How many messages a busy server takes between two looks at its refused handshakes.
_MONITOR_EVERY = 256

# pyzmq's own socket methods, without the wrappers of its ``zmq.Socket`` subclass: on the step
# loop those cost more than the calls they wrap. The wrapped ``send`` only adds draft-API
# arguments (routing_id, group) and ``recv_multipart`` asks for RCVMORE through an enum lookup
# per frame; a frame received without copying knows whether more follow (``Frame.more``).
_send = zmq.backend.Socket.send
_recv = zmq.backend.Socket.recv
_SNDMORE = int(zmq.SNDMORE)
_NOBLOCK = int(zmq.NOBLOCK)


class Incoming(NamedTuple):
    """A decoded message and what is needed to answer it.

    A named tuple: one is built per message received, and a tuple costs a fraction of a frozen
    dataclass to build.
    """

    peer: bytes
    correlation_id: int
    message: Message


class RequestServer:
    """A bound ROUTER socket. Belongs to the thread that creates it.

    Malformed frames (wrong frame count, bad msgpack, unknown types, wrong fields, wrong protocol
    version, oversized) are logged and rejected with an :class:`ErrorResponse` where the sender can
    be identified; they never raise out of :meth:`receive`, so the owning actor keeps running.
    A flood of them is logged in part, then summarised (:class:`~mosaic.core.log_limit.LogLimiter`).
    Frames above ``max_frame_bytes`` are also dropped by ZeroMQ itself (``MAXMSGSIZE``).

    On ipc and tcp only peers that prove ``credentials`` at the handshake are heard at all (see
    :mod:`mosaic.transport.security`); each refused peer is logged as a warning, a flood of them
    in part.
    """

    def __init__(self, endpoint: str, *, name: str, idle_timeout_ms: int = 100,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 credentials: Credentials | None = None):
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.rejected = 0
        # A flood of garbage must not become a flood of log lines (see mosaic.core.log_limit).
        self._log_limit = LogLimiter(log, name, "malformed messages rejected")
        self._refusals = LogLimiter(log, name, "unauthenticated peers refused",
                                    level=logging.WARNING)
        self._credentials: Credentials | None = None
        self._monitor: zmq.Socket[bytes] | None = None
        self._until_monitor = _MONITOR_EVERY
        sock = context().socket(zmq.ROUTER)
        try:
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            sock.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes)
            sock.setsockopt(zmq.LINGER, 0)
            # A blocking receive that gives up after the idle timeout: one call per message
            # on the hot path instead of a poll and a receive.
            sock.setsockopt(zmq.RCVTIMEO, idle_timeout_ms)
            if secure_server(sock, endpoint, credentials):
                self._credentials = credentials
                self._monitor = sock.get_monitor_socket(sum(_REFUSED_EVENTS))
            sock.bind(endpoint)
            last = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except Exception:
            self._close_security(sock)
            sock.close(linger=0)
            raise
        self._socket = sock
        #: The address peers connect to (a tcp port chosen by the OS is filled in).
        self.endpoint = last if last and not endpoint.startswith("inproc://") else endpoint

    def receive(self, wait: bool = True) -> Incoming | None:
        """Take one valid message, waiting up to the idle timeout if ``wait``.

        Returns ``None`` if none arrived or the one that arrived was rejected.
        """
        sock = self._socket
        try:
            # A ROUTER hands over the sender's routing id first, then at least one frame, all
            # of a message at once: once the first frame is in, the rest is there.
            peer = _recv(sock, 0 if wait else _NOBLOCK)
        except zmq.Again:
            # Idle: a moment to log refused peers and summarise a flood that has ended.
            self._note_refusals()
            self._log_limit.flush()
            self._refusals.flush()
            return None
        frame = _recv(sock, 0, False)
        self._until_monitor -= 1
        if not self._until_monitor:
            self._note_refusals()
        if frame.more:
            count = 2
            while frame.more:
                frame = _recv(sock, 0, False)
                count += 1
            self._reject(peer, 0, "?", CodecError(f"expected 2 frames, got {count}"))
            return None
        payload = frame.bytes
        try:
            correlation_id, message = decode_message(payload, max_bytes=self.max_frame_bytes)
        except CodecError as error:
            self._reject(peer, 0, "?", error)
            return None
        return Incoming(peer, correlation_id, message)

    def reply(self, incoming: Incoming, response: Response) -> None:
        """Send ``response`` to the peer of ``incoming``; a vanished peer is logged, not raised."""
        try:
            self._send(incoming.peer, encode_message(response, incoming.correlation_id), 0)
        except zmq.ZMQError as error:
            log.warning("%s: could not reply %s: %s", self.name, type(response).__name__, error)

    def _reject(self, peer: bytes | None, correlation_id: int, request: str,
                error: Exception) -> None:
        self.rejected += 1
        if self._log_limit.allow(type(error).__name__):
            log.error("%s: rejected a malformed message: %s: %s", self.name, type(error).__name__,
                      error)
        if peer is None:
            return
        answer = ErrorResponse(request=request, error_type=type(error).__name__, error=str(error))
        # the sender is gone or not a mosaic peer; the rejection is logged
        with contextlib.suppress(zmq.ZMQError):
            self._send(peer, encode_message(answer, correlation_id), _NOBLOCK)

    def _send(self, peer: bytes, payload: bytes, flags: int) -> None:
        # Two sends instead of send_multipart, whose per-part checks cost more than both sends
        # on the step loop. ROUTER_MANDATORY makes the first send raise for a vanished peer.
        sock = self._socket
        _send(sock, peer, flags | _SNDMORE)
        _send(sock, payload, flags)

    def _note_refusals(self) -> None:
        """Log the peers whose handshake failed since the last look."""
        self._until_monitor = _MONITOR_EVERY
        monitor = self._monitor
        if monitor is None:
            return
        while True:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            # An event is a 16-bit id and a 32-bit value, then the endpoint. Read here rather
            # than with zmq.utils.monitor, whose import pulls in asyncio (see transport.zap).
            if len(frames) != 2 or len(frames[0]) != 6:
                continue
            what = _REFUSED_EVENTS.get(struct.unpack("=Hi", frames[0])[0])
            if what is not None and self._refusals.allow(what):
                log.warning("%s: refused a peer that did not authenticate (%s) on %s", self.name,
                            what, frames[1].decode("utf-8", "replace"))

    def _close_security(self, sock: zmq.Socket[bytes]) -> None:
        if self._monitor is not None:
            self._note_refusals()
            sock.disable_monitor()
            self._monitor.close(linger=0)
            self._monitor = None
        if self._credentials is not None:
            release(self._credentials)
            self._credentials = None

    def close(self) -> None:
        """Close the socket. Idempotent."""
        if self._socket.closed:
            return
        self._close_security(self._socket)
        self._log_limit.flush(force=True)
        self._refusals.flush(force=True)
        # The last replies (a shutdown's answer) go out even if the process ends right after:
        # see mosaic.transport.context.deliver_pending.
        self._socket.close(linger=REPLY_LINGER_MS)
