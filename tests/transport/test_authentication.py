"""Authenticated endpoints on real sockets: the run's peers talk; nobody else gets a byte read.

ipc servers demand the run's token (PLAIN), tcp servers its CURVE keys; inproc needs nothing.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from mosaic.core.errors import TransportError
from mosaic.messages import PingRequest, PongResponse
from mosaic.messages.codec import encode_message
from mosaic.transport import Credentials, RequestClient, RequestServer
from mosaic.transport.credentials import PLAIN_USER
from mosaic.transport.keys import generate_keys, load_keys

pytestmark = pytest.mark.timeout(60)

#: How long a peer that should get nothing waits for an answer.
SILENCE_S = 1.0
RUN = Credentials.fresh()
OTHER_RUN = Credentials.fresh()


class CountingServer:
    """A RequestServer in a thread of its own: answers pings and counts what reached it."""

    def __init__(self, endpoint: str, credentials: Credentials | None = RUN) -> None:
        self.handled = 0
        self.rejected = 0
        self.mechanism = -1
        self.endpoint = ""
        self._ready = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(endpoint, credentials),
                                        daemon=True)
        self._thread.start()
        assert self._ready.wait(5)

    def _serve(self, endpoint: str, credentials: Credentials | None) -> None:
        server = RequestServer(endpoint, name="counting", idle_timeout_ms=20,
                               credentials=credentials)
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


@pytest.fixture(params=["ipc", "tcp"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CountingServer]:
    endpoint = {"ipc": f"ipc://{tmp_path}/s", "tcp": "tcp://127.0.0.1:*"}[request.param]
    serving = CountingServer(endpoint)
    yield serving
    serving.stop()


def ask(endpoint: str, credentials: Credentials = RUN) -> str:
    client = RequestClient(endpoint, peer="counting", credentials=credentials)
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
        # A refused handshake can end before the send: the socket then has no peer to queue
        # for, and a send without a timeout would wait for one forever.
        sock.setsockopt(zmq.SNDTIMEO, int(SILENCE_S * 1000))
        try:
            sock.send(encode_message(PingRequest(), 1))
        except zmq.Again:
            return []
        answers = []
        if sock.poll(int(SILENCE_S * 1000), zmq.POLLIN):
            answers.append(sock.recv())
        return answers
    finally:
        sock.close(linger=0)
        ctx.term()


def _plain_socket() -> dict[int, bytes]:
    return {}


def _wrong_token() -> dict[int, bytes]:
    return {zmq.PLAIN_USERNAME: PLAIN_USER, zmq.PLAIN_PASSWORD: b"guess"}


def _other_runs_token() -> dict[int, bytes]:
    return {zmq.PLAIN_USERNAME: PLAIN_USER, zmq.PLAIN_PASSWORD: OTHER_RUN.token}


def _other_runs_keys() -> dict[int, bytes]:
    return {zmq.CURVE_SERVERKEY: RUN.server_public, zmq.CURVE_PUBLICKEY: OTHER_RUN.client_public,
            zmq.CURVE_SECRETKEY: OTHER_RUN.client_secret}


def _server_pair_as_client() -> dict[int, bytes]:
    # Holding the server's pair is not holding the client's.
    return {zmq.CURVE_SERVERKEY: RUN.server_public, zmq.CURVE_PUBLICKEY: RUN.server_public,
            zmq.CURVE_SECRETKEY: RUN.server_secret}


def _curve_with_the_run_keys() -> dict[int, bytes]:
    # The right keys in the wrong mechanism for ipc, the right one for tcp (the control case).
    return {zmq.CURVE_SERVERKEY: RUN.server_public, zmq.CURVE_PUBLICKEY: RUN.client_public,
            zmq.CURVE_SECRETKEY: RUN.client_secret}


INTRUDERS: list[Callable[[], dict[int, bytes]]] = [
    _plain_socket, _wrong_token, _other_runs_token, _other_runs_keys, _server_pair_as_client]


def test_the_run_s_peers_are_served_plain_over_ipc_and_curve_over_tcp(server: CountingServer):
    expected = zmq.CURVE if server.endpoint.startswith("tcp://") else zmq.PLAIN
    assert server.mechanism == expected
    for _ in range(3):
        assert ask(server.endpoint) == "counting"
    assert (server.handled, server.rejected) == (3, 0)


@pytest.mark.parametrize("intruder", INTRUDERS, ids=lambda f: f.__name__.strip("_"))
def test_nothing_from_a_peer_without_the_run_s_credentials_is_processed(server: CountingServer,
                                                                       intruder) -> None:
    assert intrude(server.endpoint, intruder()) == []
    assert (server.handled, server.rejected) == (0, 0)
    assert ask(server.endpoint) == "counting"  # the run's peers are still served
    assert server.handled == 1


def test_the_right_keys_in_the_wrong_mechanism_get_nothing_over_ipc(tmp_path: Path) -> None:
    serving = CountingServer(f"ipc://{tmp_path}/s")
    try:
        assert intrude(serving.endpoint, _curve_with_the_run_keys()) == []
        assert serving.handled == 0
    finally:
        serving.stop()


def test_another_run_s_credentials_do_not_open_this_run_s_servers(tmp_path: Path) -> None:
    ours, theirs = CountingServer(f"ipc://{tmp_path}/a"), CountingServer("tcp://127.0.0.1:*",
                                                                          OTHER_RUN)
    try:
        assert ask(ours.endpoint) == "counting"
        assert ask(theirs.endpoint, OTHER_RUN) == "counting"
        for endpoint, credentials in ((ours.endpoint, OTHER_RUN), (theirs.endpoint, RUN)):
            client = RequestClient(endpoint, peer="x", credentials=credentials)
            try:
                # Refused either way: the reply never comes, or, when the refusal is quicker
                # than the send (a loaded machine), the send finds no peer to take it.
                with pytest.raises(Exception, match=r"did not answer|could not send"):
                    correlation = client.send(PingRequest())
                    client.receive(correlation, SILENCE_S, PongResponse)
            finally:
                client.close()
        assert (ours.handled, theirs.handled) == (1, 1)
    finally:
        ours.stop()
        theirs.stop()


def test_each_refused_peer_is_logged_as_a_warning(server: CountingServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mosaic.transport.server")
    for intruder in (_plain_socket, _wrong_token):
        assert intrude(server.endpoint, intruder()) == []
    ask(server.endpoint)  # the server looks at its refused handshakes when it is idle or busy
    # One per refused connection: a ZeroMQ peer reconnects by itself, and may be refused again.
    pause = threading.Event()
    for _ in range(100):
        refusals = [r for r in caplog.records if "refused a peer that did not authenticate"
                    in r.getMessage()]
        if len(refusals) >= 2:
            break
        pause.wait(0.05)
    assert 2 <= len(refusals) <= 10, [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.WARNING and r.getMessage().startswith("counting: ")
               for r in refusals)


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_a_server_without_credentials_is_refused_rather_than_left_open(tmp_path: Path,
                                                                       transport: str) -> None:
    endpoint = {"ipc": f"ipc://{tmp_path}/s", "tcp": "tcp://127.0.0.1:*"}[transport]
    with pytest.raises(TransportError, match="without a run's credentials"):
        RequestServer(endpoint, name="open")


def test_inproc_needs_no_credentials() -> None:
    serving = CountingServer("inproc://auth-plain", credentials=None)
    try:
        assert serving.mechanism == zmq.NULL
        client = RequestClient("inproc://auth-plain", peer="counting")
        try:
            assert client.request(PingRequest(), PongResponse, 5).uid == "counting"
        finally:
            client.close()
    finally:
        serving.stop()


def test_a_key_folder_supplies_the_tcp_keys(tmp_path: Path) -> None:
    generate_keys(tmp_path / "keys")
    keys = load_keys(tmp_path / "keys")
    credentials = Credentials.fresh(keys)
    assert (credentials.server_public, credentials.client_public) == (keys.server_public,
                                                                      keys.client_public)
    serving = CountingServer("tcp://127.0.0.1:*", credentials)
    try:
        holder = {zmq.CURVE_SERVERKEY: keys.server_public, zmq.CURVE_PUBLICKEY: keys.client_public,
                  zmq.CURVE_SECRETKEY: keys.client_secret}
        assert len(intrude(serving.endpoint, holder)) == 1  # a peer with the folder's keys
    finally:
        serving.stop()


def test_credentials_are_fresh_private_and_travel_whole() -> None:
    one, two = Credentials.fresh(), Credentials.fresh()
    assert one.domain != two.domain and one.token != two.token
    assert one.server_public != two.server_public and one.client_public != two.client_public
    shown = repr(one)
    for secret in (one.token, one.server_secret, one.client_secret):
        assert secret.decode() not in shown
    assert Credentials.from_bytes(one.to_bytes()) == one
    with pytest.raises(TransportError, match="unreadable run credentials"):
        Credentials.from_bytes(b"\x81\xa1x\x01")


SHUTDOWN_SCRIPT = """\
import atexit, sys, threading
from mosaic.messages import PingRequest, PongResponse
from mosaic.transport import Credentials, RequestClient, RequestServer, context

def after_everything():
    # Registered first, so it runs last: after mosaic's own exit hook.
    print("threads", threading.active_count(), flush=True)
    context().term()
    print("terminated", flush=True)

atexit.register(after_everything)
credentials = Credentials.fresh()
server = RequestServer(sys.argv[1], name="s", idle_timeout_ms=20, credentials=credentials)
client = RequestClient(server.endpoint, peer="s", credentials=credentials)
correlation = client.send(PingRequest())
incoming = None
while incoming is None:
    incoming = server.receive()
server.reply(incoming, PongResponse("s"))
print("answer", client.receive(correlation, 5, PongResponse).uid, flush=True)
client.close()
server.close()
"""


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_the_gatekeeper_stops_and_the_context_terminates_at_exit(tmp_path: Path, process_tag: str,
                                                                transport: str) -> None:
    script = tmp_path / "shutdown.py"
    script.write_text(textwrap.dedent(SHUTDOWN_SCRIPT))
    endpoint = {"ipc": f"ipc://{tmp_path}/s", "tcp": "tcp://127.0.0.1:*"}[transport]
    done = subprocess.run([sys.executable, str(script), endpoint], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answer s", "threads 1", "terminated"], done.stderr
