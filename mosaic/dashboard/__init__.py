"""The dashboard in the browser: recorded and live runs, learning curves, episode replay, and
Manual mode (``mosaic dashboard``).

It reads a store and drives operator workers; it needs the ``dashboard`` extra (Starlette and
uvicorn). :mod:`~mosaic.dashboard.security` says who may reach it. The names load on first use,
as the package façade's do: :mod:`~mosaic.dashboard.replay` and
:mod:`~mosaic.dashboard.export` (``mosaic runs replay``) need no Starlette.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mosaic.core.lazy import lazy_names

if TYPE_CHECKING:
    from mosaic.dashboard.app import Dashboard, create_app
    from mosaic.dashboard.server import BackgroundServer, serve

_HOMES = {
    **dict.fromkeys(("Dashboard", "create_app"), "mosaic.dashboard.app"),
    **dict.fromkeys(("BackgroundServer", "serve"), "mosaic.dashboard.server"),
}

__all__ = ["BackgroundServer", "Dashboard", "create_app", "serve"]


__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
