"""An HTTP POST whose whole exchange is bounded by one timeout, not each socket read.

``urllib``'s ``timeout`` bounds every socket operation on its own, so a server that sends a byte
every few seconds keeps a request alive forever. :func:`post` starts a timer beside the request;
when it fires it shuts the request's socket down, which ends any read in progress at once. The
standard library's proxy handling (``HTTP_PROXY`` and friends) is kept.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RequestFailed", "post"]


class RequestFailed(Exception):
    """The request did not get a 2xx answer in time.

    ``reason`` is ``http`` (the server answered with an error ``status``), ``timeout`` (no
    complete answer within the timeout) or ``connection`` (refused, reset, unreachable).
    """

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


class _Connections:
    """The connections one request opened, so that the timer can cut them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPConnection] = []
        self.cut = False

    def factory(self, cls: type[http.client.HTTPConnection]) -> Callable[..., Any]:
        def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            connection = cls(host, **kwargs)
            with self._lock:
                self._open.append(connection)
            return connection

        return make

    def cut_all(self) -> None:
        with self._lock:
            self.cut = True
            for connection in self._open:
                sock = connection.sock
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connections.factory(http.client.HTTPConnection), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connections.factory(http.client.HTTPSConnection), req)


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float,
         max_bytes: int) -> bytes:
    """POST ``body`` to ``url``; the first ``max_bytes`` of a 2xx answer's body.

    The whole exchange (connect, send, status, headers and body) takes at most about
    ``timeout`` seconds. Raises :class:`RequestFailed` otherwise, or for an error status (its
    message holds the start of the error body).
    """
    connections = _Connections()
    opener = urllib.request.build_opener(_HTTP(connections), _HTTPS(connections))
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    timer = threading.Timer(timeout, connections.cut_all)
    timer.daemon = True  # a worker told to stop must not wait for it
    timer.start()
    try:
        with opener.open(request, timeout=timeout) as response:
            raw: bytes = response.read(max_bytes)
        if connections.cut:  # the timer ended the read: what came is not the whole answer
            raise _timed_out(timeout)
        return raw
    except urllib.error.HTTPError as exc:
        if connections.cut:
            raise _timed_out(timeout) from exc
        detail = ""
        with contextlib.suppress(OSError, http.client.HTTPException):
            detail = exc.read(300).decode("utf-8", "replace") if exc.fp is not None else ""
        raise RequestFailed("http", f"HTTP {exc.code} {exc.reason}: {detail.strip()[:200]}",
                            exc.code) from exc
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        if connections.cut or isinstance(exc, TimeoutError) or isinstance(
                getattr(exc, "reason", None), TimeoutError):
            raise _timed_out(timeout) from exc
        why = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise RequestFailed("connection", f"request failed: {type(why).__name__}: {why}") from exc
    finally:
        timer.cancel()
        connections.cut_all()  # nothing of this request stays open


def _timed_out(timeout: float) -> RequestFailed:
    return RequestFailed("timeout", f"request failed: timed out after {timeout:g} s")
