"""Do PPO, DQN, TD3 and SAC reach their learning targets through mosaic, and does MAPPO beat
IPPO? Each example file is run as ``mosaic experiment-start`` runs it (through
:func:`mosaic.run`), seed after seed.

Run: ``python benchmarks/learning_targets.py [--tasks ppo-cartpole dqn-cartpole ...]
[--seeds 0 1 2 3]``. For every task and seed it runs the task's example with its train phase
only, until the mean return of the last 20 training episodes (sampled actions, with the
exploration of training) reaches the target or the env-step budget is spent (a termination
``condition``; episodes of all copies count, and the episode that crosses the budget ends), and
prints per seed: whether the target was reached, the last-20 mean, the env steps and episodes
it took, and the wall time from the first step to the last. Then per task how many seeds met
it, against the issue's bar.

| task | example | target | budget | bar |
| --- | --- | --- | --- | --- |
| ppo-cartpole | cartpole_ppo.yml | 475 | 100k | 3 of 4 seeds; vs SB3's PPO |
| dqn-cartpole | cartpole_dqn.yml | 475 | 100k | 3 of 4 seeds |
| torch-ppo-cartpole | cartpole_torch_ppo.yml (torch extra) | 475 | 100k | 3 of 4; vs ppo-cartpole |
| ppo-acrobot | acrobot_ppo.yml | -100 | 200k | every seed run |
| ppo-pendulum | pendulum_ppo.yml | -400 | 500k | every seed run |
| td3-pendulum | pendulum_td3.yml | -200 | 24k | every seed run; vs SB3's TD3 |
| sac-pendulum | pendulum_sac.yml | -200 | 24k | every seed run; vs SB3's SAC |
| torch-td3-pendulum | pendulum_td3.yml, TorchTD3Brain | -200 | 24k | every seed; vs td3-pendulum |
| torch-sac-pendulum | pendulum_sac.yml, TorchSACBrain | -200 | 24k | every seed; vs sac-pendulum |
| td3-mountaincar | mountaincar_td3.yml | 90 | 100k | every seed run; vs SB3's TD3 |
| sac-mountaincar | mountaincar_sac.yml (gSDE) | 90 | 60k | every seed run; vs SB3's SAC (gSDE) |

(MountainCarContinuous-v0's target is the env's "solved" return, here reached by the training
episodes, which pay for the exploration noise's pushes: stricter than the greedy test phase.)

A comparison runs two examples on the same seeds for the same env steps (their train phases
only, as the files give them) and prints, per seed, the mean return of each one's last
:data:`COMPARED_EPISODES` training episodes (with its standard error, and that of their
difference) and over all of them, and the two learning curves' difference (the mean of the last
episodes ended by every 10k env steps, and at which of those points the first was higher on
every seed); its bar is the first above the second on the last episodes, for every seed run:

| task | examples | budget | bar |
| --- | --- | --- | --- |
| mappo-vs-ippo-spread | simple_spread_mappo.yml vs simple_spread_ippo.yml | 50k | all seeds |
| mappo-vs-ippo-pursuit | pursuit_mappo.yml vs pursuit_ippo.yml | 50k | all seeds |
| mappo-vs-ippo-spread-partial | simple_spread_partial_mappo.yml vs ..._ippo.yml | 50k | all seeds |

(simple_spread needs the mpe2 extra; its partial pair sees only each agent's nearest landmark and
nearest other agent; 50k env steps are 2000 episodes; pursuit's episodes end
early once every evader is caught, so its runs stop at the end of the episode that crosses 50k
env steps and take the same env steps to within one episode (100 at most); it needs the
pursuit extra. The issue asks for seeds 0-2: ``--tasks mappo-vs-ippo-spread
mappo-vs-ippo-pursuit --seeds 0 1 2``.)

A task with a peer also runs, per seed and right after mosaic's run, Stable-Baselines3's
learner (the ``bench`` extra) with the RL Baselines3 Zoo's hyperparameters for the task's
environment, to the same target measured the same way (its Monitor's episode returns), with a
budget of 20k env steps (TD3, SAC on Pendulum-v1) or 100k (PPO on 8 copies of CartPole-v1, its
learning rate and clip range decaying linearly over them; TD3 with Ornstein-Uhlenbeck noise on
MountainCarContinuous-v0, a third of the Zoo's 300k; 50k for SAC with gSDE there, the Zoo's
own), and torch on one thread (mosaic's
NumPy learners use one). It prints the peer's env steps, CPU seconds (its process's) and wall
seconds (its ``learn``) beside mosaic's, and the ratios of their sums over the seeds; the bar
then also needs, for TD3 and SAC (both tasks each), mosaic within 1.2x the peer's env steps and
under its CPU, and for PPO at most 0.5x its CPU and less wall time on every seed.
``--no-peers`` leaves the peers out. A peer runs in a child process of ``--peer-python``
(default: this Python), so that Stable-Baselines3 may live in another environment than
mosaic's (e.g. ``--peer-python /path/to/bench-venv/bin/python``).

A task with a reference runs, per seed and just before its own run, the reference task's
example (torch-ppo-cartpole: the NumPy PPO of ppo-cartpole; torch-td3-pendulum and
torch-sac-pendulum: the NumPy brains of the same example) and prints the ratio of the wall
times to the target, summed over the seeds (and of the CPU times, less noisy on a shared
machine); the bar then also needs the wall-time ratio at most
:data:`REFERENCE_WALL_BAR`.

Exits with 1 if a task misses its bar. Runs are CPU-bound (about 20-60 s each for CartPole on
a quiet machine, minutes for Pendulum); they run one at a time, so that the machine's other
work slows each alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the budget conditions below are named by import path

import mosaic  # noqa: E402

WINDOW = 20


def within_100k(stats: Any) -> bool:
    """Termination condition: the phase has taken 100,000 env steps."""
    return int(stats["steps"]) >= 100_000


def within_200k(stats: Any) -> bool:
    """Termination condition: the phase has taken 200,000 env steps."""
    return int(stats["steps"]) >= 200_000


def within_24k(stats: Any) -> bool:
    """Termination condition: the phase has taken 24,000 env steps (1.2x the peers' budget)."""
    return int(stats["steps"]) >= 24_000


def within_500k(stats: Any) -> bool:
    """Termination condition: the phase has taken 500,000 env steps."""
    return int(stats["steps"]) >= 500_000


def within_50k(stats: Any) -> bool:
    """Termination condition: the phase has taken 50,000 env steps."""
    return int(stats["steps"]) >= 50_000


def within_60k(stats: Any) -> bool:
    """Termination condition: the phase has taken 60,000 env steps (1.2x the peer's budget)."""
    return int(stats["steps"]) >= 60_000


@dataclass(frozen=True)
class Task:
    example: str
    target: float
    budget: str  # the name of a condition above
    needed: int | None  # seeds that must meet the target (None: all run)
    # A Stable-Baselines3 learner run alongside: "PPO", "SAC", "TD3", "TD3-MountainCar" or
    # "SAC-MountainCar"
    peer: str | None = None
    reference: str | None = None  # another task run alongside, whose wall time this one's is
    # compared to
    brain: str | None = None  # the brain the example's first agent uses instead of its own


TASKS = {
    "ppo-cartpole": Task("cartpole_ppo.yml", 475.0, "within_100k", 3, "PPO"),
    "dqn-cartpole": Task("cartpole_dqn.yml", 475.0, "within_100k", 3),
    "torch-ppo-cartpole": Task("cartpole_torch_ppo.yml", 475.0, "within_100k", 3,
                               reference="ppo-cartpole"),
    "ppo-acrobot": Task("acrobot_ppo.yml", -100.0, "within_200k", None),
    "ppo-pendulum": Task("pendulum_ppo.yml", -400.0, "within_500k", None),
    "td3-pendulum": Task("pendulum_td3.yml", -200.0, "within_24k", None, "TD3"),
    "sac-pendulum": Task("pendulum_sac.yml", -200.0, "within_24k", None, "SAC"),
    "torch-td3-pendulum": Task("pendulum_td3.yml", -200.0, "within_24k", None,
                               reference="td3-pendulum",
                               brain="mosaic.agents.learners.torch_actor_critic:TorchTD3Brain"),
    "torch-sac-pendulum": Task("pendulum_sac.yml", -200.0, "within_24k", None,
                               reference="sac-pendulum",
                               brain="mosaic.agents.learners.torch_actor_critic:TorchSACBrain"),
    "td3-mountaincar": Task("mountaincar_td3.yml", 90.0, "within_100k", None, "TD3-MountainCar"),
    "sac-mountaincar": Task("mountaincar_sac.yml", 90.0, "within_60k", None, "SAC-MountainCar"),
}


@dataclass(frozen=True)
class Comparison:
    """``example`` against ``baseline``, each trained for ``episodes`` episodes of fixed length
    (so the same env steps), or, with ``budget`` (a condition above), until the episode that
    crosses that many env steps ends (episodes that end early): the first must reach the higher
    mean return."""

    example: str
    baseline: str
    episodes: int
    budget: str | None = None


#: MAPPO's centralised critic against independent PPO on MPE2's simple_spread (25 steps an
#: episode): the same learner, params and env steps, the critic's input alone differs.
COMPARISONS = {
    "mappo-vs-ippo-spread": Comparison("simple_spread_mappo.yml", "simple_spread_ippo.yml", 2000),
    #: The same with each agent seeing only its nearest landmark and its nearest other agent
    #: (mpe2's num_landmark_neighbors and num_agent_neighbors: 1): the global state (the joint
    #: observation) then holds what an agent's own observation does not.
    "mappo-vs-ippo-spread-partial": Comparison("simple_spread_partial_mappo.yml",
                                               "simple_spread_partial_ippo.yml", 2000),
    #: The same on PettingZoo's SISL pursuit_v5 (the pursuit extra), made small: 4 pursuers
    #: catch 4 evaders on an 8 x 8 map, two on an evader's cell to catch it; an episode ends
    #: when all are caught or after 100 steps.
    "mappo-vs-ippo-pursuit": Comparison("pursuit_mappo.yml", "pursuit_ippo.yml", 10_000_000,
                                        "within_50k"),
}
#: The training episodes at the end whose mean return a comparison compares.
COMPARED_EPISODES = 100
#: A comparison also prints the learning curves side by side: the mean return of the last
#: COMPARED_EPISODES training episodes ended by each multiple of this many env steps.
CURVE_EVERY = 10_000


@dataclass(frozen=True)
class Compared:
    """One run of a comparison: the mean return of its last :data:`COMPARED_EPISODES`
    training episodes, its standard error, the mean over all of them, the env steps, wall and
    CPU seconds, and the curve (env steps -> the last-episodes mean by then)."""

    last: float
    error: float
    whole: float
    steps: int
    wall: float
    cpu: float
    curve: dict[int, float]


def run_compared(example: str, episodes: int, seed: int, folder: Path,
                 budget: str | None = None) -> Compared:
    """The figures of ``example``'s train phase of ``episodes`` (ended by the condition
    ``budget`` too, if given)."""
    start = cpu_seconds()
    train: dict[str, Any] = {"name": "train", "mode": "train", "episodes": episodes}
    if budget is not None:
        train["termination"] = {"condition": f"benchmarks.learning_targets:{budget}"}
    results = mosaic.run(REPO / "examples" / example, seed=seed, progress=False,
                         phases=[train], store={"path": str(folder / f"{seed}.sqlite"),
                                                "record_steps": "episodes"})
    run = results[0]
    if run.status != "finished":
        raise SystemExit(f"{example}, seed {seed}: the run {run.status}: {run.error}")
    frame = results.episodes()
    training = frame[~frame["evaluation"]]
    returns = training["total_return"].to_numpy()
    ended_by = training["run_steps"].to_numpy()
    last = returns[-COMPARED_EPISODES:]
    error = float(last.std(ddof=1) / last.shape[0] ** 0.5) if last.shape[0] > 1 else 0.0
    curve = {at: float(returns[ended_by <= at][-COMPARED_EPISODES:].mean())
             for at in range(CURVE_EVERY, int(ended_by[-1]) + 1, CURVE_EVERY)
             if (ended_by <= at).sum() >= COMPARED_EPISODES}
    return Compared(float(last.mean()), error, float(returns.mean()), run.steps,
                    run.wall_time, cpu_seconds() - start, curve)


def compare(name: str, seeds: list[int]) -> bool:
    """Run comparison ``name`` on ``seeds``, print its figures; whether it met its bar."""
    comparison = COMPARISONS[name]
    length = (f"{comparison.episodes} training episodes" if comparison.budget is None
              else comparison.budget.replace("_", " ") + " env steps")
    print(f"{name}: examples/{comparison.example} against examples/{comparison.baseline}, "
          f"{length} each; mean return of the last {COMPARED_EPISODES} training episodes "
          "(and of all)", flush=True)
    higher = 0
    ahead: dict[int, int] = {}  # env steps -> the seeds on which the example was higher by then
    for seed in seeds:
        runs = []
        for example in (comparison.example, comparison.baseline):
            with tempfile.TemporaryDirectory() as tmp:
                one = run_compared(example, comparison.episodes, seed, Path(tmp),
                                   comparison.budget)
            runs.append(one)
            print(f"  seed {seed}: {example:28s} last-{COMPARED_EPISODES} mean {one.last:7.2f} "
                  f"(+-{one.error:4.2f})  all {one.whole:7.2f}  {one.steps:6d} env steps  "
                  f"{one.wall:5.1f} s wall  {one.cpu:5.1f} s CPU", flush=True)
        first, second = runs
        higher += first.last > second.last
        # The standard error of the difference, to tell a gap from the episodes' noise.
        spread = (first.error ** 2 + second.error ** 2) ** 0.5
        print(f"  seed {seed}: {'higher' if first.last > second.last else 'NOT HIGHER'} "
              f"({first.last - second.last:+.2f}, standard error {spread:.2f})", flush=True)
        shared = sorted(set(first.curve) & set(second.curve))
        for at in shared:
            ahead[at] = ahead.get(at, 0) + (first.curve[at] > second.curve[at])
        print(f"  seed {seed}: the difference by " + ", ".join(
            f"{at // 1000}k {first.curve[at] - second.curve[at]:+.2f}" for at in shared)
            + " env steps", flush=True)
    ok = higher == len(seeds)
    print(f"  {comparison.example} higher on {higher} of {len(seeds)} seeds (needed: all): "
          f"{'ok' if ok else 'MISSED'}", flush=True)
    print("  higher on every seed by " + (", ".join(
        f"{at // 1000}k" for at, seeds_ahead in sorted(ahead.items())
        if seeds_ahead == len(seeds)) or "no point of the curve") + " env steps (the last "
        f"{COMPARED_EPISODES} training episodes by then)", flush=True)
    return ok


#: The peers' budgets, and how much more env steps mosaic may take than TD3 and SAC (a ratio
#: of sums over the seeds).
PEER_BUDGET = 20_000
PPO_PEER_BUDGET = 100_000
MOUNTAINCAR_PEER_BUDGET = 100_000
SAC_MOUNTAINCAR_PEER_BUDGET = 50_000
STEPS_RATIO = 1.2
#: The most of SB3's PPO's CPU time mosaic's PPO may take (a ratio of sums over the seeds).
PPO_CPU_RATIO = 0.5
#: The most of its reference's wall time to the target a task with a reference may take.
REFERENCE_WALL_BAR = 1.5


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (process placements)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_peer(algorithm: str, seed: int,
             target: float) -> tuple[bool, float, int, float, float]:
    """(reached, last-20 mean, env steps, CPU seconds, wall seconds) of Stable-Baselines3's
    ``algorithm`` with the RL Baselines3 Zoo's hyperparameters, stopped at ``target`` or its
    budget: PPO on 8 copies of CartPole-v1 (:data:`PPO_PEER_BUDGET`), TD3 and SAC on
    Pendulum-v1 (:data:`PEER_BUDGET`), ``TD3-MountainCar``: TD3 on MountainCarContinuous-v0
    (:data:`MOUNTAINCAR_PEER_BUDGET`), ``SAC-MountainCar``: SAC with gSDE there
    (:data:`SAC_MOUNTAINCAR_PEER_BUDGET`)."""
    import gymnasium
    import numpy as np
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    torch.set_num_threads(1)
    returns: list[float] = []

    class Stop(BaseCallback):  # type: ignore[misc]
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    returns.append(float(info["episode"]["r"]))
            return not (len(returns) >= WINDOW and np.mean(returns[-WINDOW:]) >= target)

    budget = PEER_BUDGET
    if algorithm == "PPO":  # rl-baselines3-zoo hyperparams/ppo.yml, CartPole-v1
        from stable_baselines3.common.env_util import make_vec_env

        budget = PPO_PEER_BUDGET
        model = stable_baselines3.PPO(
            "MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), n_steps=32,
            batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
            learning_rate=lambda remaining: remaining * 1e-3,
            clip_range=lambda remaining: remaining * 0.2, seed=seed, device="cpu")
    elif algorithm == "TD3-MountainCar":  # rl-baselines3-zoo hyperparams/td3.yml
        # MountainCarContinuous-v0: TD3's defaults (400x300 ReLU networks, 100 random steps,
        # batches of 256) with Ornstein-Uhlenbeck noise of sigma 0.5 (theta 0.15, dt 0.01).
        budget = MOUNTAINCAR_PEER_BUDGET
        model = stable_baselines3.TD3(
            "MlpPolicy", Monitor(gymnasium.make("MountainCarContinuous-v0")),
            action_noise=OrnsteinUhlenbeckActionNoise(np.zeros(1), 0.5 * np.ones(1)),
            seed=seed, device="cpu")
    elif algorithm == "SAC-MountainCar":  # rl-baselines3-zoo hyperparams/sac.yml
        # MountainCarContinuous-v0: gSDE (a new exploration matrix at each rollout of
        # train_freq steps), a fixed entropy coefficient, 64x64 ReLU networks.
        budget = SAC_MOUNTAINCAR_PEER_BUDGET
        model = stable_baselines3.SAC(
            "MlpPolicy", Monitor(gymnasium.make("MountainCarContinuous-v0")),
            learning_rate=3e-4, buffer_size=50_000, batch_size=512, ent_coef=0.1, train_freq=32,
            gradient_steps=32, gamma=0.9999, tau=0.01, learning_starts=0, use_sde=True,
            policy_kwargs={"log_std_init": -3.67, "net_arch": [64, 64]}, seed=seed,
            device="cpu")
    elif algorithm == "SAC":  # rl-baselines3-zoo hyperparams/sac.yml, Pendulum-v1
        model = stable_baselines3.SAC("MlpPolicy", Monitor(gymnasium.make("Pendulum-v1")),
                                      learning_rate=1e-3, seed=seed, device="cpu")
    else:  # rl-baselines3-zoo hyperparams/td3.yml, Pendulum-v1
        model = stable_baselines3.TD3(
            "MlpPolicy", Monitor(gymnasium.make("Pendulum-v1")), gamma=0.98,
            buffer_size=200_000, learning_starts=10_000,
            action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), gradient_steps=1,
            train_freq=1, learning_rate=1e-3, policy_kwargs={"net_arch": [400, 300]},
            seed=seed, device="cpu")
    start, started = cpu_seconds(), time.perf_counter()
    model.learn(total_timesteps=budget, callback=Stop())
    cpu, wall = cpu_seconds() - start, time.perf_counter() - started
    last = float(np.mean(returns[-WINDOW:]))
    return last >= target, last, int(model.num_timesteps), cpu, wall


