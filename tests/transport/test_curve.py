"""CURVE on real tcp sockets: the key holders talk; nothing from anyone else is processed."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from zmq.auth.thread import AuthenticationThread

from mosaic.errors import ConfigError, TransportError
from mosaic.messages import PingRequest, PongResponse
from mosaic.messages.codec import encode_message
from mosaic.transport import EndpointAllocator, RequestClient, RequestServer
from mosaic.transport import security
from mosaic.transport.keys import CurveKeys, generate_keys, load_keys

pytestmark = pytest.mark.timeout(60)

#: How long a peer that should get nothing waits for an answer.
SILENCE_S = 1.0


def make_keys(folder: Path) -> CurveKeys:
    generate_keys(folder)
    return load_keys(folder)


def authenticator_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if isinstance(t, AuthenticationThread)]


@pytest.fixture
def keys(tmp_path: Path) -> CurveKeys:
    return make_keys(tmp_path / "keys")


@pytest.fixture
def curve_on(keys: CurveKeys) -> Iterator[CurveKeys]:
    assert security.enabled() is None
    security.enable(keys)
    try:
        yield keys
    finally:
        security.disable()
    assert security.enabled() is None
    assert not authenticator_threads(), "the authenticator outlived disable()"


class CountingServer:
    """A RequestServer in a thread of its own: answers pings and counts what reached it."""

    def __init__(self, endpoint: str) -> None:
        self.handled = 0
        self.rejected = 0
        self.mechanism = -1
        self.endpoint = ""
        self._ready = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(endpoint,), daemon=True)
        self._thread.start()
        assert self._ready.wait(5)

    def _serve(self, endpoint: str) -> None:
        server = RequestServer(endpoint, name="counting", idle_timeout_ms=20)
        self.endpoint = server.endpoint
        self.mechanism = server._socket.getsockopt(zmq.MECHANISM)
        self._ready.set()
        try:
            while not self._done.is_set():
                incoming = server.receive()
                self.rejected = server.rejected
                if incoming is not None:
                    self.handled += 1
                    server.reply(incoming, PongResponse("counting"))
        finally:
            server.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)
        assert not self._thread.is_alive()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[CountingServer]:
    serving = CountingServer(getattr(request, "param", "tcp://127.0.0.1:*"))
    yield serving
    serving.stop()


def ask(endpoint: str) -> str:
    client = RequestClient(endpoint, peer="counting")
    try:
        return client.request(PingRequest(), PongResponse, 5).uid
    finally:
        client.close()


def intrude(endpoint: str, configure: dict[int, bytes]) -> list[bytes]:
    """Send a valid mosaic request from a socket of another context; return any answer."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        for option, value in configure.items():
            sock.setsockopt(option, value)
        sock.connect(endpoint)
        sock.send(encode_message(PingRequest(), 1))
        answers = []
        if sock.poll(int(SILENCE_S * 1000), zmq.POLLIN):
            answers.append(sock.recv())
        return answers
    finally:
        sock.close(linger=0)
        ctx.term()


@pytest.mark.parametrize("server", ["tcp://127.0.0.1:*", "tcp://0.0.0.0:*"], indirect=True)
def test_key_holders_exchange_requests_over_curve(curve_on: CurveKeys,
                                                  server: CountingServer) -> None:
    assert server.mechanism == zmq.CURVE
    for _ in range(3):
        assert ask(server.endpoint) == "counting"
    assert (server.handled, server.rejected) == (3, 0)


def _plain(keys: CurveKeys) -> dict[int, bytes]:
    return {}


def _other_keypair(keys: CurveKeys) -> dict[int, bytes]:
    # Keys of another `mosaic keys generate`: another server key, another client pair.
    server_public, _ = zmq.curve_keypair()
    public, secret = zmq.curve_keypair()
    return {zmq.CURVE_SERVERKEY: server_public, zmq.CURVE_PUBLICKEY: public,
            zmq.CURVE_SECRETKEY: secret}


def _unauthorized_client(keys: CurveKeys) -> dict[int, bytes]:
    # The server's public key is no secret; the client pair is what lets a peer in.
    public, secret = zmq.curve_keypair()
    return {zmq.CURVE_SERVERKEY: keys.server_public, zmq.CURVE_PUBLICKEY: public,
            zmq.CURVE_SECRETKEY: secret}


def _server_pair_as_client(keys: CurveKeys) -> dict[int, bytes]:
    # Holding the server's pair is not holding the client's.
    return {zmq.CURVE_SERVERKEY: keys.server_public, zmq.CURVE_PUBLICKEY: keys.server_public,
            zmq.CURVE_SECRETKEY: keys.server_secret}


@pytest.mark.parametrize("peer", [_plain, _other_keypair, _unauthorized_client,
                                  _server_pair_as_client])
def test_nothing_from_a_peer_without_the_client_key_is_processed(
        curve_on: CurveKeys, server: CountingServer, peer) -> None:  # type: ignore[no-untyped-def]
    assert intrude(server.endpoint, peer(curve_on)) == []
    assert (server.handled, server.rejected) == (0, 0)
    # The server keeps serving the key holders.
    assert ask(server.endpoint) == "counting"
    assert server.handled == 1


