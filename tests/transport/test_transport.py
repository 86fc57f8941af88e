"""Real ZeroMQ sockets: replies are paired by correlation id; bad bytes are rejected, not fatal."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

from mosaic.core.errors import CodecError, RemoteError, RequestTimeout, TransportError
from mosaic.core.log_limit import DEFAULT_BURST
from mosaic.messages import (
    EnvironmentUpdateRequest,
    EnvironmentUpdateResponse,
    ErrorResponse,
    PingRequest,
    PongResponse,
    Request,
)
from mosaic.messages.codec import decode_message, encode_message
from mosaic.transport import Credentials, RequestClient, RequestServer
from tests.hostile import (
    KINDS,
    flood,
    hostile_messages,
    send_and_collect,
    send_not_zeromq,
    send_oversized,
)

pytestmark = pytest.mark.timeout(30)

#: What the ipc and tcp servers of these tests demand, and their clients prove.
CREDENTIALS = Credentials.fresh()


class EchoServer:
    """A server thread answering PingRequest with PongResponse, optionally after a delay.

    ``endpoint`` is where it was bound (the port the OS chose, for ``tcp://...:*``).
    """

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
        server = RequestServer(self.endpoint, name="echo", idle_timeout_ms=20,
                               credentials=CREDENTIALS)
        self.endpoint = server.endpoint
        self.ready.set()
        try:
            while not self.done.is_set():
                incoming = server.receive()
                if incoming is not None and isinstance(incoming.message, PingRequest):
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
    echo = EchoServer(endpoint)
    client = RequestClient(echo.endpoint, peer="echo", credentials=CREDENTIALS)
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


def test_an_answer_sent_before_the_peer_is_found_gone_is_still_taken():
    """A component's last answer (its shutdown's) can be on its way when the wait's check finds
    it gone: the answer wins; without one, the check's failure stands."""
    server = RequestServer("inproc://last-word", name="last", idle_timeout_ms=20)
    client = RequestClient("inproc://last-word", peer="last")

    class Gone(Exception):
        pass

    def answered_then_gone() -> None:
        server.reply(incoming, PongResponse("last"))
        raise Gone

    def gone() -> None:
        raise Gone

    try:
        correlation = client.send(PingRequest())
        incoming = server.receive()
        assert client.receive(correlation, 5, PongResponse, answered_then_gone).uid == "last"
        correlation = client.send(PingRequest())
        incoming = server.receive()
        with pytest.raises(Gone):
            client.receive(correlation, 5, PongResponse, gone)
    finally:
        client.close()
        server.close()


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


def test_no_hostile_message_decodes_to_a_request():
    """The hostile set must stay hostile: were one of them a request a component handles, the
    end-to-end attack would alter the run it attacks instead of testing its defences."""
    kinds = set()
    for item in hostile_messages(oversized=False):
        kinds.add(item.kind)
        if len(item.frames) != 1:
            continue  # a server takes exactly one frame per message
        try:
            _, message = decode_message(item.frames[0])
        except CodecError:
            continue
        assert not isinstance(message, Request), item.label
        assert not item.answered, f"{item.label} decodes, yet is said to be answered"
    assert kinds == set(KINDS) - {"oversized"}


def test_hostile_messages_are_rejected_and_the_server_keeps_serving(endpoint, caplog):
    """Every kind of hostile message, over every transport: each is rejected (answered with an
    ErrorResponse where mosaic sees it) and logged by kind, and the server serves on."""
    items = hostile_messages()
    echo = EchoServer(endpoint)
    endpoint = echo.endpoint
    client = RequestClient(endpoint, peer="echo", credentials=CREDENTIALS)
    try:
        with caplog.at_level(logging.ERROR, logger="mosaic.transport.server"):
            answers = send_and_collect(endpoint, items[:-1], credentials=CREDENTIALS)
            assert all(isinstance(a, ErrorResponse) for a in answers), answers
            assert len(answers) == sum(item.answered for item in items[:-1])
            oversized = items[-1]
            if endpoint.startswith("inproc://"):
                [answer] = send_and_collect(endpoint, [oversized], credentials=CREDENTIALS)
                assert answer.error_type == "FrameTooLarge"
            else:
                # ZeroMQ drops it, and the connection, before mosaic sees it (MAXMSGSIZE).
                assert send_oversized(endpoint, oversized, 2, credentials=CREDENTIALS) == 2
            assert client.request(PingRequest(), PongResponse, 5).uid == "echo"
            # Every message that reached the server but the Response (which decodes) counts.
            reaching = [item for item in items if item.answered_on(endpoint) or not item.oversized]
            deadline = time.monotonic() + 5
            while echo.rejected < len(reaching) - 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert echo.rejected == len(reaching) - 1
            if not endpoint.startswith("inproc://"):
                send_not_zeromq(endpoint)
                assert client.request(PingRequest(), PongResponse, 5).uid == "echo"
    finally:
        client.close()
        echo.stop()
    logged = {r.getMessage().split(": ")[2] for r in caplog.records
              if "rejected a malformed message" in r.getMessage()}
    expected = {"MalformedFrame", "MessageFieldError", "UnknownMessageType",
                "ProtocolVersionMismatch", "CodecError"}
    if endpoint.startswith("inproc://"):
        expected.add("FrameTooLarge")
    assert logged == expected


