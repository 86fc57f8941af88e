"""What authenticated endpoints cost per round trip: the same sockets with and without it.

A server process answers a small request (an EnvironmentUpdateRequest, the step loop's most
frequent message, through mosaic's codec) over ipc and over tcp, in the same run, twice:

* **open**: ZeroMQ sockets with no security mechanism, as mosaic had before;
* **secured**: the same sockets made to demand and prove a run's credentials by
  :mod:`mosaic.transport.security`: PLAIN over ipc (checked once, at the handshake), CURVE
  over tcp (every message encrypted).

It prints µs per round trip and the ratio secured/open for each transport. A mosaic step costs
two round trips (environment, muscle) plus the work of both, so the ratio bounds the cost per
step from above. These machines are shared and noisy: compare the ratios.

Usage: python benchmarks/authentication.py [--round-trips 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import tempfile
import time
from typing import Any

import zmq

from mosaic.messages import EnvironmentUpdateRequest, EnvironmentUpdateResponse
from mosaic.messages.codec import decode_message, encode_message
from mosaic.transport import Credentials, context
from mosaic.transport.security import secure_client, secure_server

ANSWER = EnvironmentUpdateResponse({"agent_0": [0.1, 0.2, 0.3, 0.4]}, {"agent_0": 1.0}, False,
                                   False, ("agent_0",), {})
REQUEST = EnvironmentUpdateRequest({"agent_0": 1})


def serve(secured: bool, endpoint: str, credentials: bytes, ready: Any, count: int) -> None:
    sock = context().socket(zmq.ROUTER)
    if secured:
        secure_server(sock, endpoint, Credentials.from_bytes(credentials))
    sock.bind(endpoint)
    ready.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    for _ in range(count):
        peer, frame = sock.recv_multipart()
        correlation, _ = decode_message(frame)
        sock.send_multipart([peer, encode_message(ANSWER, correlation)])
    sock.close(linger=0)


def round_trip_us(secured: bool, transport: str, count: int) -> float:
    credentials = Credentials.fresh()
    folder = tempfile.mkdtemp(prefix="mosaic-bench-")
    endpoint = f"ipc://{folder}/s" if transport == "ipc" else "tcp://127.0.0.1:*"
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Queue()
    warmup = 200
    server = spawn.Process(target=serve, args=(secured, endpoint, credentials.to_bytes(), ready,
                                               count + warmup))
    server.start()
    try:
        bound = ready.get(timeout=30)
        sock = context().socket(zmq.DEALER)
        if secured:
            secure_client(sock, bound, credentials)
        sock.connect(bound)
        for index in range(warmup):
            sock.send(encode_message(REQUEST, index))
            decode_message(sock.recv())
        started = time.perf_counter()
        for index in range(count):
            sock.send(encode_message(REQUEST, index))
            decode_message(sock.recv())
        elapsed = time.perf_counter() - started
        sock.close(linger=0)
    finally:
        server.join(30)
        shutil.rmtree(folder, ignore_errors=True)
    return elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round-trips", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5, help="alternating pairs; median shown")
    args = parser.parse_args()
    print(f"{'transport':<10}{'open µs':>10}{'secured µs':>12}{'secured/open':>14}")
    for transport in ("ipc", "tcp"):
        plain, secured, ratios = [], [], []
        for _ in range(args.repeat):
            plain.append(round_trip_us(False, transport, args.round_trips))
            secured.append(round_trip_us(True, transport, args.round_trips))
            ratios.append(secured[-1] / plain[-1])
        print(f"{transport:<10}{statistics.median(plain):>10.1f}{statistics.median(secured):>12.1f}"
              f"{statistics.median(ratios):>14.3f}")


if __name__ == "__main__":
    main()
