"""Serving the dashboard with uvicorn: :func:`serve` (``mosaic dashboard``) and
:class:`BackgroundServer`, the same server on a thread (tests and benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

import uvicorn

from mosaic.dashboard.app import Dashboard, create_app
from mosaic.dashboard.security import check_bind

__all__ = ["BackgroundServer", "serve"]

#: Seconds open connections (live channels) get to end at shutdown before they are closed.
GRACEFUL_SHUTDOWN = 2


class _Server(uvicorn.Server):
    """uvicorn's server, which tells the live channels to end as soon as it begins to stop:
    uvicorn waits for open responses, and a live channel never ends by itself."""

    def __init__(self, dashboard: Dashboard, host: str, port: int,
                 on_listening: Callable[[], None] | None = None) -> None:
        check_bind(host, dashboard.token)
        self.closing = threading.Event()
        self.on_listening = on_listening
        super().__init__(uvicorn.Config(
            create_app(dashboard, self.closing), host=host, port=port, log_level="warning",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN, lifespan="on", proxy_headers=False,
            server_header=False))

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_listening is not None:
            self.on_listening()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.closing.set()
        await super().shutdown(sockets)


def serve(dashboard: Dashboard, host: str = "127.0.0.1", port: int = 8765,
          on_listening: Callable[[], None] | None = None) -> None:
    """Serve until Ctrl-C or SIGTERM; ``on_listening`` is called once the port accepts
    connections. Raises ValueError for a host beyond loopback without a token; OSError when
    the port cannot be bound."""
    _Server(dashboard, host, port, on_listening).run()


class BackgroundServer:
    """The dashboard served on a thread, on a free port of ``host`` (or ``port``).

    :meth:`start` returns once it accepts connections (RuntimeError after ``timeout`` s);
    :meth:`stop` shuts it down and joins the thread. A context manager.
    """

    def __init__(self, dashboard: Dashboard, host: str = "127.0.0.1", port: int = 0) -> None:
        if port == 0:
            with socket.socket() as probe:
                probe.bind((host, 0))
                port = probe.getsockname()[1]
        self.host, self.port = host, port
        self._server = _Server(dashboard, host, port)
        self._thread = threading.Thread(target=self._server.run, name="mosaic-dashboard",
                                        daemon=True)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> Self:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the dashboard did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._server.closing.set()
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
