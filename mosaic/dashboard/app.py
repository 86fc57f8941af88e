"""The dashboard's ASGI application: the routes, the guard in front of them, and what lives as
long as the application (the store, its watcher, the manual-mode sessions)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from mosaic.core.errors import MosaicError
from mosaic.dashboard import manual_routes, run_routes, video_routes
from mosaic.dashboard.curves import CurveCache
from mosaic.dashboard.live import POLL_INTERVAL, StoreWatcher
from mosaic.dashboard.manual import BrowserManual
from mosaic.dashboard.security import ASGIApp, BodyLimit, Guard
from mosaic.store import Store

__all__ = ["Dashboard", "create_app"]

STATIC = Path(__file__).with_name("static")


@dataclass(frozen=True)
class Dashboard:
    """What one dashboard serves: a store opened for reading (or None), the evaluation files
    it may open in Manual mode, and the token every request must carry (None: none, which is
    only allowed on loopback; see :mod:`mosaic.dashboard.security`)."""

    store: Store | None
    manual: Sequence[Path] = field(default_factory=tuple)
    token: str | None = None
    poll_interval: float = POLL_INTERVAL


def create_app(dashboard: Dashboard, closing: threading.Event | None = None) -> ASGIApp:
    """The application, guarded. Live channels end once ``closing`` is set (the server sets it
    when it begins to shut down); at shutdown every manual-mode worker is stopped and reaped,
    and the store is closed."""
    sessions = [BrowserManual(Path(path)) for path in dashboard.manual]
    watcher = (StoreWatcher(dashboard.store, dashboard.poll_interval)
               if dashboard.store is not None else None)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.store = dashboard.store
        app.state.watcher = watcher
        app.state.ended_runs = {}
        app.state.curves = CurveCache(dashboard.store) if dashboard.store is not None else None
        app.state.manual = sessions
        app.state.closing = closing or threading.Event()
        try:
            yield
        finally:
            if watcher is not None:
                await watcher.stop()
            for session in sessions:
                await run_in_threadpool(session.close)
            if dashboard.store is not None:
                dashboard.store.close()

    async def as_json(request: Request, error: Exception) -> Response:
        return run_routes.errors_as_json(error)

    app = Starlette(
        routes=[*run_routes.routes, *video_routes.routes, *manual_routes.routes,
                Mount("/static", StaticFiles(directory=STATIC), name="static")],
        exception_handlers={run_routes.BadRequest: as_json, MosaicError: as_json},
        # Inside Starlette's handling of errors (a 500 for anything unhandled), outside that of
        # the routes: the read that passes the limit raises through the route to it.
        middleware=[Middleware(BodyLimit)],
        lifespan=lifespan,
    )
    return Guard(app, dashboard.token)