def test_a_refused_client_key_is_logged_once(curve_on: CurveKeys, server: CountingServer,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mosaic.transport.security")
    intruder = _unauthorized_client(curve_on)
    for _ in range(2):  # a second connection with the same key
        assert intrude(server.endpoint, intruder) == []
    refusals = [r.getMessage() for r in caplog.records if "refused a tcp peer" in r.getMessage()]
    assert refusals == [f"refused a tcp peer with an unknown CURVE client key "
                        f"{intruder[zmq.CURVE_PUBLICKEY].decode()}"]
    assert server.handled == 0


def test_a_listening_server_refuses_everyone_once_keys_are_disabled(
        keys: CurveKeys, server_after_disable: CountingServer) -> None:
    right_keys = {zmq.CURVE_SERVERKEY: keys.server_public, zmq.CURVE_PUBLICKEY: keys.client_public,
                  zmq.CURVE_SECRETKEY: keys.client_secret}
    assert intrude(server_after_disable.endpoint, right_keys) == []
    assert server_after_disable.handled == 0


@pytest.fixture
def server_after_disable(keys: CurveKeys) -> Iterator[CountingServer]:
    """A CURVE server that answered the key holder, then lost its authenticator."""
    security.enable(keys)
    try:
        serving = CountingServer("tcp://127.0.0.1:*")
        assert ask(serving.endpoint) == "counting"
        serving.handled = 0
    finally:
        security.disable()
    assert not authenticator_threads()
    yield serving
    serving.stop()


@pytest.mark.parametrize("transport", ["inproc", "ipc"])
def test_inproc_and_ipc_stay_plain(curve_on: CurveKeys, tmp_path: Path, transport: str) -> None:
    endpoint = {"inproc": "inproc://curve-plain", "ipc": f"ipc://{tmp_path}/s"}[transport]
    serving = CountingServer(endpoint)
    try:
        assert serving.mechanism == zmq.NULL
        assert ask(endpoint) == "counting"
    finally:
        serving.stop()
    assert not authenticator_threads()  # only a CURVE server starts one


def test_without_keys_tcp_is_plain_and_loopback_only() -> None:
    assert security.enabled() is None
    serving = CountingServer("tcp://127.0.0.1:*")
    try:
        assert serving.mechanism == zmq.NULL
        assert ask(serving.endpoint) == "counting"
    finally:
        serving.stop()
    assert EndpointAllocator("t", transport="tcp").external("x") == "tcp://127.0.0.1:*"
    with pytest.raises(ConfigError) as caught:
        EndpointAllocator("t", transport="tcp", host="0.0.0.0")
    assert caught.value.location == "host"
    assert 'run "mosaic keys generate DIR" and set curve_keys: DIR' in caught.value.hint
    assert security.child_arguments() == []


def test_with_keys_a_non_loopback_host_is_accepted(curve_on: CurveKeys) -> None:
    allocator = EndpointAllocator("t", transport="tcp", host="0.0.0.0")
    assert allocator.external("x") == "tcp://0.0.0.0:*"
    assert security.child_arguments() == ["--curve-keys", str(curve_on.directory)]


def test_one_process_uses_one_set_of_keys(curve_on: CurveKeys, tmp_path: Path) -> None:
    security.enable(load_keys(curve_on.directory))  # the same keys again: nothing changes
    other = make_keys(tmp_path / "other")
    with pytest.raises(TransportError, match="already in use"):
        security.enable(other)
    assert security.enabled() == curve_on


def test_curve_block_restores_what_was_there(keys: CurveKeys) -> None:
    with security.curve(None):
        assert security.enabled() is None
    with security.curve(keys):
        assert security.enabled() == keys
        with security.curve(keys):
            pass
        assert security.enabled() == keys  # an inner block leaves the outer one's keys
    assert security.enabled() is None


SHUTDOWN_SCRIPT = """\
import atexit, sys, threading
from mosaic.messages import PingRequest, PongResponse
from mosaic.transport import RequestClient, RequestServer, context, security
from mosaic.transport.keys import load_keys

def after_everything():
    # Registered first, so it runs last: after mosaic's own exit hook.
    print("threads", threading.active_count(), flush=True)
    context().term()
    print("terminated", flush=True)

atexit.register(after_everything)
security.enable(load_keys(sys.argv[1]))
server = RequestServer("tcp://127.0.0.1:*", name="s", idle_timeout_ms=20)
client = RequestClient(server.endpoint, peer="s")
correlation = client.send(PingRequest())
incoming = None
while incoming is None:
    incoming = server.receive()
server.reply(incoming, PongResponse("s"))
print("answer", client.receive(correlation, 5, PongResponse).uid, flush=True)
client.close()
server.close()
if sys.argv[2] == "disable":
    security.disable()
    print("after disable", threading.active_count(), flush=True)
"""


@pytest.mark.parametrize("how", ["disable", "exit"])
def test_the_authenticator_stops_and_the_context_terminates(keys: CurveKeys, tmp_path: Path,
                                                            process_tag: str, how: str) -> None:
    script = tmp_path / "shutdown.py"
    script.write_text(textwrap.dedent(SHUTDOWN_SCRIPT))
    done = subprocess.run([sys.executable, str(script), str(keys.directory), how],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = ["answer s", "threads 1", "terminated"]
    if how == "disable":
        expected.insert(1, "after disable 1")
    assert lines == expected, done.stderr
