"""Episodes recorded as MP4 videos: Gymnasium's ``RecordVideo``, told mosaic's episode numbers.

``RecordVideo`` counts the resets it sees. A run's environment also resets for evaluation
episodes, and a continued run starts at its saved episode, so that count is not the run's
episode number. :class:`EpisodeVideo` is told the number before each reset (the environment
actor has it from the reset request): the episodes its :class:`~mosaic.messages.VideoPlan`
names are recorded, evaluation episodes never, and each file is named by the run's episode,
``<environment uid>-episode-<N>.mp4``, in the plan's folder.

A video is written when its episode is over: at the next reset, or when the environment is
closed (a run stopped mid-episode leaves the part played). It holds every frame recorded, one
after the reset and one after each step: :func:`write_mp4` writes them through imageio-ffmpeg,
where RecordVideo's own MoviePy writer drops the last frame of some lengths (11 to 14 frames at
50 fps, from rounding the clip's duration).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
from gymnasium.wrappers import RecordVideo

from mosaic.core.errors import MosaicError
from mosaic.core.extras import VIDEO, require
from mosaic.messages.run_config import VideoPlan

__all__ = ["RENDER_MODE", "EpisodeVideo", "VideoError", "episode_video", "video_files",
           "write_mp4"]

#: The render mode a recorded environment is made with.
RENDER_MODE = "rgb_array"
_NAME = re.compile(r"^(?P<environment>.+)-episode-(?P<episode>\d+)\.mp4$")


class VideoError(MosaicError):
    """An environment cannot be recorded; the message says why."""


if TYPE_CHECKING:
    _RecordVideo = RecordVideo[Any, Any]
else:
    # Subscripted only for the type checker: RecordVideo's type parameters differ between
    # Gymnasium releases (1.2 has three, 1.1 and 1.3+ two), and a wrong count fails at import.
    _RecordVideo = RecordVideo


class EpisodeVideo(_RecordVideo):
    """``RecordVideo`` recording the episodes ``plan`` names, numbered as the run numbers them.

    Call :meth:`next_episode` before each reset. Raises :class:`VideoError` when ``env`` does
    not render ``rgb_array`` frames.
    """

    def __init__(self, env: gymnasium.Env[Any, Any], plan: VideoPlan, name: str) -> None:
        if env.render_mode != RENDER_MODE:
            env.close()
            raise VideoError(f"environment {name!r} renders {env.render_mode!r}, and "
                             f"record_video needs render_mode={RENDER_MODE!r} frames")
        self.plan = plan
        self.upcoming: int | None = None
        super().__init__(env, plan.folder, episode_trigger=self._wanted, name_prefix=name,
                         disable_logger=True)

    def next_episode(self, episode: int | None) -> None:
        """The next reset starts training episode ``episode`` of the run (None: an evaluation
        episode, not recorded)."""
        self.upcoming = episode
        if episode is not None:
            self.episode_id = episode - 1  # RecordVideo adds one as it resets

    def _wanted(self, episode_id: int) -> bool:
        return self.upcoming is not None and self.plan.wants(self.upcoming)

    def stop_recording(self) -> None:
        """Write the episode's frames as ``<name>-episode-<N>.mp4`` (see the module)."""
        if self.recorded_frames and self._video_name is not None:
            write_mp4(self.recorded_frames, self.frames_per_sec,
                      Path(self.video_folder) / f"{self._video_name}.mp4")
        self.recorded_frames = []
        self.recording = False
        self._video_name = None


def episode_video(env: Any) -> EpisodeVideo | None:
    """The :class:`EpisodeVideo` that an environment adapter holds, if it records videos."""
    held = getattr(env, "env", None)
    return held if isinstance(held, EpisodeVideo) else None


def video_files(folder: str | Path) -> list[tuple[str, int, Path]]:
    """``(environment uid, episode, path)`` of each video :class:`EpisodeVideo` wrote in
    ``folder`` (a run's folder), by environment and episode; none when it does not exist."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _NAME.match(path.name)
        if match and path.is_file():
            found.append((match["environment"], int(match["episode"]), path))
    return sorted(found, key=lambda item: (item[0], item[1]))


def write_mp4(frames: Sequence[Any] | np.ndarray, fps: float, path: str | Path) -> None:
    """Write ``frames`` (height x width x 3 uint8 arrays of one size) to ``path`` as an H.264
    MP4 video at ``fps`` frames per second, every frame kept. Raises VideoError for no frames
    or frames that are not RGB images, MissingExtra without imageio-ffmpeg (the ``video``
    extra), and OSError when ffmpeg fails."""
    if len(frames) == 0:
        raise VideoError("no frames to write")
    stack = np.stack([np.asarray(frame) for frame in frames])
    if stack.dtype != np.uint8 or stack.ndim != 4 or stack.shape[-1] != 3:
        raise VideoError(f"the frames are {stack.dtype} arrays of shape {stack.shape[1:]}, not "
                         "RGB images (height x width x 3, uint8)")
    ffmpeg = require("imageio_ffmpeg", "writing an MP4 video", VIDEO)
    # H.264 in yuv420p takes even sizes only: pad the last row and column with black.
    height, width = stack.shape[1] + stack.shape[1] % 2, stack.shape[2] + stack.shape[2] % 2
    if (height, width) != stack.shape[1:3]:
        padded = np.zeros((len(stack), height, width, 3), np.uint8)
        padded[:, :stack.shape[1], :stack.shape[2]] = stack
        stack = padded
    writer = ffmpeg.write_frames(str(path), (width, height), fps=float(fps), codec="libx264",
                                 pix_fmt_out="yuv420p", macro_block_size=1,
                                 ffmpeg_log_level="error")
    writer.send(None)  # starts ffmpeg
    try:
        for frame in stack:
            writer.send(np.ascontiguousarray(frame))
    finally:
        writer.close()
