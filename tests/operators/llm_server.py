"""An OpenAI-compatible chat-completions server on loopback for tests, with scripted replies.

Each request to ``POST /v1/chat/completions`` takes the next scripted :class:`Reply` (or the
default one when the script is empty): a normal completion with ``usage`` token counts, an HTTP
error (with a ``Retry-After`` header when ``retry_after`` is set), a body that is not JSON, a slow
reply, a trickle (one byte of the answer, status line and headers included, every ``trickle``
seconds), a body trickle (status line and headers at once, then one byte of the body every
``body_trickle`` seconds) or a stall (status line and headers, then nothing). With a
``responder``, a request the script does not answer gets ``responder(body)``: a fake model that
reads its prompt. Requests are recorded in ``requests``. :class:`SilentServer` accepts
connections and never reads or answers; :func:`refused_port` is a port where nothing listens.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``raw`` replaces the whole body; ``status`` != 200 is an error."""

    text: str = "1"
    status: int = 200
    delay: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 2
    raw: bytes | None = None
    trickle: float = 0.0
    retry_after: str | None = None
    body_trickle: float = 0.0
    stall: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a slow handler must not delay stop()


class LLMTestServer:
    """Serve scripted chat completions on ``127.0.0.1`` at a free port. Use as a context manager;
    ``stop()`` returns within about a second even while a slow reply is pending."""

    def __init__(self, default: Reply | None = None,
                 responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.default = default or Reply()
        self.responder = responder
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        """The base URL to give a client, ending in ``/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self.script.extend(replies)

    def __enter__(self) -> LLMTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._stopping.set()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2.0)

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if self.script:
                return self.script.popleft()
        return self.responder(body) if self.responder is not None else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                data = self.rfile.read(length)
                if not self.path.endswith("/chat/completions"):
                    self._send(404, b'{"error": "not found"}')
                    return
                try:
                    body = json.loads(data)
                except ValueError:
                    self._send(400, b'{"error": "bad json"}')
                    return
                reply = server._next(body, dict(self.headers))
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                if reply.trickle:
                    self._trickle(reply)
                elif reply.body_trickle or reply.stall:
                    self._slow_body(reply)
                elif reply.raw is not None:
                    self._send(reply.status, reply.raw)
                elif reply.status != 200:
                    self._send(reply.status, json.dumps({"error": {"message": reply.text}})
                               .encode(), retry_after=reply.retry_after)
                else:
                    self._send(200, json.dumps({
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model", ""),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply.text}}],
                        "usage": {"prompt_tokens": reply.prompt_tokens,
                                  "completion_tokens": reply.completion_tokens,
                                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
                    }).encode())

            def _trickle(self, reply: Reply) -> None:
                payload = json.dumps({"choices": [{"message": {"content": reply.text}}]})
                answer = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(payload)}\r\n\r\n{payload}").encode()
                self.close_connection = True
                for index in range(len(answer)):
                    try:
                        self.wfile.write(answer[index:index + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up: what the test wants
                        return
                    if server._stopping.wait(reply.trickle):
                        return

            def _slow_body(self, reply: Reply) -> None:
                payload = json.dumps({"choices": [{"message": {"content": reply.text}}]}).encode()
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.flush()
                    for index in range(len(payload)):
                        if server._stopping.wait(3600.0 if reply.stall else reply.body_trickle):
                            return
                        self.wfile.write(payload[index:index + 1])
                        self.wfile.flush()
                except OSError:  # the client gave up: what the test wants
                    return

            def _send(self, status: int, payload: bytes, retry_after: str | None = None) -> None:
                try:
                    self.send_response(status)
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        return Handler


class SilentServer:
    """A listening socket on ``127.0.0.1`` that accepts connections and never reads or answers.
    Use as a context manager; the connections are closed on exit."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.05)
        self._held: list[socket.socket] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def base_url(self) -> str:
        """The base URL to give a client, ending in ``/v1``."""
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(connection)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=2.0)
        for connection in [*self._held, self._socket]:
            connection.close()


def refused_port() -> int:
    """A loopback port that was free a moment ago: a connection to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
