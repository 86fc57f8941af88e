"""The pages and JSON of recorded runs: the runs table, a run, several runs on one chart, an
episode's replay, and the live channel that tells the pages which runs changed.

Every store read runs in a worker thread, so that a slow query never holds up the live
channel. Run ids in a request are parsed as integers and looked up in the configured store;
nothing else in a request selects what is read.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from html import escape
from typing import Any

import sqlalchemy as sa
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mosaic.core.errors import MosaicError, StoreError
from mosaic.dashboard import pages
from mosaic.dashboard.curves import CurveCache
from mosaic.dashboard.live import StoreWatcher, event_stream
from mosaic.dashboard.replay import ReplayError, replay_episode, replayable, run_check
from mosaic.dashboard.videos import export_links, run_videos, videos_section
from mosaic.store import Store, schema
from mosaic.store.schema import FINAL_STATUSES

__all__ = ["BadRequest", "int_param", "routes", "store_of"]

#: Runs one comparison may draw.
MAX_COMPARED = 50


class BadRequest(ValueError):
    """A request parameter is missing or malformed; answered with 400 and the message."""


def int_param(request: Request, name: str, default: int | None = None, *, low: int = 0,
              high: int = 2**63 - 1) -> int:
    """The integer query parameter ``name`` (``default`` when absent), within [low, high]."""
    text = request.query_params.get(name)
    if text is None or text == "":
        if default is None:
            raise BadRequest(f"give {name}=<integer>")
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, not {text[:40]!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}, not {value}")
    return value


def _ids(request: Request, name: str = "runs") -> list[int]:
    text = request.query_params.get(name, "")
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BadRequest(f"{name} must be run ids separated by commas") from None
    return list(dict.fromkeys(ids))[:MAX_COMPARED]


def _store(request: Request) -> Store:
    store: Store | None = request.app.state.store
    if store is None:
        raise BadRequest("this dashboard was started without --store")
    return store


def store_of(request: Request) -> Store:
    """The store the dashboard serves; BadRequest when it was started without ``--store``."""
    return _store(request)


def _where(request: Request) -> str:
    store: Store | None = request.app.state.store
    return store.location if store is not None else "no store"


async def runs_page(request: Request) -> Response:
    store = _store(request)
    runs = await run_in_threadpool(store.list_runs)
    return HTMLResponse(pages.page("Runs", pages.runs_table(runs), where=store.location,
                                   script="runs.js"))


async def run_rows(request: Request) -> Response:
    store, ids = _store(request), _ids(request, "ids")
    runs = await run_in_threadpool(store.list_runs, None, ids=ids)
    return JSONResponse({"rows": {str(run.id): pages.run_row(run) for run in runs},
                         "experiments": {str(run.id): run.experiment for run in runs}})


#: A run that ended never changes: its page's sections are kept (the last this many).
_ENDED_KEPT = 256


def _sections(store: Store, run_id: int, ended: dict[int, dict[str, Any]]) -> dict[str, Any]:
    kept = ended.get(run_id)
    if kept is not None:
        return kept
    detail = store.show_run(run_id)
    environments = replayable(store, run_id)
    metrics = store.metric_names(run_id)
    sections = {**pages.run_sections(detail, environments, bool(environments), metrics),
                "uid": detail.uid, "metrics": metrics}
    if detail.status in FINAL_STATUSES:
        if len(ended) >= _ENDED_KEPT:
            ended.pop(next(iter(ended)), None)
        ended[run_id] = sections
    return sections


async def sections_of(request: Request, run_id: int) -> dict[str, Any]:
    """What a run's page shows of it (see :func:`mosaic.dashboard.pages.run_sections`)."""
    return await run_in_threadpool(_sections, _store(request), run_id,
                                   request.app.state.ended_runs)


async def run_page(request: Request) -> Response:
    store, run_id = _store(request), request.path_params["run_id"]
    # Both at once, and the curve in the page: the reads overlap, and no second round trip.
    sections, drawn, recorded = await asyncio.gather(
        sections_of(request, run_id),
        run_in_threadpool(chart, store, request.app.state.curves, [run_id]),
        run_in_threadpool(run_videos, store, run_id))
    body = (
        f'<h1>{escape(sections["uid"])}</h1>'
        f'<section id=failure>{sections["failure"]}</section>'
        f'<section id=summary>{sections["summary"]}</section>'
        f"<h2>Learning curve</h2>{pages.chart_controls(sections['metrics'])}"
        f'<h2>State transitions</h2><section id=transitions>{sections["transitions"]}</section>'
        f'<h2>Episodes</h2><section id=episodes>{sections["episodes"]}</section>'
        f"{videos_section(recorded)}"
    )
    return HTMLResponse(pages.page(sections["uid"], body, where=store.location,
                                   script="run.js", data={"runs": [run_id], "chart": drawn}))


async def run_sections(request: Request) -> Response:
    return JSONResponse(await sections_of(request, request.path_params["run_id"]))