def peer_in_child(python: str, algorithm: str, seed: int,
                  target: float) -> tuple[bool, float, int, float, float]:
    """:func:`run_peer` in a child process of ``python``."""
    done = subprocess.run([python, __file__, "--run-peer", algorithm, str(seed), str(target)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"SB3 {algorithm}, seed {seed} failed:\n{done.stderr[-2000:]}")
    reached, last, steps, cpu, wall = json.loads(done.stdout.strip().splitlines()[-1])
    return bool(reached), float(last), int(steps), float(cpu), float(wall)


def run_task(task: Task, seed: int,
             folder: Path) -> tuple[bool, float, int, int, float, float]:
    """(reached, last-20 mean, env steps, episodes, wall seconds, CPU seconds) of one seed's
    training."""
    start = cpu_seconds()
    train = {"name": "train", "mode": "train", "episodes": 10_000_000,
             "termination": {"reward_threshold": task.target, "window": WINDOW,
                             "condition": f"benchmarks.learning_targets:{task.budget}"}}
    brain: dict[str, Any] = {} if task.brain is None else {"agents.0.brain": task.brain}
    results = mosaic.run(REPO / "examples" / task.example, seed=seed, progress=False,
                         phases=[train], store={"path": str(folder / f"{seed}.sqlite"),
                                                "record_steps": "episodes"}, **brain)
    run = results[0]
    if run.status != "finished":
        raise SystemExit(f"{task.example}, seed {seed}: the run {run.status}: {run.error}")
    frame = results.episodes()
    returns = frame[~frame["evaluation"]]["total_return"].to_numpy()
    last = float(returns[-WINDOW:].mean())
    cpu = cpu_seconds() - start
    return last >= task.target, last, run.steps, run.episodes, run.wall_time, cpu


def peer_bar(peer: str, ours: list[tuple[int, float, float]],
             theirs: list[tuple[int, float, float]]) -> bool:
    """Print mosaic's (env steps, CPU, wall) per seed against the peer's, as ratios of sums;
    whether they meet the peer's bar."""
    steps_ratio = sum(s for s, _, _ in ours) / sum(s for s, _, _ in theirs)
    cpu_ratio = sum(c for _, c, _ in ours) / sum(c for _, c, _ in theirs)
    wall_ratio = sum(w for _, _, w in ours) / sum(w for _, _, w in theirs)
    if peer == "PPO":
        faster = sum(w < peer_wall for (_, _, w), (_, _, peer_wall) in zip(ours, theirs,
                                                                           strict=True))
        near = cpu_ratio <= PPO_CPU_RATIO and faster == len(ours)
        print(f"  against SB3's PPO: {cpu_ratio:.2f}x its CPU (bar {PPO_CPU_RATIO}x), "
              f"{wall_ratio:.2f}x its wall time, less on {faster} of {len(ours)} seeds (bar: "
              f"all), {steps_ratio:.2f}x its env steps: {'ok' if near else 'MISSED'}",
              flush=True)
        return near
    near = steps_ratio <= STEPS_RATIO and cpu_ratio < 1.0
    print(f"  against SB3's {peer}: {steps_ratio:.2f}x its env steps (bar {STEPS_RATIO}x), "
          f"{cpu_ratio:.2f}x its CPU (bar < 1), {wall_ratio:.2f}x its wall time: "
          f"{'ok' if near else 'MISSED'}", flush=True)
    return near


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted([*TASKS, *COMPARISONS]),
                        default=[*TASKS, *COMPARISONS])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--no-peers", action="store_true",
                        help="leave out the Stable-Baselines3 peers")
    parser.add_argument("--peer-python", default=sys.executable,
                        help="the Python that runs the peers (with the bench extra)")
    parser.add_argument("--run-peer", nargs=3, metavar=("ALGORITHM", "SEED", "TARGET"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_peer:
        algorithm, seed, target = args.run_peer
        print(json.dumps(run_peer(algorithm, int(seed), float(target))))
        return 0
    print(f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs",
          flush=True)
    missed = []
    for name in args.tasks:
        if name in COMPARISONS:
            if not compare(name, args.seeds):
                missed.append(name)
            continue
        task = TASKS[name]
        met = 0
        ours: list[tuple[int, float, float]] = []  # (env steps, CPU, wall) per seed
        theirs: list[tuple[int, float, float]] = []
        references: list[tuple[int, float, float]] = []  # the reference's, alike
        print(f"{name}: examples/{task.example}, target: last-{WINDOW} mean >= {task.target:g} "
              f"{task.budget.replace('_', ' ')} env steps", flush=True)
        for seed in args.seeds:
            if task.reference:
                reference = TASKS[task.reference]
                with tempfile.TemporaryDirectory() as tmp:
                    reached, last, steps, episodes, wall, cpu = run_task(reference, seed,
                                                                         Path(tmp))
                references.append((steps, cpu, wall))
                print(f"    {task.reference} (reference): {'reached' if reached else 'MISSED '}"
                      f"  last-{WINDOW} mean {last:8.1f}  {steps:7d} env steps  {wall:6.1f} s "
                      f"wall  {cpu:6.1f} s CPU", flush=True)
            with tempfile.TemporaryDirectory() as tmp:
                reached, last, steps, episodes, wall, cpu = run_task(task, seed, Path(tmp))
            met += reached
            ours.append((steps, cpu, wall))
            print(f"  seed {seed}: {'reached' if reached else 'MISSED '}  last-{WINDOW} mean "
                  f"{last:8.1f}  {steps:7d} env steps  {episodes:5d} episodes  {wall:6.1f} s "
                  f"wall ({steps / wall:.0f} steps/s)  {cpu:6.1f} s CPU", flush=True)
            if task.peer and not args.no_peers:
                reached, last, steps, cpu, wall = peer_in_child(args.peer_python, task.peer,
                                                                seed, task.target)
                theirs.append((steps, cpu, wall))
                print(f"    SB3 {task.peer}: {'reached' if reached else 'MISSED '}  last-"
                      f"{WINDOW} mean {last:8.1f}  {steps:7d} env steps  {wall:6.1f} s wall  "
                      f"{cpu:6.1f} s CPU", flush=True)
        needed = len(args.seeds) if task.needed is None else min(task.needed, len(args.seeds))
        ok = met >= needed
        print(f"  {met} of {len(args.seeds)} seeds met it (needed: {needed}): "
              f"{'ok' if ok else 'MISSED'}", flush=True)
        if theirs:
            near = peer_bar(task.peer or "", ours, theirs)
            ok = ok and near
        if references:
            steps_ratio, cpu_ratio, wall_ratio = (
                sum(run[i] for run in ours) / sum(run[i] for run in references)
                for i in range(3))
            near = wall_ratio <= REFERENCE_WALL_BAR
            ok = ok and near
            print(f"  against {task.reference}: {wall_ratio:.2f}x its wall time to the target "
                  f"(bar {REFERENCE_WALL_BAR}x; {cpu_ratio:.2f}x its CPU): "
                  f"{'ok' if near else 'MISSED'}; {steps_ratio:.2f}x its env steps, so "
                  f"{wall_ratio / steps_ratio:.2f}x its wall time per env step", flush=True)
        if not ok:
            missed.append(name)
    print("every target met" if not missed else f"TARGETS MISSED: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
