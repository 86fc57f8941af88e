"""Rollout workers (``rollouts: M``): env-steps/s and sampling CPU against references measured
in the same run, because these machines are shared and noisy: read the ratios.

Rows, each mosaic's figure against a reference, and the target:

1. ``copies: 16, rollouts: 1, seeding: once`` on CartPole, the worker in a process, random
   muscle: env-steps/s against Gymnasium's ``SyncVectorEnv(16)`` of CartPole stepped in this
   process with random actions, seeded once as well; >= 0.8x.
1b. The default ``seeding: episode`` (a seed per episode of each copy) against the same
   ``SyncVectorEnv(16)`` resetting each ended copy with a seed of its own.
2. ``rollouts: 2`` against ``rollouts: 1``, CartPole burning 1 ms of CPU a step
   (benchmarks/busy_env.py), one copy a worker, workers in processes: env-steps/s; >= 1.75x.
3a. ``copies: 8, rollouts: 1``, random muscle: CPU seconds per 100k env steps against RLlib's
   local SingleAgentEnvRunner with 8 envs, ``sample(random_actions=True)``; <= 0.8x.
3b. The same with PPO's muscle in ``mode: test`` (greedy, an untrained [64, 64] MLP) against the
   same runner's PPO RLModule ([64, 64]), ``sample(explore=False)``; <= 0.8x.

What each figure includes:

* mosaic's env-steps/s: the run's own steps over the time it stepped, both read from the
  store: from its ``running`` transition (the workers start stepping then) to its ``stopping``
  one (up to one collect, 50 ms, after the last step). Set-up and shut-down are left out, as
  the references' are, and shown beside: the run's time before ``running`` and after
  ``stopping`` (``runs.started_at`` and ``runs.ended_at``).
* mosaic's CPU: ``getrusage(RUSAGE_CHILDREN)`` around the whole ``mosaic experiment-start``
  command: interpreter start-up, imports, zygote, set-up, stepping, the store's writes
  (``record_steps: episodes``) and shut-down, in every process of the run. The same command
  with 8 episodes (one per copy) is run too, to show how much of it is fixed cost. A
  termination condition ends the run once it has taken 100,000 steps (a few more are taken
  before the workers stop; the figure is per 100k of the steps stored).
* RLlib's CPU: ``time.process_time()`` of a child process around the ``sample`` calls only
  (RLlib's import and set-up and one warm-up call left out), with 8 envs in one
  SingleAgentEnvRunner (``num_env_runners=0, num_envs_per_env_runner=8``, the new API stack),
  torch on one thread (as mosaic runs NumPy's BLAS on one thread).
* The SyncVectorEnv loop counts real env steps: the step that autoresets a copy (Gymnasium's
  next-step autoreset) is a reset, not a step, as it is not one in mosaic.
* mosaic steps its copies with its own vector, ``SyncCopies`` (Gymnasium's SyncVectorEnv with a
  leaner step and the same answers), and the reference is Gymnasium's SyncVectorEnv, as a
  plain loop would use it. Row 1's notes also give ``SyncCopies`` stepped the same way here,
  so that what mosaic's loop adds to its own vector shows beside the ratio.
* Row 2 also shows what the machine gives right now: the same environment stepped by a plain
  loop in one process, and in two at once (no mosaic, start-up left out).

Each measurement is repeated ``--repeat`` times (default 3), mosaic and its reference in turn so
that both see the same load, and the medians are compared. A mosaic command whose run does not
finish stops the benchmark with its error.

The peers (RLlib; the ``bench`` extra also brings Stable-Baselines3) are optional: without them
the script stops and says to ``pip install -e '.[bench]'``; ``--no-peers`` skips row 3 instead.

Usage: python benchmarks/rollouts.py [--repeat 3] [--quick] [--no-peers]
It measures the mosaic found first on the path: the repository this file is in (it is put first
on PYTHONPATH for the commands it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.throughput import mosaic_command  # noqa: E402 (the repository root, first)

#: The steps after which row 3's runs end (see :func:`within_100k`), ``--quick`` or not: fewer
#: would weigh the command's fixed cost more.
CPU_STEPS = 100_000

ROW1 = """\
uid: rollouts-speed
seed: 1
episodes: {episodes}
placement: process
store: {{record_steps: episodes}}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    copies: 16
    rollouts: 1
    seeding: {seeding}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""

