"""The agents' checkpoint files of a run, kept in its store as the brains save them.

A brain saves its checkpoint to a file on the disk of the machine it runs on (see
:mod:`mosaic.core.checkpoints`). On a Ray node that disk is not the command's, and a node that
dies takes it along; and a command that dies leaves only what it had stored. So while a run
steps, :class:`CheckpointSync` looks at its agents' checkpoint files about once a second and
hands each new version to the run's records (the store writer, or the relay of a run on a Ray
node), and :func:`restore_checkpoints` writes them back where a later phase or a resumed run
looks for them, when they are not on that disk.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from mosaic.conductors.run_context import RunRecords
from mosaic.core.checkpoints import (
    checkpoint_name,
    previous_checkpoint,
    save_bytes,
    saved_episodes,
)
from mosaic.core.errors import StoreError
from mosaic.messages import RunConfig

__all__ = ["CheckpointSync", "checkpoint_files", "restore_checkpoints"]

log = logging.getLogger(__name__)

#: How often a running run's checkpoint files are looked at.
SYNC_EVERY_S = 1.0


def checkpoint_files(config: RunConfig) -> dict[str, Path]:
    """The checkpoint files the agents of ``config`` save, by their name in the store: each
    save path and the periodic one kept before it."""
    files: dict[str, Path] = {}
    for agent in config.agents:
        save = agent.checkpoints.save if agent.checkpoints is not None else None
        if save is not None:
            for path in (Path(save), previous_checkpoint(save)):
                files[checkpoint_name(path)] = path
    return files


class CheckpointSync:
    """Hands each new version of ``config``'s checkpoint files to ``records`` (run
    ``run_id``): :meth:`poll` while the run steps, :meth:`poll` with ``force`` once it ended."""

    def __init__(self, config: RunConfig, run_id: int, records: RunRecords) -> None:
        self._files = checkpoint_files(config)
        self._run_id = run_id
        self._records = records
        self._seen: dict[str, tuple[int, int]] = {}
        self._next = 0.0

    def poll(self, force: bool = False) -> None:
        """Store the files that changed since they were last stored (at most once a
        :data:`SYNC_EVERY_S` unless ``force``). A file that cannot be read is logged."""
        now = time.monotonic()
        if not self._files or (not force and now < self._next):
            return
        self._next = now + SYNC_EVERY_S
        for name, path in self._files.items():
            try:
                stat = path.stat()
                version = (stat.st_mtime_ns, stat.st_size)
                if self._seen.get(name) == version:
                    continue
                data = path.read_bytes()  # a brain replaces its file whole: never half of it
            except FileNotFoundError:
                continue
            except OSError as error:
                log.warning("checkpoint %s cannot be read to be stored: %s", path, error)
                continue
            self._records.record_checkpoint(self._run_id, name, data, saved_episodes(data))
            self._seen[name] = version

    def polling(self, then: Callable[[], None] | None) -> Callable[[], None]:
        """A wait callback that polls, then calls ``then`` (a run's progress, say)."""
        def wait() -> None:
            self.poll()
            if then is not None:
                then()
        return wait


def restore_checkpoints(files: dict[str, Path],
                        read: Callable[[str], bytes | None]) -> list[Path]:
    """Write each of ``files`` (name -> path) that is not on this disk from ``read(name)``
    (the store's copy, None if it has none); return the paths written. A file the store
    cannot give is logged and left missing."""
    written = []
    for name, path in files.items():
        if os.path.exists(path):
            continue
        try:
            data = read(name)
        except StoreError as error:  # then it is missing, as it would be without the store
            log.warning("checkpoint %s is not on this disk and not read from the store: %s",
                        path, error)
            continue
        if data is not None:
            save_bytes(path, data)
            written.append(path)
    return written