@pytest.mark.parametrize("read", [True, False], ids=["answers-read", "answers-unread"])
def test_a_flood_is_logged_in_part_and_summarised(endpoint, read, caplog):
    """10,000 garbage frames: each rejected, a few dozen lines logged, not 10,000, and quickly;
    an attacker who leaves the answers unread does not stall the server either."""
    count = 10_000
    echo = EchoServer(endpoint)
    client = RequestClient(echo.endpoint, peer="echo", credentials=CREDENTIALS)
    try:
        with caplog.at_level(logging.ERROR, logger="mosaic.transport.server"):
            started = time.monotonic()
            if read:
                assert flood(echo.endpoint, count, credentials=CREDENTIALS) == count
            else:
                flood(echo.endpoint, count, unread_until=lambda: echo.rejected >= count,
                      credentials=CREDENTIALS)
            elapsed = time.monotonic() - started
            assert client.request(PingRequest(), PongResponse, 10).uid == "echo"
    finally:
        client.close()
        echo.stop()  # closing the server logs the summary of what it held back
    assert echo.rejected == count
    assert elapsed < 30, f"10,000 rejections took {elapsed:.1f} s"
    lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.transport.server"]
    one_by_one = [line for line in lines if "rejected a malformed message" in line]
    [summary] = [line for line in lines if "more malformed messages rejected" in line]
    assert 0 < len(one_by_one) <= DEFAULT_BURST * 6  # at most six kinds of CodecError
    held = int(summary.split(": ")[1].split()[0])
    assert len(one_by_one) + held == count


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


def test_a_send_to_a_peer_that_never_reads_gives_up_instead_of_hanging(tmp_path, monkeypatch):
    # Nobody binds the endpoint: ZeroMQ queues up to the high-water mark, then a send would
    # block for ever (out of reach of Ctrl-C) without the send timeout.
    monkeypatch.setattr("mosaic.transport.client.SEND_TIMEOUT_S", 0.05)
    client = RequestClient(f"ipc://{tmp_path}/nobody", peer="nobody", credentials=CREDENTIALS)
    try:
        started = time.monotonic()
        with pytest.raises(TransportError, match="could not send PingRequest to nobody"):
            for _ in range(100_000):
                client.send(PingRequest())
        assert time.monotonic() - started < 10
    finally:
        client.close()


def test_a_reply_to_a_vanished_peer_is_logged_and_the_server_keeps_serving(caplog):
    server = RequestServer("inproc://vanish", name="vanish", idle_timeout_ms=20)
    gone = RequestClient("inproc://vanish", peer="vanish", sender="gone")
    client = RequestClient("inproc://vanish", peer="vanish")
    try:
        gone.send(PingRequest())
        incoming = server.receive()
        assert incoming is not None
        gone.close()
        # ZeroMQ forgets the peer soon after it closes; until then a reply is simply dropped.
        deadline = time.monotonic() + 5
        with caplog.at_level(logging.WARNING, logger="mosaic.transport.server"):
            while "could not reply PongResponse" not in caplog.text:
                assert time.monotonic() < deadline, "the vanished peer was never noticed"
                server.reply(incoming, PongResponse("vanish"))
                time.sleep(0.01)
        correlation = client.send(PingRequest())
        answered = server.receive()
        assert answered is not None
        server.reply(answered, PongResponse("vanish"))
        assert client.receive(correlation, 5, PongResponse).uid == "vanish"
    finally:
        client.close()
        gone.close()
        server.close()
