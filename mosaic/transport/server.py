"""The serving side of a component: a ROUTER socket that decodes requests and sends replies."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import zmq

from mosaic.errors import CodecError
from mosaic.log_limit import LogLimiter
from mosaic.messages import ErrorResponse, Message, Response
from mosaic.messages.codec import DEFAULT_MAX_FRAME_BYTES, decode_message, encode_message
from mosaic.transport.context import context
from mosaic.transport.security import secure_server

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Incoming:
    """A decoded message and what is needed to answer it."""

    peer: bytes
    correlation_id: int
    message: Message


class RequestServer:
    """A bound ROUTER socket. Belongs to the thread that creates it.

    Malformed frames (wrong frame count, bad msgpack, unknown types, wrong fields, wrong protocol
    version, oversized) are logged and rejected with an :class:`ErrorResponse` where the sender can
    be identified; they never raise out of :meth:`receive`, so the owning actor keeps running.
    A flood of them is logged in part, then summarised (:class:`~mosaic.log_limit.LogLimiter`).
    Frames above ``max_frame_bytes`` are also dropped by ZeroMQ itself (``MAXMSGSIZE``).
    """

    def __init__(self, endpoint: str, *, name: str, idle_timeout_ms: int = 100,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.name = name
        self.max_frame_bytes = max_frame_bytes
        self.rejected = 0
        # A flood of garbage must not become a flood of log lines (see mosaic.log_limit).
        self._log_limit = LogLimiter(log, name, "malformed messages rejected")
        sock = context().socket(zmq.ROUTER)
        try:
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            sock.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes)
            sock.setsockopt(zmq.LINGER, 0)
            # A blocking receive that gives up after the idle timeout: one call per message
            # on the hot path instead of a poll and a receive.
            sock.setsockopt(zmq.RCVTIMEO, idle_timeout_ms)
            secure_server(sock, endpoint)  # CURVE on tcp when this process has keys
            sock.bind(endpoint)
            last = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except Exception:
            sock.close(linger=0)
            raise
        self._socket = sock
        #: The address peers connect to (a tcp port chosen by the OS is filled in).
        self.endpoint = last if last and not endpoint.startswith("inproc://") else endpoint

    def receive(self, wait: bool = True) -> Incoming | None:
        """Take one valid message, waiting up to the idle timeout if ``wait``.

        Returns ``None`` if none arrived or the one that arrived was rejected.
        """
        try:
            frames = self._socket.recv_multipart(0 if wait else zmq.NOBLOCK)
        except zmq.Again:
            self._log_limit.flush()  # idle: a moment to summarise a flood that has ended
            return None
        if len(frames) != 2:
            self._reject(frames[0] if frames else None, 0, "?",
                         CodecError(f"expected 2 frames, got {len(frames)}"))
            return None
        peer, payload = frames
        try:
            correlation_id, message = decode_message(payload, max_bytes=self.max_frame_bytes)
        except CodecError as error:
            self._reject(peer, 0, "?", error)
            return None
        return Incoming(peer, correlation_id, message)

    def reply(self, incoming: Incoming, response: Response) -> None:
        """Send ``response`` to the peer of ``incoming``; a vanished peer is logged, not raised."""
        try:
            self._socket.send_multipart([incoming.peer, encode_message(response, incoming.correlation_id)])
        except zmq.ZMQError as error:
            log.warning("%s: could not reply %s: %s", self.name, type(response).__name__, error)

    def _reject(self, peer: bytes | None, correlation_id: int, request: str, error: Exception) -> None:
        self.rejected += 1
        if self._log_limit.allow(type(error).__name__):
            log.error("%s: rejected a malformed message: %s: %s", self.name, type(error).__name__,
                      error)
        if peer is None:
            return
        answer = ErrorResponse(request=request, error_type=type(error).__name__, error=str(error))
        try:
            self._socket.send_multipart([peer, encode_message(answer, correlation_id)], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass  # the sender is gone or not a mosaic peer; the rejection is logged

    def close(self) -> None:
        """Close the socket. Idempotent."""
        self._log_limit.flush(force=True)
        self._socket.close(linger=0)
