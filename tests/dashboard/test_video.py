"""A run's recorded videos on its page, served as MP4 only from their folder, and a replayed
episode exported as a GIF or an MP4 file: over HTTP and in a real headless Chromium."""

from __future__ import annotations

import io
import shutil
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import imageio_ffmpeg
import pytest
from PIL import Image
from selenium.webdriver.common.by import By

from tests.dashboard.browser import wait_for
from tests.dashboard.conftest import REPO, served
from tests.e2e.cli import cartpole, query, write_experiment

pytestmark = pytest.mark.timeout(120)

#: CartPole's render_fps: each frame of an export lasts 1/50 s.
FRAME_MS = 20


@pytest.fixture(scope="module")
def video_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of a real ``mosaic experiment-start`` of CartPole that recorded episodes 0 and
    2 of 3."""
    folder = tmp_path_factory.mktemp("video")
    text = cartpole(uid="recorded", episodes=3).replace(
        "        params: {}\n", "        params: {}\n        record_video: {every: 2}\n")
    path = write_experiment(folder, text)
    store = folder / "recorded.sqlite"
    done = subprocess.run([sys.executable, "-m", "mosaic", "experiment-start", str(path),
                           "--store", str(store), "--quiet"], cwd=REPO, capture_output=True,
                          text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return store


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _steps(store: Path, episode: int) -> int:
    return int(query(store, "SELECT steps FROM episodes WHERE episode = ?", episode)[0][0])


def mp4_frames(data: bytes, folder: Path) -> int:
    path = folder / "decoded.mp4"
    path.write_bytes(data)
    frames = imageio_ffmpeg.read_frames(str(path))
    next(frames)
    return sum(1 for _ in frames)


def test_a_replay_exports_as_a_gif_and_an_mp4(video_store: Path, tmp_path: Path) -> None:
    steps = _steps(video_store, 1)
    with served(video_store) as server:
        base = f"{server.url}/runs/1/replay/export?environment=cartpole&episode=1"
        status, headers, gif = get(base + "&format=gif")
        assert status == 200 and headers["content-type"] == "image/gif"
        assert headers["content-disposition"] == (
            'attachment; filename="run-1-cartpole-episode-1.gif"')
        image = Image.open(io.BytesIO(gif))
        assert image.size == (600, 400)
        durations = []
        for index in range(image.n_frames):
            image.seek(index)
            durations.append(image.info["duration"])
        # A frame equal to the one before is folded into it: the time shown stays the episode's.
        assert 1 < len(durations) <= steps + 1 and sum(durations) == (steps + 1) * FRAME_MS
        status, headers, mp4 = get(base + "&format=mp4")
        assert status == 200 and headers["content-type"] == "video/mp4"
        assert mp4_frames(mp4, tmp_path) == steps + 1
        assert get(base + "&format=avi")[0] == 400
        assert get(base.replace("cartpole", "nowhere") + "&format=gif")[0] == 422


def test_videos_are_served_by_number_from_their_folder_only(video_store: Path,
                                                           tmp_path: Path) -> None:
    with served(video_store) as server:
        status, headers, data = get(f"{server.url}/videos/1")
        assert status == 200 and headers["content-type"] == "video/mp4"
        assert mp4_frames(data, tmp_path) == _steps(video_store, 0) + 1
        assert get(f"{server.url}/videos/99")[0] == 404
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(data)
    tampered = tmp_path / "tampered.sqlite"
    shutil.copy(video_store, tampered)
    with sqlite3.connect(tampered) as db:
        db.execute("UPDATE videos SET name = '../../outside.mp4' WHERE id = 1")
        db.execute("UPDATE videos SET folder = ?, name = 'tampered.sqlite' WHERE id = 2",
                   (str(tmp_path),))
    with served(tampered) as server:
        assert get(f"{server.url}/videos/1")[0] == 404
        assert get(f"{server.url}/videos/2")[0] == 404


def test_the_run_page_plays_its_videos_and_the_replay_downloads(
        video_store: Path, browser: Any, tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": str(downloads)})
    with served(video_store) as server:
        browser.get(f"{server.url}/runs/1")
        videos = browser.find_elements(By.CSS_SELECTOR, "#videos video")
        assert [v.get_attribute("data-episode") for v in videos] == ["0", "2"]
        assert "cartpole episode 2" in browser.find_element(By.ID, "videos").text
        # Chromium reads the file's header: it is a video it can play, of the episode's length.
        duration = wait_for("the first video's metadata", lambda: browser.execute_script(
            "const v = arguments[0]; return v.readyState >= 1 ? v.duration : null;", videos[0]))
        assert duration == pytest.approx((_steps(video_store, 0) + 1) * FRAME_MS / 1000,
                                         abs=0.03)
        browser.get(f"{server.url}/runs/1/replay?environment=cartpole&episode=1")
        browser.find_element(By.ID, "export-gif").click()
        gif = wait_for("the GIF download", lambda: [
            p for p in downloads.iterdir() if p.suffix == ".gif"], 60)
        assert gif[0].name == "run-1-cartpole-episode-1.gif"
        image = Image.open(gif[0])
        assert image.format == "GIF" and image.size == (600, 400)
