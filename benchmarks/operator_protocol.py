"""Operator worker protocol throughput against an in-process loop, measured in the same run.

Prints steps per second of:
  * an in-process CartPole-v1 loop with random actions (the baseline);
  * the random worker driven over the JSON-lines protocol (OperatorProcessHandle.step);
and their ratio (medians of interleaved repeats, since a shared machine is noisy), plus the ping
round trip, the time from launch to the first reply, the size of one 600x400 RGB frame as a
PNG render payload versus as nested JSON lists (and the time each takes to make), and what
reading a reply costs with the handle's matching in either dialect (``ReplyRouter``) against
validating the line alone.

    python benchmarks/operator_protocol.py [--steps 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit

import gymnasium as gym
import numpy as np

from mosaic.operators.api.config import OperatorConfig
from mosaic.operators.driver._routing import ReplyRouter
from mosaic.operators.driver.launcher import OperatorLauncher
from mosaic.operators.protocol import decode_object, encode_line, parse_response, rgb_payload


def in_process(steps: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.action_space.seed(0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def over_protocol(steps: int, repeats: int = 1) -> tuple[list[float], float, list[float]]:
    config = OperatorConfig.single_agent("bench", "random", "random_worker", "Random",
                                         "gymnasium", "CartPole-v1")
    launched = time.perf_counter()
    rates = []
    with OperatorLauncher().launch(config) as handle:
        handle.ping(timeout=30)
        first_reply = time.perf_counter() - launched
        pings = [handle.ping(timeout=5) for _ in range(500)]
        for _ in range(repeats):
            handle.reset(0)
            start = time.perf_counter()
            for _ in range(steps):
                _, end = handle.step(timeout=5)
                if end is not None:
                    handle.reset(None)
            rates.append(steps / (time.perf_counter() - start))
    return rates, first_reply, pings


def frame_costs() -> tuple[int, int, float, float]:
    """One CartPole-like 600x400 frame: its bytes as nested JSON lists and as a PNG payload
    line, and the seconds each takes to make (best of 5)."""
    frame = np.full((400, 600, 3), 255, np.uint8)
    frame[300:310, :] = 0
    frame[250:300, 270:330] = (200, 0, 0)
    frame[100:250, 295:305] = (202, 152, 101)

    def lists() -> bytes:
        return json.dumps({"mode": "rgb", "rgb": frame.tolist()}).encode()

    def png() -> bytes:
        return encode_line(rgb_payload(frame))

    lists_s = min(timeit.repeat(lists, number=5, repeat=5)) / 5
    png_s = min(timeit.repeat(png, number=20, repeat=5)) / 20
    return len(lists()), len(png()), lists_s, png_s


def reply_reading() -> tuple[float, float]:
    """Seconds per ``step`` reply: validated alone, and registered plus routed by the handle."""
    line = encode_line({"type": "step", "step_index": 3, "action": 1, "reward": 1.0,
                        "terminated": False, "truncated": False, "episode_reward": 4.0, "id": 7})
    router = ReplyRouter()

    def routed() -> None:
        router.sent(7, {"cmd": "step"})
        router.route(decode_object(line))

    def validated() -> None:
        parse_response(line)

    runs = 20_000
    alone = min(timeit.repeat(validated, number=runs, repeat=5)) / runs
    matched = min(timeit.repeat(routed, number=runs, repeat=5)) / runs
    return alone, matched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    baselines, remotes = [], []
    first_reply, pings = 0.0, []
    for _ in range(args.repeats):  # interleaved, so both see the same machine load
        baselines.append(in_process(args.steps))
        rates, first_reply, pings = over_protocol(args.steps, 1)
        remotes.extend(rates)
    baseline, remote = statistics.median(baselines), statistics.median(remotes)
    lists, png, lists_s, png_s = frame_costs()
    print(f"in-process CartPole loop     {baseline:12,.0f} steps/s  "
          f"(runs: {', '.join(f'{b:,.0f}' for b in baselines)})")
    print(f"random worker over protocol  {remote:12,.0f} steps/s  "
          f"(runs: {', '.join(f'{r:,.0f}' for r in remotes)})")
    print(f"ratio (in-process / worker)  {baseline / remote:12.1f}x")
    print(f"ping round trip              median {statistics.median(pings) * 1e6:.0f} us, "
          f"p99 {np.percentile(pings, 99) * 1e6:.0f} us")
    print(f"launch to first reply        {first_reply:.2f} s")
    print(f"600x400 RGB frame            {lists:,} bytes as JSON lists, {png:,} bytes as PNG "
          f"payload ({lists / png:.0f}x smaller); {png_s * 1e3:.2f} ms to encode as PNG "
          f"(Pillow), {lists_s * 1e3:.1f} ms as lists ({lists_s / png_s:.0f}x)")
    alone, matched = reply_reading()
    print(f"reading one step reply       {matched * 1e6:.1f} us matched and validated, "
          f"{alone * 1e6:.1f} us validated alone ({matched / alone:.2f}x); the matching is "
          f"{(matched - alone) * remote:.1%} of a step over the protocol")
    return 0


if __name__ == "__main__":
    sys.exit(main())
