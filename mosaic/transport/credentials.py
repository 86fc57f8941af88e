"""The secrets of one run: what a peer must prove it holds before a byte of it is read.

Every run gets fresh credentials when it starts. They live in memory only: component processes
receive them through an inherited pipe (see :mod:`mosaic.runtime.bootstrap`), never through a
file, the command line or the environment, where other processes could read them.

* Over **ipc** a client proves it holds the run's *token* in ZeroMQ's PLAIN handshake. The
  socket is a file in a private folder on this machine, so nobody else sees the token pass, and
  after the handshake a message costs nothing extra.
* Over **tcp** the server and the client hold the run's CURVE keypairs: the handshake proves the
  client key, and every message is encrypted. The keypairs are ephemeral unless the experiment
  names a key folder (``curve_keys``), for peers that must know them in advance.
* **inproc** endpoints cannot be reached from outside the process, which holds the secrets
  anyway: they need no handshake.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import msgpack
import zmq

from mosaic.core.errors import TransportError
from mosaic.transport.keys import CurveKeys

__all__ = ["PLAIN_USER", "Credentials"]

#: The user name of the PLAIN handshake; the token is the password.
PLAIN_USER = b"mosaic"
_FIELDS = ("domain", "token", "server_public", "server_secret", "client_public", "client_secret")


@dataclass(frozen=True)
class Credentials:
    """One run's secrets: a ZAP domain, an ipc token and two CURVE keypairs (Z85-encoded).

    The secret parts are left out of ``repr`` so that a log line or a traceback never shows them.
    """

    #: Names the run at the authenticator: a peer proves the secrets of this run, not another's.
    domain: str
    token: bytes = field(repr=False)
    server_public: bytes
    server_secret: bytes = field(repr=False)
    client_public: bytes
    client_secret: bytes = field(repr=False)

    @classmethod
    def fresh(cls, keys: CurveKeys | None = None) -> Credentials:
        """New credentials for a run; with ``keys``, its CURVE keypairs are those of the folder."""
        if keys is not None:
            curve = (keys.server_public, keys.server_secret, keys.client_public, keys.client_secret)
        else:
            curve = (*zmq.curve_keypair(), *zmq.curve_keypair())
        return cls(f"mosaic-{secrets.token_hex(8)}", secrets.token_hex(32).encode(), *curve)

    def to_bytes(self) -> bytes:
        """The credentials as one msgpack map, for a pipe to a component process."""
        packed: bytes = msgpack.packb({name: getattr(self, name) for name in _FIELDS})
        return packed

    @classmethod
    def from_bytes(cls, data: bytes) -> Credentials:
        """Read what :meth:`to_bytes` wrote; raises :class:`TransportError` on anything else."""
        try:
            fields: Any = msgpack.unpackb(data)
            return cls(**{name: fields[name] for name in _FIELDS})
        except (ValueError, TypeError, KeyError, msgpack.UnpackException) as error:
            raise TransportError(f"unreadable run credentials: {error}") from None
