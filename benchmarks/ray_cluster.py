"""mosaic on a two-node Ray cluster on this machine (tests/e2e/ray_cluster.py: a head and a second
node, one CPU each), against the same work without Ray, measured in the same run.

1. **Runs on the cluster.** ``--runs`` runs of CartPole whose every step burns 1 ms of CPU
   (busy_env.BusyCartPole), with ``--ray`` (one run per node at a time), against ``--jobs 2``
   on this machine. Reports both wall times, their ratio (target: 1.3 at most) and the
   scheduling overhead per run (the extra wall time of the cluster, per run).
2. **An environment on the second node.** One run of CartPole-v1 with the environment in a Ray
   actor on the second node (``placement: ray``; tcp with CURVE), against the environment in a
   process of its own on ipc; the digests must be equal; reports the steps/s of each and the
   ratio.
4. **Rollout workers on the cluster.** One run of the 1 ms-per-step CartPole with ``rollouts:
   1, 2, 4, 8`` (one copy each), the workers as Ray actors (``placement: ray``, placed where
   Ray puts them); reports each one's env-steps/s while it stepped (from its ``running`` to its
   ``stopping`` transition) and the speed-up over one worker, and checks that the same number
   of workers in threads of the command gives the same digest.
3. **A node killed mid-run.** Two runs on the cluster, one per node; the second node's raylet is
   SIGKILLed while both step; reports the seconds from the kill until the run there is recorded
   as failed (target: 5 s at most), its error, and that the other run finished. The same with
   the runs in the command and the environment of one of them on the second node.

Usage: python benchmarks/ray_cluster.py [--runs 8] [--episodes 60] [--trials 1] [--parts 1234]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from tests.e2e import ray_cluster  # noqa: E402

BUSY = """\
uid: busy
seed: 3
runs: {runs}
episodes: {episodes}
environments:
  - uid: cartpole
    env: busy_env:BusyCartPole
    params: {{busy_ms: 1.0}}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""
REMOTE_ENV = """\
uid: remote-env
seed: 4
runs: 1
episodes: {episodes}
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    placement: {placement}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
executor:
  ray: {{runs: false, component_cpus: 0, component_resources: {{{second}: 0.01}}}}
"""
ROLLOUTS = """\
uid: rollouts
seed: 6
episodes: {episodes}
store: {{record_steps: episodes}}
environments:
  - uid: cartpole
    env: busy_env:BusyCartPole
    params: {{busy_ms: 1.0}}
    placement: {placement}
    rollouts: {rollouts}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
executor:
  ray: {{runs: false, component_cpus: 0}}
"""
KILL = """\
uid: kill
seed: 5
runs: {runs}
episodes: 400
environments:
  - uid: cartpole
    env: busy_env:BusyCartPole
    params: {{busy_ms: 1.0}}
    placement: thread
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
executor:
  ray: {{runs: {on_ray}, component_cpus: 0, component_resources: {{{second}: 0.01}}}}
{sweep}
"""


def mosaic(cluster: ray_cluster.Cluster, folder: Path, text: str, *args: str,
           timeout: float = 900) -> tuple[float, Path, dict[str, float]]:
    """Run ``mosaic experiment-start`` on ``text``; its wall time, store and timings."""
    experiment = folder / f"e{time.monotonic_ns()}.yml"
    experiment.write_text(text)
    store, timings = experiment.with_suffix(".sqlite"), experiment.with_suffix(".json")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mosaic", "experiment-start", str(experiment),
                           "--store", str(store), "--quiet", "--timings", str(timings), *args],
                          cwd=HERE, env=cluster.env, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"mosaic failed ({done.returncode}): {done.stderr[-3000:]}")
    return wall, store, json.loads(timings.read_text())


