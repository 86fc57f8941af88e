"""Why mosaic keeps its step loop on one CPU: a ZeroMQ round trip on one CPU vs across two.

Two threads ping-pong a small frame over ``inproc``, first pinned to the same CPU, then to two
different CPUs, in the same run. On the virtual machines mosaic is measured on, the cross-CPU
wake-up dominates the round trip (see :mod:`mosaic.core.affinity`).

Usage: python benchmarks/cross_cpu.py [--round-trips 20000]
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import zmq


def round_trip_us(server_cpu: int, client_cpu: int, count: int) -> float:
    """Mean µs of one request/reply between threads pinned to the given CPUs."""
    context = zmq.Context()
    context.linger = 0
    endpoint = f"inproc://cross-cpu-{server_cpu}-{client_cpu}"
    ready, done = threading.Event(), threading.Event()

    def serve() -> None:
        os.sched_setaffinity(0, {server_cpu})
        socket = context.socket(zmq.ROUTER)
        socket.setsockopt(zmq.RCVTIMEO, 100)
        socket.bind(endpoint)
        ready.set()
        while not done.is_set():
            try:
                socket.send_multipart(socket.recv_multipart())
            except zmq.Again:
                continue
        socket.close()

    server = threading.Thread(target=serve)
    server.start()
    ready.wait()
    os.sched_setaffinity(0, {client_cpu})
    client = context.socket(zmq.DEALER)
    client.connect(endpoint)
    frame = b"x" * 100
    for _ in range(count // 10):  # warm-up
        client.send(frame)
        client.recv()
    started = time.perf_counter()
    for _ in range(count):
        client.send(frame)
        client.recv()
    elapsed = time.perf_counter() - started
    done.set()
    server.join()
    client.close()
    context.term()
    return elapsed / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--round-trips", type=int, default=20000)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("needs at least two CPUs")
    original = set(cpus)
    try:
        same = round_trip_us(cpus[0], cpus[0], args.round_trips)
        across = round_trip_us(cpus[0], cpus[1], args.round_trips)
    finally:
        os.sched_setaffinity(0, original)
    print(f"round trip, both threads on CPU {cpus[0]}: {same:6.1f} us")
    print(f"round trip, CPUs {cpus[0]} and {cpus[1]}:       {across:6.1f} us")
    print(f"ratio across / same: {across / same:.2f}")


if __name__ == "__main__":
    main()
