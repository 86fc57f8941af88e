"""Environments stepped in parallel: steps/s of a run with N environment processes vs one.

Each environment is CartPole whose step burns ``--busy-ms`` of CPU (benchmarks/busy_env.py), in
a process of its own; one random agent acts in all of them (one muscle per environment, in
threads). The controller sends every environment its request before it waits for any reply, so
N environment processes can use N cores. Measured in the same run, because these machines are
shared and noisy:

* the in-process loop: the same environment stepped by a plain Python loop (one core);
* mosaic with 1, 2, 4 (``--counts``) environment processes.

It prints total env-steps/s for each count, the ratio to one environment (ideal: N on N free
cores; at most the number of cores), and the ratio to the in-process loop.

Usage: python benchmarks/parallel_environments.py [--busy-ms 1] [--episodes 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.busy_env import BusyCartPole  # noqa: E402 (the repository root, first)
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
    print(f"{'environment processes':<24}{'env-steps/s':>12}{f'x {args.counts[0]} env':>10}"
          f"{'x in-process':>14}")
    one = rows[0][1]
    for count, rate in rows:
        print(f"{count:<24}{rate:>12,.0f}{rate / one:>10.2f}{rate / baseline:>14.2f}")


def measure(counts: list[int], episodes: int, busy_ms: float,
            repeat: int) -> tuple[float, list[tuple[int, float]]]:
    """The in-process loop's env-steps/s, and (count, median env-steps/s) per count."""
    rates: dict[int, list[float]] = {count: [] for count in counts}
    baselines: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        for _ in range(repeat):
            for count in counts:
                steps, rate = run(Path(tmp), count, episodes, busy_ms)
                rates[count].append(rate)
                # Between the runs, so that both see the same load.
                baselines.append(in_process(min(steps, 2000), BusyCartPole(busy_ms=busy_ms)))
    return (statistics.median(baselines),
            [(count, statistics.median(rates[count])) for count in counts])

if __name__ == "__main__":
    main()
