"""``mosaic experiment-start`` of a file with ``sweep: {search: ...}``: Optuna asks for the
points in waves, the median pruner ends runs below the earlier points at an episode end (status
``pruned``, exit 0), the summary and ``runs list`` name the best point, and the same file and
``--jobs`` give the same points and prune the same runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cli import REPO, assert_store_consistent, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

#: A random CartPole player whose return is capped by the searched max_steps: a point with a
#: low one stays below the points before it, and the median pruner ends it.
SEARCH = """\
    uid: search
    seed: 7
    episodes: 12
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
    agents:
      - uid: random
        brain: mosaic.agents:NoOpBrain
        muscle: mosaic.agents:RandomMuscle
    sweep:
      search:
        samples: 6
        pruner: {median: {n_startup_trials: 2}}
        params:
          max_steps: {int: [2, 40]}
"""


def _runs(store: Path) -> list[tuple[int, int, str, int, str]]:
    rows = query(store, "SELECT run_index, params, status, episodes, digest FROM runs "
                        "ORDER BY run_index")
    return [(index, json.loads(params)["max_steps"], status, episodes, digest)
            for index, params, status, episodes, digest in rows]


def _reported(store: Path) -> dict[int, list[tuple[int, float]]]:
    rows = query(store, "SELECT r.run_index, m.episode, m.value FROM metrics m JOIN runs r "
                        "ON r.id = m.run_id WHERE m.source = 'search' AND m.name = 'return' "
                        "ORDER BY m.id")
    reported: dict[int, list[tuple[int, float]]] = {}
    for index, episode, value in rows:
        reported.setdefault(index, []).append((episode, value))
    return reported


def test_a_search_prunes_runs_below_the_earlier_points_and_names_the_best(tmp_path):
    path = write_experiment(tmp_path, SEARCH)
    store = tmp_path / "experiment.sqlite"
    done = run_mosaic("experiment-start", str(path), "--jobs", "2")
    assert done.returncode == 0, done.stderr  # a pruned run is no failure
    assert "6 run(s) = 6 search point(s) x 1 seed(s)" in done.stderr
    runs = _runs(store)
    assert [index for index, *_ in runs] == list(range(6))
    pruned = [run for run in runs if run[2] == "pruned"]
    assert pruned, runs
    assert {status for _, _, status, _, _ in runs} == {"finished", "pruned"}
    # The first wave (--jobs 2: two points) has no earlier point to be measured against.
    assert all(status == "finished" for _, _, status, _, _ in runs[:2])
    reported = _reported(store)
    for index, _, status, episodes, _ in runs:
        # A report at every episode end, up to the one that pruned the run.
        assert [episode for episode, _ in reported[index]] == list(range(1, episodes + 1))
        assert (episodes < 12) == (status == "pruned")
    # The best point is the finished one whose last report (its mean return) is highest.
    finished = {max_steps: reported[index][-1][1]
                for index, max_steps, status, _, _ in runs if status == "finished"}
    best = max(finished, key=finished.__getitem__)
    assert f"Best point: max_steps={best}: return {finished[best]:.4g} (mean of 1 run(s))" \
        in done.stdout, done.stdout
    assert re.search(r"Ended early: search-\S+: pruned by the median pruner: return \S+ at "
                     r"episode \d+", done.stdout), done.stdout
    assert_store_consistent(store)

    listed = run_mosaic("runs", "list", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count(" pruned ") == len(pruned), listed.stdout
    assert (f"best point of search: max_steps={best}: return {finished[best]:.4g} "
            "(mean of 1 run(s))") in listed.stdout, listed.stdout
    shown = run_mosaic("runs", "show", _uid(store, pruned[0][0]), "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"status\s+pruned", shown.stdout), shown.stdout
    assert "ended early: pruned by the" in shown.stdout, shown.stdout


def _uid(store: Path, index: int) -> str:
    return str(query(store, "SELECT uid FROM runs WHERE run_index = ?", index)[0][0])


def test_the_same_file_and_jobs_give_the_same_points_and_prune_the_same_runs(tmp_path):
    path = write_experiment(tmp_path, SEARCH.replace("samples: 6", "samples: 7"))
    results = []
    for name in ("one", "two"):
        store = tmp_path / f"{name}.sqlite"
        done = run_mosaic("experiment-start", str(path), "--jobs", "2", "-q",
                          "--store", str(store))
        assert done.returncode == 0, done.stderr
        results.append((_runs(store), _reported(store)))
    assert results[0] == results[1]
    runs, _ = results[0]
    assert any(status == "pruned" for _, _, status, _, _ in runs), runs
    # Another seed of the search asks for other points.
    other = tmp_path / "other.sqlite"
    done = run_mosaic("experiment-start", str(path), "--jobs", "2", "-q", "--store", str(other),
                      "--set", "sweep.search.seed=8")
    assert done.returncode == 0, done.stderr
    assert [run[1] for run in _runs(other)] != [run[1] for run in runs]


def test_without_optuna_a_search_is_exit_2_naming_the_extra(tmp_path):
    path = write_experiment(tmp_path, SEARCH)
    # As if optuna were not installed: its import fails.
    hide = ("import sys; sys.modules['optuna'] = None; from mosaic.cli import main; "
            "sys.argv[0] = 'mosaic'; main(sys.argv[1:])")
    for command in ("experiment-check", "experiment-start"):
        done = subprocess.run([sys.executable, "-c", hide, command, str(path)], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        [line] = [line for line in done.stderr.splitlines() if line.strip()]
        assert "sweep.search" in line and "pip install 'mosaic[search]'" in line, line
    assert not (tmp_path / "experiment.sqlite").exists()
