"""A ZAP handler (ZeroMQ RFC 27): the thread that ZeroMQ asks about every secured handshake.

pyzmq's ``ThreadAuthenticator`` does the same on asyncio, whose import (with ``ssl``) cost every
mosaic process about 25 ms of CPU at start-up, 60 ms on a busy machine. This one is a REP socket
polled beside a control socket, so that :meth:`ZapHandler.stop` ends it at once.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import zmq

__all__ = ["ZAP_ENDPOINT", "ZapHandler"]

#: Where ZeroMQ sends the ZAP requests of every socket in the context (fixed by RFC 27).
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
#: How long :meth:`ZapHandler.start` waits for the thread to bind, and :meth:`stop` for it to end.
START_STOP_S = 10.0

#: (ZAP domain, mechanism, the mechanism's credential frames) -> admitted?
Decide = Callable[[str, bytes, list[bytes]], bool]

_handlers = itertools.count()


class ZapHandler:
    """Answers ZAP requests in a thread named ``name`` with ``decide``; one per ZeroMQ context.

    A peer admitted gets status 200 with user id ``user``; anything else, a malformed request
    included, gets 400, so that ZeroMQ disconnects the peer before any of its frames is read.
    """

    def __init__(self, ctx: zmq.Context[Any], decide: Decide, *, name: str,
                 user: bytes = b"mosaic") -> None:
        self._ctx = ctx
        self._decide = decide
        self._user = user
        self._control = f"inproc://mosaic-zap-control-{next(_handlers)}"
        self._bound = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread; returns once it answers (or raises what kept it from binding)."""
        self._thread.start()
        if not self._bound.wait(START_STOP_S):
            raise RuntimeError(f"the ZAP handler did not start within {START_STOP_S:g} s")
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        """End the thread; handshakes after this fail (ZAP_ENFORCE_DOMAIN)."""
        if not self._thread.is_alive():
            return
        control = self._ctx.socket(zmq.PAIR)
        control.linger = 0
        try:
            control.connect(self._control)
            control.send(b"STOP")
        finally:
            control.close()
        self._thread.join(START_STOP_S)

    def _serve(self) -> None:
        try:
            zap = self._ctx.socket(zmq.REP)
            control = self._ctx.socket(zmq.PAIR)
            zap.linger = control.linger = 0
            zap.bind(ZAP_ENDPOINT)
            control.bind(self._control)
        except BaseException as error:
            self._failure = error
            self._bound.set()
            return
        self._bound.set()
        poller = zmq.Poller()
        poller.register(zap, zmq.POLLIN)
        poller.register(control, zmq.POLLIN)
        try:
            while True:  # the control socket is the shutdown signal polled beside the requests
                ready = dict(poller.poll())
                if control in ready:
                    return
                if zap in ready:
                    zap.send_multipart(self._answer(zap.recv_multipart()))
        finally:
            zap.close()
            control.close()

    def _answer(self, request: list[bytes]) -> list[bytes]:
        request_id = request[1] if len(request) > 1 else b""
        if len(request) < 6 or request[0] != b"1.0":
            return [b"1.0", request_id, b"400", b"malformed ZAP request", b"", b""]
        domain, mechanism = request[2].decode("utf-8", "replace"), request[5]
        if self._decide(domain, mechanism, request[6:]):
            return [b"1.0", request_id, b"200", b"OK", self._user, b""]
        return [b"1.0", request_id, b"400", b"unknown credentials", b"", b""]
