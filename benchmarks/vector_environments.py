"""Vector environments: env-steps/s of ``copies: N`` against Gymnasium's ``SyncVectorEnv(N)``.

The run has one CartPole entry with ``copies: N`` (its actor in a process of its own, the
random muscle in a thread by default), so one message carries the whole batch each way. The
reference is the in-process loop of ``gymnasium.make_vec(..., vectorization_mode="sync")``
with random actions, measured between the runs, because these machines are shared and noisy.

A second reference is the floor of any design that steps the copies in another process: the
same vector in a child process, stepped by a raw pyzmq + msgpack loop that makes one round trip
per batch (DEALER -> ROUTER over ipc, arrays as raw bytes, random actions drawn in the loop, no
validation, no records), the way ``benchmarks/step_cost.py`` measures the single step.

It prints, for each N, mosaic's env-steps/s, the raw loop's and the in-process vector loop's,
and mosaic's ratio to each.

Usage: python benchmarks/vector_environments.py [--copies 1 4 16] [--episodes 3000]
       [--repeat 3] [--muscle-placement thread] [--vector-mode sync]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.step_cost import _decode_array, _encode_array, _serve  # noqa: E402
from benchmarks.throughput import timed_run  # noqa: E402 (the repository root, first)

EXPERIMENT = """\
uid: vector
seed: 1
episodes: {episodes}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    copies: {copies}
    vector_mode: {vector_mode}
    placement: process
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
    placement: {muscle_placement}
store:
  record_steps: none
"""


def in_process_vector(copies: int, steps: int) -> float:
    """Env-steps/s of a plain loop over ``SyncVectorEnv(copies)`` of CartPole, random actions."""
    env = gymnasium.make_vec("CartPole-v1", num_envs=copies, vectorization_mode="sync")
    env.action_space.seed(1)
    env.reset(seed=1)
    batches = max(1, steps // copies)
    started = time.perf_counter()
    for _ in range(batches):
        env.step(env.action_space.sample())
    elapsed = time.perf_counter() - started
    env.close()
    return batches * copies / elapsed


def raw_vector_environment(endpoint: str, copies: int) -> None:
    """The raw loop's environment process: ``SyncVectorEnv(copies)`` of CartPole on request."""
    env = gymnasium.make_vec("CartPole-v1", num_envs=copies, vectorization_mode="sync")

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        if "seed" in request:
            observations, _ = env.reset(seed=request["seed"])
            return {"observations": _encode_array(observations)}
        observations, rewards, terminated, truncated, _ = env.step(
            _decode_array(request["actions"]))
        return {"observations": _encode_array(observations), "rewards": _encode_array(rewards),
                "terminated": _encode_array(terminated), "truncated": _encode_array(truncated)}

    _serve(endpoint, handle)
    env.close()


def raw_vector(copies: int, steps: int) -> float:
    """Env-steps/s of the raw pyzmq + msgpack loop over ``SyncVectorEnv(copies)`` in a child
    process: one round trip a batch, random actions drawn here."""
    import msgpack
    import zmq

    with tempfile.TemporaryDirectory(prefix="mosaic-raw-") as folder:
        endpoint = f"ipc://{folder}/environment"
        child = subprocess.Popen([sys.executable, __file__, "--raw-environment", endpoint,
                                  str(copies)])
        ctx = zmq.Context()
        ctx.linger = 0
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVTIMEO, 30_000)
        sock.connect(endpoint)

        def ask(request: Any) -> Any:
            sock.send(msgpack.packb(request))
            return msgpack.unpackb(sock.recv())

        space = gymnasium.vector.utils.batch_space(gymnasium.spaces.Discrete(2), copies)
        space.seed(1)
        try:
            reply = ask({"seed": 1})
            batches = max(1, steps // copies)
            started = time.perf_counter()
            for _ in range(batches):
                _decode_array(reply["observations"])
                reply = ask({"actions": _encode_array(space.sample())})
                _decode_array(reply["rewards"])
            elapsed = time.perf_counter() - started
            ask(None)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            sock.close()
            ctx.term()
    return batches * copies / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--episodes", type=int, default=3000,
                        help="episodes per run (over all copies)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per N (median)")
    parser.add_argument("--muscle-placement", choices=["thread", "process"], default="thread")
    parser.add_argument("--vector-mode", choices=["sync", "async"], default="sync")
    args = parser.parse_args()

    rows = measure(args.copies, args.episodes, args.repeat, args.vector_mode,
                   args.muscle_placement)
    print(f"CartPole, environment in a process ({args.vector_mode}), muscle in a "
          f"{args.muscle_placement}; median of {args.repeat}")
    print(f"{'copies':>6}{'mosaic env-steps/s':>20}{'raw loop':>10}{'SyncVectorEnv':>15}"
          f"{'mosaic/raw':>12}{'mosaic/Sync':>13}{'raw/Sync':>10}")
    for copies, ours, raw, theirs in rows:
        print(f"{copies:>6}{ours:>20,.0f}{raw:>10,.0f}{theirs:>15,.0f}{ours / raw:>12.2f}"
              f"{ours / theirs:>13.2f}{raw / theirs:>10.2f}")


def measure(counts: list[int], episodes: int, repeat: int, vector_mode: str = "sync",
            muscle_placement: str = "thread") -> list[tuple[int, float, float, float]]:
    """(copies, and the median env-steps/s of mosaic, the raw loop and SyncVectorEnv) per
    number of copies."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        for copies in counts:
            ours, raw, theirs = [], [], []
            for _ in range(repeat):
                marks = timed_run(Path(tmp), EXPERIMENT.format(
                    episodes=episodes, copies=copies, vector_mode=vector_mode,
                    muscle_placement=muscle_placement), f"vector-{copies}")
                ours.append(marks["steps_per_s"])
                # Between the runs, so that all see the same load.
                raw.append(raw_vector(copies, int(marks["steps"])))
                theirs.append(in_process_vector(copies, int(marks["steps"])))
            rows.append((copies, statistics.median(ours), statistics.median(raw),
                         statistics.median(theirs)))
    return rows

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--raw-environment":
        raw_vector_environment(sys.argv[2], int(sys.argv[3]))
    else:
        main()
