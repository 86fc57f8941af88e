"""The pages and commands of Manual mode in the browser.

Only the evaluation files given on the command line (``--manual FILE``) can be opened, each by
its position in that list: a request never names a path. Commands are JSON POSTs; each answers
with the session's snapshot once done, and the live channel sends a snapshot on every change.
"""

from __future__ import annotations

import asyncio
import json
from html import escape
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mosaic.core.errors import ConfigError
from mosaic.dashboard import pages
from mosaic.dashboard.live import event_stream
from mosaic.dashboard.manual import BrowserManual, CommandError
from mosaic.dashboard.run_routes import BadRequest

__all__ = ["routes"]

_LIVE_TICK = 0.1


def _sessions(request: Request) -> list[BrowserManual]:
    sessions: list[BrowserManual] = request.app.state.manual
    return sessions


def _session(request: Request) -> BrowserManual:
    sessions, index = _sessions(request), int(request.path_params["index"])
    if not 0 <= index < len(sessions):
        raise BadRequest(f"no manual-mode file {index}: this dashboard has {len(sessions)}")
    return sessions[index]


def _where(request: Request) -> str:
    store = request.app.state.store
    return str(store.location) if store is not None else "no store"


async def list_page(request: Request) -> Response:
    items = "".join(
        f'<li><a href="/manual/{i}">{escape(s.path.name)}</a> <small>{escape(str(s.path))}'
        "</small></li>" for i, s in enumerate(_sessions(request)))
    body = ("<h1>Manual mode</h1>" + (f"<ul class=files>{items}</ul>" if items else
            "<p class=empty>Start the dashboard with --manual FILE (an evaluation file, as "
            "for mosaic manual) to step its operators here.</p>"))
    return HTMLResponse(pages.page("Manual mode", body, where=_where(request)))


async def session_page(request: Request) -> Response:
    session, index = _session(request), request.path_params["index"]
    body = (
        f"<h1>Manual mode: {escape(session.path.name)}</h1>"
        '<div class="toolbar manual-controls">'
        "<button id=open>Open</button><button id=close>Close</button>"
        "<button id=step class=primary>Step All</button>"
        '<label>Step <input id=n type=number min=1 max=10000 value=10></label>'
        "<button id=stepn>Step N</button>"
        '<label>seed <input id=seed type=number min=0 placeholder="next"></label>'
        "<button id=reset>Reset All</button>"
        "<span id=shared></span></div><div id=message class=message></div>"
        "<div id=panels class=panels></div>"
    )
    return HTMLResponse(pages.page("Manual mode", body, where=_where(request),
                                   script="manual.js", data={"index": index}))


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object; BadRequest (400) for anything else, too deep included.
    (Its size is bounded before: see mosaic.dashboard.security.BodyLimit.)"""
    try:
        data = json.loads(await request.body() or b"{}")
    except RecursionError:
        raise BadRequest("the body is JSON nested too deep") from None
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def _int(data: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = data.get(key, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{key} must be a whole number, not {value!r}")
    return value


async def command(request: Request) -> Response:
    session, name = _session(request), request.path_params["command"]
    data = await _body(request)
    try:
        if name == "open":
            await run_in_threadpool(session.open)
        elif name == "close":
            await run_in_threadpool(session.close)
        elif name == "step":
            await run_in_threadpool(session.step_all, _int(data, "n", 1) or 1)
        elif name == "reset":
            await run_in_threadpool(session.reset_all, _int(data, "seed"))
        elif name == "act":
            operator, action = data.get("operator"), _int(data, "action")
            if not isinstance(operator, str) or action is None:
                raise BadRequest("act needs operator (an id) and action (an integer)")
            await run_in_threadpool(session.act, operator, action)
        elif name == "play":
            fields = [data.get(key) for key in ("operator", "player", "move")]
            texts = [value for value in fields if isinstance(value, str)]
            if len(texts) != len(fields):
                raise BadRequest("play needs operator (a game's id), player and move (text)")
            await run_in_threadpool(session.play, *texts)
        else:
            raise BadRequest(f"unknown command {name!r}: open, close, step, reset, act or play")
    except (CommandError, ConfigError) as error:
        return JSONResponse({"error": str(error), **session.snapshot()}, status_code=409)
    return JSONResponse(session.snapshot())


async def snapshot(request: Request) -> Response:
    return JSONResponse(_session(request).snapshot())


async def live(request: Request) -> Response:
    session = _session(request)
    sent = -1

    async def next_event() -> tuple[str, Any] | None:
        nonlocal sent
        for _ in range(int(1.0 / _LIVE_TICK)):
            if session.version != sent:
                sent = session.version
                return "snapshot", session.snapshot()
            await asyncio.sleep(_LIVE_TICK)
        return None

    return StreamingResponse(event_stream(next_event, request.app.state.closing),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


routes = [
    Route("/manual", list_page),
    Route("/manual/{index:int}", session_page),
    Route("/api/manual/{index:int}", snapshot),
    Route("/api/manual/{index:int}/events", live),
    Route("/api/manual/{index:int}/{command}", command, methods=["POST"]),
]
