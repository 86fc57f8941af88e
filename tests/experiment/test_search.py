"""The sweep's ``search:`` section: its defaults, its runs before any point is asked for, and the
errors a user gets for a bad one (the file, the key path and a hint), before anything runs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import load_experiment
from mosaic.experiment.loader import search_point
from mosaic.experiment.sweep import search_probes
from tests.e2e.cli import cartpole, write_experiment

pytestmark = pytest.mark.timeout(60)

SEARCH = """\
    sweep:
      search:
        samples: 5
        params:
          max_steps: {int: [2, 40]}
          agents.0.params.gamma: {log_uniform: [0.5, 0.99]}
          environments.0.params: {choice: [{}, {max_episode_steps: 6}, {max_episode_steps: 9}]}
"""


def _file(tmp_path: Path, sweep: str = SEARCH) -> Path:
    return write_experiment(tmp_path, cartpole(runs=2)
                            + textwrap.indent(textwrap.dedent(sweep), "    "))


def _error(tmp_path: Path, sweep: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_experiment(_file(tmp_path, sweep))
    return caught.value


def test_a_search_has_its_defaults_and_no_point_before_it_runs(tmp_path):
    experiment = load_experiment(_file(tmp_path))
    search = experiment.search
    assert search is not None
    assert (search.metric, search.direction, search.seed) == ("return", "maximize", None)
    assert (search.sampler_name, search.sampler_options) == ("tpe", {})
    assert (search.pruner_name, search.pruner_options) == ("median", {})
    # Its points are asked for as it runs: 5 points x 2 seeds, the file's own settings for now.
    assert experiment.points == () and experiment.run_count == 10
    assert experiment.run_params(9) == {}
    config = experiment.run_config(9)
    assert config.search is not None and config.search.trial == 4
    assert (config.search.metric, config.search.pruner) == ("return", "median")
    assert config.max_steps is None


def test_a_point_of_the_search_is_validated_and_set_as_a_grid_point_is(tmp_path):
    experiment = load_experiment(_file(tmp_path))
    values = {"max_steps": 7, "agents.0.params.gamma": 0.9,
              "environments.0.params": {"max_episode_steps": 6}}
    point = search_point(experiment, values)
    with_point = experiment.model_copy(update={"points": (point,)})
    config = with_point.run_config(1)
    assert config.max_steps == 7 and config.environments[0].params == {"max_episode_steps": 6}
    assert config.agents[0].muscle.params["gamma"] == 0.9
    assert with_point.run_params(0) == values
    with pytest.raises(ConfigError) as caught:
        search_point(experiment, {**values, "max_steps": 0})
    assert caught.value.location == "sweep.search.params['max_steps']", str(caught.value)
    assert "with max_steps = 0" in caught.value.message


def test_the_probes_reach_each_end_and_every_choice():
    from mosaic.experiment.sweep import SearchSweep

    search = SearchSweep.model_validate({"samples": 1, "params": {
        "a": {"int": [1, 3]}, "b": {"choice": ["x", "y", "z"]}, "c": {"uniform": [0, 1]}}})
    probes = search_probes(search)
    assert [p["b"] for p in probes] == ["x", "y", "z"]
    assert {p["a"] for p in probes} == {1, 3} and {p["c"] for p in probes} == {0.0, 1.0}


@pytest.mark.parametrize(("sweep", "location", "text"), [
    ("sweep:\n  search:\n    samples: 2\n    params:\n      max_step: {int: [1, 5]}\n",
     "sweep.search.params.max_step", "unknown key 'max_step'"),
    ("sweep:\n  search:\n    samples: 2\n    params:\n      max_steps: {int: [0, 5]}\n",
     "sweep.search.params.max_steps", "with max_steps = 0"),
    ("sweep:\n  search:\n    samples: 2\n    sampler: grid\n    params:\n"
     "      max_steps: {int: [1, 5]}\n", "sweep.search.sampler", "one of tpe, cmaes, random"),
    ("sweep:\n  search:\n    samples: 2\n    pruner: {median: {n_startup: 2}}\n    params:\n"
     "      max_steps: {int: [1, 5]}\n", "sweep.search.pruner.median", "n_startup"),
    ("sweep:\n  search:\n    samples: 2\n    direction: up\n    params:\n"
     "      max_steps: {int: [1, 5]}\n", "sweep.search.direction", "'maximize' or 'minimize'"),
    ("sweep:\n  search:\n    samples: 0\n    params:\n      max_steps: {int: [1, 5]}\n",
     "sweep.search.samples", "from 1 to 1000"),
    ("sweep:\n  grid:\n    episodes: [1, 2]\n  search:\n    samples: 2\n    params:\n"
     "      max_steps: {int: [1, 5]}\n", "sweep.search", "cannot be combined with 'grid'"),
    ("sweep:\n  search:\n    samples: 2\n    params:\n      uid: {choice: [a, b]}\n",
     "sweep.search.params.uid", "cannot be swept"),
])
def test_a_bad_search_is_the_files_error_at_its_key_path(tmp_path, sweep, location, text):
    error = _error(tmp_path, sweep)
    assert error.location == location, str(error)
    assert text in error.message, str(error)
    assert error.path.endswith("experiment.yml") and error.line is not None


def test_without_optuna_a_search_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # as if it were not installed
    error = _error(tmp_path, SEARCH)
    assert error.location == "sweep.search", str(error)
    assert "pip install 'mosaic[search]'" in error.message
    # A grid needs no Optuna.
    load_experiment(_file(tmp_path, "sweep:\n  grid:\n    episodes: [1, 2]\n"))
