"""Real ZeroMQ sockets: replies are paired by correlation id; bad bytes are rejected, not fatal."""

from __future__ import annotations

import threading

import msgpack
import numpy as np
import pytest
import zmq

from mosaic.errors import RemoteError, RequestTimeout
from mosaic.messages import (
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    ErrorResponse,
    PingRequest,
    PongResponse,
)
from mosaic.messages.codec import PROTOCOL_VERSION, decode_message, encode_message
from mosaic.transport import RequestClient, RequestServer, context

pytestmark = pytest.mark.timeout(30)


class EchoServer:
    """A server thread answering PingRequest with PongResponse, optionally after a delay."""

    def __init__(self, endpoint: str, delay: float = 0.0) -> None:
        self.endpoint = endpoint
        self.delay = delay
        self.ready = threading.Event()
        self.done = threading.Event()
        self.rejected = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        assert self.ready.wait(5)

    def _serve(self) -> None:
        server = RequestServer(self.endpoint, name="echo", idle_timeout_ms=20)
        self.ready.set()
        try:
            while not self.done.is_set():
                incoming = server.receive()
                if incoming is not None:
                    if self.delay:
                        self.done.wait(self.delay)
                    server.reply(incoming, PongResponse("echo"))
                self.rejected = server.rejected
        finally:
            server.close()

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)


@pytest.fixture(params=["inproc", "ipc", "tcp"])
def endpoint(request, tmp_path):
    return {"inproc": f"inproc://test-{id(request)}", "ipc": f"ipc://{tmp_path}/s",
            "tcp": "tcp://127.0.0.1:*"}[request.param]


def test_a_request_gets_its_answer_over_every_transport(endpoint):
    if endpoint.startswith("tcp"):
        server = RequestServer(endpoint, name="probe")
        endpoint = server.endpoint
        server.close()
    echo = EchoServer(endpoint)
    client = RequestClient(endpoint, peer="echo")
    try:
        for _ in range(3):
            assert client.request(PingRequest(), PongResponse, 5).uid == "echo"
    finally:
        client.close()
        echo.stop()


def test_a_late_answer_is_not_taken_for_the_next_one():
    echo = EchoServer("inproc://slow", delay=0.3)
    client = RequestClient("inproc://slow", peer="slow")
    try:
        with pytest.raises(RequestTimeout):
            client.request(PingRequest(), PongResponse, 0.1)
        echo.delay = 0.0
        # The answer to the timed-out request arrives first; it must be dropped.
        assert client.request(PingRequest(), PongResponse, 5).uid == "echo"
    finally:
        client.close()
        echo.stop()


def test_an_error_response_raises_remote_error():
    server = RequestServer("inproc://err", name="err", idle_timeout_ms=20)
    client = RequestClient("inproc://err", peer="err")
    try:
        correlation = client.send(PingRequest())
        incoming = server.receive()
        server.reply(incoming, ErrorResponse("PingRequest", "ValueError", "nope"))
        with pytest.raises(RemoteError, match="ValueError: nope"):
            client.receive(correlation, 5, PongResponse)
    finally:
        client.close()
        server.close()


HOSTILE = [
    b"",
    b"\xc1",  # never valid msgpack
    b"\x94\x01\x00",  # truncated envelope
    msgpack.packb([PROTOCOL_VERSION, 1, "NoSuchMessage", {}]),
    msgpack.packb([PROTOCOL_VERSION + 1, 1, "PingRequest", {}]),
    msgpack.packb([PROTOCOL_VERSION, 1, "EnvironmentUpdateRequest", {"actions": 5}]),
    msgpack.packb([PROTOCOL_VERSION, 1, "EnvironmentUpdateRequest", {"wrong": {}}]),
    msgpack.packb({"not": "an envelope"}),
    bytes(range(256)) * 4,
]


def test_hostile_frames_are_rejected_and_the_server_keeps_serving():
    echo = EchoServer("inproc://hostile")
    raw = context().socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.setsockopt(zmq.RCVTIMEO, 2000)
    raw.connect("inproc://hostile")
    client = RequestClient("inproc://hostile", peer="echo")
    try:
        for frame in HOSTILE:
            raw.send(frame)
            _, answer = decode_message(raw.recv())
            assert isinstance(answer, ErrorResponse)
        raw.send_multipart([b"two", b"frames"])  # wrong frame count: rejected too
        raw.recv()
        assert client.request(PingRequest(), PongResponse, 5).uid == "echo"
        assert echo.rejected == len(HOSTILE) + 1
    finally:
        raw.close()
        client.close()
        echo.stop()


def test_numpy_payloads_cross_the_wire_exactly():
    server = RequestServer("inproc://np", name="np", idle_timeout_ms=20)
    client = RequestClient("inproc://np", peer="np")
    try:
        observation = np.arange(12, dtype=np.float32).reshape(3, 4)
        client.send(EnvironmentUpdateRequest({"agent_0": np.int64(1), "other": (1, 2)}))
        incoming = server.receive()
        assert incoming.message.actions["agent_0"] == np.int64(1)
        assert type(incoming.message.actions["agent_0"]) is np.int64
        assert incoming.message.actions["other"] == (1, 2)
        server.reply(incoming, EnvironmentUpdateResponse({"agent_0": observation}, {"agent_0": 1.0},
                                                         False, True, ("agent_0",), {}))
        answer = client.receive(incoming.correlation_id, 5, EnvironmentUpdateResponse)
        got = answer.observations["agent_0"]
        assert got.dtype == np.float32 and np.array_equal(got, observation) and answer.is_terminal
    finally:
        client.close()
        server.close()


def test_encode_then_decode_keeps_the_correlation_id():
    assert decode_message(encode_message(PingRequest(), 41))[0] == 41
