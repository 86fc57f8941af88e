"""Environments stepped in parallel: steps/s of a run with N environment processes vs one.

Each environment is CartPole whose step burns ``--busy-ms`` of CPU (benchmarks/busy_env.py), in
a process of its own; one random agent acts in all of them (one muscle per environment, in
threads). The controller sends every environment its request before it waits for any reply, so
N environment processes can use N cores. Measured in the same run, because these machines are
shared and noisy:

* the in-process loop: the same environment stepped by a plain Python loop (one core);
* mosaic with 1, 2, 4 (``--counts``) environment processes;
* a raw pyzmq + msgpack loop with as many environment processes, the floor of this design:
  every request out before any reply is awaited, the replies taken in order, a random action
  drawn for each in the loop's own thread and sent at once (DEALER -> ROUTER over ipc, arrays as
  raw bytes; no validation, no records, as in ``benchmarks/step_cost.py``).

It prints total env-steps/s for each count, the ratio to one environment (ideal: N on N free
cores; at most the number of cores), the raw loop's own ratio, and the ratio to the
in-process loop.

Usage: python benchmarks/parallel_environments.py [--busy-ms 1] [--episodes 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.busy_env import BusyCartPole  # noqa: E402 (the repository root, first)
from benchmarks.step_cost import _decode_array, serve_environment  # noqa: E402
from benchmarks.throughput import in_process, timed_run  # noqa: E402

ENVIRONMENT = """\
  - uid: env{index}
    env: benchmarks.busy_env:BusyCartPole
    params: {{busy_ms: {busy_ms}}}
    placement: process
"""

EXPERIMENT = """\
uid: parallel
seed: 1
episodes: {episodes}
environments:
{environments}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
store:
  record_steps: false
"""


def run(folder: Path, count: int, episodes: int, busy_ms: float) -> tuple[int, float]:
    """(steps, env-steps/s between the first and the last step) of one run."""
    environments = "".join(ENVIRONMENT.format(index=i, busy_ms=busy_ms) for i in range(count))
    marks = timed_run(folder, EXPERIMENT.format(episodes=episodes,
                                                environments=environments.rstrip("\n")),
                      f"parallel-{count}")
    return int(marks["steps"]), marks["steps_per_s"]


def raw_busy_environment(endpoint: str, busy_ms: float) -> None:
    """The raw loop's environment process: one BusyCartPole, reset and step on request."""
    serve_environment(endpoint, BusyCartPole(busy_ms=busy_ms))


def raw_parallel(count: int, steps: int, busy_ms: float) -> float:
    """Env-steps/s of the raw pyzmq + msgpack loop over ``count`` environment processes."""
    import gymnasium
    import msgpack
    import zmq

    with tempfile.TemporaryDirectory(prefix="mosaic-raw-") as folder:
        endpoints = [f"ipc://{folder}/env{index}" for index in range(count)]
        children = [subprocess.Popen([sys.executable, __file__, "--raw-environment", endpoint,
                                      str(busy_ms)]) for endpoint in endpoints]
        ctx = zmq.Context()
        ctx.linger = 0
        sockets = []
        for endpoint in endpoints:
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.RCVTIMEO, 30_000)
            sock.connect(endpoint)
            sockets.append(sock)
        space = gymnasium.spaces.Discrete(2, seed=1)
        episodes = [0] * count

        def next_request(index: int, reply: dict[str, Any]) -> bytes:
            if reply.get("terminated") or reply.get("truncated"):
                episodes[index] += 1
                return msgpack.packb({"seed": episodes[index]})
            _decode_array(reply["observation"])
            return msgpack.packb({"action": int(space.sample())})

        try:
            # The first resets wait for the processes to start: not timed.
            for sock in sockets:
                sock.send(msgpack.packb({"seed": 0}))
            for index, sock in enumerate(sockets):
                sock.send(next_request(index, msgpack.unpackb(sock.recv())))
            rounds = max(1, steps // count)
            started = time.perf_counter()
            for _ in range(rounds):
                for index, sock in enumerate(sockets):
                    sock.send(next_request(index, msgpack.unpackb(sock.recv())))
            elapsed = time.perf_counter() - started
            for sock in sockets:
                sock.recv()
                sock.send(msgpack.packb(None))
                sock.recv()
            for child in children:
                child.wait(30)
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            for sock in sockets:
                sock.close()
            ctx.term()
    return rounds * count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy-ms", type=float, default=1.0,
                        help="CPU time each environment step burns")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per environment")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4],
                        help="numbers of environment processes to compare")
    parser.add_argument("--repeat", type=int, default=3, help="runs per count (median)")
    args = parser.parse_args()

    baseline, rows = measure(args.counts, args.episodes, args.busy_ms, args.repeat)
    print(f"cores: {os.cpu_count()}; each step burns {args.busy_ms:g} ms of CPU")
    print(f"in-process loop, one environment: {baseline:,.0f} env-steps/s "
          f"(median of {args.repeat * len(args.counts)})")
    first = f"x {args.counts[0]} env"
    print(f"{'environment processes':<24}{'env-steps/s':>12}{first:>10}{'raw loop':>10}"
          f"{f'raw {first}':>14}{'x raw':>7}{'x in-process':>14}")
    one, raw_one = rows[0][1], rows[0][2]
    for count, rate, raw in rows:
        print(f"{count:<24}{rate:>12,.0f}{rate / one:>10.2f}{raw:>10,.0f}{raw / raw_one:>14.2f}"
              f"{rate / raw:>7.2f}{rate / baseline:>14.2f}")


def measure(counts: list[int], episodes: int, busy_ms: float,
            repeat: int) -> tuple[float, list[tuple[int, float, float]]]:
    """The in-process loop's env-steps/s, and (count, mosaic's and the raw loop's median
    env-steps/s) per count."""
    rates: dict[int, list[float]] = {count: [] for count in counts}
    raw: dict[int, list[float]] = {count: [] for count in counts}
    baselines: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        for _ in range(repeat):
            for count in counts:
                steps, rate = run(Path(tmp), count, episodes, busy_ms)
                rates[count].append(rate)
                # Between the runs, so that all see the same load.
                raw[count].append(raw_parallel(count, steps, busy_ms))
                baselines.append(in_process(min(steps, 2000), BusyCartPole(busy_ms=busy_ms)))
    return (statistics.median(baselines),
            [(count, statistics.median(rates[count]), statistics.median(raw[count]))
             for count in counts])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--raw-environment":
        raw_busy_environment(sys.argv[2], float(sys.argv[3]))
    else:
        main()
