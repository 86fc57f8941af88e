"""A component process's last message survives its exit: a socket closed with
REPLY_LINGER_MS keeps what it holds, and deliver_pending hands it over before the process ends
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

SENDER = textwrap.dedent("""
    import os, sys
    import zmq
    from mosaic.transport.context import REPLY_LINGER_MS, context, deliver_pending

    sock = context().socket(zmq.PUSH)
    sock.connect(sys.argv[1])
    sock.send(b"x" * int(sys.argv[2]))
    sock.close(linger=REPLY_LINGER_MS)
    if sys.argv[3] == "deliver":
        deliver_pending(REPLY_LINGER_MS / 1000 + 5.0)
    os._exit(0)
""")


def _received(tmp_path, how: str) -> int:
    """Bytes a PULL socket got from a sender process that ends right after sending (``how``:
    ``deliver`` waits for deliver_pending first, ``exit`` does not)."""
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.linger = 0
    endpoint = f"ipc://{tmp_path}/last-word"
    pull.bind(endpoint)
    try:
        sender = subprocess.run([sys.executable, "-c", SENDER, endpoint, str(SIZE), how],
                                timeout=30, capture_output=True, text=True)
        assert sender.returncode == 0, sender.stderr
        return len(pull.recv()) if pull.poll(10_000) else 0
    finally:
        pull.close()
        ctx.term()


def test_the_last_message_reaches_its_peer_after_the_sender_exits(tmp_path) -> None:
    assert _received(tmp_path, "deliver") == SIZE
