"""The experiment file's ``tracking:`` section: validated like every section, its folders
resolved like ``store.path``, its sinks' extras checked when the file is loaded."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import load_experiment

pytestmark = pytest.mark.timeout(30)

VALID = """\
uid: ok
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""


def write(folder: Path, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "exp.yml"
    path.write_text(VALID + extra)
    return path


def error_of(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    return caught.value


def test_no_section_tracks_nothing(tmp_path: Path) -> None:
    experiment = load_experiment(write(tmp_path))
    assert experiment.tracking.tensorboard is None and experiment.tensorboard_dir is None
    assert experiment.tracking.mlflow is None and experiment.mlflow_uri is None


def test_relative_folders_are_taken_from_the_files_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "sub", "tracking: {tensorboard: tb, mlflow: runs/ml}\n")
    monkeypatch.chdir(tmp_path)
    experiment = load_experiment("sub/exp.yml")
    assert experiment.tracking.tensorboard == "tb"
    assert experiment.tensorboard_dir == (tmp_path / "sub" / "tb").resolve()
    assert experiment.mlflow_uri == (tmp_path / "sub" / "runs" / "ml").resolve().as_uri()
    assert load_experiment(path).tensorboard_dir == experiment.tensorboard_dir


@pytest.mark.parametrize(("written", "uri"), [
    ("file:ml", "{here}/ml"),
    ("'file:///abs/ml'", "file:///abs/ml"),
    ("http://tracker:5000", "http://tracker:5000"),
    ("databricks", "databricks"),
    ("runs", "{here}/runs"),
])
def test_mlflow_uris_keep_their_scheme(tmp_path: Path, written: str, uri: str) -> None:
    experiment = load_experiment(write(tmp_path, f"tracking: {{mlflow: {written}}}\n"))
    here = tmp_path.resolve().as_uri()
    assert experiment.mlflow_uri == uri.format(here=here)


def test_the_command_line_takes_folders_from_the_current_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "sub", "tracking: {tensorboard: tb, mlflow: ml}\n")
    monkeypatch.chdir(tmp_path)
    experiment = load_experiment(path).with_tracking(tensorboard="mine")
    assert experiment.tensorboard_dir == (tmp_path / "mine").resolve()
    assert experiment.mlflow_uri == (tmp_path / "sub" / "ml").resolve().as_uri()  # the file's
    assert load_experiment(path).with_tracking() == load_experiment(path)


@pytest.mark.parametrize(("extra", "location", "message"), [
    ("tracking: {tensorboard: ''}\n", "tracking.tensorboard", "got an empty text"),
    ("tracking: {tensorbord: tb}\n", "tracking.tensorbord", "unknown key"),
    ("tracking: {mlflow: 5}\n", "tracking.mlflow", "expected"),
    ("tracking: tb\n", "tracking", "expected"),
])
def test_a_bad_section_is_the_files_error(tmp_path: Path, extra: str, location: str,
                                          message: str) -> None:
    error = error_of(write(tmp_path, extra))
    assert error.location == location
    assert message in error.message
    assert error.line == 8


@pytest.mark.parametrize(("key", "module"), [("tensorboard", "tensorboardX"),
                                             ("mlflow", "mlflow")])
def test_a_sink_without_its_extra_is_refused_when_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    path = write(tmp_path, f"tracking:\n  {key}: somewhere\n")
    error = error_of(path)
    assert error.location == f"tracking.{key}"
    assert error.line == 9
    assert f"pip install 'mosaic[{key}]'" in error.message
    with pytest.raises(ConfigError, match=rf"--{key}: .*pip install 'mosaic\[{key}\]'"):
        load_experiment(write(tmp_path / "plain")).with_tracking(**{key: "somewhere"})
