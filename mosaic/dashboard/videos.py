"""The HTML of a run's recorded videos and of a replay's export links, and where a video's
file is.

Videos are named by their row in the store's ``videos`` table, never by a path: a request
chooses a number, and the file served is the one that row names, only if it lies in the row's
folder and is an MP4 file (a name with a separator or ``..`` is refused).
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa

from mosaic.dashboard.export import FORMATS
from mosaic.store import Store, VideoRecord, schema

__all__ = ["export_links", "run_videos", "video_path", "videos_section"]


def videos_section(videos: list[VideoRecord]) -> str:
    """A run page's videos: a player for each, under its environment and episode."""
    if not videos:
        return ""
    items = "".join(
        f'<figure class=video><video controls preload=metadata width=300 src="/videos/{v.id}" '
        f'data-episode="{v.episode}"></video><figcaption>{escape(v.environment)} episode '
        f"{v.episode} <small>({v.size / 1024:,.0f} KiB)</small></figcaption></figure>"
        for v in videos)
    # Side by side, as many as the page is wide (laid out here: the page's style sheet is
    # shared by every page).
    return ('<h2>Videos</h2><section id=videos class=videos '
            f'style="display:flex;flex-wrap:wrap;gap:0 1.5em">{items}</section>')


def export_links(run_id: int, environment: str, episode: int) -> str:
    """The replay page's links that download the episode as a GIF or an MP4 file."""
    query = f"environment={escape(quote(environment, safe=''))}&amp;episode={episode}"
    return "".join(
        f'<a class=export id=export-{fmt} download href="/runs/{run_id}/replay/export?'
        f'{query}&amp;format={fmt}">Export {fmt.upper()}</a> ' for fmt in FORMATS)


def run_videos(store: Store, run_id: int) -> list[VideoRecord]:
    """The videos run ``run_id`` recorded (none for an unknown run)."""
    with store.reading() as conn:
        known = conn.execute(sa.select(schema.runs.c.id).where(schema.runs.c.id == run_id)
                             ).scalar_one_or_none()
    return store.videos(run_id) if known is not None else []


def video_path(store: Store, video_id: int) -> Path | None:
    """The file of video ``video_id``: None when the store has no such row, or its file is
    missing, not an MP4 file or not in the row's folder."""
    with store.reading() as conn:
        if not sa.inspect(conn).has_table("videos"):
            return None
        v = schema.videos
        row = conn.execute(sa.select(v.c.folder, v.c.name).where(v.c.id == video_id)).first()
    if row is None:
        return None
    folder = Path(str(row.folder)).resolve()
    path = (folder / str(row.name)).resolve()
    if path.parent != folder or path.suffix != ".mp4" or not path.is_file():
        return None
    return path
