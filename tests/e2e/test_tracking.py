"""End to end: ``--tensorboard`` and ``--mlflow`` (and ``tracking:`` in the file) log every run
to TensorBoard and MLflow as the store records it, read back with their own readers; without
the extra nothing runs, and a sink that fails leaves the runs as they were."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import ray_cluster
from tests.e2e.cli import REPO, cartpole, mosaic_command, query, run_mosaic, write_experiment
from tests.processes import TAG_VARIABLE, kill_all, tagged_processes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

#: CartPole with a PPO agent, whose brain logs its losses every update (every 64 steps).
PPO = """\
    uid: {uid}
    seed: 7
    runs: {runs}
    episodes: {episodes}
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: ppo
        brain: mosaic.agents.learners:PPOBrain
        muscle: mosaic.agents.learners:PPOMuscle
        params: {{rollout_steps: 64, epochs: 1, minibatch_size: 32}}
"""


def ppo(uid: str = "tracked", runs: int = 1, episodes: int = 8, extra: str = "") -> str:
    return PPO.format(uid=uid, runs=runs, episodes=episodes) + extra


def start(path: Path, store: Path, *options: str, **env: str) -> Any:
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "-q", *options,
                      timeout=150, **env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


def runs_of(store: Path) -> list[tuple[int, str, int, str, str]]:
    return query(store, "SELECT id, uid, seed, digest, status FROM runs ORDER BY id")


def returns_of(store: Path, run_id: int) -> list[tuple[int, float]]:
    """The run's training episodes as (the run's env steps when it ended, its return)."""
    rows = query(store, "SELECT steps, total_return FROM episodes WHERE run_id = ? AND "
                 "evaluation = 0 ORDER BY id", run_id)
    steps = itertools.accumulate(step for step, _ in rows)
    return [(at, value) for at, (_, value) in zip(steps, rows, strict=True)]


def metrics_of(store: Path, run_id: int) -> dict[str, list[tuple[int, float]]]:
    """The run's metric rows by tag (``<source>/<name>``), as (step, value) in order."""
    found: dict[str, list[tuple[int, float]]] = {}
    for source, name, step, value in query(store, "SELECT source, name, step, value FROM "
                                           "metrics WHERE run_id = ? ORDER BY id", run_id):
        found.setdefault(f"{source}/{name}", []).append((step, value))
    return found


