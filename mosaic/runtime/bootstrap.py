"""What a component process learns from its parent before it serves, through an inherited pipe.

The run's credentials (:mod:`mosaic.transport.credentials`) and the names the run's experiment
file allows to be imported travel this way, never on the command line or in the environment,
where other processes of the machine could read them. The parent writes one msgpack map and
closes its end; the child reads until the end, then closes its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from mosaic.core.errors import TransportError
from mosaic.transport import Credentials

#: The most a bootstrap may hold: an experiment file's names and a few keys.
MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Bootstrap:
    """What a component process is trusted with: ``None`` for what its run does not restrict."""

    credentials: Credentials | None
    allowed_imports: frozenset[str] | None


#: What a component is given where nothing restricts it: no credentials, any import.
NO_TRUST = Bootstrap(None, None)


def encode(bootstrap: Bootstrap) -> bytes:
    """``bootstrap`` as one msgpack map (for a pipe, or a Ray actor's argument)."""
    data: bytes = msgpack.packb({
        "credentials": None if bootstrap.credentials is None else bootstrap.credentials.to_bytes(),
        "allowed_imports": None if bootstrap.allowed_imports is None
        else sorted(bootstrap.allowed_imports),
    })
    return data


def write(fd: int, bootstrap: Bootstrap) -> None:
    """Write ``bootstrap`` to the pipe ``fd`` and close it (blocks while the child reads)."""
    data = encode(bootstrap)
    try:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:
        pass  # the child died before reading: its exit code tells why


def read(fd: int) -> Bootstrap:
    """Read a bootstrap from ``fd`` to its end and close it; :class:`TransportError` if invalid."""
    with os.fdopen(fd, "rb") as pipe:
        data = pipe.read(MAX_BYTES + 1)
    return decode(data)


def decode(data: bytes) -> Bootstrap:
    """Read what :func:`encode` wrote; :class:`TransportError` if it is anything else."""
    if len(data) > MAX_BYTES:
        raise TransportError(f"bootstrap larger than {MAX_BYTES} bytes")
    try:
        fields: Any = msgpack.unpackb(data)
        credentials, allowed = fields["credentials"], fields["allowed_imports"]
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as error:
        raise TransportError(f"unreadable bootstrap: {error}") from None
    return Bootstrap(None if credentials is None else Credentials.from_bytes(credentials),
                     None if allowed is None else frozenset(map(str, allowed)))


def named_strings(config: Any) -> frozenset[str]:
    """Every string in a validated run config: what it may name for import, and nothing else."""
    found: set[str] = set()
    stack = [config]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
            stack.extend(value)
    return frozenset(found)
