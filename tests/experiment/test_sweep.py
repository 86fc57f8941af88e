"""Overrides and the sweep: section: what they set, how a sweep expands, and the errors a user
gets for a bad one (the file, the key path and a hint), before anything runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import experiment_from_data, load_experiment
from tests.e2e.cli import cartpole, write_experiment

pytestmark = pytest.mark.timeout(60)

SWEEP = """\
    sweep:
      grid:
        max_steps: [5, 8]
        environments.0.params: [{}, {max_episode_steps: 6}]
      random:
        samples: 3
        seed: 1
        params:
          agents.0.params.gamma: {uniform: [0.9, 0.999]}
          agents.0.params.width: {int: [1, 4]}
"""


def _file(tmp_path: Path, sweep: str = SWEEP, **settings: str) -> Path:
    # cartpole() is indented for dedent(); so must the sweep be.
    return write_experiment(tmp_path, cartpole(runs=2, **settings)
                            + textwrap.indent(textwrap.dedent(sweep), "    "))


def _error(tmp_path: Path, sweep: str, **overrides: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_experiment(_file(tmp_path, sweep), overrides=overrides)
    return caught.value


def test_a_grid_times_random_draws_times_seeds_gives_every_run_its_values(tmp_path):
    experiment = load_experiment(_file(tmp_path))
    assert len(experiment.points) == 2 * 2 * 3 and experiment.run_count == 24
    params = [experiment.run_params(index) for index in range(experiment.run_count)]
    assert [p["max_steps"] for p in params[::6]] == [5, 5, 8, 8]
    assert params[0] == params[1], "the seeds of one point share its values"
    draws = {(p["agents.0.params.gamma"], p["agents.0.params.width"]) for p in params}
    assert len(draws) == 3 and all(0.9 <= g <= 0.999 and 1 <= w <= 4 for g, w in draws)
    config = experiment.run_config(7)
    assert config.max_steps == params[7]["max_steps"]
    assert config.environments[0].params == params[7]["environments.0.params"]
    assert config.agents[0].muscle.params["gamma"] == params[7]["agents.0.params.gamma"]
    # Every point runs the same seeds: points differ in their values only.
    seeds = experiment.run_seeds()
    assert seeds[:2] == seeds[2:4] and seeds[0] != seeds[1]
    assert load_experiment(_file(tmp_path)).run_seeds() == seeds


def test_the_random_draws_depend_on_the_sweep_seed(tmp_path):
    first = load_experiment(_file(tmp_path))
    other = load_experiment(_file(tmp_path), overrides={"sweep.random.seed": 2})
    assert [p.params for p in first.points] != [p.params for p in other.points]


@pytest.mark.parametrize(("sweep", "location", "text"), [
    ("sweep:\n  grid:\n    agents.0.parms.lr: [1]\n", "sweep.grid['agents.0.parms.lr']",
     "unknown key 'parms'"),
    ("sweep:\n  grid:\n    episodes: []\n", "sweep.grid.episodes", "expected at least 1 item"),
    ("sweep:\n  grid:\n    agents.4.params.lr: [1]\n", "sweep.grid['agents.4.params.lr']",
     "has 1 item(s), so no item 4"),
    ("sweep:\n  grid:\n    episodes: [2, -1]\n", "sweep.grid.episodes",
     "with episodes = -1: episodes: expected a whole number >= 1"),
    ("sweep:\n  grid:\n    uid: [a, b]\n", "sweep.grid.uid", "cannot be swept"),
    ("sweep:\n  random:\n    samples: 2\n    params:\n      seed: {normal: [0, 1]}\n",
     "sweep.random.params.seed.normal", "unknown key 'normal'"),
    ("sweep:\n  random:\n    samples: 2\n    params:\n      max_steps: {int: [5, 2]}\n",
     "sweep.random.params.max_steps.int", "low < high"),
    ("sweep:\n  random:\n    samples: 2\n    params:\n"
     "      max_steps: {int: [1, 2], choice: [3]}\n",
     "sweep.random.params.max_steps", "got 2 keys"),
    ("sweep: {}\n", "sweep", "expected 'grid', 'random' or both"),
])
def test_a_bad_sweep_is_the_files_error_at_its_key_path(tmp_path, sweep, location, text):
    error = _error(tmp_path, sweep)
    assert error.location == location, str(error)
    assert text in error.message, str(error)
    assert error.path.endswith("experiment.yml") and error.line is not None


def test_overrides_set_what_they_say(tmp_path):
    experiment = load_experiment(_file(tmp_path, ""), overrides={
        "seed": 3, "episodes": 5, "agents.0.params.learning_rate": 0.01,
        "store": {"path": "elsewhere.sqlite"}})
    assert (experiment.seed, experiment.episodes) == (3, 5)
    assert experiment.run_config(0).agents[0].muscle.params == {"learning_rate": 0.01}
    assert experiment.store_path == (tmp_path / "elsewhere.sqlite").resolve()
    swept = load_experiment(_file(tmp_path, ""), overrides={"sweep": {"grid": {"seed": [1, 2]}}})
    assert swept.run_count == 4 and len(set(swept.run_seeds())) == 4


@pytest.mark.parametrize(("overrides", "location", "text"), [
    ({"agents.0.parms.lr": 1}, "agents[0].parms", "unknown key 'parms'"),
    ({"episdes": 3}, "episdes", "did you mean 'episodes'"),
    ({"episodes": 0}, "episodes", "set by the override 'episodes'"),
    ({"agents.2.params.lr": 1}, "agents[2]", "override 'agents.2.params.lr'"),
    ({"agents.0.muscle.params.x": 1}, "agents[0].muscle", "short form"),
])
def test_a_bad_override_is_a_config_error_with_its_key_path(tmp_path, overrides, location, text):
    with pytest.raises(ConfigError) as caught:
        load_experiment(_file(tmp_path, ""), overrides=overrides)
    assert caught.value.location == location, str(caught.value)
    assert text in str(caught.value)


def test_a_mapping_is_read_as_a_file_of_its_uid_in_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = {"uid": "inline", "environments": [{"uid": "e", "env": "gymnasium:CartPole-v1"}],
            "agents": [{"uid": "a", "muscle": "mosaic.agents:RandomMuscle"}]}
    experiment = experiment_from_data(data, overrides={"episodes": 2})
    assert experiment.store_path == tmp_path / "inline.sqlite" and experiment.episodes == 2
    assert "episodes" not in data
    with pytest.raises(ConfigError, match=r"<experiment data>: agents\[0\].muscle"):
        experiment_from_data({**data, "agents": [{"uid": "a", "muscle": "nope:Nope"}]})
