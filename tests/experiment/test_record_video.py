"""``record_video:`` of an environment: where its videos go, which episodes it names, and a
file that asks for it without the ``video`` extra refused when it is loaded."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mosaic.core.errors import ConfigError
from mosaic.experiment import load_experiment
from mosaic.messages import VideoPlan

pytestmark = pytest.mark.timeout(30)

FILE = """\
uid: ok
environments:
  - uid: cartpole
    env: gymnasium:CartPole-v1
    record_video: {setting}
agents:
  - uid: random
    muscle: mosaic.agents:RandomMuscle
"""


def write(folder: Path, setting: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "exp.yml"
    path.write_text(FILE.format(setting=setting) + extra)
    return path


def test_videos_go_beside_the_store_unless_the_file_names_a_folder(tmp_path: Path) -> None:
    beside = load_experiment(write(tmp_path / "a", "{every: 3, episodes: [1]}"))
    plan = beside.run_config(0).environments[0].record_video
    assert plan == VideoPlan(str(tmp_path / "a" / "exp-videos"), 3, (1,))
    assert [episode for episode in range(8) if plan.wants(episode)] == [0, 1, 3, 6]
    named = load_experiment(write(tmp_path / "b", "{episodes: [2], folder: ../clips}"))
    assert named.run_config(0).environments[0].record_video == VideoPlan(
        str((tmp_path / "clips").resolve()), None, (2,))
    database = load_experiment(write(tmp_path / "c", "{every: 1}",
                                     "store: {url: 'postgresql://u@h/db'}\n"))
    assert database.run_config(0).environments[0].record_video.folder == str(
        tmp_path / "c" / "exp-videos")


def test_no_record_video_plans_none(tmp_path: Path) -> None:
    path = write(tmp_path, "{every: 1}")
    path.write_text(path.read_text().replace("    record_video: {every: 1}\n", ""))
    assert load_experiment(path).run_config(0).environments[0].record_video is None


def test_record_video_without_its_extra_is_refused_when_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "moviepy", None)  # importing it raises ImportError
    with pytest.raises(ConfigError) as caught:
        load_experiment(write(tmp_path, "{every: 10}"))
    assert caught.value.location == "environments[0].record_video"
    assert "pip install 'mosaic[video]'" in caught.value.message
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("setting", "location", "message"), [
    ("10", "environments[0].record_video", "expected a mapping such as {every: 10}"),
    ("{every: -1}", "environments[0].record_video.every",
     "expected a whole number from 1: N records episodes 0, N, 2N"),
    ("{episodes: []}", "environments[0].record_video.episodes",
     "expected at least 1 item"),
    ("{episodes: [-2]}", "environments[0].record_video.episodes[0]", "got the number -2"),
    ("{every: 2, folder: ''}", "environments[0].record_video.folder", "empty text"),
])
def test_a_bad_record_video_names_its_key(tmp_path: Path, setting: str, location: str,
                                          message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_experiment(write(tmp_path, setting))
    assert caught.value.location == location
    assert message in caught.value.message
