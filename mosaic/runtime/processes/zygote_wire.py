"""What a parent and its zygote say to each other: one request and one reply per fork.

They talk over a ``SOCK_SEQPACKET`` unix socket pair, so every message arrives whole. A request
is a JSON map, the command to run (``argv``: ``[python, "-m", module, *args]``) and the
descriptor number each passed descriptor gets in the fork (``fds``), with the descriptors
themselves attached (``SCM_RIGHTS``), in the same order. The reply is ``{"pid": N}``, the
process that runs the command, or ``{"error": "..."}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: The most a request may hold: a command line and a few descriptor numbers.
MAX_REQUEST_BYTES = 64 * 1024
#: The most descriptors a request may pass (its stdout and stderr, and the command's own).
MAX_FDS = 16


class WireError(ValueError):
    """A message that is not what the other side sends."""


@dataclass(frozen=True)
class ForkRequest:
    """Run ``argv`` (``[python, "-m", module, *args]``) with descriptor ``fds[i]`` for the
    ``i``-th descriptor attached to the request."""

    argv: tuple[str, ...]
    fds: tuple[int, ...]

    def encode(self) -> bytes:
        return json.dumps({"argv": list(self.argv), "fds": list(self.fds)}).encode()

    @classmethod
    def decode(cls, data: bytes) -> ForkRequest:
        """The request in ``data``; :class:`WireError` if it is not one."""
        try:
            fields = json.loads(data)
            argv, fds = fields["argv"], fields["fds"]
        except (ValueError, TypeError, KeyError) as error:
            raise WireError(f"unreadable fork request: {error}") from None
        if (not isinstance(argv, list) or len(argv) < 3 or argv[1] != "-m"
                or not all(isinstance(arg, str) for arg in argv)):
            raise WireError(f"expected argv [python, '-m', module, ...], got {argv!r}")
        if not isinstance(fds, list) or not all(isinstance(fd, int) and fd >= 0 for fd in fds):
            raise WireError(f"expected descriptor numbers, got {fds!r}")
        return cls(tuple(argv), tuple(fds))


def encode_reply(pid: int | None, error: str | None = None) -> bytes:
    """The zygote's reply: the pid of the fork, or why there is none."""
    return json.dumps({"pid": pid} if error is None else {"error": error}).encode()


def decode_reply(data: bytes) -> int:
    """The pid in a reply; :class:`WireError` with the zygote's reason if there is none."""
    try:
        fields = json.loads(data)
    except ValueError:
        raise WireError(f"unreadable reply from the zygote: {data[:80]!r}") from None
    pid = fields.get("pid") if isinstance(fields, dict) else None
    if isinstance(pid, int) and pid > 0:
        return pid
    reason = fields.get("error") if isinstance(fields, dict) else None
    raise WireError(str(reason or f"unexpected reply from the zygote: {data[:80]!r}"))