ROW2 = """\
uid: rollouts-busy
seed: 1
episodes: {episodes}
placement: process
store: {{record_steps: episodes}}
environments:
  - uid: cartpole
    env: benchmarks.busy_env:BusyCartPole
    params: {{busy_ms: 1}}
    rollouts: {rollouts}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""

ROW3_HEAD = """\
uid: rollouts-cpu
seed: 1
episodes: {episodes}
mode: {mode}
placement: process
store: {{record_steps: episodes}}
{termination}environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    copies: 8
    rollouts: 1
"""

RANDOM_AGENT = """\
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""

PPO_AGENT = """\
agents:
  - uid: learner
    brain: mosaic.agents.learners:PPOBrain
    muscle: mosaic.agents.learners:PPOMuscle
    params: {hidden_sizes: [64, 64]}
"""


def within_100k(stats: Any) -> bool:
    """Termination condition of row 3: the run has taken 100,000 env steps."""
    return int(stats["steps"]) >= CPU_STEPS


# -- mosaic ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One mosaic command: the run's steps and times from its store, the command's CPU."""

    steps: int
    episodes: int
    wall_s: float  # runs.ended_at - runs.started_at
    before_running_s: float  # runs.started_at -> the 'running' transition
    after_stopping_s: float  # the 'stopping' transition -> runs.ended_at
    cpu_s: float  # RUSAGE_CHILDREN around the command
    digest: str

    @property
    def stepping_s(self) -> float:
        """From the 'running' transition to the 'stopping' one."""
        return self.wall_s - self.before_running_s - self.after_stopping_s

    @property
    def rate(self) -> float:
        return self.steps / self.stepping_s

    @property
    def cpu_per_100k(self) -> float:
        return self.cpu_s / self.steps * 100_000


