"""Where components listen: inproc for threads, ipc or tcp for processes.

tcp binds to loopback unless the process has CURVE keys (:mod:`mosaic.transport.security`).
"""

from __future__ import annotations

import ipaddress
import shutil
import tempfile
from typing import Literal

from mosaic.errors import ConfigError
from mosaic.transport.keys import HOW_TO_GENERATE
from mosaic.transport.security import enabled

Placement = Literal["thread", "process"]
Transport = Literal["ipc", "tcp"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def is_loopback(host: str) -> bool:
    """True if ``host`` is a loopback name or address."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EndpointAllocator:
    """Hands out endpoint addresses for one run and removes what they leave on disk.

    Thread-placed components get ``inproc://`` endpoints (no syscalls, same process). Components
    that must be reachable from another process get ``ipc://`` sockets in a private temporary
    folder, or ``tcp://host:*`` where the bound port is read back after binding. Binding beyond
    loopback is refused unless CURVE keys are enabled in this process (see
    :func:`mosaic.transport.security.enable`): a tcp server is then reachable by others, and only
    the keys keep them out.
    """

    def __init__(self, scope: str, *, transport: Transport = "ipc", host: str = "127.0.0.1"):
        if transport == "tcp" and not is_loopback(host) and enabled() is None:
            raise ConfigError(
                "", "host", f"refusing to bind {host!r}: not a loopback address, and no CURVE "
                "keys are enabled", HOW_TO_GENERATE,
            )
        self.scope = scope
        self.transport = transport
        self.host = host
        self._folder: str | None = None

    def inproc(self, name: str) -> str:
        """An in-process endpoint, unique to this allocator's scope."""
        return f"inproc://mosaic/{self.scope}/{name}"

    def external(self, name: str) -> str:
        """An endpoint another process can reach (ipc socket file or tcp on ``host``)."""
        if self.transport == "tcp":
            return f"tcp://{self.host}:*"
        if self._folder is None:
            # Short prefix: ipc paths are limited to about 100 bytes.
            self._folder = tempfile.mkdtemp(prefix="mosaic-")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
        return f"ipc://{self._folder}/{safe}"

    def for_placement(self, name: str, reachable_from_process: bool) -> str:
        """inproc unless some peer lives in another process."""
        return self.external(name) if reachable_from_process else self.inproc(name)

    def cleanup(self) -> None:
        """Remove the ipc folder and anything left in it. Idempotent."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