def event_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """A TensorBoard run folder's scalars by tag, read with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep them all
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}


def assert_series(got: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    assert [step for step, _ in got] == [step for step, _ in expected]
    # TensorBoard keeps 32-bit floats.
    assert [value for _, value in got] == pytest.approx([v for _, v in expected], rel=1e-6)


def assert_logged_like_the_store(folder: Path, store: Path) -> None:
    """``folder`` has one TensorBoard run per run of ``store``, each with its returns (one per
    episode, against the run's env steps) and its learner's metrics (at their own steps)."""
    runs = runs_of(store)
    assert sorted(path.name for path in folder.iterdir()) == sorted(uid for _, uid, *_ in runs)
    for run_id, uid, *_ in runs:
        scalars = event_scalars(folder / uid)
        expected = returns_of(store, run_id)
        assert expected
        assert_series(scalars["return/cartpole"], expected)
        metrics = metrics_of(store, run_id)
        assert {"ppo/policy_loss", "ppo/value_loss", "ppo/entropy"} <= set(metrics)
        for tag, series in metrics.items():
            assert_series(scalars[tag], series)
        assert set(scalars) == {"return/cartpole", *metrics}


def test_tensorboard_logs_each_run_as_the_store_records_it(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, ppo(runs=2))
    store, board = tmp_path / "tracked.sqlite", tmp_path / "board"
    start(path, store, "--tensorboard", str(board), "--jobs", "2")
    assert [status for *_, status in runs_of(store)] == ["finished", "finished"]
    assert_logged_like_the_store(board, store)


def test_the_files_tracking_section_is_taken_from_the_files_folder(tmp_path: Path) -> None:
    # The command runs in the repository; "board" is next to the file all the same.
    path = write_experiment(tmp_path, ppo(extra="    tracking: {tensorboard: board}\n"))
    store = tmp_path / "tracked.sqlite"
    start(path, store)
    assert_logged_like_the_store(tmp_path / "board", store)


def test_the_option_wins_over_the_file(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(tracking="{tensorboard: filed}"))
    start(path, tmp_path / "t.sqlite", "--tensorboard", str(tmp_path / "given"))
    assert not (tmp_path / "filed").exists()
    assert len(list((tmp_path / "given").iterdir())) == 1


def test_mlflow_has_one_run_per_run_with_its_params_returns_and_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    # The command asks for MLflow 3's file store itself, the folder being named.
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    sweep = "    sweep: {grid: {agents.0.params.epochs: [1, 2]}}\n"
    path = write_experiment(tmp_path, ppo(uid="logged", extra=sweep))
    store, uri = tmp_path / "logged.sqlite", (tmp_path / "mlruns").as_uri()
    start(path, store, "--mlflow", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # for this reader
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("logged")
    assert experiment is not None
    logged = {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}
    runs = runs_of(store)
    assert sorted(logged) == sorted(uid for _, uid, *_ in runs)
    for (run_id, uid, seed, digest, status), epochs in zip(runs, (1, 2), strict=True):
        run = logged[uid]
        assert run.data.params == {"experiment": "logged", "seed": str(seed),
                                   "agents.0.params.epochs": str(epochs)}
        assert status == "finished"
        assert run.data.tags["status"] == "finished"
        assert run.data.tags["digest"] == digest
        assert "error" not in run.data.tags
        assert run.info.status == "FINISHED"

        def history(key: str, run_id: str = run.info.run_id) -> list[tuple[int, float]]:
            return sorted((metric.step, metric.value)
                          for metric in client.get_metric_history(run_id, key))

        assert history("return/cartpole") == returns_of(store, run_id)
        for tag, series in metrics_of(store, run_id).items():
            assert history(tag) == sorted(series)


@pytest.mark.parametrize(("key", "module"), [("tensorboard", "tensorboardX"),
                                             ("mlflow", "mlflow")])
def test_without_the_extra_nothing_runs(tmp_path: Path, key: str, module: str) -> None:
    shadow = tmp_path / "shadow"
    (shadow / module).mkdir(parents=True)
    (shadow / module / "__init__.py").write_text("raise ImportError('not installed')\n")
    pythonpath = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p)
    target = tmp_path / "tracking"
    asked = {
        f"--{key}": (write_experiment(tmp_path, cartpole(), "option.yml"),
                     (f"--{key}", str(target))),
        f"tracking.{key}": (write_experiment(tmp_path, cartpole(tracking=f"{{{key}: tracking}}"),
                                             "filed.yml"), ()),
    }
    for where, (path, options) in asked.items():
        store = tmp_path / "t.sqlite"
        done = run_mosaic("experiment-start", str(path), "--store", str(store), *options,
                          PYTHONPATH=pythonpath)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert f"{where}: " in line
        assert f"pip install 'mosaic[{key}]'" in line
        assert not store.exists() and not target.exists()


def test_a_sink_that_fails_leaves_the_runs_as_they_were(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(runs=2, episodes=5))
    plain = tmp_path / "plain.sqlite"
    start(path, plain)
    blocked = tmp_path / "board"
    blocked.write_text("a file where the folder should be\n")
    store = tmp_path / "tracked.sqlite"
    done = start(path, store, "--tensorboard", str(blocked))
    warnings = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1, done.stderr
    assert "TensorBoard failed" in warnings[0] and "the runs go on" in warnings[0]
    assert [run[2:] for run in runs_of(store)] == [run[2:] for run in runs_of(plain)]
    for (tracked, *_), (untracked, *_) in zip(runs_of(store), runs_of(plain), strict=True):
        assert returns_of(store, tracked) == returns_of(plain, untracked)
    assert blocked.read_text() == "a file where the folder should be\n"


def test_mosaic_run_takes_tracking_as_an_override(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import mosaic

    path = write_experiment(tmp_path, cartpole(episodes=3))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # "board" is relative to the file's folder, not this one
    results = mosaic.run(path, tracking={"tensorboard": "board"}, progress=False)
    (run,) = results.runs
    assert run.status == "finished"
    assert [folder.name for folder in (tmp_path / "board").iterdir()] == [run.uid]
    scalars = event_scalars(tmp_path / "board" / run.uid)
    assert len(scalars["return/cartpole"]) == 3
    assert not list(elsewhere.iterdir())


@pytest.fixture
def cluster() -> Iterator[ray_cluster.Cluster]:
    """A two-node Ray cluster of this test's own (see tests/e2e/test_ray.py)."""
    started = ray_cluster.start()
    try:
        yield started
    finally:
        ray_cluster.stop(started)
        assert not started.node_processes(), "a process of the test cluster outlived it"
        # The head's Ray client server is no node's child by then, nor names a node's folder,
        # so ray_cluster.stop misses it; it ends by itself about a minute later. It carries
        # this suite's tag: end it now, by pid.
        kill_all([pid for pid in tagged_processes(os.environ[TAG_VARIABLE])
                  if b"ray.util.client.server" in _command_line(pid)])


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_runs_on_a_ray_cluster_are_logged_from_the_command(
        tmp_path: Path, cluster: ray_cluster.Cluster) -> None:
    # Their records reach the command's store writer through the relay, and the tee there.
    path = write_experiment(tmp_path, ppo(runs=2, episodes=4))
    store, board = tmp_path / "tracked.sqlite", tmp_path / "board"
    done = subprocess.run(
        [*mosaic_command(), "experiment-start", str(path), "--store", str(store), "-q",
         "--ray", cluster.address, "--tensorboard", str(board)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
        env={**cluster.env, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    assert_logged_like_the_store(board, store)
