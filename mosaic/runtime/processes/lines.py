"""Reading a pipe line by line, never holding more than a bounded line in memory.

Both ends of a line protocol over pipes (a worker reading its commands, its driver reading the
replies) read this way: a peer cannot make the reader hold an endless line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO


def bounded_lines(stream: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """The non-blank lines of ``stream`` until its end, each with its newline.

    A line longer than ``limit`` bytes is read to its end in pieces of at most ``limit`` bytes,
    discarded, and yields ``None`` in its place. Raises what the stream's ``readline`` raises.
    """
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = stream.readline(limit)
            yield None
        elif line.strip():
            yield line
