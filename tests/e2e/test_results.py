"""``mosaic runs plot``, ``runs export`` and ``runs show`` on a store of real CartPole runs.

The store holds an experiment of two seeds (drawn as one mean with a band) and one of a single
run, and metric rows inserted here as brains would report them.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from mosaic.results import build_figure, load_curves, moving_average
from mosaic.store import open_store
from tests.e2e.cli import cartpole, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    path = folder / "results.sqlite"
    for text in (cartpole(uid="seeds", runs=2, episodes=8, seed=5),
                 cartpole(uid="single", runs=1, episodes=5, seed=9)):
        experiment = write_experiment(folder, text, name="experiment.yml")
        done = run_mosaic("experiment-start", str(experiment), "--store", str(path), "--quiet",
                          timeout=120)
        assert done.returncode == 0, done.stderr
    runs = [row[0] for row in query(path, "SELECT id FROM runs ORDER BY id")]
    with sqlite3.connect(path) as connection:
        for run_id in runs:
            for update in range(1, 5):  # a loss per update, and an epsilon per episode
                connection.execute(
                    "INSERT INTO metrics (run_id, agent, source, name, value, episode, step, at)"
                    " VALUES (?, 'random', 'random', 'loss', ?, ?, ?, ?)",
                    (run_id, float(run_id * 10 + update), update, update * 20, time.time()))
            connection.execute(
                "INSERT INTO metrics (run_id, agent, source, name, value, episode, step, at)"
                " VALUES (?, 'random', 'random', 'epsilon', 0.5, 1, 10, ?)",
                (run_id, time.time()))
    return path


def seed_runs(store: Path) -> list[str]:
    return [row[0] for row in query(
        store, "SELECT r.uid FROM runs r JOIN experiments x ON x.id = r.experiment_id "
        "WHERE x.uid = 'seeds' ORDER BY r.id")]


def returns(store: Path, uid: str) -> np.ndarray:
    rows = query(store, "SELECT e.total_return FROM episodes e JOIN runs r ON r.id = e.run_id "
                 "WHERE r.uid = ? ORDER BY e.id", uid)
    return np.array([row[0] for row in rows], dtype=np.float64)


def no_traceback(done: object) -> None:
    assert "Traceback" not in done.stderr, done.stderr  # type: ignore[attr-defined]


def test_plot_draws_the_mean_of_the_seeds_with_a_min_max_band(store: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "curve.png"
    done = run_mosaic("runs", "plot", "--experiment", "seeds", "--store", str(store),
                      "--smooth", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)

    first, second = (moving_average(returns(store, uid), 3) for uid in seed_runs(store))
    with open_store(store) as opened:
        figure = build_figure(load_curves(opened, experiment="seeds", smooth=3))
    (axes,) = figure.axes
    (line,) = axes.get_lines()
    np.testing.assert_allclose(line.get_xdata(), np.arange(1, 9))
    np.testing.assert_allclose(line.get_ydata(), (first + second) / 2)
    (band,) = axes.collections
    ys = band.get_paths()[0].vertices[:, 1]
    np.testing.assert_allclose([ys.min(), ys.max()],
                               [np.minimum(first, second).min(), np.maximum(first, second).max()])
    (legend,) = [text.get_text() for text in axes.get_legend().get_texts()]
    assert legend == "seeds: mean of 2 seeds, band: min-max"
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("episode", "return (moving average of 3)")

    import matplotlib.image

    pixels = matplotlib.image.imread(out)
    assert pixels.shape[:2] == (450, 800)
    plot_area = pixels[60:380, 90:760, :3]
    drawn = (plot_area < 0.9).any(axis=2).mean()
    blue = ((plot_area[..., 2] > 0.5) & (plot_area[..., 0] < 0.5)).mean()  # the line and band
    assert drawn > 0.01 and blue > 0.002


def test_plot_of_two_experiments_has_a_line_each(store: Path, tmp_path: Path) -> None:
    uid = query(store, "SELECT r.uid FROM runs r JOIN experiments x ON x.id = r.experiment_id "
                "WHERE x.uid = 'single'")[0][0]
    done = run_mosaic("runs", "plot", uid[:-1], "--experiment", "seeds", "--store", str(store),
                      "--x", "steps", "--band", "std")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == store.with_name("results-returns.png")
    with open_store(store) as opened:
        curves = load_curves(opened, [uid[:-1]], experiment="seeds", x="steps", band="std")
    figure = build_figure(curves)
    legends = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legends == [f"single ({uid})", "seeds: mean of 2 seeds, band: ±1 std"]
    assert figure.axes[0].get_xlabel() == "env steps"
    single = figure.axes[0].get_lines()[0]
    np.testing.assert_allclose(single.get_ydata(), returns(store, uid))
    steps = [row[0] for row in query(store, "SELECT e.steps FROM episodes e JOIN runs r "
                                     "ON r.id = e.run_id WHERE r.uid = ? ORDER BY e.id", uid)]
    np.testing.assert_allclose(single.get_xdata(), np.cumsum(steps))
    assert len(figure.axes[0].collections) == 1  # a band for the group only


def test_plot_of_a_metric_against_steps(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "loss.png"
    done = run_mosaic("runs", "plot", "--experiment", "seeds", "--store", str(store),
                      "--metric", "loss", "--x", "steps", "--out", str(out))
    assert done.returncode == 0, done.stderr
    ids = [row[0] for row in query(store, "SELECT id FROM runs WHERE uid IN (?, ?) ORDER BY id",
                                   *seed_runs(store))]
    with open_store(store) as opened:
        figure = build_figure(load_curves(opened, experiment="seeds", metric="loss", x="steps"))
    (line,) = figure.axes[0].get_lines()
    np.testing.assert_allclose(line.get_xdata(), [20, 40, 60, 80])
    np.testing.assert_allclose(line.get_ydata(), [5 * sum(ids) + u for u in range(1, 5)])
    assert figure.axes[0].get_ylabel() == "loss"
    assert out.stat().st_size > 10_000


@pytest.mark.parametrize(("args", "message"), [
    (("--experiment", "seeds", "--metric", "reward"),
     "no metric 'reward' in the selected runs (metrics: epsilon, loss)"),
    (("no-such-run",), "no run 'no-such-run'"),
    (("--experiment", "nobody"), "no runs of experiment 'nobody'"),
    ((), "no runs selected"),
    (("--experiment", "seeds", "--out", "/proc/mosaic/curve.png"), "cannot write"),
])
def test_plot_errors_are_one_line_and_exit_2(store: Path, args: tuple[str, ...],
                                             message: str) -> None:
    done = run_mosaic("runs", "plot", *args, "--store", str(store))
    assert done.returncode == 2, done.stderr
    no_traceback(done)
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_export_episodes_as_csv_on_stdout(store: Path) -> None:
    done = run_mosaic("runs", "export", "--experiment", "seeds", "--store", str(store))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    first, second = seed_runs(store)
    assert [row["run"] for row in rows] == [first] * 8 + [second] * 8
    np.testing.assert_allclose([float(row["total_return"]) for row in rows[:8]],
                               returns(store, first))
    assert [int(row["order"]) for row in rows[:8]] == list(range(1, 9))
    assert rows[0]["return_agent_0"] == rows[0]["total_return"]


def test_export_steps_as_json_lines_with_an_observation_column_per_element(
        store: Path, tmp_path: Path) -> None:
    out = tmp_path / "steps.jsonl"
    first = seed_runs(store)[0]
    done = run_mosaic("runs", "export", first, "--store", str(store), "--what", "steps",
                      "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    stored = query(store, "SELECT COUNT(*) FROM steps s JOIN runs r ON r.id = s.run_id "
                   "WHERE r.uid = ?", first)[0][0]
    assert len(rows) == stored
    assert {f"observation_{i}" for i in range(4)} <= rows[0].keys()
    assert "observation" not in rows[0] and rows[0]["action"] in (0, 1)
    with open_store(store) as opened:
        record = next(opened.steps(first))
    np.testing.assert_allclose([rows[0][f"observation_{i}"] for i in range(4)],
                               record.observation)


def test_export_episodes_and_metrics_as_parquet(store: Path, tmp_path: Path) -> None:
    import pandas as pd

    for what in ("episodes", "metrics"):
        out = tmp_path / f"{what}.parquet"
        done = run_mosaic("runs", "export", "--experiment", "seeds", "--store", str(store),
                          "--what", what, "--out", str(out))
        assert done.returncode == 0, done.stderr
        frame = pd.read_parquet(out)
        with open_store(store) as opened:
            expected = getattr(opened, f"{what}_frame")(experiment="seeds")
        assert len(frame) == len(expected) > 0
        assert list(frame.columns) == list(expected.columns)
    assert sorted(frame["name"].unique()) == ["epsilon", "loss"]
    # A metric's time is a time, as a run's started_at is, not seconds since 1970.
    assert str(frame["at"].dtype).startswith("datetime64") and str(frame["at"].dt.tz) == "UTC"


def test_a_missing_optional_package_names_the_extra(store: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "pandas").mkdir(parents=True)
    (shadow / "pandas" / "__init__.py").write_text("raise ImportError('not installed')\n")
    import os

    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p)
    for command in ("plot", "export"):
        done = run_mosaic("runs", command, "--experiment", "seeds", "--store", str(store),
                          PYTHONPATH=path)
        assert done.returncode == 2, done.stderr
        no_traceback(done)
        assert "pip install 'mosaic[results]'" in done.stderr


def test_runs_show_gives_the_mean_return_of_the_last_episodes(store: Path) -> None:
    first = seed_runs(store)[0]
    done = run_mosaic("runs", "show", first, "--store", str(store), "--last", "3")
    assert done.returncode == 0, done.stderr
    values = returns(store, first)
    lines = done.stdout.splitlines()
    (at,) = [index for index, line in enumerate(lines) if line.startswith("mean return")]
    assert lines[at].endswith(f"  (last 3) {values[-3:].mean():.4g}")
    assert f"  (all) {values.mean():.4g} over 8 episodes (min " in lines[at + 1]


def test_a_test_phase_goes_on_after_its_training_not_over_its_start(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, cartpole(uid="phased", runs=2, episodes=6) + (
        "    phases:\n      - {name: train, episodes: 6}\n"
        "      - {name: test, mode: test, episodes: 3}\n"))
    store = tmp_path / "phased.sqlite"
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "-q", timeout=120)
    assert done.returncode == 0, done.stderr
    with open_store(store) as opened:
        by_label = {curve.label.split(":")[0]: curve
                    for curve in load_curves(opened, experiment="phased").curves}
        steps = {curve.label.split(":")[0]: curve
                 for curve in load_curves(opened, experiment="phased", x="steps").curves}
    assert list(by_label["phased train"].x) == [1, 2, 3, 4, 5, 6]
    assert list(by_label["phased test"].x) == [7, 8, 9]
    assert steps["phased test"].x[0] > steps["phased train"].x[-1]
