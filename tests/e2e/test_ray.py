"""Runs and components on a real two-node Ray cluster on 127.0.0.1 (tests/e2e/ray_cluster.py):
runs spread over both nodes, a component placed on the second one with the same digest as in a
thread, a Ctrl-C that leaves no mosaic actor behind, and a node killed mid-run.

Without ray these tests fail (ClusterError says what to install); they never skip. Each runs as
on a researcher's machine with a Ray of their own set up (``~/.ray/auth_token``, ``RAY_ADDRESS``,
``RAY_AUTH_*``), which the test cluster must ignore.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import ray_cluster
from tests.e2e.cli import (
    REPO,
    assert_store_consistent,
    finish,
    mosaic_command,
    query,
    write_experiment,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

#: Two runs that last until they are interrupted (a sleep in every step), a NodeReportingCartPole
#: writing the node it runs on to ``nodes``.
EXPERIMENT = """\
uid: on-ray
seed: 5
runs: {runs}
episodes: {episodes}
environments:
  - uid: cartpole
    env: tests.fixtures.envs:NodeReportingCartPole
    params: {{log: {nodes}, sleep_s: {sleep_s}}}
    placement: {placement}
agents:
  - uid: random
    brain: mosaic.agents:NoOpBrain
    muscle: mosaic.agents:RandomMuscle
executor:
  max_failures: {max_failures}
  ray:
    runs: {runs_on_ray}
    cpus_per_component: {cpus}
    queue_timeout_s: {queue_timeout}
    component_cpus: 0
    component_resources: {{{second}: 0.01}}
store:
  path: {store}
{extra}
"""


def _experiment(folder: Path, *, runs: int = 2, episodes: int = 3, sleep_s: float = 0.0,
                placement: str = "thread", runs_on_ray: bool = True, cpus: float = 1.0,
                queue_timeout: float = 300.0, extra: str = "", max_failures: int = 0) -> Path:
    return write_experiment(folder, EXPERIMENT.format(
        runs=runs, episodes=episodes, nodes=folder / "nodes.log", sleep_s=sleep_s,
        placement=placement, runs_on_ray=str(runs_on_ray).lower(), cpus=cpus,
        queue_timeout=queue_timeout, max_failures=max_failures,
        second=ray_cluster.SECOND_NODE, store=folder / "results.sqlite", extra=extra))


@pytest.fixture(autouse=True)
def users_own_ray(tmp_path_factory: pytest.TempPathFactory,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's Ray, as Ray 2.60+ finds it: a token in ``~/.ray/auth_token``, which turns
    token authentication on for a node started with that ``HOME`` (the second node's
    ``ray start`` then failed with ``InvalidAuthToken``), and the address of another cluster."""
    home = tmp_path_factory.mktemp("users-home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("a-token-of-the-users-own-cluster-0123456789")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{ray_cluster.free_port()}")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[ray_cluster.Cluster]:
    started = ray_cluster.start()
    try:
        # This process too (a ray.init here) sees the cluster's environment, not the user's.
        for name in [name for name in os.environ if name.startswith("RAY_")]:
            monkeypatch.delenv(name)
        for name in ("HOME", "RAY_ADDRESS"):
            monkeypatch.setenv(name, started.env[name])
        yield started
    finally:
        ray_cluster.stop(started)
        assert not started.node_processes(), "a process of the test cluster outlived it"
        assert not started.home.exists(), "the test cluster's HOME outlived it"


def _start(cluster: ray_cluster.Cluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*mosaic_command(), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**cluster.env, "PYTHONUNBUFFERED": "1"})


def _nodes(folder: Path) -> list[str]:
    try:
        return (folder / "nodes.log").read_text().split()
    except OSError:
        return []