def run_mosaic(folder: Path, name: str, text: str) -> Run:
    """Run the experiment ``text`` with the real command; SystemExit with its error if the run
    did not finish (a benchmark of a failing run measures nothing)."""
    experiment = folder / f"{name}.yml"
    experiment.write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(ROOT), os.environ.get("PYTHONPATH")]))}
    store = folder / f"{name}-{time.monotonic_ns()}.sqlite"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([*mosaic_command(), "experiment-start", str(experiment),
                             "--store", str(store), "--quiet"],
                            capture_output=True, text=True, timeout=900, cwd=folder, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if result.returncode != 0 or not store.exists():
        raise SystemExit(f"{name}: mosaic exited {result.returncode}:\n{result.stderr}")
    with sqlite3.connect(store) as connection:
        run_id, status, error, taken, episodes, started, ended, digest = connection.execute(
            "SELECT id, status, error, steps, episodes, started_at, ended_at, digest FROM runs"
        ).fetchone()
        times = dict(connection.execute(
            "SELECT to_state, at FROM transitions WHERE run_id = ?", (run_id,)).fetchall())
    if status != "finished":
        raise SystemExit(f"{name}: the run {status}: {error}")
    store.unlink()
    return Run(taken, episodes, ended - started, times["running"] - started,
               ended - times["stopping"], cpu, digest)


# -- references --------------------------------------------------------------------------------

def sync_vector(copies: int, steps: int, lean: bool = False,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """Env-steps/s of a plain loop over ``SyncVectorEnv(copies)`` of CartPole with random
    actions, until ``steps`` real env steps (an autoreset is not one). ``lean``: over mosaic's
    own vector instead, :class:`~mosaic.environments.sync_copies.SyncCopies`, resetting an
    ended copy inside the step as mosaic's copies seeded once do (Gymnasium's SAME_STEP
    autoreset, in which every step of every copy is a real one): what mosaic's loop adds to its
    vector (row 1's notes). ``clock``: wall time, or ``time.process_time`` for CPU time."""
    import gymnasium
    import numpy as np
    from gymnasium.vector import AutoresetMode

    if lean:
        from mosaic.environments.sync_copies import SyncCopies

        env = SyncCopies([lambda: gymnasium.make("CartPole-v1")] * copies,
                         autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        env = gymnasium.make_vec("CartPole-v1", num_envs=copies, vectorization_mode="sync")
    env.action_space.seed(1)
    env.reset(seed=1)
    resetting = np.zeros(copies, dtype=bool)
    taken = 0
    started = clock()
    while taken < steps:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        taken += copies - int(resetting.sum())
        if not lean:
            resetting = terminated | truncated
    elapsed = clock() - started
    env.close()
    return taken / elapsed


def sync_vector_reseeded(copies: int, steps: int) -> float:
    """As :func:`sync_vector`, but each copy whose episode ends is reset at once with a seed of
    its own, as mosaic resets the copies (a seed per episode of each copy, from a
    SeedSequence): the same environment work as mosaic's, without mosaic."""
    import gymnasium
    import numpy as np
    from gymnasium.vector import AutoresetMode

    env = gymnasium.make_vec("CartPole-v1", num_envs=copies, vectorization_mode="sync",
                             vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})

    def seed(copy: int, episode: int) -> int:
        state = np.random.SeedSequence(1, spawn_key=(copy, episode)).generate_state(1)
        return int(state[0])

    episodes = [0] * copies
    env.action_space.seed(1)
    env.reset(seed=[seed(copy, 0) for copy in range(copies)])
    taken = 0
    started = time.perf_counter()
    while taken < steps:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        taken += copies
        ended = terminated | truncated
        if ended.any():
            seeds = []
            for copy in range(copies):
                if ended[copy]:
                    episodes[copy] += 1
                seeds.append(seed(copy, episodes[copy]))
            env.reset(seed=seeds, options={"reset_mask": ended})
    elapsed = time.perf_counter() - started
    env.close()
    return taken / elapsed


def busy_loop(steps: int) -> None:
    """A plain loop of ``steps`` steps of BusyCartPole (1 ms) with random actions; prints the
    wall-clock times of its first and its last step as JSON."""
    from benchmarks.busy_env import BusyCartPole

    env = BusyCartPole(busy_ms=1.0)
    env.action_space.seed(1)
    env.reset(seed=1)
    first = time.time()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    print(json.dumps({"first": first, "last": time.time()}))


def plain_processes(count: int, steps: int) -> float:
    """Env-steps/s of ``count`` plain busy loops at once, ``steps`` in all, one per process
    (from the first step of any to the last of all; start-up left out)."""
    share = steps // count
    children = [subprocess.Popen([sys.executable, __file__, "--busy-loop", str(share)],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT)
                for _ in range(count)]
    marks = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise SystemExit(f"the plain busy loop failed ({child.returncode})")
        marks.append(json.loads(out))
    first = min(float(mark["first"]) for mark in marks)
    return share * count / (max(float(mark["last"]) for mark in marks) - first)


PEERS_MISSING = ("row 3 compares mosaic with RLlib, which is not installed here ({error}).\n"
                 "Install the benchmark peers with:  pip install -e '.[bench]'  (in the "
                 "repository root),\nor run with --no-peers to skip row 3.")


def rllib_child(steps: int) -> None:
    """In a child process: RLlib's local SingleAgentEnvRunner with 8 CartPole envs; print the
    steps, CPU and wall seconds of ``sample`` with random actions and with the greedy module."""
    import torch

    torch.set_num_threads(1)
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    # RLlib's annotations are partial (untyped calls): its config and runner are Any here.
    new_config: Any = PPOConfig
    config = (new_config()
              .environment("CartPole-v1")
              .env_runners(num_env_runners=0, num_envs_per_env_runner=8)
              .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))
              .debugging(seed=1))
    runner: Any = SingleAgentEnvRunner(config=config)
    out = {}
    for name, options in (("random", {"random_actions": True}), ("greedy", {"explore": False})):
        runner.sample(num_timesteps=800, **options)  # warm-up, not measured
        cpu, wall = time.process_time(), time.perf_counter()
        episodes = runner.sample(num_timesteps=steps, **options)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        out[name] = {"steps": sum(len(episode) for episode in episodes), "cpu_s": cpu,
                     "wall_s": wall}
    runner.stop()
    print(json.dumps(out))


