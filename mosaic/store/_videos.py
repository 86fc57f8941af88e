"""The videos a run recorded (``record_video:``), as the store lists them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from mosaic.store import schema

__all__ = ["VideoRecord", "videos_of"]


@dataclass(frozen=True)
class VideoRecord:
    """One recorded episode: the file ``name`` in ``folder`` (on the machine that ran the
    environment), ``size`` bytes, recorded at ``recorded_at`` (seconds since the epoch)."""

    id: int
    run_id: int
    environment: str
    episode: int
    folder: str
    name: str
    size: int
    recorded_at: float

    @property
    def path(self) -> Path:
        """Where the video is: ``folder / name``."""
        return Path(self.folder) / self.name


def videos_of(conn: sa.Connection, run_ids: list[int]) -> list[VideoRecord]:
    """The videos of ``run_ids``, by run, environment and episode; none in a store made before
    the ``videos`` table, which only its next writer adds."""
    if not run_ids or not sa.inspect(conn).has_table("videos"):
        return []
    v = schema.videos
    rows = conn.execute(sa.select(v).where(v.c.run_id.in_(run_ids))
                        .order_by(v.c.run_id, v.c.environment, v.c.episode))
    return [VideoRecord(row.id, row.run_id, row.environment, row.episode, row.folder, row.name,
                        row.bytes, row.recorded_at) for row in rows]
