"""Hostile traffic for mosaic's servers: what anyone who can reach an endpoint may send.

Every item is one ZeroMQ message (one or more frames) that no mosaic peer ever sends and that
no mosaic server may act on: each must be rejected, logged, and leave the server serving. None
of them is a well-formed request a component handles, so sending them to a live run must not
change its trajectory. ``tests/transport/test_transport.py`` checks that none of them decodes
to a message a component would handle, so that a codec grown lax fails there, plainly, rather
than by quietly altering an attacked run in the end-to-end test.
"""

from __future__ import annotations

import dataclasses
import random
import socket
import time
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack  # type: ignore[import-untyped]
import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from mosaic.messages import (
    AgentUpdateRequest,
    BrainSyncRequest,
    EnvironmentUpdateRequest,
    Message,
    MuscleUpdateRequest,
    Notice,
    PongResponse,
    Record,
    Request,
)
from mosaic.messages._base import _REGISTRY
from mosaic.messages.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    decode_message,
    encode_message,
)
from mosaic.transport import Credentials, context, routing_id
from mosaic.transport.security import secure_client

#: The kinds of hostile message in the set.
KINDS = ("random", "truncated", "wrong-types", "unknown-type", "wrong-version", "oversized")

V = PROTOCOL_VERSION


@dataclass(frozen=True)
class Hostile:
    """One hostile ZeroMQ message.

    ``answered`` says whether a mosaic server answers it with an ``ErrorResponse``: a Response
    sent to a server is dropped without one (see the host), and an oversized frame is answered
    only over inproc: over ipc and tcp, ZeroMQ reads its length, drops the connection
    (``MAXMSGSIZE``) and mosaic never sees a byte of it.
    """

    kind: str
    label: str
    frames: tuple[bytes, ...]
    answered: bool = True

    @property
    def oversized(self) -> bool:
        return self.kind == "oversized"

    def answered_on(self, endpoint: str) -> bool:
        """Whether a mosaic server bound at ``endpoint`` answers this message."""
        return self.answered or (self.oversized and endpoint.startswith("inproc://"))


def _envelope(*items: object) -> bytes:
    return msgpack.packb(list(items))


def _valid_frames() -> list[bytes]:
    """Well-formed frames of the requests each component kind serves (cut short below)."""
    return [
        encode_message(EnvironmentUpdateRequest({"agent_0": np.int64(1)}), 7),
        encode_message(AgentUpdateRequest(3, {"agent_0": np.zeros(4, np.float32)},
                                          {"agent_0": 1.0}, False, False, ("agent_0",), {}), 8),
        encode_message(MuscleUpdateRequest("learner@cartpole", 1), 9),
        encode_message(BrainSyncRequest("learner@cartpole"), 10),
    ]


