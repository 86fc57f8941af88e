"""``mosaic experiment-start`` of a file with a sweep: every point times every seed is a run,
each records its values, ``runs list`` shows and groups them, and ``--jobs`` changes nothing
of a trajectory."""

from __future__ import annotations

import pytest

from tests.e2e.cli import assert_store_consistent, cartpole, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

GRID = """\
    sweep:
      grid:
        max_steps: [4, 7]
        episodes: [1, 2]
"""


def _digests(store) -> dict[tuple[int, str], str]:
    rows = query(store, "SELECT seed, params, digest FROM runs WHERE status = 'finished'")
    return {(seed, params): digest for seed, params, digest in rows}


def test_a_2x2_grid_times_2_seeds_is_8_runs_with_their_values(tmp_path, process_tag):
    path = write_experiment(tmp_path, cartpole(runs=2, episodes=2) + GRID)
    one = run_mosaic("experiment-start", str(path), "--store", str(tmp_path / "one.sqlite"))
    assert one.returncode == 0, one.stderr
    assert "8 run(s) = 4 sweep point(s) x 2 seed(s)" in one.stderr
    store = tmp_path / "one.sqlite"
    rows = query(store, "SELECT run_index, params, digest FROM runs ORDER BY run_index")
    assert [index for index, _, _ in rows] == list(range(8))
    assert len({params for _, params, _ in rows}) == 4
    assert len({digest for _, _, digest in rows}) == 8
    assert '"max_steps": 7' in rows[-1][1]
    assert_store_consistent(store)

    listed = run_mosaic("runs", "list", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.splitlines()[0]
    assert "max_steps" in header and "episodes" in header
    grouped = listed.stdout.split("by sweep values\n")[1].splitlines()
    assert len(grouped) == 1 + 4 and all(line.split()[2] == "2" for line in grouped[1:])

    two = run_mosaic("experiment-start", str(path), "--jobs", "2", "-q",
                     "--store", str(tmp_path / "two.sqlite"))
    assert two.returncode == 0, two.stderr
    assert _digests(tmp_path / "two.sqlite") == _digests(store)


@pytest.mark.parametrize(("sweep", "where"), [
    ("sweep:\n  grid:\n    agents.0.parms.lr: [1]\n", "sweep.grid['agents.0.parms.lr']"),
    ("sweep:\n  grid:\n    episodes: []\n", "sweep.grid.episodes"),
    ("sweep:\n  random:\n    samples: 2\n    params:\n      seed: {gauss: [0, 1]}\n",
     "sweep.random.params.seed.gauss"),
])
def test_a_bad_sweep_exits_2_naming_the_file_and_key_path(tmp_path, sweep, where):
    path = write_experiment(tmp_path, cartpole() + "    " + sweep.replace("\n", "\n    "))
    result = run_mosaic("experiment-start", str(path))
    assert result.returncode == 2, result.stderr
    assert "experiment.yml:" in result.stderr and where in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "experiment.sqlite").exists()
