"""An HTTP POST whose whole exchange, body included, is bounded by one timeout.

httpx's timeouts, like urllib's, bound each network operation on its own (connecting, one write,
one read): a server that sends its answer a byte every few seconds keeps a request alive for as
long as it likes. :class:`BoundedClient` runs each request on httpx's asynchronous client inside
``asyncio.timeout``, which cancels the exchange wherever it is (connecting, sending, waiting for
the status line, reading the body) when the time is up; the cancelled connection is closed. One
event loop and one connection pool serve all the requests of a client, so a connection is reused
from one request to the next. The standard proxy variables (``HTTP_PROXY``, ``HTTPS_PROXY``,
``ALL_PROXY``, ``NO_PROXY``) are honoured (httpx's ``trust_env``); a ``socks5://`` proxy needs
the ``httpx[socks]`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import time
from collections.abc import Mapping

import httpx

__all__ = ["BoundedClient", "RequestFailed", "retry_after_seconds"]


class RequestFailed(Exception):
    """The request did not get a 2xx answer in time.

    ``reason`` is ``http`` (the server answered with an error ``status``), ``timeout`` (no
    complete answer within the timeout) or ``connection`` (refused, reset, unreachable, or the
    exchange broke off). ``retry_after`` is the wait in seconds that an ``http`` answer asked for
    in its ``Retry-After`` header (None without a readable one).
    """

    def __init__(self, reason: str, message: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


class BoundedClient:
    """POSTs whose whole exchange ends within a timeout (see the module docstring).

    Not thread-safe: one thread makes the requests. :meth:`close` it when done.
    """

    def __init__(self) -> None:
        # No timeout of httpx's own: asyncio.timeout bounds each whole exchange (see post).
        self._client = httpx.AsyncClient(trust_env=True, follow_redirects=True, timeout=None)
        self._runner: asyncio.Runner | None = None

    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float,
             max_bytes: int) -> bytes:
        """POST ``body`` to ``url``; the first ``max_bytes`` of a 2xx answer's body.

        The whole exchange (connect, send, status, headers and body) ends within ``timeout``
        seconds. Raises :class:`RequestFailed` otherwise, or for an error status (its message
        holds the start of the error body).
        """
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self._post(url, body, headers, timeout, max_bytes))

    def close(self) -> None:
        """Close the connections and the event loop; a request still pending (the worker was
        told to stop in the middle of one) is cancelled. Safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            pending = asyncio.all_tasks(runner.get_loop())
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                runner.run(self._aclose(pending))
        finally:
            runner.close()

    async def _aclose(self, pending: set[asyncio.Task[object]]) -> None:
        await asyncio.gather(*pending, return_exceptions=True)
        await self._client.aclose()

    async def _post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float,
                    max_bytes: int) -> bytes:
        try:
            async with asyncio.timeout(timeout), self._client.stream(
                    "POST", url, content=body, headers=dict(headers)) as response:
                if response.is_success:
                    return await _read(response, max_bytes)
                detail = (await _read(response, 300)).decode("utf-8", "replace")
                raise RequestFailed(
                    "http", f"HTTP {response.status_code} {response.reason_phrase}: "
                            f"{detail.strip()[:200]}",
                    response.status_code, retry_after_seconds(response.headers.get("Retry-After")))
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise RequestFailed("timeout",
                                f"request failed: timed out after {timeout:g} s") from exc
        except httpx.HTTPError as exc:
            raise RequestFailed("connection", f"request failed: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    """``ConnectError: All connection attempts failed (ConnectionRefusedError: [Errno 111] ...)``:
    the error, and the operating system's error under it when there is one."""
    text = f"{type(exc).__name__}: {str(exc) or 'the exchange broke off'}"
    cause, seen = exc.__cause__ or exc.__context__, 0
    root: BaseException | None = None
    while cause is not None and seen < 10:  # the deepest OS error in the chain
        if isinstance(cause, OSError) and cause.errno is not None:
            root = cause
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return f"{text} ({type(root).__name__}: {root})" if root is not None else text


async def _read(response: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of ``response``'s (decoded) body; stops reading there."""
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return bytes(data[:limit])


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for: its seconds, or the time until its HTTP date
    (0 for a date past); None for no header or one that is neither."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are in GMT
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None