def _wait_for_runs(store: Path, proc: subprocess.Popen[str], count: int,
                   timeout: float = 120.0) -> None:
    """Wait until ``count`` runs have recorded an episode."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, finish(proc)
        assert time.monotonic() < deadline, "the runs did not start"
        try:
            if store.exists() and query(
                    store, "SELECT COUNT(DISTINCT run_id) FROM episodes")[0][0] >= count:
                return
        except sqlite3.Error:
            pass  # not created yet
        time.sleep(0.3)


def test_without_ray_the_command_names_the_extra_and_exits_2(tmp_path: Path) -> None:
    # As if ray were not installed: its import fails.
    hide = ("import sys; sys.modules['ray'] = None; from mosaic.cli import main; "
            "sys.argv[0] = 'mosaic'; main(sys.argv[1:])")
    thread_file = _experiment(tmp_path, runs_on_ray=False)
    for args in (["--ray", "auto"], []):
        path = thread_file if args else _experiment(tmp_path, placement="ray",
                                                    runs_on_ray=False)
        done = subprocess.run([sys.executable, "-c", hide, "experiment-start", str(path), *args],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "pip install 'mosaic[ray]'" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "results.sqlite").exists()


def test_a_cluster_that_does_not_answer_is_exit_2_at_once(tmp_path: Path) -> None:
    port = ray_cluster.free_port()  # nothing listens there
    path = _experiment(tmp_path)
    done = subprocess.run([*mosaic_command(), "experiment-start", str(path), "--ray",
                           f"127.0.0.1:{port}"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"no Ray cluster answers at '127.0.0.1:{port}'" in done.stderr
    assert not (tmp_path / "results.sqlite").exists()


def test_runs_spread_over_both_nodes_and_a_component_on_the_second_keeps_the_digest(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    # Point 0 has the environment in the run's thread, point 1 on the second node; both points
    # run with the same seed, so their trajectories must be the same step for step.
    path = _experiment(tmp_path, extra="sweep:\n  grid:\n    environments.0.placement: "
                                       "[thread, ray]\n", runs=1)
    proc = _start(cluster, "experiment-start", str(path), "--ray", cluster.address)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    store = tmp_path / "results.sqlite"
    rows = query(store, "SELECT run_index, status, digest, steps FROM runs ORDER BY run_index")
    assert [status for _, status, _, _ in rows] == ["finished", "finished"]
    assert rows[0][2] == rows[1][2] and rows[0][3] > 0
    assert_store_consistent(store)
    # Each node has one CPU and each run asks for one: one run per node.
    ran_on = {line.split("(")[-1].rstrip(")") for line in err.splitlines()
              if " finished: " in line and "on Ray node" in line}
    assert ran_on == {cluster.head_node[:12], cluster.second_node[:12]}, err
    # The environment of point 1 ran on the second node; the one of point 0 where its run did.
    assert cluster.second_node in _nodes(tmp_path)
    assert "run(s)" in out  # the summary, as for a local run


def test_ctrl_c_cancels_every_run_and_leaves_no_mosaic_actor(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    path = _experiment(tmp_path, episodes=100_000, sleep_s=0.002, placement="ray", cpus=0.5)
    proc = _start(cluster, "experiment-start", str(path), "--ray", cluster.address)
    try:
        _wait_for_runs(tmp_path / "results.sqlite", proc, 2)
        assert _mosaic_on_cluster(cluster)[0], "no mosaic actor while the runs step"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        finish(proc)
    assert proc.returncode == 130, err
    assert err.count(" cancelled: ") == 2, err
    statuses = query(tmp_path / "results.sqlite", "SELECT status FROM runs")
    assert statuses == [("cancelled",), ("cancelled",)]
    deadline = time.monotonic() + 30
    while any(_mosaic_on_cluster(cluster)):
        assert time.monotonic() < deadline, f"left on the cluster: {_mosaic_on_cluster(cluster)}"
        time.sleep(1.0)


def test_a_node_killed_mid_run_fails_that_run_naming_it_and_the_other_finishes(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    # The runs stay with the command (--jobs 2); the environment of point 1 is on the second
    # node, the one of point 0 in a thread.
    path = _experiment(tmp_path, runs=1, episodes=60, sleep_s=0.002, runs_on_ray=False,
                       extra="sweep:\n  grid:\n    environments.0.placement: [thread, ray]\n")
    proc = _start(cluster, "experiment-start", str(path), "--jobs", "2")
    try:
        _wait_for_runs(tmp_path / "results.sqlite", proc, 2)
        killed_at = time.time()
        os.kill(cluster.second_raylet_pid(), signal.SIGKILL)
        _, err = proc.communicate(timeout=180)
    finally:
        finish(proc)
    assert proc.returncode == 1, err
    rows = query(tmp_path / "results.sqlite",
                 "SELECT run_index, status, error, ended_at FROM runs ORDER BY run_index")
    assert rows[0][1] == "finished", rows
    _, status, error, ended_at = rows[1]
    assert status == "failed", rows
    assert "environment 'cartpole'" in error and cluster.second_node[:12] in error, error
    # The target is 5 s (benchmarks/ray_cluster.py measures it); a loaded machine gets slack.
    assert ended_at - killed_at < 15, (ended_at - killed_at, error)


def test_a_run_larger_than_every_node_is_exit_2_naming_what_it_asks_and_what_nodes_have(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    # Each node has 1 CPU; Ray would queue a 64-CPU task for ever, and say so only in
    # `ray status`.
    path = _experiment(tmp_path, cpus=64)
    began = time.monotonic()
    done = subprocess.run([*mosaic_command(), "experiment-start", str(path), "--ray",
                           cluster.address], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=cluster.env)
    took = time.monotonic() - began
    assert done.returncode == 2, done.stderr
    assert "a run asks 64 CPUs (64 per process it starts: the run only)" in done.stderr
    assert "the largest node has 1 CPU" in done.stderr
    assert "Traceback" not in done.stderr
    # 10 s for the check, the rest for the command's start and its joining the cluster on a
    # loaded 2-core machine (a wait on the queue would last until the timeout below).
    assert took < 40, took
    assert not (tmp_path / "results.sqlite").exists()
    assert _mosaic_on_cluster(cluster) == ([], [])


def test_a_run_that_waits_on_the_queue_past_its_timeout_fails_saying_why(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    # Three runs of 1 CPU on two 1-CPU nodes: one waits on the queue while two step (until the
    # Ctrl-C below).
    timeout = 10.0
    path = _experiment(tmp_path, runs=3, episodes=100_000, sleep_s=0.002,
                       queue_timeout=timeout)
    proc = _start(cluster, "experiment-start", str(path), "--ray", cluster.address, "-q")
    store = tmp_path / "results.sqlite"
    try:
        deadline = time.monotonic() + 120
        failed: list[tuple[str, float, float]] = []
        while not failed:
            assert proc.poll() is None, finish(proc)
            assert time.monotonic() < deadline, "no run failed on the queue"
            with contextlib.suppress(sqlite3.Error):  # not created yet
                failed = query(store, "SELECT error, started_at, ended_at FROM runs "
                                      "WHERE status = 'failed'")
            time.sleep(0.3)
        _wait_for_runs(store, proc, 2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        finish(proc)
    assert proc.returncode == 130, err
    [(error, started_at, ended_at)] = failed
    assert f"did not start on the Ray cluster within {timeout:.0f} s" in error, error
    assert "free for its task" in error and "ray status" in error, error
    assert timeout <= ended_at - started_at < timeout + 10, (started_at, ended_at)
    # While it waited, it said so, and what for.
    assert re.search(r"has waited \d+ s for a Ray node with 1 CPU free", err), err
    statuses = sorted(status for (status,) in query(store, "SELECT status FROM runs"))
    assert statuses == ["cancelled", "cancelled", "failed"], statuses


def test_jobs_1_runs_one_run_at_a_time_on_the_cluster(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    path = _experiment(tmp_path, runs=2, episodes=3)
    proc = _start(cluster, "experiment-start", str(path), "--ray", cluster.address,
                  "--jobs", "1", "-q")
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    rows = query(tmp_path / "results.sqlite",
                 "SELECT run_index, status, started_at, ended_at FROM runs ORDER BY started_at")
    assert [status for _, status, _, _ in rows] == ["finished", "finished"], rows
    (_, _, _, first_ended), (_, _, second_started, _) = rows
    assert first_ended <= second_started, rows


def _mosaic_on_cluster(cluster: ray_cluster.Cluster) -> tuple[list[str], list[str]]:
    """mosaic's named actors alive on the cluster (Ray's state, from the GCS), and the node
    processes busy with a mosaic task or actor (Ray titles a worker after what it runs)."""
    probe = (f"import json, ray; ray.init(address={cluster.address!r}, logging_level='ERROR'); "
             "print(json.dumps([a['name'] for a in ray.util.list_named_actors("
             "all_namespaces=True)]))")
    done = subprocess.run([sys.executable, "-c", probe], env=cluster.env, capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    actors = [name for name in json.loads(done.stdout.strip().splitlines()[-1])
              if name.startswith("mosaic-")]
    busy = []
    for pid in cluster.node_processes():
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if title.startswith(("ray::mosaic", "ray::MosaicComponent", "ray::run_on_node")):
            busy.append(title)
    return actors, busy


def test_a_sigkilled_command_resumes_its_runs_on_the_cluster(
        cluster: ray_cluster.Cluster, tmp_path: Path) -> None:
    """The command and its session SIGKILLed while both runs step on the cluster; the tasks
    it left lose their relay and end. --resume runs both again on the cluster, each in its own
    row, to the digests of an uninterrupted invocation."""
    (tmp_path / "whole").mkdir()
    whole = _experiment(tmp_path / "whole", episodes=30, sleep_s=0.005)
    done = _start(cluster, "experiment-start", str(whole), "-q")
    _, err = done.communicate(timeout=240)
    assert done.returncode == 0, err

    path = _experiment(tmp_path, episodes=30, sleep_s=0.005)
    store = tmp_path / "results.sqlite"
    proc = subprocess.Popen([*mosaic_command(), "experiment-start", str(path), "-q"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**cluster.env, "PYTHONUNBUFFERED": "1"})
    try:
        _wait_for_runs(store, proc, 2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    resumed = _start(cluster, "experiment-start", str(path), "--resume", "-q")
    _, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err
    runs = "SELECT run_index, status, steps, digest FROM runs ORDER BY run_index"
    assert query(store, runs) == query(tmp_path / "whole" / "results.sqlite", runs)
    assert query(store, "SELECT count(*) FROM steps") == query(store, "SELECT sum(steps) FROM runs")
    assert query(store, "SELECT count(*) FROM transitions WHERE to_state = 'resumed'") == [(2,)]


def test_a_run_whose_node_died_is_run_again_under_max_failures(
        cluster: ray_cluster.Cluster, tmp_path: Path) -> None:
    """Two runs on the cluster's two 1-CPU nodes; the second node killed under one of them.
    With max_failures: 1 that run is run again (it waits for the other to free the node that
    is left), in its own row: both finish, every step stored once."""
    path = _experiment(tmp_path, runs=2, episodes=40, sleep_s=0.005, max_failures=1)
    proc = _start(cluster, "experiment-start", str(path), "-q")
    try:
        _wait_for_runs(tmp_path / "results.sqlite", proc, 2)
        os.kill(cluster.second_raylet_pid(), signal.SIGKILL)
        _, err = proc.communicate(timeout=240)
    finally:
        finish(proc)
    assert proc.returncode == 0, err
    store = tmp_path / "results.sqlite"
    assert [status for (status,) in query(store, "SELECT status FROM runs")] == [
        "finished", "finished"]
    [(reason,)] = query(store, "SELECT reason FROM transitions WHERE to_state = 'resumed'")
    assert reason.startswith("attempt 2 of 2 after: ") and "Ray" in reason, reason
    assert query(store, "SELECT count(*) FROM steps") == query(store, "SELECT sum(steps) FROM runs")


def test_rollout_workers_on_the_second_node_keep_the_digest_of_workers_in_threads(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    # Point 0 has its two rollout workers in the run's threads, point 1 on the second node.
    path = _experiment(tmp_path, episodes=20, runs=1, extra=(
        "sweep:\n  grid:\n    environments.0.placement: [thread, ray]\n"
        "    environments.0.rollouts: [2]\n    environments.0.copies: [3]\n"))
    proc = _start(cluster, "experiment-start", str(path), "--ray", cluster.address)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    store = tmp_path / "results.sqlite"
    rows = query(store, "SELECT run_index, status, digest, steps, episodes FROM runs "
                        "ORDER BY run_index")
    assert [row[1] for row in rows] == ["finished", "finished"], rows
    assert rows[0][2:] == rows[1][2:] and rows[0][4] == 20
    assert query(store, "SELECT DISTINCT copy FROM episodes ORDER BY copy") == [
        (copy,) for copy in range(6)]
    assert_store_consistent(store)
    assert cluster.second_node in _nodes(tmp_path)


def test_a_search_on_the_cluster_asks_for_and_prunes_what_it_does_here(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    """Each run's pruner decides on its node from the points before its wave: the same points,
    the same runs pruned at the same episodes as with the runs in this command's threads."""
    from tests.e2e.test_search import SEARCH

    path = write_experiment(tmp_path, SEARCH)
    here = subprocess.run([*mosaic_command(), "experiment-start", str(path), "--jobs", "2",
                           "-q", "--store", str(tmp_path / "here.sqlite")], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=cluster.env)
    assert here.returncode == 0, here.stderr
    proc = _start(cluster, "experiment-start", str(path), "--ray", cluster.address,
                  "--jobs", "2", "--store", str(tmp_path / "ray.sqlite"))
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    runs = "SELECT run_index, params, status, episodes, digest FROM runs ORDER BY run_index"
    on_ray = query(tmp_path / "ray.sqlite", runs)
    assert on_ray == query(tmp_path / "here.sqlite", runs)
    assert "pruned" in {status for _, _, status, _, _ in on_ray}, on_ray
    assert err.count("on Ray node") == len(on_ray), err
    assert "Best point: max_steps=" in out, out
