"""Many agents per step: agent-steps/s of a PettingZoo parallel environment with N agents run by
``mosaic experiment-start``, against the same environment stepped by a plain loop in this
process, measured in the same run (these machines are shared and noisy: read the ratios).

The environment is :class:`benchmarks.many_agents_env.Crowd`: N agents, each with a Box(4)
observation and a Discrete(2) action, every agent acting in every step, episodes of 100 steps;
its own work per step is one NumPy update of all agents' states. mosaic runs it with
everything in threads (``placement: thread``), one ``RandomMuscle`` agent entry taking every
env agent (the policy mapping of a file with one agent), and episode rows only
(``record_steps: episodes``). The target: >= 0.5x the plain loop's agent-steps/s, and about
the same ratio from 2 to 128 agents.

What each figure includes:

* mosaic's agent-steps/s: the run's env steps times N over the time it stepped, both read
  from the store: from its ``running`` transition to its ``stopping`` one (the step loop's
  whole work: the environment, the muscle's draws, the digest, the messages, the episode
  rows). Set-up and shut-down are left out, as the plain loop's are.
* The plain loop's agent-steps/s: as many env steps of the same environment, here, each with
  a dict of one ``action_space.sample()`` per live agent (each agent's space seeded, as the
  muscle's are), and a reset with a seed of its own when the episode ends (as mosaic resets
  each episode), timed from its first step to its last (making the environment is left out).

For each N, mosaic and the plain loop take turns ``--repeat`` times (default 3), so that both
see the same load, and the medians are compared. A run that does not finish stops the
benchmark with its error.

Usage: python benchmarks/many_agents.py [--repeat 3] [--quick] [--agents 2 8 32 128]
It measures the mosaic found first on the path: the repository this file is in (it is put first
on PYTHONPATH for the command it runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.many_agents_env import EPISODE_STEPS, Crowd  # noqa: E402 (the root, first)
from benchmarks.rollouts import Run, load  # noqa: E402
from benchmarks.rollouts import run_mosaic as run_experiment  # noqa: E402

EXPERIMENT = """\
uid: many-agents
seed: 1
episodes: {episodes}
placement: thread
store: {{record_steps: episodes}}
environments:
  - uid: crowd
    env: benchmarks.many_agents_env:Crowd
    params: {{agents: {agents}}}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""

#: Agent-steps each mosaic run takes (rounded to whole episodes, at least 20 of them).
AGENT_STEPS = 600_000
QUICK_AGENT_STEPS = 150_000


def run_mosaic(folder: Path, agents: int, episodes: int) -> Run:
    """Run the experiment with the real command (see :func:`benchmarks.rollouts.run_mosaic`)."""
    return run_experiment(folder, f"crowd-{agents}",
                          EXPERIMENT.format(episodes=episodes, agents=agents))


def plain_loop(agents: int, steps: int) -> float:
    """Agent-steps/s of ``steps`` env steps of Crowd(agents) in a plain loop (see the module)."""
    import gymnasium

    env = Crowd(agents)
    spaces: dict[str, gymnasium.spaces.Space[Any]] = {}
    for index, agent in enumerate(env.possible_agents):
        spaces[agent] = gymnasium.spaces.Discrete(2)
        spaces[agent].seed(index)
    episode = 0
    env.reset(seed=episode)
    taken = 0
    started = time.perf_counter()
    while taken < steps:
        env.step({agent: spaces[agent].sample() for agent in env.agents})
        taken += 1
        if not env.agents:
            episode += 1
            env.reset(seed=episode)
    return taken * agents / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3,
                        help="measurements of each figure (median reported)")
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, shorter runs: a smoke test, rough figures")
    parser.add_argument("--agents", type=int, nargs="+", default=[2, 8, 32, 128],
                        help="the numbers of agents to measure (default: 2 8 32 128)")
    args = parser.parse_args()
    if args.repeat < 1 or any(count < 1 for count in args.agents):
        parser.error("--repeat and --agents take positive numbers")
    repeat = 1 if args.quick else args.repeat
    budget = QUICK_AGENT_STEPS if args.quick else AGENT_STEPS
    started = time.monotonic()

    import mosaic

    print(f"many agents per step against a plain loop measured in this run; median of {repeat}"
          f"{' (--quick)' if args.quick else ''}")
    print(f"mosaic from {Path(mosaic.__file__).parent}; {os.cpu_count()} CPUs; "
          f"load average {load()} (1, 5, 15 min) at the start", flush=True)
    results: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-many-agents-") as tmp:
        folder = Path(tmp)
        for agents in args.agents:
            episodes = max(20, round(budget / agents / EPISODE_STEPS))
            ours: list[float] = []
            plain: list[float] = []
            for index in range(repeat):
                run = run_mosaic(folder, agents, episodes)
                ours.append(run.steps * agents / run.stepping_s)
                plain.append(plain_loop(agents, run.steps))
                print(f"  {agents} agents, repeat {index + 1} of {repeat}: mosaic "
                      f"{ours[-1]:,.0f}, plain loop {plain[-1]:,.0f} agent-steps/s "
                      f"({run.steps:,} env steps; digest {run.digest}; load {load()})",
                      flush=True)
            mosaic_rate, plain_rate = statistics.median(ours), statistics.median(plain)
            results.append((agents, mosaic_rate, plain_rate, mosaic_rate / plain_rate))

    print(f"\n{'agents':>6}{'mosaic agent-steps/s':>22}{'plain loop':>12}{'ratio':>8}"
          f"{'target':>10}  result")
    for agents, mosaic_rate, plain_rate, ratio in results:
        print(f"{agents:>6}{mosaic_rate:>22,.0f}{plain_rate:>12,.0f}{ratio:>7.2f}x"
              f"{'>= 0.50x':>10}  {'met' if ratio >= 0.5 else 'MISSED'}")
    ratios = [ratio for *_, ratio in results]
    print(f"\nflat: the ratios span {min(ratios):.2f}x-{max(ratios):.2f}x "
          f"(lowest / highest {min(ratios) / max(ratios):.2f})")
    print("mosaic: env steps x agents from the store, over its 'running' -> 'stopping' "
          "transitions (threads, RandomMuscle,\nrecord_steps: episodes); plain loop: the same "
          "env steps in this process, one action_space.sample() per agent.")
    print(f"\nload average {load()} (1, 5, 15 min) at the end; "
          f"{time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
