"""Who may talk to the dashboard: loopback by default, a token for anything beyond it.

* :func:`check_bind` refuses a non-loopback ``--host`` without a token.
* :class:`Guard` is ASGI middleware in front of every route, the live channels included:

  - with a token, every request must carry it: an ``Authorization: Bearer`` header, a
    ``mosaic_token`` cookie, or a ``?token=`` query parameter (which sets the cookie, so that a
    browser opened on the link printed at start keeps working; ``EventSource`` cannot send
    headers, the cookie goes with it);
  - without a token (loopback only), the ``Host`` header must name a loopback address, so that a
    web page elsewhere cannot reach the dashboard through DNS rebinding;
  - a request that changes something (POST) must be JSON and, if it says where it comes from
    (``Origin``), come from the dashboard's own origin: a form on another site cannot post to it.

* :class:`BodyLimit` is ASGI middleware that bounds every request body to
  :data:`MAX_BODY_BYTES`: a larger one is answered with 413, and the rest of it is not read.

Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["COOKIE", "MAX_BODY_BYTES", "BodyLimit", "BodyTooLarge", "Guard", "check_bind",
           "is_loopback"]

COOKIE = "mosaic_token"
#: The largest request body the dashboard reads: its commands are a few bytes of JSON.
MAX_BODY_BYTES = 1024 * 1024
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 possibly in brackets) is loopback only."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Raise ValueError unless ``host`` is loopback or a token is set (of 16 characters or more)."""
    if token is not None and len(token) < 16:
        raise ValueError("--token must be at least 16 characters long")
    if not is_loopback(host) and token is None:
        raise ValueError(
            f"--host {host} is beyond loopback: anyone who reaches it could read the store and "
            "drive operators; give --token (at least 16 characters) to require it on every "
            "request, or bind 127.0.0.1"
        )


class Guard:
    """ASGI middleware: the checks of the module docstring, then ``app``."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        from_query = (query.get("token") or [None])[0]
        if self.token is None:
            host = headers.get("host", "")
            if not is_loopback(_host_name(host)):
                await _refuse(send, 403, f"host {host!r} is not loopback")
                return
        elif not _carries_token(self.token, headers, from_query):
            await _refuse(send, 401, "this dashboard needs its token (?token=... or a "
                                     "Bearer header)")
            return
        if scope.get("method") == "POST":
            problem = _post_problem(headers)
            if problem:
                await _refuse(send, 403, problem)
                return
        if self.token is not None and from_query is not None:
            await self.app(scope, receive, _with_cookie(send, self.token))
            return
        await self.app(scope, receive, send)


class BodyTooLarge(Exception):
    """A request body passed :data:`MAX_BODY_BYTES` while the application read it."""


class BodyLimit:
    """ASGI middleware: an HTTP request whose body is over ``limit`` bytes is answered with 413,
    and the rest of its body is not read.

    A ``Content-Length`` over the limit is refused before ``app`` runs (one that is not a number
    with 400). A body without one (chunked) is counted as ``app`` reads it: the read that passes
    the limit raises :class:`BodyTooLarge`, which this middleware answers with 413 (so it must
    sit outside the application's own exception handling: Starlette's ``middleware=``).
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"the request body is over {self.limit} bytes"
        lengths = [v for k, v in scope.get("headers", []) if k.lower() == b"content-length"]
        if lengths:
            try:
                length = int(lengths[0])
            except ValueError:
                await _refuse(send, 400, "Content-Length is not a number")
                return
            if length > self.limit:
                await _refuse(send, 413, too_large)
                return
        read = 0
        started = False

        async def counting() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.limit:
                    raise BodyTooLarge(too_large)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, sending)
        except BodyTooLarge:
            if started:
                raise
            await _refuse(send, 413, too_large)


def _carries_token(token: str, headers: dict[str, str], from_query: str | None) -> bool:
    offered: list[str] = []
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        offered.append(auth[7:].strip())
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header offers nothing
        cookie = SimpleCookie()
    if COOKIE in cookie:
        offered.append(cookie[COOKIE].value)
    if from_query is not None:
        offered.append(from_query)
    expected = token.encode()
    return any(hmac.compare_digest(value.encode(), expected) for value in offered)


def _host_name(host: str) -> str:
    """The name part of a Host header (``[::1]:8765`` -> ``::1``, ``a:80`` -> ``a``)."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _post_problem(headers: dict[str, str]) -> str | None:
    if not headers.get("content-type", "").startswith("application/json"):
        return "a request that changes something must be sent as application/json"
    origin = headers.get("origin")
    if origin not in (None, "null") and urlsplit(origin).netloc != headers.get("host", ""):
        return f"origin {origin!r} is not this dashboard"
    return None


def _with_cookie(send: Send, token: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            value = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
            message["headers"] = [*message.get("headers", []),
                                  (b"set-cookie", value.encode("latin-1"))]
        await send(message)

    return sending


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
