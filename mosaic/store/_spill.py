"""The spill file: where the store writer keeps records the store cannot take now.

While the store refuses writes, the writer keeps the records in memory up to a bound, and past
it appends them here, in the order they came; when the store comes back it writes them in from
here, in that order. If the store is given up on, everything not written ends up here, and
``mosaic store recover`` (:mod:`mosaic.store.recover`) writes it in later.

The file is a stream of msgpack values: a header map, then one ``[kind, params]`` per queued
item, ``params`` being the statement parameters the writer would have executed (observations
already encoded), so recovery needs neither the run nor its codec. A ``[RUN, [id, uid]]`` item
names a run the records refer to, so that recovery can check that it writes into the store the
run was recorded in; a ``CHECK`` item marks records that may be in the store already. What was
written in already is recorded in the store itself, in the same
transaction (``meta`` key ``spill:<id>``: the offset up to which the file is in the store), so
neither the writer nor a recovery ever writes a record twice.

The file is created next to a SQLite store (so it lives and dies with the results) or, for a
database server or a disk that cannot take it, in the temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgpack

from mosaic.core.errors import StoreError

#: The header's key that marks a spill file, and the format's version.
MAGIC = "mosaic_spill"
VERSION = 1
#: The kind of the items that name a run: ``[RUN, [run_id, run_uid]]``.
RUN = 100
#: ``[CHECK, [writer_key, seq, count]]``: the ``count`` items after it are a transaction whose
#: commit was tried and may have happened: it did if the store's ``meta`` value of
#: ``writer_key`` reached ``seq``.
CHECK = 101
#: The store's ``meta`` key that holds how far the spill file ``id`` is written in.
META_PREFIX = "spill:"


def meta_key(spill_id: str) -> str:
    return META_PREFIX + spill_id


@dataclass(frozen=True)
class SpillHeader:
    """What a spill file says of itself."""

    id: str
    store: str
    created: float
    host: str
    pid: int


class SpillFile:
    """A spill file being written: :meth:`append` items, :meth:`read` them back by offset."""

    def __init__(self, path: Path, header: SpillHeader, file: IO[bytes], end: int) -> None:
        self.path = path
        self.header = header
        self._file = file
        #: Offset of the first item (after the header) and of the end of the last one.
        self.start = end
        self.end = end
        self._packer = msgpack.Packer()

    @classmethod
    def create(cls, spill_id: str, store: str, beside: Path | None) -> SpillFile:
        """A new spill file for the store described as ``store``: next to ``beside`` (a SQLite
        file) if it can be written there, else in the temporary folder.

        Raises StoreError if neither place takes it.
        """
        header = SpillHeader(spill_id, store, time.time(), socket.gethostname(), os.getpid())
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folders = ([(beside.parent, f"{beside.name}.{stamp}-{spill_id[:8]}.spill")]
                   if beside is not None else [])
        folders.append((Path(tempfile.gettempdir()), f"mosaic-{stamp}-{spill_id[:8]}.spill"))
        problems = []
        for folder, name in folders:
            path = folder / name
            try:
                return cls._open(path, header)
            except OSError as error:
                problems.append(f"{path}: {error.strerror or error}")
        raise StoreError("no spill file could be created: " + "; ".join(problems))

    @classmethod
    def _open(cls, path: Path, header: SpillHeader) -> SpillFile:
        # Unbuffered: nothing left in a buffer that a close on a full disk would fail to write.
        file = open(path, "xb+", buffering=0)  # noqa: SIM115 - open for as long as the spill
        try:
            _write_all(file, msgpack.packb({MAGIC: VERSION, **header.__dict__}))
            os.fsync(file.fileno())
            return cls(path, header, file, file.tell())
        except BaseException:
            file.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise

    def append(self, items: list[tuple[int, Any]]) -> None:
        """Append ``items`` and make them durable (``fsync``).

        If the file's disk is full and the file is not in the temporary folder yet, it moves
        there and tries again. Raises OSError if that fails too, StoreError if a value cannot be
        packed.
        """
        try:
            data = b"".join(self._packer.pack(list(item)) for item in items)
        except (TypeError, ValueError) as error:
            raise StoreError(f"a record cannot be spilled: {error}") from error
        try:
            self._write(data)
        except OSError:
            if not self._move_to_temp():
                raise
            self._write(data)

    def _write(self, data: bytes) -> None:
        self._file.seek(self.end)
        _write_all(self._file, data)
        os.fsync(self._file.fileno())
        self.end += len(data)

    def _move_to_temp(self) -> bool:
        folder = Path(tempfile.gettempdir())
        if self.path.parent == folder:
            return False
        target = folder / self.path.name
        try:
            with open(target, "xb", buffering=0) as copy:
                self._file.seek(0)
                _write_all(copy, self._file.read(self.end))
                os.fsync(copy.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                target.unlink()
            return False
        old, self.path = self.path, target
        self._file.close()
        self._file = open(target, "rb+", buffering=0)  # noqa: SIM115
        with contextlib.suppress(OSError):
            old.unlink()
        return True

    def read(self, start: int, end: int) -> Iterator[tuple[int, Any, int]]:
        """The items between offsets ``start`` and ``end``, each with the offset after it."""
        self._file.seek(start)
        unpacker = _unpacker(self._file)
        for kind, params in unpacker:
            offset = start + unpacker.tell()
            yield kind, params, offset
            if offset >= end:
                return

    def close(self) -> None:
        self._file.close()

    def remove(self) -> None:
        """Close and delete the file (everything in it is in the store)."""
        self._file.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass(frozen=True)
class SpillContents:
    """A spill file read back whole: its header, items (with the offset after each), and how
    many bytes at its end are the start of an item cut off (its writer was killed mid-write)."""

    header: SpillHeader
    start: int
    items: list[tuple[int, Any, int]]
    cut_off: int


def read_spill(path: Path) -> SpillContents:
    """Read the spill file at ``path``; StoreError if it is not one or cannot be read."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            unpacker = _unpacker(file)
            try:
                header = next(unpacker)
            except (StopIteration, ValueError, msgpack.UnpackException) as error:
                raise StoreError(f"{path} is not a mosaic spill file ({error or 'empty'})") \
                    from None
            if not isinstance(header, dict) or header.get(MAGIC) != VERSION:
                raise StoreError(f"{path} is not a mosaic spill file of version {VERSION}")
            start = unpacker.tell()
            items = []
            try:
                for kind, params in unpacker:
                    items.append((kind, params, unpacker.tell()))
            except (ValueError, msgpack.UnpackException) as error:
                raise StoreError(f"{path}: unreadable record after offset "
                                 f"{items[-1][2] if items else start}: {error}") from None
    except OSError as error:
        raise StoreError(f"cannot read spill file {path}: {error.strerror or error}") from None
    end = items[-1][2] if items else start
    try:
        found = SpillHeader(str(header["id"]), str(header["store"]), float(header["created"]),
                            str(header["host"]), int(header["pid"]))
    except (KeyError, TypeError, ValueError) as error:
        raise StoreError(f"{path}: the spill file's header is damaged ({error})") from None
    return SpillContents(found, start, items, size - end)


def _write_all(file: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to the unbuffered ``file`` (OSError as the system says)."""
    view = memoryview(data)
    while view:
        done = file.write(view)
        if not done:
            raise OSError(f"no progress writing {len(view)} bytes")
        view = view[done:]


def _unpacker(file: IO[bytes]) -> msgpack.Unpacker:
    # Tuples, as the writer made them: the driver takes step rows only as tuples.
    return msgpack.Unpacker(file, raw=False, strict_map_key=False, use_list=False)
