"""Start-up of a run with everything in processes: from launching the command to the first step.

Every configuration runs the real ``mosaic experiment-start`` command in a subprocess, with every
environment and muscle in a process of its own (``placement: process``; a random agent's brain
learns nothing and stays in a thread):

* 1 agent: CartPole, one random agent (2 component processes: environment, muscle);
* 16 agents: PettingZoo's Knights Archers Zombies with 8 archers and 8 knights, one random agent
  per player (17 component processes: the environment, and a muscle per agent).

The command forks its component processes from its zygote
(:mod:`mosaic.runtime.processes.zygote_client`); ``--spawn`` adds each configuration with
``MOSAIC_ZYGOTE=0``, every component process a fresh interpreter, for comparison.

Each run takes a few steps only; what counts is the time from the launch of the command to its
first step, read from the timings file the command writes. These machines are shared and noisy,
so a reference is measured between the runs, under the same load: the wall time of a fresh
interpreter that imports what a run's command imports first (``python -c "import mosaic,
gymnasium"``). Compare the ratios, not the absolute figures.

It prints, per configuration, the median start-up over ``--repeat`` runs and its ratio to the
median reference.

Usage: python benchmarks/startup.py [--repeat 5] [--spawn]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import timed_run  # noqa: E402 (the repository root, first)
from mosaic.cli.processes import ZYGOTE_VARIABLE  # noqa: E402

ONE_AGENT = """\
uid: startup-1
seed: 1
episodes: 1
max_steps: 5
placement: process
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
store:
  record_steps: false
"""

MANY_AGENTS = """\
uid: startup-{count}
seed: 1
episodes: 1
max_steps: 5
placement: process
environments:
  - uid: kaz
    env: pettingzoo:butterfly.knights_archers_zombies_v11
    params:
      api: parallel
      num_archers: {archers}
      num_knights: {knights}
    policy_mapping:
{mapping}
agents:
{agents}
store:
  record_steps: false
"""

#: The reference: a fresh interpreter with the imports a run's command starts with.
REFERENCE = [sys.executable, "-c", "import mosaic, gymnasium"]


def many_agents(count: int) -> str:
    """An experiment with ``count`` random agents, one per player of one game (``count`` even).

    Half of the players are archers, half knights.
    """
    players = ([f"archer_{i}" for i in range(count // 2)]
               + [f"knight_{i}" for i in range(count - count // 2)])
    mapping = "\n".join(f"      {player}: {player}" for player in players)
    agents = "\n".join(f"  - uid: {player}\n    muscle: mosaic.agents:RandomMuscle"
                       for player in players)
    return MANY_AGENTS.format(count=count, archers=count // 2, knights=count - count // 2,
                              mapping=mapping, agents=agents)


def startup(folder: Path, name: str, experiment_text: str, *, spawn: bool = False) -> float:
    """Seconds from launching ``mosaic experiment-start`` to the run's first step; with
    ``spawn``, without a zygote."""
    if not spawn:
        return timed_run(folder, experiment_text, name)["startup_s"]
    os.environ[ZYGOTE_VARIABLE] = "0"
    try:
        return timed_run(folder, experiment_text, name)["startup_s"]
    finally:
        del os.environ[ZYGOTE_VARIABLE]


def reference() -> float:
    """Seconds a fresh interpreter takes to import mosaic and gymnasium and exit."""
    started = time.perf_counter()
    subprocess.run(REFERENCE, check=True, timeout=120)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs per configuration (median reported)")
    parser.add_argument("--agents", type=int, default=16,
                        help="agents of the many-agent configuration (half archers, half knights)")
    parser.add_argument("--spawn", action="store_true",
                        help="also each configuration without a zygote (MOSAIC_ZYGOTE=0)")
    args = parser.parse_args()

    configurations = [("1 agent", ONE_AGENT, False),
                      (f"{args.agents} agents", many_agents(args.agents), False)]
    if args.spawn:
        configurations += [(f"{name}, spawn", text, True) for name, text, _ in configurations]
    references: list[float] = []
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        folder = Path(tmp)
        samples: dict[str, list[float]] = {name: [] for name, _, _ in configurations}
        # Interleaved, so that every configuration and the reference see the same load.
        for _ in range(args.repeat):
            for name, text, spawn in configurations:
                samples[name].append(startup(folder, name.split(",")[0].replace(" ", "-"), text,
                                             spawn=spawn))
                references.append(reference())
        rows = [(name, statistics.median(samples[name])) for name, _, _ in configurations]
    baseline = statistics.median(references)

    print(f"reference ({' '.join(REFERENCE[1:])}): {baseline:.3f} s "
          f"(median of {len(references)})")
    print(f"{'configuration':<20}{'start -> first step':>21}{'x reference':>13}")
    for name, seconds in rows:
        print(f"{name:<20}{seconds:>20.3f}s{seconds / baseline:>13.2f}")


if __name__ == "__main__":
    main()