def _placeholder(annotation: Any) -> Any:
    """A value of the annotated type, as plain as it gets."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        return None if type(None) in options else _placeholder(options[0])
    if origin is typing.Literal:
        return typing.get_args(annotation)[0]
    if annotation is tuple or origin is tuple:
        return ()
    if annotation is dict or origin is dict:
        return {}
    if isinstance(annotation, type) and issubclass(annotation, Record):
        hints = typing.get_type_hints(annotation)
        return annotation(**{f.name: _placeholder(hints[f.name])
                             for f in dataclasses.fields(annotation)})
    return {str: "x", bool: False, int: 1, float: 0.0, bytes: b""}.get(annotation, 1)


def every_request() -> list[Message]:
    """One valid instance of every request and notice type mosaic knows, with plain values."""
    found = []
    for cls in sorted(set(_REGISTRY.values()), key=lambda c: c.__name__):
        if isinstance(cls, type) and issubclass(cls, Request | Notice):
            hints = typing.get_type_hints(cls)
            found.append(cls(**{f.name: _placeholder(hints[f.name])
                                for f in dataclasses.fields(cls)}))
    return found


def hostile_messages(seed: int = 0, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                     oversized: bool = True) -> list[Hostile]:
    """The hostile set, the same for a given ``seed``; the oversized frame last.

    The oversized frame is ``max_frame_bytes + 1`` bytes long (64 MiB by default): leave it out
    with ``oversized=False`` where that much memory per message matters.
    """
    rng = random.Random(seed)
    items: list[Hostile] = []

    def add(kind: str, label: str, *frames: bytes, answered: bool = True) -> None:
        items.append(Hostile(kind, label, frames, answered))

    # Random frames: random lengths, also empty, several parts, and bytes msgpack never uses.
    for length in (0, 1, 2, 7, 64, 1000, 65_537):
        add("random", f"{length} random bytes", rng.randbytes(length))
    add("random", "0xc1, never valid msgpack", b"\xc1")
    add("random", "two random parts", rng.randbytes(10), rng.randbytes(300))
    add("random", "five random parts", *(rng.randbytes(rng.randrange(50)) for _ in range(5)))
    add("random", "a valid request followed by a part", _valid_frames()[0], b"x")

    # Truncated msgpack of valid messages (of each component kind's requests).
    for frame in _valid_frames():
        for cut in (1, len(frame) // 2, len(frame) - 1):
            add("truncated", f"{frame[:cut]!r:.30} cut at {cut}/{len(frame)}", frame[:cut])
    add("truncated", "an envelope announcing 4 items with 2", b"\x94\x01\x00")

    # Valid msgpack of the wrong types: not an envelope, or an envelope whose parts are wrong.
    for value in ({"not": "an envelope"}, 5, -1, "PingRequest", None, [], 1.5, b"\x00" * 9,
                  [[V, 1, "PingRequest", {}]]):
        add("wrong-types", f"msgpack {type(value).__name__} {value!r:.20}", msgpack.packb(value))
    add("wrong-types", "string correlation id", _envelope(V, "1", "PingRequest", {}))
    add("wrong-types", "int tag", _envelope(V, 1, 7, {}))
    add("wrong-types", "list fields", _envelope(V, 1, "PingRequest", []))
    add("wrong-types", "negative correlation id", _envelope(V, -1, "PingRequest", {}))
    add("wrong-types", "five envelope items", _envelope(V, 1, "PingRequest", {}, {}))
    add("wrong-types", "three envelope items", _envelope(V, 1, "PingRequest"))
    # Known tags of each kind's requests with missing, extra and mistyped fields.
    for tag, fields in (
        ("EnvironmentUpdateRequest", {}),
        ("EnvironmentUpdateRequest", {"actions": 5}),
        ("EnvironmentUpdateRequest", {"actions": {}, "extra": 1}),
        ("EnvironmentUpdateRequest", {"actions": {}, "x" * 10_000: 1}),
        ("EnvironmentResetRequest", {"seed": "7"}),
        ("EnvironmentShutdownRequest", {"environment_uid": 1}),
        ("AgentUpdateRequest", {"step": 1}),
        ("AgentUpdateRequest", {"step": "1", "observations": {}, "rewards": {},
                                "terminated": False, "truncated": False, "acting": [],
                                "legal_actions": {}}),
        ("MuscleShutdownRequest", {"muscle_uid": None}),
        ("MuscleUpdateRequest", {"muscle_uid": 3, "experience": 1}),
        ("BrainSyncRequest", {"muscle_uid": ["x"]}),
        ("BrainShutdownRequest", {"muscle_uid": b"learner@cartpole"}),
        ("BrainCheckpointRequest", {"muscle_uid": "m", "episodes": "1"}),
    ):
        add("wrong-types", f"{tag} {fields!r:.40}", _envelope(V, 1, tag, fields))
    # A Response sent to a server: well-formed, but no server takes one (nor answers it).
    add("wrong-types", "a response sent as a request", encode_message(PongResponse("x"), 11),
        answered=False)

    # Unknown message types.
    for tag in ("NoSuchMessage", "SensorSpec", "", "x" * 10_000, "environmentupdaterequest"):
        add("unknown-type", f"tag {tag!r:.30}", _envelope(V, 1, tag, {}))

    # The wrong protocol version (valid otherwise).
    tag, fields = "EnvironmentUpdateRequest", {"actions": {"agent_0": 1}}
    for version in (0, V + 1, -1, 2**64 - 1, -(2**63), str(V), True, 1.0):
        add("wrong-version", f"version {version!r}", _envelope(version, 1, tag, fields))

    if oversized:
        add("oversized", f"{max_frame_bytes + 1} bytes", bytes(max_frame_bytes + 1),
            answered=False)
    return items


def random_flood(count: int, seed: int = 1) -> Iterator[bytes]:
    """``count`` random garbage frames (1 to 200 bytes): a flood of cheap rejections."""
    rng = random.Random(seed)
    for _ in range(count):
        yield rng.randbytes(rng.randrange(1, 200))


def raw_dealer(endpoint: str, *, receive_timeout_ms: int = 10_000,
               credentials: Credentials | None = None,
               sender: str | None = None) -> zmq.Socket[bytes]:
    """A bare DEALER, connected to ``endpoint``: an attacker speaks ZeroMQ, not mosaic.

    With ``credentials`` (and a ``sender`` name) it is an insider gone bad: it passes the
    handshake, so what it sends reaches the decoder and, if valid, the component.
    """
    sock = context().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, receive_timeout_ms)
    sock.setsockopt(zmq.SNDTIMEO, receive_timeout_ms)
    if sender is not None:
        sock.setsockopt(zmq.ROUTING_ID, routing_id(sender))
    secure_client(sock, endpoint, credentials)
    sock.connect(endpoint)
    return sock


def send_and_collect(endpoint: str, items: list[Hostile], *, timeout_ms: int = 10_000,
                     credentials: Credentials | None = None,
                     sender: str | None = None) -> list[Message]:
    """Send ``items`` in order on one fresh DEALER; return the answers to those answered.

    A server answers one peer's messages in order, so the answers come in the order sent.
    Raises ``zmq.Again`` if one does not come within ``timeout_ms``.
    """
    sock = raw_dealer(endpoint, receive_timeout_ms=timeout_ms, credentials=credentials,
                      sender=sender)
    try:
        for item in items:
            sock.send_multipart(item.frames)
        expected = sum(item.answered_on(endpoint) for item in items)
        return [decode_message(sock.recv())[1] for _ in range(expected)]
    finally:
        sock.close(linger=0)


def send_oversized(endpoint: str, item: Hostile, count: int, *, timeout: float = 20.0,
                   credentials: Credentials | None = None) -> int:
    """Send an oversized ``item`` ``count`` times to an ipc or tcp ``endpoint``.

    Returns how often the server hung up on us within ``timeout`` s: ZeroMQ's ``MAXMSGSIZE``
    makes it drop the connection as soon as it has read the frame's length. The DEALER
    reconnects (and sends the next one) by itself.
    """
    sock = raw_dealer(endpoint, credentials=credentials)
    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    monitor.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    dropped = 0
    try:
        for _ in range(count):
            sock.send_multipart(item.frames, copy=False)
        while dropped < count:
            try:
                recv_monitor_message(monitor)
            except zmq.Again:
                break
            dropped += 1
        return dropped
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)


def flood(endpoint: str, count: int, *, batch: int = 500, timeout_ms: int = 30_000,
          unread_until: Callable[[], bool] | None = None,
          credentials: Credentials | None = None) -> int:
    """Send ``count`` random garbage frames; return how many answers were read.

    By default ``batch`` frames at a time, reading each batch's answers: they cannot pile up
    (and be dropped) at the high-water marks, so every rejection is counted. With
    ``unread_until``, the answers are left unread, as a careless attacker would leave them (the
    server must drop what it cannot deliver, and serve everyone else); the socket stays open
    until ``unread_until()`` is true, as closing it would discard frames not yet delivered.
    """
    sock = raw_dealer(endpoint, receive_timeout_ms=timeout_ms, credentials=credentials)
    answers = 0
    try:
        pending = 0
        for frame in random_flood(count):
            sock.send(frame)
            pending += 1
            if unread_until is None and pending == batch:
                for _ in range(pending):
                    sock.recv()
                answers += pending
                pending = 0
        if unread_until is None:
            for _ in range(pending):
                sock.recv()
            return answers + pending
        deadline = time.monotonic() + timeout_ms / 1000
        while not unread_until() and time.monotonic() < deadline:
            time.sleep(0.01)
        return 0
    finally:
        sock.close(linger=0)


def send_not_zeromq(endpoint: str, seed: int = 2) -> None:
    """Connect with a plain socket and write bytes that are not ZeroMQ at all, then hang up.

    libzmq takes a peer that opens with anything but a ZMTP 3 greeting for a ZMTP 1.0 peer
    (which had none), so some of these bytes arrive as messages of random frames: those are
    rejected like any other. The rest ends the connection.
    """
    rng = random.Random(seed)
    scheme, address = endpoint.split("://", 1)
    if scheme == "tcp":
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=5)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        deadline = time.monotonic() + 5
        while True:
            try:
                sock.connect(address)
                break
            except BlockingIOError:  # the listen queue is full (after a stream of connections)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    with sock:
        for payload in (rng.randbytes(4096), b"\xff" + b"\x00" * 8 + b"\x7f" + rng.randbytes(64),
                        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            try:
                sock.sendall(payload)
            except OSError:
                break  # ZeroMQ already hung up on us: that is the point