async def compare_page(request: Request) -> Response:
    store, ids = _store(request), _ids(request)
    runs = await run_in_threadpool(store.list_runs, None, ids=ids) if ids else []
    names = await run_in_threadpool(store.metric_names, *ids) if runs else []
    listed = "".join(f'<li><a href="/runs/{r.id}">{escape(r.uid)}</a> {pages.badge(r.status)}'
                     "</li>" for r in runs)
    hint = "" if runs else ("<p class=empty>Pick runs on the <a href=\"/\">runs page</a> and "
                            "press Compare selected.</p>")
    body = (f"<h1>Compare runs</h1>{hint}<ul class=compared>{listed}</ul>"
            f"{pages.chart_controls(names) if runs else ''}")
    return HTMLResponse(pages.page("Compare", body, where=store.location, script="run.js",
                                   data={"runs": [r.id for r in runs]}))


def chart(store: Store, cache: CurveCache, ids: list[int], metric: str | None = None,
          x: str = "episodes", smooth: int = 1) -> dict[str, Any]:
    """What a chart draws: a line per run (per part of a metric), labelled with the run's uid,
    and the axes' labels. Unknown ids are left out."""
    with store.reading() as conn:
        uids = {row.id: row.uid for row in conn.execute(
            sa.select(schema.runs.c.id, schema.runs.c.uid).where(schema.runs.c.id.in_(ids)))}
    lines = []
    for run_id in ids:
        if run_id not in uids:
            continue
        for line in cache.lines(run_id, metric=metric, x=x,  # type: ignore[arg-type]
                                smooth=smooth):
            suffix = "" if line["label"] in ("return", metric) else f" {line['label']}"
            lines.append({**line, "label": uids[run_id] + suffix, "run": run_id})
    label = metric or "return"
    if smooth > 1:
        label += f" (moving average of {smooth})"
    return {"lines": lines, "y_label": label,
            "x_label": "episode" if x == "episodes" else "env steps"}


async def curves(request: Request) -> Response:
    store, ids = _store(request), _ids(request)
    metric = request.query_params.get("metric") or None
    x = request.query_params.get("x", "episodes")
    if x not in ("episodes", "steps"):
        raise BadRequest("x must be episodes or steps")
    smooth = int_param(request, "smooth", 1, low=1, high=100_000)
    return JSONResponse(await run_in_threadpool(chart, store, request.app.state.curves, ids,
                                                metric, x, smooth))


async def replay_page(request: Request) -> Response:
    store, run_id = _store(request), request.path_params["run_id"]
    environment = request.query_params.get("environment", "")
    episode = int_param(request, "episode")
    body = (f'<h1>Replay: <a href="/runs/{run_id}">run {run_id}</a>, {escape(environment)} '
            f"episode {episode}</h1><div id=verdict class=verdict>re-simulating…</div>"
            '<div class=player><img id=frame alt="frame"><div class=playbar>'
            "<button id=play>Play</button><input id=position type=range min=0 value=0>"
            "<span id=where></span></div></div>"
            f"<div class=exports>{export_links(run_id, environment, episode)}</div>")
    return HTMLResponse(pages.page("Replay", body, where=store.location, script="replay.js",
                                   data={"run": run_id, "environment": environment,
                                         "episode": episode}))


async def replay(request: Request) -> Response:
    store, run_id = _store(request), request.path_params["run_id"]
    environment = request.query_params.get("environment", "")
    episode = int_param(request, "episode")

    def load() -> dict[str, Any]:
        result = replay_episode(store, run_id, environment, episode)
        digest, verdict = run_check(store, run_id)
        return {**asdict(result), "same": result.same, "run_digest": digest,
                "run_check": verdict}

    try:
        return JSONResponse(await run_in_threadpool(load))
    except ReplayError as error:
        return JSONResponse({"error": str(error)}, status_code=422)


async def events(request: Request) -> Response:
    watcher: StoreWatcher = request.app.state.watcher
    listener = watcher.listen()

    async def next_event() -> tuple[str, Any] | None:
        try:
            ids = await asyncio.wait_for(listener.get(), timeout=1.0)
        except TimeoutError:
            return None
        while not listener.empty():
            ids |= listener.get_nowait()
        return "runs", {"ids": sorted(ids)}

    return StreamingResponse(event_stream(next_event, request.app.state.closing,
                                          lambda: watcher.leave(listener)),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def errors_as_json(error: Exception) -> Response:
    """A request's error as JSON: 400 for a bad parameter, 404 for an unknown run."""
    if isinstance(error, BadRequest):
        return JSONResponse({"error": str(error)}, status_code=400)
    if isinstance(error, StoreError) and "no run" in str(error):
        return JSONResponse({"error": str(error)}, status_code=404)
    if isinstance(error, MosaicError):
        return JSONResponse({"error": str(error)}, status_code=500)
    raise error


routes = [
    Route("/", runs_page),
    Route("/runs/{run_id:int}", run_page),
    Route("/runs/{run_id:int}/replay", replay_page),
    Route("/compare", compare_page),
    Route("/api/runs/rows", run_rows),
    Route("/api/runs/{run_id:int}/sections", run_sections),
    Route("/api/runs/{run_id:int}/replay", replay),
    Route("/api/curves", curves),
    Route("/api/events", events),
]
