"""An OpenAI-compatible chat-completions server on loopback for tests, with scripted replies.

Each request to ``POST /v1/chat/completions`` takes the next scripted :class:`Reply` (or the
default one when the script is empty): a normal completion with ``usage`` token counts, an HTTP
error, a body that is not JSON, a slow reply, or a trickle (one byte of the answer, status line
and headers included, every ``trickle`` seconds). Requests are recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
from collections import deque
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a slow handler must not delay stop()


class LLMTestServer:
    """Serve scripted chat completions on ``127.0.0.1`` at a free port. Use as a context manager;
    ``stop()`` returns within about a second even while a slow reply is pending."""

    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or Reply()
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
            return self.script.popleft() if self.script else self.default

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
                elif reply.raw is not None:
                    self._send(reply.status, reply.raw)
                elif reply.status != 200:
                    self._send(reply.status, json.dumps({"error": {"message": reply.text}})
                               .encode())
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

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        return Handler
