"""A replayed episode as a file: an animated GIF or an MP4 video of its frames.

The frames are the replay's (:func:`~mosaic.dashboard.replay.replay_episode`): one after the
reset and one after each stored step, as RGB arrays, at the environment's ``render_fps`` (30
when it names none). GIFs are written by imageio with Pillow, MP4 (H.264) as recorded videos
are (:func:`~mosaic.environments.video.write_mp4`); both come with the ``video`` extra, and
nothing is left on disk.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mosaic.core.extras import VIDEO, require
from mosaic.dashboard.replay import Replay, ReplayError, replay_episode
from mosaic.environments.video import write_mp4
from mosaic.store import Store

__all__ = ["DEFAULT_FPS", "FORMATS", "Export", "export_episode", "write_frames"]

#: The export formats and their content types.
FORMATS = {"gif": "image/gif", "mp4": "video/mp4"}
#: Frames per second of an environment that names no ``render_fps``.
DEFAULT_FPS = 30


@dataclass(frozen=True)
class Export:
    """A replay as a file: its bytes (``data``), and the replay they show (its frames the
    RGB arrays, and whether it is the stored episode: ``replay.same``)."""

    data: bytes
    replay: Replay


def export_episode(store: Store, run_id: int, environment: str, episode: int,
                   fmt: str) -> Export:
    """The replay of ``episode`` of ``environment`` in run ``run_id`` as a file of format
    ``fmt`` (a key of :data:`FORMATS`).

    Raises ReplayError when the episode cannot be replayed or ``fmt`` is unknown,
    MissingExtra when the ``video`` extra is not installed, and StoreError when the store
    cannot be read.
    """
    if fmt not in FORMATS:
        raise ReplayError(f"export as {' or '.join(FORMATS)}, not {fmt!r}")
    require("imageio", f"exporting a replay as {fmt.upper()}", VIDEO)
    rates: list[Any] = []

    def render(env: Any) -> Any:
        if not rates:
            rates.append(env.metadata.get("render_fps"))
        return env.render()

    replay = replay_episode(store, run_id, environment, episode, render=render)
    fps = rates[0] if rates and isinstance(rates[0], int | float) and rates[0] > 0 \
        else DEFAULT_FPS
    return Export(write_frames(replay.frames, float(fps), fmt), replay)


def write_frames(frames: list[Any], fps: float, fmt: str) -> bytes:
    """``frames`` (H x W x 3 uint8 arrays of one size) as a ``fmt`` file at ``fps`` frames per
    second, its bytes. Raises ReplayError for no frames or frames that are not RGB images."""
    stack = np.stack([np.asarray(frame) for frame in frames]) if frames else None
    if stack is None or stack.dtype != np.uint8 or stack.ndim != 4 or stack.shape[-1] != 3:
        raise ReplayError("the replay has no RGB frames (height x width x 3, uint8) to export")
    if fmt == "gif":
        iio = require("imageio.v3", "exporting a replay as GIF", VIDEO)
        # Pillow folds a frame equal to the one before into it, lengthening that one's
        # duration: the GIF may hold fewer frames, never a shorter episode.
        data: bytes = iio.imwrite("<bytes>", stack, extension=".gif",
                                  duration=round(1000 / fps), loop=0)
        return data
    with tempfile.TemporaryDirectory(prefix="mosaic-export-") as folder:
        path = Path(folder) / "replay.mp4"
        write_mp4(stack, fps, path)
        return path.read_bytes()
