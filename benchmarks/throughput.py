"""Steps per second of the full mosaic stack on CartPole, against an in-process Gymnasium loop.

Every configuration runs the real ``mosaic experiment-start`` command in a subprocess; the
in-process loop (gymnasium.make + action_space.sample, no mosaic) is measured in the same run,
because these machines are shared and noisy: compare the ratios, not the absolute figures.

For each configuration it prints:
* steps/s between the first and the last step, and the ratio to the in-process loop;
* start-up: from launching the command to the first step;
* shut-down: from the last step to the exit of the command.

With ``--scaling`` it then prints the scaling table: N environment processes whose step burns
1 ms of CPU against one (benchmarks/parallel_environments.py), and ``copies: N`` against
Gymnasium's ``SyncVectorEnv(N)`` (benchmarks/vector_environments.py).

Usage: python benchmarks/throughput.py [--episodes 1000] [--repeat 3] [--scaling]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium

CONFIGS = [
    # name, environment placement, agent placement, record every step
    ("processes, recording", "process", "process", True),
    ("processes, no recording", "process", "process", False),
    ("threads, recording", "thread", "thread", True),
    ("threads, no recording", "thread", "thread", False),
]

EXPERIMENT = """\
uid: throughput
seed: 1
episodes: {episodes}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    placement: {env_placement}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
    placement: {agent_placement}
store:
  record_steps: {record}
"""


def in_process(steps: int, env: gymnasium.Env | None = None) -> float:  # type: ignore[type-arg]
    """Steps/s of a plain Gymnasium loop with random actions (default: CartPole-v1); closes it."""
    env = env if env is not None else gymnasium.make("CartPole-v1")
    env.action_space.seed(1)
    env.reset(seed=1)
    started = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - started
    env.close()
    return steps / elapsed


def mosaic_command() -> list[str]:
    script = Path(sys.executable).with_name("mosaic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mosaic"]


def full_stack(folder: Path, episodes: int, env_placement: str, agent_placement: str,
               record: bool) -> dict[str, float]:
    return timed_run(folder, EXPERIMENT.format(episodes=episodes, env_placement=env_placement,
                                               agent_placement=agent_placement,
                                               record="true" if record else "false"))


def timed_run(folder: Path, text: str, name: str = "throughput") -> dict[str, float]:
    """Run the experiment ``text`` with the real command; its steps, steps/s between the first
    and the last step, start-up (launch to first step) and shut-down (last step to exit)."""
    experiment = folder / f"{name}.yml"
    experiment.write_text(text)
    store = folder / f"{name}-{time.monotonic_ns()}.sqlite"
    timings = folder / "timings.json"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(root), os.environ.get("PYTHONPATH")]))}
    launched = time.time()
    result = subprocess.run([*mosaic_command(), "experiment-start", str(experiment), "--store",
                             str(store), "--quiet", "--timings", str(timings)],
                            capture_output=True, text=True, timeout=900, cwd=root, env=env)
    exited = time.time()
    if result.returncode != 0:
        raise SystemExit(f"mosaic failed:\n{result.stderr}")
    marks = json.loads(timings.read_text())
    with sqlite3.connect(store) as connection:
        steps, episodes = connection.execute(
            "SELECT SUM(steps), SUM(episodes) FROM runs").fetchone()
    return {
        "steps": steps,
        "episodes": episodes,
        "steps_per_s": steps / (marks["last_step_at"] - marks["first_step_at"]),
        "startup_s": marks["first_step_at"] - launched,
        "shutdown_s": exited - marks["last_step_at"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000,
                        help="CartPole episodes per configuration")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per configuration (median reported)")
    parser.add_argument("--scaling", action="store_true",
                        help="also print the scaling table (parallel and vector environments)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mosaic-bench-") as tmp:
        folder = Path(tmp)
        rows = []
        baselines = []
        for name, env_placement, agent_placement, record in CONFIGS:
            samples = []
            for _ in range(args.repeat):
                samples.append(full_stack(folder, args.episodes, env_placement, agent_placement,
                                          record))
                # The baseline is measured between the runs, so both see the same machine load.
                baselines.append(in_process(samples[-1]["steps"]))
            rows.append((name, {key: statistics.median(s[key] for s in samples)
                                for key in samples[0]}))
        baseline = statistics.median(baselines)

    print(f"in-process Gymnasium loop: {baseline:,.0f} steps/s (median of {len(baselines)})")
    print(f"{'configuration':<26}{'steps/s':>10}{'x in-process':>14}"
          f"{'start-up':>11}{'shut-down':>11}")
    for name, row in rows:
        print(f"{name:<26}{row['steps_per_s']:>10,.0f}{row['steps_per_s'] / baseline:>14.4f}"
              f"{row['startup_s']:>10.2f}s{row['shutdown_s']:>10.2f}s")
    by_name = dict(rows)
    for placement in ("processes", "threads"):
        cost = 1 - (by_name[f"{placement}, recording"]["steps_per_s"]
                    / by_name[f"{placement}, no recording"]["steps_per_s"])
        print(f"cost of recording every step ({placement}): {cost:.1%} of throughput")
    if args.scaling:
        print_scaling(args.repeat)


def print_scaling(repeat: int) -> None:
    """The scaling table: environment processes and vector copies, each against its reference."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import parallel_environments, vector_environments

    counts = [1, 2, 4, 8]
    baseline, processes = parallel_environments.measure(counts, 20, 1.0, repeat)
    copies = vector_environments.measure([1, 4, 16], 3000, repeat)
    print(f"\nscaling on {os.cpu_count()} cores (median of {repeat})")
    print(f"{'configuration':<34}{'env-steps/s':>12}{'reference':>12}{'ratio':>8}")
    one, raw_one = processes[0][1], processes[0][2]
    for count, rate, raw in processes:
        print(f"{f'{count} env process(es), 1 ms/step':<34}{rate:>12,.0f}"
              f"{'x1 env':>12}{rate / one:>8.2f}  (raw pyzmq loop: {raw / raw_one:.2f})")
    print(f"{'(in-process loop, 1 ms/step)':<34}{baseline:>12,.0f}")
    for count, rate, raw, reference in copies:
        print(f"{f'copies: {count}, env in a process':<34}{rate:>12,.0f}{reference:>12,.0f}"
              f"{rate / reference:>8.2f}  (raw pyzmq loop: {raw:,.0f}, {raw / reference:.2f})")


if __name__ == "__main__":
    main()
