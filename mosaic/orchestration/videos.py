"""Where a run's videos go (``record_video:``), and their record in the store.

Each run records into a folder of its own, ``<videos folder>/<run uid>/``; once the run is over
(its environments closed, so every video is written), the videos found there are recorded in
the store's ``videos`` table, with the run's end.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from mosaic.environments.video import video_files
from mosaic.messages.run_config import RunConfig, VideoPlan

if TYPE_CHECKING:  # the controller, which names each run's folder, needs no store
    from mosaic.store import StoreWriter

__all__ = ["record_videos", "run_videos"]

log = logging.getLogger(__name__)


def run_videos(plan: VideoPlan | None, run_uid: str) -> VideoPlan | None:
    """``plan`` with the folder of run ``run_uid``'s videos (None without a plan)."""
    if plan is None:
        return None
    return dataclasses.replace(plan, folder=str(Path(plan.folder) / run_uid))


def record_videos(config: RunConfig, run_id: int, run_uid: str, store: StoreWriter) -> int:
    """Enqueue a ``videos`` row for each video run ``run_uid`` wrote of an environment that
    records them; returns how many. A video of an environment the run does not have (a file
    someone put there) is left out."""
    count = 0
    for environment in config.environments:
        plan = run_videos(environment.record_video, run_uid)
        if plan is None:
            continue
        for uid, episode, path in video_files(plan.folder):
            if uid != environment.uid:
                continue
            store.record_video(run_id, uid, episode, str(path.parent), path.name,
                               path.stat().st_size)
            count += 1
    if count:
        log.info("run %s recorded %d video(s)", run_uid, count)
    return count
