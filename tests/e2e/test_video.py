"""End to end: ``record_video:`` records the episodes it names as MP4 files that decode to one
frame per step and one for the reset, numbered by the run's episodes (evaluation episodes in
between are not recorded and shift nothing), and lists them in the store; a file that asks for
it where it cannot work is exit 2 at experiment-check, naming the key."""

from __future__ import annotations

from pathlib import Path

import imageio_ffmpeg
import pytest

from mosaic.store import open_store
from tests.e2e.cli import cartpole, query, run_mosaic, write_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

RECORDED = """\
    evaluate_every: 2
    evaluate_episodes: 1
    environments:
      - uid: cartpole
        env: gymnasium:CartPole-v1
        placement: {placement}
        record_video: {{every: 2, episodes: [3]}}
"""


def _experiment(placement: str) -> str:
    text = cartpole(uid="video", episodes=5)
    head, _, agents = text.partition("    environments:\n")
    _, _, agents = agents.partition("    agents:\n")
    return head + RECORDED.format(placement=placement) + "    agents:\n" + agents


def decoded_frames(path: Path) -> tuple[int, tuple[int, int]]:
    """How many frames the MP4 file decodes to, and their size (width, height)."""
    frames = imageio_ffmpeg.read_frames(str(path))
    meta = next(frames)
    return sum(1 for _ in frames), tuple(meta["size"])  # type: ignore[return-value]


@pytest.mark.parametrize("placement", ["thread", "process"])
def test_recorded_episodes_are_mp4_files_listed_in_the_store(tmp_path: Path,
                                                              placement: str) -> None:
    path = write_experiment(tmp_path, _experiment(placement))
    store = tmp_path / "video.sqlite"
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet",
                      timeout=100)
    assert done.returncode == 0, done.stderr
    (uid,) = (row[0] for row in query(store, "SELECT uid FROM runs"))
    folder = tmp_path / "video-videos" / uid
    assert sorted(p.name for p in folder.iterdir()) == [
        "cartpole-episode-0.mp4", "cartpole-episode-2.mp4", "cartpole-episode-3.mp4",
        "cartpole-episode-4.mp4"]
    lengths = dict(query(store, "SELECT episode, steps FROM episodes WHERE NOT evaluation"))
    assert query(store, "SELECT COUNT(*) FROM episodes WHERE evaluation")[0][0] == 2
    with open_store(store) as opened:
        videos = opened.videos(uid)
    assert [(v.environment, v.episode) for v in videos] == [
        ("cartpole", 0), ("cartpole", 2), ("cartpole", 3), ("cartpole", 4)]
    for video in videos:
        assert video.path.parent == folder and video.size == video.path.stat().st_size > 0
        # RecordVideo keeps the reset's frame and one per step: the episode, and only it.
        assert decoded_frames(video.path) == (lengths[video.episode] + 1, (600, 400))


def test_record_video_in_a_folder_of_ones_own(tmp_path: Path) -> None:
    text = _experiment("thread").replace("record_video: {every: 2, episodes: [3]}",
                                         "record_video: {episodes: [1], folder: clips}")
    path = write_experiment(tmp_path, text)
    done = run_mosaic("experiment-start", str(path), "--quiet", timeout=100)
    assert done.returncode == 0, done.stderr
    store = tmp_path / "experiment.sqlite"
    (uid,) = (row[0] for row in query(store, "SELECT uid FROM runs"))
    assert [p.name for p in (tmp_path / "clips" / uid).iterdir()] == ["cartpole-episode-1.mp4"]
    assert query(store, "SELECT episode, folder FROM videos") == [(1, str(tmp_path / "clips" /
                                                                           uid))]


@pytest.mark.parametrize(("setting", "env", "expected"), [
    ("{}", "gymnasium:CartPole-v1", "record_video needs every or episodes"),
    ("{every: 0}", "gymnasium:CartPole-v1", "record_video.every"),
    ("{every: 2, fps: 3}", "gymnasium:CartPole-v1", "record_video.fps: unknown key"),
    ("{every: 2}\n        copies: 2", "gymnasium:CartPole-v1", "copies: and rollouts:"),
    ("{every: 2}", "pettingzoo:classic.rps_v2", "not PettingZoo ones"),
    ("{every: 2}", "tests.fixtures.envs:TextOnly",
     "cannot render 'rgb_array' frames (its render modes: ansi)"),
])
def test_record_video_where_it_cannot_work_is_exit_2_naming_the_key(
        tmp_path: Path, setting: str, env: str, expected: str) -> None:
    text = cartpole(uid="bad-video", env=env).replace(
        "        params: {}\n", f"        params: {{}}\n        record_video: {setting}\n")
    path = write_experiment(tmp_path, text)
    done = run_mosaic("experiment-check", str(path), timeout=60)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "record_video" in done.stderr, done.stderr
    assert done.stderr.count("\n") <= 3, done.stderr
    assert not list(tmp_path.glob("*-videos"))


def test_runs_replay_writes_an_episode_as_a_gif_and_an_mp4(tmp_path: Path) -> None:
    from PIL import Image

    path = write_experiment(tmp_path, cartpole(uid="replayed", episodes=2))
    store = tmp_path / "replayed.sqlite"
    done = run_mosaic("experiment-start", str(path), "--store", str(store), "--quiet")
    assert done.returncode == 0, done.stderr
    steps = int(query(store, "SELECT steps FROM episodes WHERE episode = 1")[0][0])
    (uid,) = (row[0] for row in query(store, "SELECT uid FROM runs"))
    for name in ("one.gif", "one.mp4"):
        done = run_mosaic("runs", "replay", "replayed", "1", "--out", str(tmp_path / name),
                          "--store", str(store))
        assert done.returncode == 0, done.stderr
        # One line: what was written (SDL says nothing of a display it does not need).
        assert done.stderr.splitlines() == [
            f"{tmp_path / name}: cartpole episode 1 of run {uid}, {steps} steps, "
            f"{steps + 1} frames"], done.stderr
    gif = Image.open(tmp_path / "one.gif")
    durations = []
    for index in range(gif.n_frames):
        gif.seek(index)
        durations.append(gif.info["duration"])
    assert sum(durations) == (steps + 1) * 20  # CartPole's 50 frames per second
    assert decoded_frames(tmp_path / "one.mp4") == (steps + 1, (600, 400))
    missing = run_mosaic("runs", "replay", "replayed", "7", "--out", str(tmp_path / "x.gif"),
                         "--store", str(store))
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("episode 7 of cartpole has no stored seed")
    assert not (tmp_path / "x.gif").exists()
