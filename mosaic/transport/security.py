"""CURVE security for this process's tcp sockets: set once per process, applied to every socket.

Once :func:`enable` has been given a key folder (see :mod:`mosaic.transport.keys`), every tcp
socket this process creates is secured: a :class:`~mosaic.transport.RequestServer` becomes a
CURVE server with the server secret key, and a ZAP authenticator (pyzmq's
``ThreadAuthenticator`` on the process's context) lets in only peers that prove they hold the
client secret key; a :class:`~mosaic.transport.RequestClient` becomes a CURVE client with the
client keypair and the server public key. A peer without the keys never completes the handshake,
so none of its bytes reach a decoder, let alone a handler. inproc and ipc sockets stay plain:
they do not leave the machine, and ipc sockets live in a private (``0700``) folder.

Servers also set ``ZAP_ENFORCE_DOMAIN``: should the authenticator be gone (stopped at shutdown
while a socket still listens), a handshake fails instead of being let through.

The setting belongs to the process, as the ZeroMQ context does, because sockets are created in
many places that know only their endpoint. Component processes get the same folder from their
parent through :func:`child_arguments`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import zmq
from zmq.auth.thread import ThreadAuthenticator

from mosaic.errors import TransportError
from mosaic.transport.context import context
from mosaic.transport.keys import CurveKeys

__all__ = ["child_arguments", "curve", "disable", "enable", "enabled", "secure_client",
           "secure_server"]

log = logging.getLogger(__name__)

#: The ZAP domain of mosaic's servers; the authenticator answers for this domain only.
ZAP_DOMAIN = "mosaic"
#: The command-line option a component process takes the key folder with.
CHILD_OPTION = "--curve-keys"
#: Denied client keys remembered for one warning each (a denied peer keeps reconnecting).
_WARN_LIMIT = 64

_lock = threading.Lock()
_keys: CurveKeys | None = None
_authenticator: ThreadAuthenticator | None = None
_owner_pid: int | None = None
_exit_hook = False


class _AllowedClients:
    """The ZAP credentials check: a CURVE client gets in only with the client public key."""

    def __init__(self, allowed: bytes) -> None:
        self.allowed = allowed
        self.warned: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        if domain == ZAP_DOMAIN and key == self.allowed:
            log.debug("let in a tcp peer holding the CURVE client key")
            return True
        if key not in self.warned and len(self.warned) < _WARN_LIMIT:
            self.warned.add(key)
            log.warning("refused a tcp peer with an unknown CURVE client key %s", key.decode())
        return False


def enable(keys: CurveKeys) -> None:
    """Secure every tcp socket this process creates from now on with ``keys``.

    Enabling the same keys again does nothing; enabling other keys while some are enabled
    raises :class:`~mosaic.errors.TransportError` (two runs in one process must share them).
    """
    global _keys, _exit_hook
    with _lock:
        _forget_inherited()
        if _keys is not None and _keys != keys:
            raise TransportError(f"CURVE keys from {_keys.directory} are already in use in this "
                                 f"process; cannot switch to {keys.directory}")
        _keys = keys
        if not _exit_hook:
            # Component processes end without a word to this module; stop the thread at exit.
            atexit.register(disable)
            _exit_hook = True


def disable() -> None:
    """Stop the authenticator and forget the keys: new tcp sockets are plain again. Idempotent.

    Servers created while the keys were enabled refuse every handshake from now on.
    """
    global _keys, _authenticator
    with _lock:
        _forget_inherited()
        authenticator, _authenticator, _keys = _authenticator, None, None
    if authenticator is not None:
        authenticator.stop()


def enabled() -> CurveKeys | None:
    """The keys tcp sockets of this process are secured with, or ``None``."""
    _forget_inherited()
    return _keys


@contextmanager
def curve(keys: CurveKeys | None) -> Iterator[None]:
    """Enable ``keys`` (if any) for the ``with`` block, and disable them after it.

    Keys that were already enabled before the block stay enabled after it.
    """
    if keys is None:
        yield
        return
    already = enabled() is not None
    enable(keys)
    try:
        yield
    finally:
        if not already:
            disable()


def child_arguments() -> list[str]:
    """The command-line arguments that give a component process this process's keys."""
    keys = enabled()
    return [] if keys is None else [CHILD_OPTION, str(keys.directory)]


def secure_server(sock: zmq.Socket[bytes], endpoint: str) -> None:
    """Make ``sock`` a CURVE server behind the authenticator if it is to bind tcp ``endpoint``.

    Call it before binding. Does nothing for other transports or when CURVE is not enabled.
    """
    keys = enabled()
    if keys is None or not endpoint.startswith("tcp://"):
        return
    _start_authenticator(keys)
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.server_public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, keys.server_secret)
    sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN.encode())
    sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)


def secure_client(sock: zmq.Socket[bytes], endpoint: str) -> None:
    """Make ``sock`` a CURVE client with the client keys if it is to connect to tcp ``endpoint``.

    Call it before connecting. Does nothing for other transports or when CURVE is not enabled.
    """
    keys = enabled()
    if keys is None or not endpoint.startswith("tcp://"):
        return
    sock.setsockopt(zmq.CURVE_SERVERKEY, keys.server_public)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.client_public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, keys.client_secret)


def _start_authenticator(keys: CurveKeys) -> None:
    """Start the ZAP authenticator on this process's context, once."""
    global _authenticator
    with _lock:
        if _authenticator is not None or _keys is not keys:
            return
        authenticator = ThreadAuthenticator(context(), log=logging.getLogger(f"{__name__}.zap"))
        authenticator.configure_curve_callback(ZAP_DOMAIN, _AllowedClients(keys.client_public))
        authenticator.start()
        _authenticator = authenticator


def _forget_inherited() -> None:
    """Drop state copied into a forked child: the authenticator runs in the parent only."""
    global _keys, _authenticator, _owner_pid
    pid = os.getpid()
    if _owner_pid != pid:
        if _owner_pid is not None:
            _keys, _authenticator = None, None
        _owner_pid = pid
