"""A disk that fills up, for real: a small tmpfs the tests mount (as root) and fill."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def small_disk(folder: Path, size: str = "4m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``folder`` (created) for the ``with`` block.

    Raises RuntimeError with the reason where it cannot (mounting needs root).
    """
    if os.geteuid() != 0:
        raise RuntimeError("the full-disk tests mount a small tmpfs, which needs root")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                   check=True, timeout=20, capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], timeout=20, capture_output=True)


def fill(folder: Path) -> Path:
    """Fill ``folder``'s file system to the last byte with one file; return it."""
    filler = folder / "filler"
    block = b"\xff" * 65536
    with open(filler, "wb", buffering=0) as file:
        while True:
            try:
                file.write(block)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                if len(block) == 1:
                    return filler
                block = block[: len(block) // 2]