def rows(store: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows of ``sql`` in ``store``; none while it does not exist or has no tables yet."""
    if not store.exists():
        return []
    try:
        with sqlite3.connect(store) as connection:
            return connection.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []


def started(store: Path, count: int) -> bool:
    """Whether ``count`` runs have recorded an episode."""
    found = rows(store, "SELECT COUNT(DISTINCT run_id) FROM episodes")
    return bool(found) and int(str(found[0][0])) >= count


def runs_on_the_cluster(cluster: ray_cluster.Cluster, folder: Path, runs: int,
                        episodes: int) -> dict[str, float]:
    text = BUSY.format(runs=runs, episodes=episodes)
    local, local_store, _ = mosaic(cluster, folder, text, "--jobs", "2")
    remote, remote_store, _ = mosaic(cluster, folder, text, "--ray", cluster.address)
    digests = [rows(s, "SELECT digest FROM runs ORDER BY run_index")
               for s in (local_store, remote_store)]
    if digests[0] != digests[1]:
        raise SystemExit("the runs on the cluster took other trajectories than the local ones")
    steps = rows(remote_store, "SELECT SUM(steps) FROM runs")[0][0]
    return {"local_s": local, "cluster_s": remote, "ratio": remote / local,
            "overhead_per_run_s": (remote - local) / runs, "steps": float(steps or 0)}


def remote_environment(cluster: ray_cluster.Cluster, folder: Path,
                       episodes: int) -> dict[str, float]:
    rates, digests = {}, {}
    for placement in ("process", "ray"):
        text = REMOTE_ENV.format(episodes=episodes, placement=placement,
                                 second=ray_cluster.SECOND_NODE)
        _, store, timings = mosaic(cluster, folder, text)
        steps = rows(store, "SELECT steps FROM runs")[0][0]
        rates[placement] = float(steps) / (timings["last_step_at"] - timings["first_step_at"])
        digests[placement] = rows(store, "SELECT digest FROM runs")[0][0]
    if digests["process"] != digests["ray"]:
        raise SystemExit("the environment on the second node took another trajectory")
    return {"ipc_steps_per_s": rates["process"], "ray_steps_per_s": rates["ray"],
            "ratio": rates["ray"] / rates["process"]}


def rollouts_on_the_cluster(cluster: ray_cluster.Cluster, folder: Path,
                            episodes: int) -> list[dict[str, float]]:
    """Env-steps/s of 1, 2, 4 and 8 rollout workers on the cluster, while they stepped."""
    measured = []
    for workers in (1, 2, 4, 8):
        digests = []
        rate = 0.0
        for placement in ("ray", "thread"):
            _, store, _ = mosaic(cluster, folder, ROLLOUTS.format(
                episodes=episodes * workers, placement=placement, rollouts=workers))
            (steps, digest), = rows(store, "SELECT steps, digest FROM runs")
            digests.append(digest)
            if placement == "ray":
                at = dict(rows(store, "SELECT to_state, at FROM transitions"))
                rate = float(steps) / (float(at["stopping"]) - float(at["running"]))
        if digests[0] != digests[1]:
            raise SystemExit(f"{workers} workers on the cluster took other trajectories")
        measured.append({"workers": float(workers), "rate": rate})
    return measured


def killed_node(folder: Path, *, on_ray: bool) -> dict[str, object]:
    """A fresh cluster; two runs; the second node's raylet killed while both step."""
    cluster = ray_cluster.start((str(HERE),))
    try:
        sweep = "" if on_ray else "sweep:\n  grid:\n    environments.0.placement: [thread, ray]"
        experiment = folder / f"kill{time.monotonic_ns()}.yml"
        experiment.write_text(KILL.format(runs=2 if on_ray else 1, on_ray=str(on_ray).lower(),
                                          second=ray_cluster.SECOND_NODE, sweep=sweep))
        store = experiment.with_suffix(".sqlite")
        args = ["--ray", cluster.address] if on_ray else ["--jobs", "2"]
        proc = subprocess.Popen([sys.executable, "-m", "mosaic", "experiment-start",
                                 str(experiment), "--store", str(store), "--quiet", *args],
                                cwd=HERE, env=cluster.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while not started(store, 2):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the runs did not start")
                time.sleep(0.3)
            killed_at = time.time()
            os.kill(cluster.second_raylet_pid(), signal.SIGKILL)
            proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        ended = rows(store, "SELECT status, ended_at, error FROM runs ORDER BY run_index")
        failed = [(at, error) for status, at, error in ended if status == "failed"]
        after = round(float(str(failed[0][0])) - killed_at, 2) if failed else None
        return {"failed_after_s": after, "error": failed[0][1] if failed else None,
                "statuses": [status for status, _, _ in ended]}
    finally:
        ray_cluster.stop(cluster)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--parts", default="1234", help="which of the four to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mosaic-ray-bench-") as tmp:
        folder = Path(tmp)
        if "1" in args.parts or "2" in args.parts or "4" in args.parts:
            cluster = ray_cluster.start((str(HERE),))
            try:
                trials = [runs_on_the_cluster(cluster, folder, args.runs, args.episodes)
                          for _ in range(args.trials) if "1" in args.parts]
                remote = [remote_environment(cluster, folder, args.episodes * 3)
                          for _ in range(args.trials) if "2" in args.parts]
                rollouts = (rollouts_on_the_cluster(cluster, folder, args.episodes)
                            if "4" in args.parts else [])
            finally:
                ray_cluster.stop(cluster)
            if trials:
                print(f"1. {args.runs} runs of a 1 ms-per-step CartPole "
                      f"({trials[0]['steps']:.0f} steps):")
            for trial in trials:
                print(f"   --jobs 2 here {trial['local_s']:.1f} s, two-node cluster "
                      f"{trial['cluster_s']:.1f} s: ratio {trial['ratio']:.2f} (target <= 1.3), "
                      f"overhead {trial['overhead_per_run_s']:.2f} s per run")
            if trials:
                print(f"   median ratio {statistics.median(t['ratio'] for t in trials):.2f}")
            if remote:
                print("2. one run, the environment on the second node (tcp, CURVE) vs in a "
                      "process (ipc):")
            for trial in remote:
                print(f"   ipc {trial['ipc_steps_per_s']:.0f} steps/s, second node "
                      f"{trial['ray_steps_per_s']:.0f} steps/s: ratio {trial['ratio']:.2f}, "
                      "same digest")
            if rollouts:
                one = rollouts[0]["rate"]
                print("4. rollout workers on the two-node cluster (1 CPU per node), 1 ms a step:")
                for measured in rollouts:
                    print(f"   {measured['workers']:.0f} worker(s): {measured['rate']:,.0f} "
                          f"env-steps/s, {measured['rate'] / one:.2f}x one worker; the digest "
                          "of as many workers in threads")
        if "3" not in args.parts:
            return
        for on_ray, what in ((True, "runs on the cluster, one per node"),
                             (False, "runs in the command, one environment on the second node")):
            outcome = killed_node(folder, on_ray=on_ray)
            print(f"3. the second node killed mid-run ({what}): failed after "
                  f"{outcome['failed_after_s']} s (target <= 5 s); runs: {outcome['statuses']}\n"
                  f"   error: {outcome['error']}")


if __name__ == "__main__":
    main()