def _child_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def peers_versions() -> str:
    """The peers' versions (RLlib importable), or SystemExit saying how to install them."""
    check = ("import ray, torch, gymnasium\n"
             "import ray.rllib.env.single_agent_env_runner\n"
             "from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig\n"
             "print(f'ray {ray.__version__} (RLlib), torch {torch.__version__}, "
             "gymnasium {gymnasium.__version__} in the RLlib process')")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            timeout=300, env=_child_env())
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise SystemExit(PEERS_MISSING.format(error=lines[-1] if lines else "no error shown"))
    return result.stdout.strip()


def rllib(steps: int) -> dict[str, dict[str, float]]:
    """RLlib's sampling, measured in a child process (see :func:`rllib_child`)."""
    result = subprocess.run([sys.executable, __file__, "--rllib", str(steps)],
                            capture_output=True, text=True, timeout=900, env=_child_env())
    if result.returncode != 0:
        raise SystemExit(f"RLlib's sampling failed ({result.returncode}):\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# -- the rows ----------------------------------------------------------------------------------

def median(values: list[float]) -> float:
    return statistics.median(values)


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3,
                        help="measurements of each figure (median reported)")
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, smaller runs in rows 1 and 2, fewer RLlib steps: "
                        "a smoke test, rough figures")
    parser.add_argument("--no-peers", action="store_true",
                        help="skip row 3, which needs RLlib (pip install -e '.[bench]')")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    row1_episodes = 2000 if args.quick else 6000  # about 45k / 135k steps
    row2_episodes = 60 if args.quick else 160  # about 1.3k / 3.5k steps of 1 ms
    rllib_steps = 20_000 if args.quick else 50_000
    started = time.monotonic()

    import mosaic

    print(f"rollout workers against references measured in this run; median of {repeat}"
          f"{' (--quick)' if args.quick else ''}")
    print(f"mosaic from {Path(mosaic.__file__).parent}; {os.cpu_count()} CPUs; "
          f"load average {load()} (1, 5, 15 min) at the start")
    peers = None if args.no_peers else peers_versions()
    if peers:
        print(f"peers: {peers}")
    print(flush=True)

    row1: dict[str, list[float]] = {"mosaic": [], "wall": [], "before": [], "after": [],
                                    "sync": [], "lean": [], "per_episode": [], "reseeded": []}
    row2: dict[str, list[float]] = {"one": [], "two": [], "plain_one": [], "plain_two": []}
    row3: dict[str, list[float]] = {"random": [], "ppo": [], "fixed": [], "rllib_random": [],
                                    "rllib_greedy": [], "random_rate": [], "ppo_rate": [],
                                    "rllib_random_rate": [], "rllib_greedy_rate": []}
    with tempfile.TemporaryDirectory(prefix="mosaic-bench-rollouts-") as tmp:
        folder = Path(tmp)
        for index in range(repeat):
            print(f"repeat {index + 1} of {repeat} (load {load()})", flush=True)
            # Row 1: mosaic, then the in-process loop for as many steps.
            run = run_mosaic(folder, "row1", ROW1.format(episodes=row1_episodes,
                                                         seeding="once"))
            row1["mosaic"].append(run.rate)
            row1["wall"].append(run.wall_s)
            row1["before"].append(run.before_running_s)
            row1["after"].append(run.after_stopping_s)
            row1["sync"].append(sync_vector(16, run.steps))
            row1["lean"].append(sync_vector(16, run.steps, lean=True))
            per_episode = run_mosaic(folder, "row1b", ROW1.format(episodes=row1_episodes,
                                                                  seeding="episode"))
            row1["per_episode"].append(per_episode.rate)
            row1["reseeded"].append(sync_vector_reseeded(16, per_episode.steps))
            print(f"  1: mosaic {run.rate:,.0f} env-steps/s, SyncVectorEnv(16) "
                  f"{row1['sync'][-1]:,.0f}; seeded per episode: mosaic "
                  f"{per_episode.rate:,.0f}, SyncVectorEnv(16) {row1['reseeded'][-1]:,.0f}",
                  flush=True)
            # Row 2: one worker and the plain loop in one process; two workers and the plain
            # loop in two processes.
            one = run_mosaic(folder, "row2-one", ROW2.format(episodes=row2_episodes, rollouts=1))
            row2["one"].append(one.rate)
            row2["plain_one"].append(plain_processes(1, one.steps))
            two = run_mosaic(folder, "row2-two", ROW2.format(episodes=row2_episodes, rollouts=2))
            row2["two"].append(two.rate)
            row2["plain_two"].append(plain_processes(2, two.steps))
            print(f"  2: mosaic {two.rate:,.0f} / {one.rate:,.0f} env-steps/s = "
                  f"{two.rate / one.rate:.2f}x; plain processes "
                  f"{row2['plain_two'][-1] / row2['plain_one'][-1]:.2f}x", flush=True)
            # Row 3: CPU per 100k env steps.
            if args.no_peers:
                continue
            termination = "termination: {condition: 'benchmarks.rollouts:within_100k'}\n"
            random_run = run_mosaic(folder, "row3-random", ROW3_HEAD.format(
                episodes=10_000_000, mode="train", termination=termination) + RANDOM_AGENT)
            ppo_run = run_mosaic(folder, "row3-ppo", ROW3_HEAD.format(
                episodes=10_000_000, mode="test", termination=termination) + PPO_AGENT)
            fixed_run = run_mosaic(folder, "row3-fixed", ROW3_HEAD.format(
                episodes=8, mode="train", termination="") + RANDOM_AGENT)
            peer = rllib(rllib_steps)
            row3["random"].append(random_run.cpu_per_100k)
            row3["ppo"].append(ppo_run.cpu_per_100k)
            row3["fixed"].append(fixed_run.cpu_s)
            row3["random_rate"].append(random_run.rate)
            row3["ppo_rate"].append(ppo_run.rate)
            for name in ("random", "greedy"):
                row3[f"rllib_{name}"].append(peer[name]["cpu_s"] / peer[name]["steps"] * 1e5)
                row3[f"rllib_{name}_rate"].append(peer[name]["steps"] / peer[name]["wall_s"])
            print(f"  3: CPU s per 100k: mosaic random {row3['random'][-1]:.2f} (fixed "
                  f"{fixed_run.cpu_s:.2f} s), RLlib random {row3['rllib_random'][-1]:.2f}; "
                  f"mosaic PPO {row3['ppo'][-1]:.2f}, RLlib greedy {row3['rllib_greedy'][-1]:.2f}",
                  flush=True)

    m1 = {key: median(values) for key, values in row1.items()}
    m2 = {key: median(values) for key, values in row2.items()}
    m3 = {key: median(values) for key, values in row3.items() if values}
    rows: list[tuple[str, str, str, str, float, str, bool | None]] = []
    ratio1 = m1["mosaic"] / m1["sync"]
    rows.append(("1", "env-steps/s, copies: 16, rollouts: 1, seeded once, vs SyncVectorEnv(16)",
                 f"{m1['mosaic']:,.0f}", f"{m1['sync']:,.0f}", ratio1, ">= 0.80x",
                 ratio1 >= 0.8))
    reseeded = m1["per_episode"] / m1["reseeded"]
    rows.append(("1b", "  seeded per episode (the default) vs SyncVectorEnv(16) reseeding",
                 f"{m1['per_episode']:,.0f}", f"{m1['reseeded']:,.0f}", reseeded, "-", None))
    ratio2 = m2["two"] / m2["one"]
    rows.append(("2", "env-steps/s, rollouts: 2 vs rollouts: 1 (1 ms/step)",
                 f"{m2['two']:,.0f}", f"{m2['one']:,.0f}", ratio2, ">= 1.75x", ratio2 >= 1.75))
    if m3:
        ratio3a = m3["random"] / m3["rllib_random"]
        rows.append(("3a", "CPU s/100k steps, copies: 8, random vs RLlib random",
                     f"{m3['random']:.2f}", f"{m3['rllib_random']:.2f}", ratio3a, "<= 0.80x",
                     ratio3a <= 0.8))
        ratio3b = m3["ppo"] / m3["rllib_greedy"]
        rows.append(("3b", "CPU s/100k steps, copies: 8, PPO greedy vs RLlib greedy",
                     f"{m3['ppo']:.2f}", f"{m3['rllib_greedy']:.2f}", ratio3b, "<= 0.80x",
                     ratio3b <= 0.8))

    print(f"\n{'row':<4}{'figure':<60}{'mosaic':>10}{'reference':>11}{'ratio':>8}"
          f"{'target':>10}  result")
    for row, figure, ours, theirs, ratio, target, met in rows:
        result = "" if met is None else "met" if met else "MISSED"
        print(f"{row:<4}{figure:<60}{ours:>10}{theirs:>11}{ratio:>7.2f}x{target:>10}  {result}")
    if not m3:
        print("3   skipped (--no-peers)")

    print(f"\n1: mosaic env-steps/s from the store: runs.steps over the time from the run's "
          f"'running' transition to its 'stopping' one\n"
          f"   (set-up and shut-down left out: {m1['before']:.2f} s before 'running', "
          f"{m1['after']:.2f} s after 'stopping' of a {m1['wall']:.2f} s run), with "
          f"seeding: once. SyncVectorEnv(16):\n   real env steps (autoresets not counted) in "
          f"this process, random actions, seeded once, as many steps as the run took, right "
          f"after it.\n   mosaic steps its copies with SyncCopies, SyncVectorEnv with a leaner "
          f"step and the same answers: stepped the same way here\n   it makes "
          f"{m1['lean']:,.0f} env-steps/s ({m1['lean'] / m1['sync']:.2f}x SyncVectorEnv(16); "
          f"mosaic's run {m1['mosaic'] / m1['lean']:.2f}x of it).\n   1b: mosaic's default "
          f"seeding: episode, against the same vector whose copies are reset when their "
          f"episode ends\n   with a seed each (a SeedSequence), as mosaic's are: a seed per "
          f"episode costs both about as much.")
    print(f"2: env-steps/s from the store, as in 1. The machine now: the same environment in "
          f"a plain loop in 1 process {m2['plain_one']:,.0f}, in 2 at once\n"
          f"   {m2['plain_two']:,.0f} env-steps/s, {m2['plain_two'] / m2['plain_one']:.2f}x "
          f"(what the free CPUs allow; each right after the mosaic run of as many workers): "
          f"mosaic\n   reaches {m2['one'] / m2['plain_one']:.2f}x of the plain loop with one "
          f"worker, {m2['two'] / m2['plain_two']:.2f}x of the two plain processes with two.")
    if m3:
        print(f"3: mosaic: CPU of the whole `mosaic experiment-start` command "
              f"(RUSAGE_CHILDREN: start-up, imports, zygote, set-up, stepping, store writes of "
              f"record_steps: episodes,\n   shut-down; every process), per 100k of the "
              f"{CPU_STEPS:,}+ steps it stored; of which fixed: {m3['fixed']:.2f} CPU s for the "
              f"same command with 8 episodes.\n"
              f"   RLlib: process CPU time around SingleAgentEnvRunner.sample(num_timesteps="
              f"{rllib_steps:,}) only (its import, set-up and a warm-up call left out), torch "
              f"on 1 thread.\n"
              f"   Wall-clock env-steps/s: mosaic random {m3['random_rate']:,.0f}, PPO "
              f"{m3['ppo_rate']:,.0f} (the store, as in 1); RLlib random "
              f"{m3['rllib_random_rate']:,.0f}, greedy {m3['rllib_greedy_rate']:,.0f} "
              f"(around sample).")
    print(f"\nload average {load()} (1, 5, 15 min) at the end; "
          f"{time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rllib":
        rllib_child(int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--busy-loop":
        busy_loop(int(sys.argv[2]))
    else:
        main()
