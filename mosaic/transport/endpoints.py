"""Where components listen: inproc for threads, ipc or tcp for processes.

Every ipc and tcp server demands the run's credentials (:mod:`mosaic.transport.security`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Literal

from mosaic.core.lifeline import process_exists

log = logging.getLogger(__name__)

Placement = Literal["thread", "process"]
Transport = Literal["ipc", "tcp"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: The private ipc folder of a run: ``mosaic-<pid of the process that owns it>-<random>``.
IPC_FOLDER_PREFIX = "mosaic-"
_IPC_FOLDER = re.compile(rf"{IPC_FOLDER_PREFIX}(\d+)-")


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
    folder, or ``tcp://host:*`` where the bound port is read back after binding.

    The ipc folder is removed by :meth:`cleanup`; one left behind by a process that was killed
    (SIGKILL, a forced exit) is removed by the next allocator that makes a folder.
    """

    def __init__(self, scope: str, *, transport: Transport = "ipc", host: str = "127.0.0.1"):
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
            remove_stale_folders()
            # Short prefix: ipc paths are limited to about 100 bytes.
            self._folder = tempfile.mkdtemp(prefix=f"{IPC_FOLDER_PREFIX}{os.getpid()}-")
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


def remove_stale_folders(root: str | None = None) -> list[Path]:
    """Remove the ipc folders whose owner process is gone; return them.

    Only this user's folders are touched, and only those named after a process that no longer
    exists: the folder of a live run, of any user, stays.
    """
    removed: list[Path] = []
    parent = Path(root or tempfile.gettempdir())
    try:
        candidates = list(parent.glob(f"{IPC_FOLDER_PREFIX}*"))
    except OSError:
        return removed
    for folder in candidates:
        match = _IPC_FOLDER.match(folder.name)
        if match is None:
            continue
        try:
            if folder.stat().st_uid != os.getuid() or process_exists(int(match.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        log.debug("removed %s, left behind by a process that is gone", folder)
        removed.append(folder)
    return removed
