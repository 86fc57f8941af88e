"""The routes of a run's recorded videos, and of a replayed episode exported as GIF or MP4
(see :mod:`mosaic.dashboard.videos` for which file a video's number serves)."""

from __future__ import annotations

import re

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from mosaic.core.errors import MissingExtra
from mosaic.dashboard.export import FORMATS, export_episode
from mosaic.dashboard.replay import ReplayError
from mosaic.dashboard.run_routes import BadRequest, int_param, store_of
from mosaic.dashboard.videos import video_path

__all__ = ["routes"]

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


async def video(request: Request) -> Response:
    store = store_of(request)
    path = await run_in_threadpool(video_path, store, request.path_params["video_id"])
    if path is None:
        return JSONResponse({"error": "no such video"}, status_code=404)
    return FileResponse(path, media_type="video/mp4")


async def export(request: Request) -> Response:
    store, run_id = store_of(request), request.path_params["run_id"]
    environment = request.query_params.get("environment", "")
    episode = int_param(request, "episode")
    fmt = request.query_params.get("format", "gif")
    if fmt not in FORMATS:
        raise BadRequest(f"format must be {' or '.join(FORMATS)}, not {fmt[:10]!r}")
    try:
        exported = await run_in_threadpool(export_episode, store, run_id, environment, episode,
                                           fmt)
    except ReplayError as error:
        return JSONResponse({"error": str(error)}, status_code=422)
    except MissingExtra as error:
        return JSONResponse({"error": str(error)}, status_code=501)
    name = f"run-{run_id}-{_SAFE.sub('_', environment)}-episode-{episode}.{fmt}"
    return Response(exported.data, media_type=FORMATS[fmt],
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


routes = [
    Route("/videos/{video_id:int}", video),
    Route("/runs/{run_id:int}/replay/export", export),
]
