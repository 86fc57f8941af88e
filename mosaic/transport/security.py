"""Authenticated sockets: a peer that cannot prove a run's credentials gets no byte read.

:func:`secure_server` makes a ROUTER socket that binds ipc or tcp demand the run's credentials
(:mod:`mosaic.transport.credentials`) at the handshake: PLAIN with the run's token over ipc,
CURVE with the run's keys over tcp. :func:`secure_client` gives a DEALER socket what it needs to
pass. ZeroMQ asks the process's *gatekeeper* (a ZAP handler, one thread per process, started on
first use) about every handshake; it admits a peer only with the credentials registered for the
server's ZAP domain, that is, of the server's own run. A peer that fails is disconnected before
any frame of it reaches mosaic: no decoder, let alone a handler, ever sees it.

Servers set ``ZAP_ENFORCE_DOMAIN``: should the gatekeeper be gone (stopped at exit while a
socket still listens), a handshake fails instead of being let through.
"""

from __future__ import annotations

import atexit
import hmac
import logging
import threading
from typing import Any

import zmq
import zmq.utils.z85

from mosaic.core.errors import TransportError
from mosaic.transport.context import context
from mosaic.transport.credentials import PLAIN_USER, Credentials
from mosaic.transport.zap import ZapHandler

__all__ = ["admit", "is_secured", "release", "secure_client", "secure_server",
           "stop_gatekeeper"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_gatekeeper: ZapHandler | None = None
#: ZAP domain -> (credentials, servers that use them).
_admitted: dict[str, tuple[Credentials, int]] = {}


def is_secured(endpoint: str) -> bool:
    """True if a server on ``endpoint`` demands credentials: every transport but inproc."""
    return not endpoint.startswith("inproc://")


def _proves(credentials: Credentials, mechanism: bytes, proof: list[bytes]) -> bool:
    if mechanism == b"PLAIN" and len(proof) == 2:
        user, password = proof
        return user == PLAIN_USER and hmac.compare_digest(password, credentials.token)
    if mechanism == b"CURVE" and len(proof) == 1:
        return hmac.compare_digest(proof[0], zmq.utils.z85.decode(credentials.client_public))
    return False  # NULL, or a mechanism mosaic never offers


#: The name of the gatekeeper's thread: one per process that serves ipc or tcp, until it exits.
GATEKEEPER_THREAD = "mosaic-zap-gatekeeper"


def _decide(domain: str, mechanism: bytes, proof: list[bytes]) -> bool:
    """The gatekeeper's answer: does the peer prove the credentials of the server's run?"""
    with _lock:
        entry = _admitted.get(domain)
    if entry is not None and _proves(entry[0], mechanism, proof):
        log.debug("let in a peer holding the run's credentials (%s)", mechanism.decode())
        return True
    return False  # logged where the refused connection shows, once per peer (RequestServer)


def admit(credentials: Credentials) -> None:
    """Let peers holding ``credentials`` in, until as many :func:`release` calls.

    Starts this process's gatekeeper on first use; it is stopped at exit.
    """
    global _gatekeeper
    with _lock:
        known, users = _admitted.get(credentials.domain, (credentials, 0))
        if known != credentials:
            raise TransportError(f"two sets of credentials for ZAP domain {credentials.domain}")
        _admitted[credentials.domain] = (credentials, users + 1)
        if _gatekeeper is None:
            gatekeeper = ZapHandler(context(), _decide, name=GATEKEEPER_THREAD)
            gatekeeper.start()
            _gatekeeper = gatekeeper
            atexit.register(stop_gatekeeper)


def release(credentials: Credentials) -> None:
    """Undo one :func:`admit`; the last one forgets the credentials."""
    with _lock:
        known = _admitted.get(credentials.domain)
        if known is None:
            return
        if known[1] <= 1:
            del _admitted[credentials.domain]
        else:
            _admitted[credentials.domain] = (known[0], known[1] - 1)


def stop_gatekeeper() -> None:
    """Stop this process's gatekeeper, if it runs (also done at exit)."""
    global _gatekeeper
    with _lock:
        gatekeeper, _gatekeeper = _gatekeeper, None
    if gatekeeper is not None:
        gatekeeper.stop()


def secure_server(sock: zmq.Socket[Any], endpoint: str, credentials: Credentials | None) -> bool:
    """Make ``sock`` demand ``credentials`` of every peer if it is to bind ``endpoint``.

    Call it before binding. inproc needs nothing (returns False); ipc and tcp need credentials,
    and a server without them is refused with :class:`TransportError` rather than left open.
    Returns True when the server was secured: call :func:`release` when it closes.
    """
    if not is_secured(endpoint):
        return False
    if credentials is None:
        raise TransportError(f"refusing to serve {endpoint} without a run's credentials")
    if endpoint.startswith("tcp://"):
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, credentials.server_public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, credentials.server_secret)
    else:
        sock.setsockopt(zmq.PLAIN_SERVER, 1)
    sock.setsockopt(zmq.ZAP_DOMAIN, credentials.domain.encode())
    sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
    admit(credentials)
    return True


def secure_client(sock: zmq.Socket[Any], endpoint: str, credentials: Credentials | None) -> None:
    """Give ``sock`` what it must prove to a server on ``endpoint``. Call it before connecting.

    Without credentials the socket stays plain: it can reach only inproc servers.
    """
    if credentials is None or not is_secured(endpoint):
        return
    if endpoint.startswith("tcp://"):
        sock.setsockopt(zmq.CURVE_SERVERKEY, credentials.server_public)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, credentials.client_public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, credentials.client_secret)
    else:
        sock.setsockopt(zmq.PLAIN_USERNAME, PLAIN_USER)
        sock.setsockopt(zmq.PLAIN_PASSWORD, credentials.token)
