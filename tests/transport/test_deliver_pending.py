"""A component process's last message survives its exit: a socket closed with a linger keeps
what it holds, and deliver_pending hands it over before the process ends
without the interpreter's teardown (as mosaic.runtime.process_main ends)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import zmq

pytestmark = pytest.mark.timeout(60)

#: Large enough that ZeroMQ's I/O thread is still writing it when the sender closes its socket.
SIZE = 32_000_000

#: The sender keeps its message up to this long (the run's REPLY_LINGER_MS is 1 s, for a
#: shutdown's short answer): 32 MB may take seconds to write on a machine at load 8.
LINGER_MS = 30_000

SENDER = textwrap.dedent("""
    import os, sys
    import zmq
    from mosaic.transport.context import context, deliver_pending

    sock = context().socket(zmq.PUSH)
    sock.connect(sys.argv[1])
    sock.send(b"x" * int(sys.argv[2]))
    sock.close(linger=int(sys.argv[3]))
    deliver_pending(int(sys.argv[3]) / 1000)
    os._exit(0)
""")


def test_the_last_message_reaches_its_peer_after_the_sender_exits(tmp_path) -> None:
    """Without deliver_pending, the sender's exit drops the message (checked by hand: 3 of 3)."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.linger = 0
    endpoint = f"ipc://{tmp_path}/last-word"
    pull.bind(endpoint)
    try:
        sender = subprocess.run([sys.executable, "-c", SENDER, endpoint, str(SIZE),
                                 str(LINGER_MS)], timeout=50, capture_output=True, text=True)
        assert sender.returncode == 0, sender.stderr
        assert pull.poll(5_000), "the message sent just before the sender's exit never came"
        assert len(pull.recv()) == SIZE
    finally:
        pull.close()
        ctx.term()
